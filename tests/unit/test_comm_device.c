/* The device communicator (lib/comm/device_comm.c) and the gradient buckets, driven by a fake device
 * library in host memory where NCCL would be: the id that rank 0 makes reaches every rank
 * through the real rendezvous over loopback; a rank that cannot load the library says so before
 * anyone waits; the watchdog turns the library's asynchronous error, or a collective that makes
 * no progress, into an abort and a restartable error naming the step; and the buckets start
 * from the top of the gradients as backward makes them final. */
#include "tests/unit/check.h"
#include "tests/unit/test_comm_harness.h"

#include <pthread.h>

#include "lib/nn/backend.h"
#include "lib/util/mem.h"

#define ID_BYTES 128

/* ---- the fake library ---- */

enum fake_mode { FAKE_OK, FAKE_ASYNC_ERROR, FAKE_HANG };

static enum fake_mode fake_mode;
static int fake_load_fails;
static struct rank_result *fake_res; /* this rank's shared result, for the id it saw */
static unsigned char fake_made[ID_BYTES];
static float *fake_base;             /* the gradients, to log offsets */
static char fake_log[4096];          /* "start OFF+N;" and "wait;" in call order */

struct fake_h {
	int rank, world;
	long long opened, started;
	volatile int aborted;
	pthread_mutex_t mu;
};

static void log_call(const char *what, const float *buf, size_t n)
{
	size_t l = strlen(fake_log);
	if (buf)
		snprintf(fake_log + l, sizeof(fake_log) - l, "%s %zu+%zu;", what, (size_t)(buf - fake_base), n);
	else
		snprintf(fake_log + l, sizeof(fake_log) - l, "%s;", what);
}

static void fake_describe(char *out, size_t len) { snprintf(out, len, "fake 1.0"); }

static int fake_load(char *msg, size_t len)
{
	if (fake_load_fails) {
		snprintf(msg, len, "cannot load NCCL 'libnccl.so.2': libnccl.so.2: cannot open shared object file");
		return -1;
	}
	return 0;
}

static int fake_make_id(void *id, char *msg, size_t len)
{
	(void)msg, (void)len;
	for (int i = 0; i < ID_BYTES; i++)
		fake_made[i] = (unsigned char)(getpid() * 31 + i * 7 + 1);
	memcpy(id, fake_made, ID_BYTES);
	return 0;
}

static void *fake_open(const void *id, int rank, int world, int timeout_ms, char *msg, size_t len)
{
	struct fake_h *h = xcalloc(1, sizeof(*h));
	(void)timeout_ms, (void)msg, (void)len;
	if (fake_res)
		memcpy(fake_res->data, id, ID_BYTES);
	h->rank = rank;
	h->world = world;
	h->opened = dlk_now_ms();
	pthread_mutex_init(&h->mu, NULL);
	return h;
}

static int fake_allreduce(void *vh, float *buf, size_t n, int avg, char *msg, size_t len)
{
	struct fake_h *h = vh;
	(void)avg;
	if (h->aborted) {
		snprintf(msg, len, "aborted");
		return -1;
	}
	pthread_mutex_lock(&h->mu);
	if (!h->started)
		h->started = dlk_now_ms();
	pthread_mutex_unlock(&h->mu);
	log_call("start", buf, n);
	return 0;
}

static int fake_broadcast(void *vh, void *buf, size_t bytes, int root, char *msg, size_t len)
{
	(void)vh, (void)buf, (void)bytes, (void)root, (void)msg, (void)len;
	return 0;
}

static int fake_wait(void *vh, int host, char *msg, size_t len)
{
	struct fake_h *h = vh;
	log_call("wait", NULL, 0);
	if (fake_mode != FAKE_OK && host) {
		/* a collective that never finishes: only an abort releases the waiter */
		while (!h->aborted)
			usleep(1000);
	}
	if (h->aborted) {
		snprintf(msg, len, "the communicator was aborted");
		return -1;
	}
	pthread_mutex_lock(&h->mu);
	h->started = 0;
	pthread_mutex_unlock(&h->mu);
	return 0;
}

static int fake_health(void *vh, int timeout_ms, char *msg, size_t len)
{
	struct fake_h *h = vh;
	int r = 0;
	pthread_mutex_lock(&h->mu);
	if (fake_mode == FAKE_ASYNC_ERROR && dlk_now_ms() - h->opened > 300) {
		snprintf(msg, len, "NCCL: remote process exited or there was a network error");
		r = -1;
	} else if (h->started && dlk_now_ms() - h->started > timeout_ms) {
		snprintf(msg, len, "NCCL all-reduce made no progress for %lld ms", dlk_now_ms() - h->started);
		r = 1;
	}
	pthread_mutex_unlock(&h->mu);
	return r;
}

static void fake_abort(void *vh) { ((struct fake_h *)vh)->aborted = 1; }

