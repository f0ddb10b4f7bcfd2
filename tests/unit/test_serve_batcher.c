/* The batcher and its compute pool, on a model-free engine whose answer shows which rows and
 * which batch it came from: every job gets exactly its own rows' results, batches never pass
 * max_batch, concurrent jobs do share passes, max_delay gathers, large jobs run in pieces, and
 * errors, closing and shutting down answer every job exactly once. */
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "lib/serve/batcher.h"
#include "lib/util/rng.h"

#define IN 3
#define OUT 3

struct fake {
	int sleep_us;         /* per pass */
	int fail;             /* run fails */
	int fail_replica;     /* replica_new fails */
	atomic_int passes;
	atomic_int max_rows;
	atomic_int wrong_thread;
};

struct replica {
	struct fake *f;
	pthread_t owner;
};

static void *rep_new(void *ctx, int max_rows, struct dlk_err *err)
{
	struct fake *f = ctx;
	(void)max_rows;
	if (f->fail_replica) {
		dlk_errf(err, DLK_EXIT_FAIL, "no memory for the replica");
		return NULL;
	}
	struct replica *r = calloc(1, sizeof(*r));
	r->f = f;
	r->owner = pthread_self();
	return r;
}

/* out = [sum of the row, rows in this pass, first value of the row] */
static int rep_run(void *rep, const float *in, int rows, float *out, struct dlk_err *err)
{
	struct replica *r = rep;
	struct fake *f = r->f;
	if (!pthread_equal(r->owner, pthread_self()))
		atomic_fetch_add(&f->wrong_thread, 1);
	if (f->sleep_us)
		usleep((useconds_t)f->sleep_us);
	atomic_fetch_add(&f->passes, 1);
	int m = atomic_load(&f->max_rows);
	while (rows > m && !atomic_compare_exchange_weak(&f->max_rows, &m, rows))
		;
	if (f->fail)
		return dlk_errf(err, DLK_EXIT_FAIL, "the device fell over");
	for (int i = 0; i < rows; i++) {
		out[i * OUT] = in[i * IN] + in[i * IN + 1] + in[i * IN + 2];
		out[i * OUT + 1] = (float)rows;
		out[i * OUT + 2] = in[i * IN];
	}
	return 0;
}

static void rep_free(void *rep) { free(rep); }

static struct dlk_engine engine(struct fake *f, int any_thread)
{
	struct dlk_engine e = { IN, OUT, f, rep_new, rep_run, rep_free, any_thread };
	return e;
}

struct client {
	struct dlk_batcher *b;
	int id, jobs;
	int wrong, failed;
	long rows_seen, passes_seen;
};

static void *client_main(void *arg)
{
	struct client *c = arg;
	struct dlk_rng r;
	dlk_rng_seed(&r, (uint64_t)c->id + 1);
	for (int j = 0; j < c->jobs; j++) {
		int rows = 1 + (int)dlk_rng_below(&r, 5);
		float in[5 * IN], out[5 * OUT];
		for (int i = 0; i < rows * IN; i++)
			in[i] = (float)(c->id * 1000 + j * 10 + i);
		struct dlk_err err = DLK_ERR_INIT;
		if (dlk_batcher_run(c->b, in, rows, out, &err)) {
			c->failed++;
			continue;
		}
		for (int i = 0; i < rows; i++) {
			if (out[i * OUT] != in[i * IN] + in[i * IN + 1] + in[i * IN + 2] || out[i * OUT + 2] != in[i * IN])
				c->wrong++;
			c->rows_seen++;
			c->passes_seen += (long)out[i * OUT + 1];
		}
	}
	return NULL;
}

static void test_concurrent(int any_thread)
{
	struct fake f = { .sleep_us = 300 };
	struct dlk_model_stats st;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pool *p = dlk_pool_new(2);
	struct dlk_engine e = engine(&f, any_thread);
	dlk_model_stats_init(&st, 16);
	struct dlk_batcher *b = dlk_pool_add(p, &e, 16, 0, &st);
	CHECK(dlk_pool_start(p, &err) == 0);

	struct client cl[24];
	pthread_t th[24];
	for (int i = 0; i < 24; i++) {
		cl[i] = (struct client){ b, i, 40, 0, 0, 0, 0 };
		pthread_create(&th[i], NULL, client_main, &cl[i]);
	}
	int wrong = 0, failed = 0;
	long rows = 0;
	double batch_sum = 0;
	for (int i = 0; i < 24; i++) {
		pthread_join(th[i], NULL);
		wrong += cl[i].wrong;
		failed += cl[i].failed;
		rows += cl[i].rows_seen;
		batch_sum += (double)cl[i].passes_seen;
	}
	CHECK_MSG(wrong == 0 && failed == 0, "%s: 960 concurrent jobs each got their own rows back (%d wrong, %d failed)",
	          any_thread ? "any thread" : "thread-bound engine", wrong, failed);
	CHECK_MSG(atomic_load(&f.max_rows) <= 16, "no pass ran more than max_batch rows (largest %d)", atomic_load(&f.max_rows));
	CHECK_MSG(batch_sum / (double)rows > 2, "concurrent jobs share forward passes (a row's pass held %.1f rows on average)",
	          batch_sum / (double)rows);
	CHECK(atomic_load(&st.inferences) == (uint64_t)rows && atomic_load(&st.executions) == (uint64_t)atomic_load(&f.passes));
	CHECK(atomic_load(&st.pending) == 0 && dlk_batcher_pending(b) == 0);
	if (!any_thread)
		CHECK_MSG(atomic_load(&f.wrong_thread) == 0, "a thread-bound replica runs only on the thread that built it");
	dlk_pool_free(p);
}

