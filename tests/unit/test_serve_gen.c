/* Continuous batching (lib/serve/gen.h) on a model-free engine: the next token is the last one
 * plus one. Sequences that arrive while a pass runs join the next pass, each at its own position
 * (their texts are exact), a pass carries every running sequence, the counters add up, a released
 * request is dropped, and closing fails what is left and wakes its waiter. */
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/serve/gen.h"

#define CTX 4
#define V 257

static atomic_int passes, rows_seen[16], in_first, gate;

static void *rep_new(void *ctx, int max_rows, struct dlk_err *err)
{
	static int replica;
	(void)ctx, (void)max_rows, (void)err;
	return &replica;
}

static int rep_run(void *rep, const float *in, int rows, float *out, struct dlk_err *err)
{
	(void)rep, (void)err;
	int p = atomic_fetch_add(&passes, 1);
	if (p == 0) {
		/* the first pass holds until the test has queued more sequences */
		atomic_store(&in_first, 1);
		while (!atomic_load(&gate))
			usleep(500);
	}
	if (p < 16)
		atomic_store(&rows_seen[p], rows);
	for (int r = 0; r < rows; r++) {
		const float *x = in + r * CTX;
		int last = 0;
		for (int i = 0; i < CTX; i++)
			if (x[i] != 0)
				last = (int)x[i];
		for (int v = 0; v < V; v++)
			out[r * V + v] = v == last + 1 ? 5.0f : 0.0f;
	}
	return 0;
}

static void rep_free(void *rep)
{
	(void)rep;
}

static void wait_until(_Atomic int64_t *v, int64_t want)
{
	while (atomic_load(v) != want)
		usleep(1000);
}

static atomic_int woken;
static void arm(void *a) { (void)a; }
static void wake(void *a) { (void)a; atomic_fetch_add(&woken, 1); }

/* polls until finished; returns the text */
static char *run_out(struct dlk_gen_req *r, enum dlk_finish *f)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	int st;
	while (!(st = dlk_gen_req_poll(r, &b, f, msg, sizeof(msg), NULL, NULL, NULL)))
		usleep(500);
	dlk_buf_addc(&b, '\0');
	return st > 0 ? b.data : (dlk_buf_release(&b), strdup(msg));
}

int main(void)
{
	struct dlk_tokenizer *tok = dlk_tokenizer_byte();
	struct dlk_lm lm;
	struct dlk_gen_stats st;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_gen_params p = { 3, { 0, 0, 1, 0 }, 0, { NULL }, { 0 } };
	enum dlk_finish f;

	memset(&lm, 0, sizeof(lm));
	lm.tok = tok, lm.context = CTX, lm.vocab = V, lm.out_size = V;
	dlk_gen_stats_init(&st);
	struct dlk_pool *pool = dlk_pool_new(1);
	struct dlk_engine e = { CTX, V, NULL, rep_new, rep_run, rep_free, 1 };
	struct dlk_batcher *bat = dlk_pool_add(pool, &e, 8, 0, NULL);
	CHECK(!dlk_pool_start(pool, &err));
	struct dlk_gen_sched *s = dlk_gen_sched_new(&lm, bat, 8, &st, NULL, NULL);

	/* the first sequence's pass waits for the pool; three more arrive meanwhile */
	struct dlk_gen_req *r[4];
	const char *prompts[4] = { "a", "xy", "0", "ABCDEFG" };
	for (int i = 0; i < 4; i++)
		CHECK(r[i] = dlk_gen_req_new(&lm, prompts[i], strlen(prompts[i]), &p, &err));
	CHECK(!dlk_gen_submit(s, r[0]));
	while (!atomic_load(&in_first))
		usleep(500);
	for (int i = 1; i < 4; i++)
		CHECK(!dlk_gen_submit(s, r[i]));
	wait_until(&st.waiting, 3);
	atomic_store(&gate, 1);

	char *t[4];
	for (int i = 0; i < 4; i++)
		t[i] = run_out(r[i], &f);
	CHECK_STR(t[0], "bcd");
	CHECK_STR(t[1], "z{|");
	CHECK_STR(t[2], "123");
	CHECK_MSG(!strcmp(t[3], "HIJ"), "a prompt longer than the window: its last 4 tokens (%s)", t[3]);
	CHECK(f == DLK_FINISH_LENGTH);
	CHECK_MSG(atomic_load(&rows_seen[0]) == 1, "the first pass: the first sequence alone");
	CHECK_MSG(atomic_load(&rows_seen[1]) == 4, "the second pass: the three that arrived joined it (%d rows)",
	          atomic_load(&rows_seen[1]));
	CHECK_MSG(atomic_load(&passes) == 4, "4 sequences of 3 tokens in 4 passes (%d)", atomic_load(&passes));
	CHECK(atomic_load(&st.tokens) == 12 && atomic_load(&st.prompt_tokens) == 1 + 2 + 1 + 7);
	CHECK(atomic_load(&st.running) == 0 && atomic_load(&st.waiting) == 0);
	uint64_t n = 0;
	for (int i = 0; i < DLK_HIST_MAX_BUCKETS; i++)
		n += atomic_load(&st.queue.counts[i]);
	n += atomic_load(&st.queue.inf);
	CHECK_MSG(n == 4, "each sequence's queue time observed once");
	for (int i = 0; i < 4; i++) {
		long long pt, ct;
		dlk_gen_req_counts(r[i], &pt, &ct);
		CHECK(ct == 3 && pt == (long long)strlen(prompts[i]));
		dlk_gen_req_release(r[i]);
		free(t[i]);
	}

	/* a waiter is woken when there is text; closing fails the rest and wakes them */
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	p.max_tokens = 1 << 20;
	struct dlk_gen_req *w = dlk_gen_req_new(&lm, "a", 1, &p, &err);
	CHECK(!dlk_gen_submit(s, w));
	while (dlk_gen_req_poll(w, &b, &f, msg, sizeof(msg), arm, wake, NULL) == 0 && !b.len)
		while (!atomic_load(&woken))
			usleep(500);
	CHECK(b.len > 0);
	dlk_pool_stop(pool);
	dlk_gen_sched_free(s);
	int rc;
	while (!(rc = dlk_gen_req_poll(w, &b, &f, msg, sizeof(msg), NULL, NULL, NULL)))
		;
	CHECK(rc == -1);
	CHECK_CONTAINS(msg, "shutting down");
	dlk_gen_req_release(w);
	dlk_buf_release(&b);
	dlk_pool_free(pool);
	dlk_tokenizer_free(tok);
	return CHECK_DONE();
}