static void fake_close(void *vh)
{
	struct fake_h *h = vh;
	pthread_mutex_destroy(&h->mu);
	free(h);
}

static const struct dlk_device_comm fake = {
	.name = "fake",
	.id_bytes = ID_BYTES,
	.describe = fake_describe,
	.load = fake_load,
	.make_id = fake_make_id,
	.open = fake_open,
	.allreduce = fake_allreduce,
	.broadcast = fake_broadcast,
	.wait = fake_wait,
	.health = fake_health,
	.abort = fake_abort,
	.close = fake_close,
};

/* ---- the id through the rendezvous ---- */

static int run_join(struct h_ctx *h)
{
	struct dist_rdzv_opts o;
	struct dlk_comm *host = NULL, *dev = NULL;
	struct dlk_err err = DLK_ERR_INIT;
	float x[3] = { 1, 2, (float)h->rank };

	fake_res = h->res;
	h_opts(h, &o);
	if (dist_join(&o, &fake, 5000, &host, &dev, &err)) {
		h_record(h, &err);
		return -1;
	}
	if (h->rank == 0)
		memcpy(h->res->note, fake_made, ID_BYTES);
	/* the host ring came with it and works */
	if (!dev || !dev->device_buffers || host->device_buffers || comm_allreduce(host, x, 3, COMM_SUM, &err) ||
	    x[0] != 3 || x[2] != 3)
		h->res->fails++;
	comm_free(dev);
	comm_free(host);
	return 0;
}

static void test_id_exchange(void)
{
	int world = 3;
	struct rank_result *res = h_start(world, 0, run_join, NULL);
	h_wait(res, world, 30000);
	int same = 1;
	for (int r = 0; r < world; r++) {
		CHECK_MSG(res[r].done && res[r].rc == 0 && !res[r].fails, "rank %d joined both communicators (%s)", r,
		          res[r].msg);
		same &= !memcmp(res[r].data, res[0].note, ID_BYTES);
	}
	int nonzero = 0;
	for (int i = 0; i < ID_BYTES; i++)
		nonzero |= res[0].data[i];
	CHECK_MSG(same && nonzero, "every rank opened the communicator with the id rank 0 made");
	h_free(res);
}

static void test_load_fails(void)
{
	struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;
	struct dlk_comm *host = NULL, *dev = NULL;
	struct dlk_err err = DLK_ERR_INIT;
	long long t0 = dlk_now_ms();

	o.rank = 1;
	o.world = 2;
	o.master_addr = "127.0.0.1";
	o.master_port = 9; /* nobody there: the check must come before any connection */
	o.run_id = "test-run";
	o.timeout_ms = 20000;
	fake_load_fails = 1;
	CHECK(dist_join(&o, &fake, 5000, &host, &dev, &err) == -1 && !host && !dev);
	fake_load_fails = 0;
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "fake: cannot load NCCL 'libnccl.so.2'");
	CHECK_MSG(dlk_now_ms() - t0 < 2000, "a rank that cannot load the library fails at once, before the rendezvous");
}

/* ---- the watchdog ---- */

struct wd_case {
	enum fake_mode mode;
	int stall_ms;
};

static int run_watch(struct h_ctx *h)
{
	struct wd_case *wc = h->arg;
	struct dist_rdzv_opts o;
	struct dlk_comm *host = NULL, *dev = NULL;
	struct dlk_err err = DLK_ERR_INIT, again = DLK_ERR_INIT;
	size_t n = 1000;
	float *g = xcalloc(n, sizeof(float));

	fake_mode = wc->mode;
	fake_base = g;
	h_opts(h, &o);
	if (dist_join(&o, &fake, wc->stall_ms, &host, &dev, &err)) {
		h_record(h, &err);
		free(g);
		return -1;
	}
	h->res->t0 = dlk_now_ms();
	int rc = 0;
	for (long step = 7; step < 100000 && !rc; step++) {
		comm_set_step(dev, step);
		rc = comm_grads_ready(dev, g, n, 0, n, 0, COMM_AVG, &err) ||
		     comm_grads_finish(dev, g, n, 0, COMM_AVG, &err);
		if (fake_mode == FAKE_OK && step == 50)
			break;
	}
	h->res->t1 = dlk_now_ms();
	h_record(h, &err);
	/* broken: fails again at once, with the same reason */
	if (rc && (comm_allreduce(dev, g, n, COMM_SUM, &again) != -1 || strcmp(again.msg, err.msg)))
		h->res->fails++;
	comm_free(dev);
	comm_free(host);
	free(g);
	return rc ? -1 : 0;
}

