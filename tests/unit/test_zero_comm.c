/* ZeRO-1's parts without a training loop: the shard layout (comm_shard) covers a buffer exactly
 * once; on the TCP ring between 1..5 forked ranks, a reduce-scatter leaves in each rank's shard
 * the same bits the all-reduce gives there, and an all-gather gives every rank every shard, for
 * sizes smaller than the world and not divisible by it; and a sharded optimizer (Adam with
 * weight-decay ranges across the shard boundaries, SGD with momentum) updates its shard exactly
 * as the whole optimizer does, holding 1/N of the state, the shards' states in rank order being
 * the whole one's. The device communicator (NCCL's
 * place, here a fake library that logs its calls) hands the halves to the library's
 * reduce_scatter / allgather, each followed by a wait, or without them to an all-reduce and to a
 * broadcast of each rank's shard from its owner. */
#include "tests/unit/check.h"
#include "tests/unit/test_comm_harness.h"

#include <math.h>

#include "lib/nn/backend.h"
#include "lib/nn/optim.h"
#include "lib/util/mem.h"

static const size_t sizes[] = { 1, 2, 7, 13, 1009, 100003 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static float input(int rank, size_t i)
{
	return (float)((long)((i * 7919u + (size_t)rank * 104729u) % 2001) - 1000) / 64.0f + 0.1f * (float)rank;
}

static void note_fail(struct h_ctx *h, const char *fmt, size_t n, size_t i)
{
	if (!h->res->fails++)
		snprintf(h->res->note, sizeof(h->res->note), fmt, n, i);
}

static int run_halves(struct h_ctx *h)
{
	struct dlk_comm *c = h_comm(h, 20000);
	struct dlk_err err = DLK_ERR_INIT;

	if (!c)
		return -1;
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k], off, len;
		float *ref = xmalloc(n * sizeof(float)), *buf = xmalloc(n * sizeof(float));

		for (int op = 0; op < 2; op++) {
			enum comm_reduce red = op ? COMM_AVG : COMM_SUM;
			for (size_t i = 0; i < n; i++)
				ref[i] = buf[i] = input(h->rank, i);
			if (comm_allreduce(c, ref, n, red, &err) || comm_reduce_scatter(c, buf, n, red, &err))
				goto failed;
			comm_shard(n, h->world, h->rank, &off, &len);
			for (size_t i = off; i < off + len; i++)
				if (memcmp(&buf[i], &ref[i], sizeof(float))) {
					note_fail(h, "size %zu: reduce-scatter element %zu differs from the all-reduce's", n, i);
					break;
				}
		}
		/* the all-gather: only this rank's shard is right before it */
		for (size_t i = 0; i < n; i++)
			buf[i] = i >= off && i < off + len ? input(h->rank, i) : NAN;
		if (comm_allgather(c, buf, n, &err))
			goto failed;
		for (int r = 0; r < h->world; r++) {
			size_t o2, l2;
			comm_shard(n, h->world, r, &o2, &l2);
			for (size_t i = o2; i < o2 + l2; i++)
				if (buf[i] != input(r, i)) {
					note_fail(h, "size %zu: all-gather element %zu is not its owner's", n, i);
					break;
				}
		}
		free(ref);
		free(buf);
		continue;
failed:
		h_record(h, &err);
		free(ref);
		free(buf);
		comm_free(c);
		return -1;
	}
	comm_free(c);
	return 0;
}

static void check_world(int world)
{
	struct rank_result *res = h_start(world, 0, run_halves, NULL);
	int ok = 1;

	h_wait(res, world, 110000);
	for (int r = 0; r < world; r++)
		if (!res[r].done || res[r].rc || res[r].fails) {
			ok = 0;
			printf("# world %d rank %d: done=%d rc=%d msg='%s' note='%s'\n", world, r, res[r].done, res[r].rc,
			       res[r].msg, res[r].note);
		}
	CHECK_MSG(ok, "world %d: reduce-scatter = the all-reduce's shard, all-gather = every owner's shard", world);
	h_free(res);
}

