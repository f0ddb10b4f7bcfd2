#include "lib/comm/comm.h"

#include <string.h>

#include "lib/util/mem.h"

int comm_allreduce(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err)
{
	if (op != COMM_SUM && op != COMM_AVG)
		return dlk_errf(err, DLK_EXIT_FAIL, "all-reduce: unknown reduction %d", (int)op);
	if (!count)
		return 0;
	return c->ops->allreduce(c, buf, count, op, err);
}

int comm_broadcast(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err)
{
	if (root < 0 || root >= c->world)
		return dlk_errf(err, DLK_EXIT_FAIL, "broadcast: root %d is not a rank of a world of %d",
				root, c->world);
	if (!nbytes)
		return 0;
	return c->ops->broadcast(c, buf, nbytes, root, err);
}

int comm_barrier(struct dlk_comm *c, struct dlk_err *err)
{
	return c->ops->barrier(c, err);
}

void comm_shard(size_t count, int world, int rank, size_t *off, size_t *len)
{
	size_t w = world > 0 ? (size_t)world : 1, per = count / w, r = (size_t)rank;

	*off = r * per;
	*len = r + 1 == w ? count - r * per : per;
}

int comm_reduce_scatter(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err)
{
	if (op != COMM_SUM && op != COMM_AVG)
		return dlk_errf(err, DLK_EXIT_FAIL, "reduce-scatter: unknown reduction %d", (int)op);
	if (!count || c->world <= 1)
		return 0;
	if (!c->ops->reduce_scatter)
		return c->ops->allreduce(c, buf, count, op, err); /* every shard reduced, ours included */
	return c->ops->reduce_scatter(c, buf, count, op, err);
}

int comm_allgather(struct dlk_comm *c, float *buf, size_t count, struct dlk_err *err)
{
	if (!count || c->world <= 1)
		return 0;
	if (c->ops->allgather)
		return c->ops->allgather(c, buf, count, err);
	for (int r = 0; r < c->world; r++) {
		size_t off, len;

		comm_shard(count, c->world, r, &off, &len);
		if (len && c->ops->broadcast(c, buf + off, len * sizeof(float), r, err))
			return -1;
	}
	return 0;
}

void comm_free(struct dlk_comm *c)
{
	if (c)
		c->ops->free(c);
}

int comm_allreduce_bucketed(struct dlk_comm *c, float *buf, size_t count, size_t bucket_mib,
			    enum comm_reduce op, struct dlk_err *err)
{
	size_t per, off;

	if (!bucket_mib)
		bucket_mib = 25;
	if (bucket_mib > 4096)
		return dlk_errf(err, DLK_EXIT_CONFIG, "all-reduce: bucket size %zu MiB is over 4096 MiB",
				bucket_mib);
	per = bucket_mib * 1024 * 1024 / sizeof(float);
	for (off = 0; off < count; off += per) {
		size_t n = count - off < per ? count - off : per;
		if (comm_allreduce(c, buf + off, n, op, err))
			return -1;
	}
	return 0;
}

static int bucket_floats(size_t bucket_mib, size_t *per, struct dlk_err *err)
{
	if (!bucket_mib)
		bucket_mib = 25;
	if (bucket_mib > 4096)
		return dlk_errf(err, DLK_EXIT_CONFIG, "all-reduce: bucket size %zu MiB is over 4096 MiB",
				bucket_mib);
	*per = bucket_mib * 1024 * 1024 / sizeof(float);
	return 0;
}

int comm_grads_ready(struct dlk_comm *c, float *buf, size_t count, size_t off, size_t n, size_t bucket_mib,
		     enum comm_reduce op, struct dlk_err *err)
{
	struct comm_grads *g = &c->grads;

	if (g->buf != buf || g->count != count) {
		/* the first range of a step */
		memset(g, 0, sizeof(*g));
		if (bucket_floats(bucket_mib, &g->per, err))
			return -1;
		g->buf = buf;
		g->count = g->ready = g->sent = count;
		g->in_order = 1;
	}
	if (!g->in_order || off + n != g->ready || n > g->ready) {
		g->in_order = 0;
		return 0;
	}
	g->ready = off;
	if (!c->ops->allreduce_start || c->world <= 1)
		return 0;
	while (g->sent - g->ready >= g->per) {
		if (c->ops->allreduce_start(c, buf + g->sent - g->per, g->per, op, err)) {
			memset(g, 0, sizeof(*g));
			return -1;
		}
		g->sent -= g->per;
	}
	return 0;
}

int comm_grads_finish(struct dlk_comm *c, float *buf, size_t count, size_t bucket_mib, enum comm_reduce op,
		      struct dlk_err *err)
{
	struct comm_grads *g = &c->grads;
	size_t left = g->buf == buf && g->count == count ? g->sent : count;
	int rc = 0;

	memset(g, 0, sizeof(*g));
	if (!c->ops->allreduce_start || c->world <= 1)
		return comm_allreduce_bucketed(c, buf, left, bucket_mib, op, err);
	if (bucket_floats(bucket_mib, &g->per, err))
		return -1;
	/* the rest in buckets from the top down, as the ones already started */
	while (left && !rc) {
		size_t n = left < g->per ? left : g->per;
		rc = c->ops->allreduce_start(c, buf + left - n, n, op, err);
		left -= n;
	}
	g->per = 0;
	if (rc)
		return -1;
	return c->ops->wait ? c->ops->wait(c, err) : 0;
}

static int single_allreduce(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			    struct dlk_err *err)
{
	(void)c, (void)buf, (void)count, (void)op, (void)err;
	return 0;
}

static int single_broadcast(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err)
{
	(void)c, (void)buf, (void)nbytes, (void)root, (void)err;
	return 0;
}

static int single_barrier(struct dlk_comm *c, struct dlk_err *err)
{
	(void)c, (void)err;
	return 0;
}

static void single_free(struct dlk_comm *c)
{
	free(c);
}

static const struct dlk_comm_ops single_ops = {
	.name = "single",
	.allreduce = single_allreduce,
	.broadcast = single_broadcast,
	.barrier = single_barrier,
	.free = single_free,
};

struct dlk_comm *comm_single_new(void)
{
	struct dlk_comm *c = xcalloc(1, sizeof(*c));
	c->ops = &single_ops;
	c->rank = 0;
	c->world = 1;
	c->step = -1;
	return c;
}
