#include "lib/comm/comm.h"

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
	"single", single_allreduce, single_broadcast, single_barrier, single_free
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