static void check_layout(void)
{
	int ok = 1;

	for (int w = 1; w <= 9; w++)
		for (size_t n = 0; n < 40; n++) {
			size_t at = 0, off, len;
			for (int r = 0; r < w; r++) {
				comm_shard(n, w, r, &off, &len);
				if (off != at || (r + 1 < w && len != n / (size_t)w))
					ok = 0;
				at = off + len;
			}
			if (at != n)
				ok = 0;
		}
	CHECK_MSG(ok, "comm_shard: equal shards of count / world in rank order, the rest the last rank's, all covered");
}

/* The same steps on the whole optimizer and on `world` shards of it: the same parameters bit for
 * bit, each shard holding its part of the state. */
static void check_optimizer(enum dlk_optim kind, int world)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_training tr = { 0 };
	struct dlk_optimizer whole = DLK_OPTIMIZER_INIT, part[4];
	struct dlk_err err = DLK_ERR_INIT;
	size_t n = 103, ranges[] = { 10, 5, 30, 40, 100, 3 }; /* the middle one crosses the shards */
	float *p0 = be->alloc(n * sizeof(float)), *p1 = be->alloc(n * sizeof(float));
	float *g = be->alloc(n * sizeof(float));
	int ok = 1, bytes_ok = 1;

	tr.optimizer = kind;
	tr.lr = 0.01;
	tr.momentum = 0.9;
	tr.weight_decay = 0.1;
	tr.beta1 = 0.9;
	tr.beta2 = 0.999;
	tr.eps = 1e-8;
	CHECK(dlk_optimizer_init(&whole, &tr, n, 10, 100, be, &err) == 0);
	dlk_optimizer_set_no_decay(&whole, ranges, 3);
	for (int r = 0; r < world; r++) {
		size_t off, len;
		comm_shard(n, world, r, &off, &len);
		CHECK(dlk_optimizer_init(&part[r], &tr, n, 10, 100, be, &err) == 0);
		dlk_optimizer_set_no_decay(&part[r], ranges, 3);
		CHECK(dlk_optimizer_shard(&part[r], off, len, &err) == 0);
		if (dlk_optimizer_state_bytes(&part[r]) * n != dlk_optimizer_state_bytes(&whole) * len)
			bytes_ok = 0;
	}
	for (size_t i = 0; i < n; i++)
		p0[i] = p1[i] = (float)sin((double)i);
	for (int step = 0; step < 5; step++) {
		for (size_t i = 0; i < n; i++)
			g[i] = (float)cos((double)(i * (size_t)(step + 3)));
		dlk_optimizer_step(&whole, p0, g, 0.01);
		for (int r = 0; r < world; r++)
			dlk_optimizer_step(&part[r], p1, g, 0.01);
	}
	for (size_t i = 0; i < n; i++)
		if (memcmp(&p0[i], &p1[i], sizeof(float)))
			ok = 0;
	CHECK_MSG(ok, "%s over %d shards: the whole optimizer's parameters bit for bit", kind == DLK_OPT_SGD ? "sgd" : "adamw",
	          world);
	CHECK_MSG(bytes_ok, "%s over %d shards: each holds its shard's share of the state", kind == DLK_OPT_SGD ? "sgd" : "adamw",
	          world);
	/* put together in rank order (as a checkpoint writes them), the shards' state is the whole
	 * optimizer's, every float of it once */
	{
		float *fm = xcalloc(n, sizeof(float)), *fv = xcalloc(n, sizeof(float));
		size_t covered = 0;
		for (int r = 0; r < world; r++) {
			CHECK(part[r].state_off == covered && part[r].t == whole.t);
			memcpy(fm + part[r].state_off, part[r].m, part[r].state_n * sizeof(float));
			if (part[r].v)
				memcpy(fv + part[r].state_off, part[r].v, part[r].state_n * sizeof(float));
			covered += part[r].state_n;
		}
		CHECK(covered == n);
		CHECK(memcmp(fm, whole.m, n * sizeof(float)) == 0);
		CHECK(!whole.v || memcmp(fv, whole.v, n * sizeof(float)) == 0);
		free(fm);
		free(fv);
	}
	CHECK(dlk_optimizer_shard(&part[0], n - 2, 3, &err) == -1);
	CHECK_CONTAINS(err.msg, "outside 103 parameters");
	for (int r = 0; r < world; r++)
		dlk_optimizer_release(&part[r]);
	dlk_optimizer_release(&whole);
	be->free(p0);
	be->free(p1);
	be->free(g);
}