static void test_watchdog(void)
{
	struct wd_case err_case = { FAKE_ASYNC_ERROR, 60000 }, stall_case = { FAKE_HANG, 600 }, ok_case = { FAKE_OK, 600 };
	struct rank_result *res;

	res = h_start(2, 0, run_watch, &err_case);
	h_wait(res, 2, 30000);
	for (int r = 0; r < 2; r++) {
		CHECK_MSG(res[r].done && res[r].rc == -1 && res[r].code == DLK_EXIT_RESTARTABLE && !res[r].fails,
		          "rank %d: the library's asynchronous error fails the collective, restartable", r);
		CHECK_CONTAINS(res[r].msg, "the watchdog saw a collective fail: NCCL: remote process exited");
		CHECK_CONTAINS(res[r].msg, "(step 7)");
		CHECK_MSG(res[r].t1 - res[r].t0 < 5000, "rank %d: released within seconds, not the stall timeout", r);
	}
	h_free(res);

	res = h_start(2, 0, run_watch, &stall_case);
	h_wait(res, 2, 30000);
	for (int r = 0; r < 2; r++) {
		CHECK_MSG(res[r].done && res[r].rc == -1 && res[r].code == DLK_EXIT_RESTARTABLE && !res[r].fails,
		          "rank %d: a collective stalled past the timeout is aborted, restartable", r);
		CHECK_CONTAINS(res[r].msg, "the watchdog gave up on a collective: NCCL all-reduce made no progress");
		long long took = res[r].t1 - res[r].t0;
		CHECK_MSG(took >= 550 && took < 5000, "rank %d: after the 600 ms stall timeout (%lld ms)", r, took);
	}
	h_free(res);

	res = h_start(2, 0, run_watch, &ok_case);
	h_wait(res, 2, 30000);
	for (int r = 0; r < 2; r++)
		CHECK_MSG(res[r].done && res[r].rc == 0 && !res[r].fails, "rank %d: healthy collectives never trip it (%s)",
		          r, res[r].msg);
	h_free(res);
}

/* ---- the buckets ---- */

static void test_buckets(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	unsigned char id[ID_BYTES] = { 1 };
	size_t count = 700000;
	float *g = xcalloc(count, sizeof(float));
	struct dlk_comm *c;

	fake_mode = FAKE_OK;
	fake_res = NULL;
	fake_base = g;
	c = comm_device_new(&fake, id, 0, 2, 5000, &err);
	CHECK(c != NULL);
	/* 1 MiB buckets = 262144 floats; three layers, the last first */
	fake_log[0] = 0;
	CHECK(comm_grads_ready(c, g, count, 400000, 300000, 1, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "start 437856+262144;");
	CHECK(comm_grads_ready(c, g, count, 100000, 300000, 1, COMM_AVG, &err) == 0);
	CHECK(comm_grads_ready(c, g, count, 0, 100000, 1, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "start 437856+262144;start 175712+262144;");
	CHECK(comm_grads_finish(c, g, count, 1, COMM_AVG, &err) == 0);
	CHECK_MSG(!strcmp(fake_log, "start 437856+262144;start 175712+262144;start 0+175712;wait;"),
	          "full buckets start during backward, the rest at the end, then one wait (%s)", fake_log);

	/* the next step starts over */
	fake_log[0] = 0;
	CHECK(comm_grads_ready(c, g, count, 400000, 300000, 1, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "start 437856+262144;");
	CHECK(comm_grads_finish(c, g, count, 1, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "start 437856+262144;start 175712+262144;start 0+175712;wait;");

	/* a range out of order defers what is left to the end, in the same buckets */
	fake_log[0] = 0;
	CHECK(comm_grads_ready(c, g, count, 0, 100000, 1, COMM_AVG, &err) == 0);
	CHECK(comm_grads_ready(c, g, count, 400000, 300000, 1, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "");
	CHECK(comm_grads_finish(c, g, count, 1, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "start 437856+262144;start 175712+262144;start 0+175712;wait;");

	/* small gradients: one bucket at the end (25 MiB by default) */
	fake_log[0] = 0;
	CHECK(comm_grads_ready(c, g, 1000, 0, 1000, 0, COMM_AVG, &err) == 0);
	CHECK(comm_grads_finish(c, g, 1000, 0, COMM_AVG, &err) == 0);
	CHECK_STR(fake_log, "start 0+1000;wait;");
	CHECK(comm_grads_ready(c, g, 10, 0, 10, 5000, COMM_AVG, &err) == -1);
	CHECK_CONTAINS(err.msg, "bucket size 5000 MiB is over 4096 MiB");
	comm_free(c);

	/* a communicator without background collectives (one rank here) reduces it all at the end */
	c = comm_single_new();
	CHECK(comm_grads_ready(c, g, count, 0, count, 1, COMM_AVG, &err) == 0 &&
	      comm_grads_finish(c, g, count, 1, COMM_AVG, &err) == 0);
	comm_free(c);
	free(g);
}

int main(void)
{
	alarm(240);
	test_id_exchange();
	test_load_fails();
	test_buckets();
	test_watchdog();
	return CHECK_DONE();
}