static void test_pieces_and_errors(void)
{
	struct fake f = { 0 };
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pool *p = dlk_pool_new(1);
	struct dlk_engine e = engine(&f, 1);
	struct dlk_batcher *b = dlk_pool_add(p, &e, 8, 0, NULL);
	float in[100 * IN], out[100 * OUT];

	CHECK(dlk_pool_start(p, &err) == 0);
	for (int i = 0; i < 100 * IN; i++)
		in[i] = (float)i;
	CHECK(dlk_batcher_run(b, in, 100, out, &err) == 0);
	int ok = 1;
	for (int i = 0; i < 100; i++)
		ok &= out[i * OUT] == in[i * IN] + in[i * IN + 1] + in[i * IN + 2] && out[i * OUT + 1] <= 8;
	CHECK_MSG(ok && atomic_load(&f.passes) == 13, "100 rows with max_batch 8 run in 13 pieces (%d)", atomic_load(&f.passes));
	f.fail = 1;
	CHECK(dlk_batcher_run(b, in, 3, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "the device fell over");
	f.fail = 0;
	dlk_batcher_close(b);
	CHECK(dlk_batcher_run(b, in, 3, out, &err) == -1);
	CHECK_CONTAINS(err.msg, "shutting down");
	dlk_pool_free(p);

	/* a replica that cannot be built: start fails with its error and leaves no thread */
	f.fail_replica = 1;
	p = dlk_pool_new(3);
	dlk_pool_add(p, &e, 8, 0, NULL);
	CHECK(dlk_pool_start(p, &err) == -1);
	CHECK_CONTAINS(err.msg, "no memory for the replica");
	dlk_pool_free(p);
}

struct counted {
	struct dlk_job job;
	atomic_int *calls;
	float in[40 * IN], out[40 * OUT];
};

static void count_done(struct dlk_job *j)
{
	struct counted *c = (struct counted *)j;
	atomic_fetch_add(c->calls, 1);
}

static void test_delay_and_shutdown(void)
{
	struct fake f = { .sleep_us = 20000 };
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pool *p = dlk_pool_new(1);
	struct dlk_engine e = engine(&f, 1);
	struct dlk_batcher *b = dlk_pool_add(p, &e, 64, 200000, NULL);
	atomic_int calls = 0;
	struct counted c[6];

	CHECK(dlk_pool_start(p, &err) == 0);
	/* with max_delay, jobs submitted within the delay share one pass */
	for (int i = 0; i < 3; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].calls = &calls;
		c[i].job.in = c[i].in;
		c[i].job.out = c[i].out;
		c[i].job.rows = 1;
		c[i].job.done = count_done;
		CHECK(dlk_batcher_try_inline(b, &c[i].job) == 0); /* a delay means: queue, never inline */
		CHECK(dlk_batcher_submit(b, &c[i].job) == 0);
	}
	while (atomic_load(&calls) < 3)
		usleep(1000);
	CHECK_MSG(c[0].out[1] == 3 && c[2].out[1] == 3 && atomic_load(&f.passes) == 1,
	          "three jobs within max_delay ran as one pass of 3 rows (%g)", (double)c[0].out[1]);
	CHECK_MSG(c[2].job.t_start - c[0].job.t_submit >= 0.15, "the pass waited for the delay");

	/* shutting down: the running pass finishes, the queued jobs are answered with an error */
	atomic_store(&calls, 0);
	f.sleep_us = 150000;
	for (int i = 0; i < 6; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].calls = &calls;
		c[i].job.in = c[i].in;
		c[i].job.out = c[i].out;
		c[i].job.rows = 40; /* 64 rows fit one job at a time: the rest wait */
		c[i].job.done = count_done;
		CHECK(dlk_batcher_submit(b, &c[i].job) == 0);
	}
	usleep(50000); /* the first pass has started */
	dlk_pool_free(p);
	int errors = 0;
	for (int i = 0; i < 6; i++)
		errors += c[i].job.status != 0;
	CHECK_MSG(atomic_load(&calls) == 6 && errors == 5, "every job was answered once (%d calls), the queued ones with an error (%d)",
	          atomic_load(&calls), errors);
	CHECK_STR(c[5].job.msg, "the server is shutting down");
}

int main(void)
{
	test_concurrent(1);
	test_concurrent(0);
	test_pieces_and_errors();
	test_delay_and_shutdown();
	return CHECK_DONE();
}