/* ---- the device communicator over a fake library ---- */

static char dlog[1024];
static float *dbase;

static void dlog_add(const char *what, const void *buf, size_t n, int root)
{
	size_t l = strlen(dlog);
	snprintf(dlog + l, sizeof(dlog) - l, "%s %td+%zu@%d;", what, (const float *)buf - dbase, n, root);
}

static int f_load(char *m, size_t l) { (void)m, (void)l; return 0; }
static void *f_open(const void *id, int rank, int world, int t, char *m, size_t l)
{
	(void)id, (void)rank, (void)world, (void)t, (void)m, (void)l;
	return xcalloc(1, 1);
}
static int f_allreduce(void *c, float *buf, size_t n, int avg, char *m, size_t l)
{
	(void)c, (void)m, (void)l;
	dlog_add(avg ? "allreduce-avg" : "allreduce-sum", buf, n, -1);
	return 0;
}
static int f_broadcast(void *c, void *buf, size_t bytes, int root, char *m, size_t l)
{
	(void)c, (void)m, (void)l;
	dlog_add("bcast", buf, bytes / sizeof(float), root);
	return 0;
}
static int f_rs(void *c, float *buf, size_t n, int avg, char *m, size_t l)
{
	(void)c, (void)m, (void)l;
	dlog_add(avg ? "rs-avg" : "rs-sum", buf, n, -1);
	return 0;
}
static int f_ag(void *c, float *buf, size_t n, char *m, size_t l)
{
	(void)c, (void)m, (void)l;
	dlog_add("ag", buf, n, -1);
	return 0;
}
static int f_wait(void *c, int host, char *m, size_t l)
{
	(void)c, (void)host, (void)m, (void)l;
	strcat(dlog, "wait;");
	return 0;
}
static int f_health(void *c, int t, char *m, size_t l) { (void)c, (void)t, (void)m, (void)l; return 0; }
static void f_abort(void *c) { (void)c; }
static void f_close(void *c) { free(c); }

static void check_device(void)
{
	struct dlk_device_comm lib = { .name = "fake", .id_bytes = 8, .load = f_load, .open = f_open,
	                               .allreduce = f_allreduce, .broadcast = f_broadcast, .reduce_scatter = f_rs,
	                               .allgather = f_ag, .wait = f_wait, .health = f_health, .abort = f_abort,
	                               .close = f_close };
	struct dlk_err err = DLK_ERR_INIT;
	unsigned char id[8] = { 0 };
	float buf[10];
	struct dlk_comm *c;

	dbase = buf;
	c = comm_device_new(&lib, id, 1, 3, 5000, &err);
	CHECK(c != NULL);
	dlog[0] = '\0';
	CHECK(comm_reduce_scatter(c, buf, 10, COMM_AVG, &err) == 0 && comm_allgather(c, buf, 10, &err) == 0);
	CHECK_STR(dlog, "rs-avg 0+10@-1;wait;ag 0+10@-1;wait;");
	comm_free(c);
	/* a library without them: an all-reduce, and each shard broadcast from its owner */
	lib.reduce_scatter = NULL;
	lib.allgather = NULL;
	c = comm_device_new(&lib, id, 1, 3, 5000, &err);
	dlog[0] = '\0';
	CHECK(comm_reduce_scatter(c, buf, 10, COMM_SUM, &err) == 0 && comm_allgather(c, buf, 10, &err) == 0);
	CHECK_STR(dlog, "allreduce-sum 0+10@-1;wait;bcast 0+3@0;wait;bcast 3+3@1;wait;bcast 6+4@2;wait;");
	comm_free(c);
}

int main(void)
{
	check_device();
	check_layout();
	check_optimizer(DLK_OPT_ADAMW, 2);
	check_optimizer(DLK_OPT_ADAMW, 3);
	check_optimizer(DLK_OPT_SGD, 4);
	for (int w = 1; w <= 5; w++)
		check_world(w);
	return CHECK_DONE();
}
