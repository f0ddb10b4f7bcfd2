/* The generation scheduler (gen.h). */
#include "lib/serve/gen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/decode.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

struct dlk_gen_req {
	pthread_mutex_t mu;
	int refs;
	struct dlk_gen_seq seq;
	struct dlk_buf pending;     /* text made and not yet polled */
	int done;                   /* 1 finished, -1 failed */
	char msg[256];
	int cancelled;
	void (*wake)(void *);       /* armed: called once when there is more */
	void *wake_arg;
	double t_submit, t_first;
	struct dlk_gen_req *next;   /* the scheduler's queue */
	struct dlk_decode *dec;     /* its key/value cache (the scheduler's thread only) */
};

struct dlk_gen_sched {
	const struct dlk_lm *lm;
	struct dlk_batcher *batcher;
	int max_seqs;
	struct dlk_gen_stats *stats;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int closed;
	struct dlk_gen_req *head, *tail;
	struct dlk_gen_req **active;
	int n_active;
	float *in, *out;
	/* key/value decoding: the scheduler's own network */
	const struct dlk_bundle *bundle;
	const struct dlk_backend *be;
	struct dlk_net net;
	int kv, init_done;
	float *dev_ids;
};

/* In the scheduler's thread: its network, and whether it decodes (a probe cache). */
static void kv_init(struct dlk_gen_sched *s)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_decode probe = DLK_DECODE_INIT;
	if (!s->bundle || !s->lm->per_position)
		return;
	s->net = (struct dlk_net)DLK_NET_INIT;
	if (dlk_bundle_net(s->bundle, s->be, &s->net, &err))
		return;
	if (dlk_decode_begin(&probe, &s->net, 1, s->lm->context, &err)) {
		dlk_net_release(&s->net);
		return;
	}
	dlk_decode_release(&probe);
	s->dev_ids = s->be->alloc((size_t)s->lm->context * sizeof(float));
	if (!s->dev_ids) {
		dlk_net_release(&s->net);
		return;
	}
	s->kv = 1;
}

static void kv_drop(struct dlk_gen_sched *s, struct dlk_gen_req *r)
{
	(void)s;
	if (r->dec) {
		dlk_decode_release(r->dec);
		free(r->dec);
		r->dec = NULL;
	}
}

/* One decoding step of r into s->out (its next token's logits at row i, position 0). */
static int kv_step(struct dlk_gen_sched *s, struct dlk_gen_req *r, int i, struct dlk_err *err)
{
	const struct dlk_lm *lm = s->lm;
	float *row = s->in + (size_t)i * (size_t)lm->context;
	int pos = dlk_gen_seq_input(&r->seq, lm, row), n = 1;
	const float *ids = row + pos;
	char msg[256];

	if (!r->dec) {
		r->dec = xcalloc(1, sizeof(*r->dec));
		if (dlk_decode_begin(r->dec, &s->net, 1, lm->context, err)) {
			free(r->dec);
			r->dec = NULL;
			return -1;
		}
	}
	if (!r->dec->len || r->dec->len >= lm->context) {
		dlk_decode_reset(r->dec);
		n = pos + 1;
		ids = row;
	}
	s->be->to_device(s->dev_ids, ids, (size_t)n * sizeof(float));
	const float *y = dlk_decode_step(r->dec, s->dev_ids, n, err);
	if (!y)
		return -1;
	s->be->to_host(s->out + (size_t)i * lm->out_size, y + (size_t)(n - 1) * (size_t)lm->vocab,
	               (size_t)lm->vocab * sizeof(float));
	if (s->be->check(msg, sizeof(msg)))
		return dlk_errf(err, DLK_EXIT_FAIL, "%s backend: %s", s->be->name, msg);
	return 0;
}

static const double rate_bounds[] = { 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000 };
static const double time_bounds[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	                              0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };

void dlk_gen_stats_init(struct dlk_gen_stats *s)
{
	memset(s, 0, sizeof(*s));
	dlk_hist_init(&s->queue, time_bounds, (int)(sizeof(time_bounds) / sizeof(*time_bounds)));
	dlk_hist_init(&s->ttft, time_bounds, (int)(sizeof(time_bounds) / sizeof(*time_bounds)));
	dlk_hist_init(&s->rate, rate_bounds, (int)(sizeof(rate_bounds) / sizeof(*rate_bounds)));
}

void dlk_gen_metrics_write(struct dlk_buf *out, const char *const *names, const struct dlk_gen_stats *const *stats, int n)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
		{ "dlk_generation_prompt_tokens_total", "counter", "Prompt tokens of the sequences admitted." },
		{ "dlk_generation_tokens_total", "counter", "Tokens generated." },
		{ "dlk_generation_sequences_running", "gauge", "Sequences in the forward passes now." },
		{ "dlk_generation_sequences_waiting", "gauge", "Sequences queued for their first pass." },
		{ "dlk_generation_queue_duration_seconds", "histogram", "Time from submission to the first forward pass." },
		{ "dlk_generation_time_to_first_token_seconds", "histogram", "Time from submission to the first token." },
		{ "dlk_generation_tokens_per_second", "histogram", "Each finished sequence's tokens per second after its first token." },
	};
	if (!n)
		return;
	for (size_t f = 0; f < sizeof(fam) / sizeof(*fam); f++) {
		dlk_metrics_family(out, fam[f].name, fam[f].type, fam[f].help);
		for (int i = 0; i < n; i++) {
			const struct dlk_gen_stats *s = stats[i];
			if (f >= 4) {
				const struct dlk_hist *h = f == 4 ? &s->queue : f == 5 ? &s->ttft : &s->rate;
				dlk_hist_write(out, fam[f].name, "model", names[i], h);
				continue;
			}
			dlk_buf_addf(out, "%s{model=\"", fam[f].name);
			dlk_metrics_label(out, names[i]);
			long long v = f == 0 ? (long long)atomic_load(&s->prompt_tokens) : f == 1 ? (long long)atomic_load(&s->tokens)
			              : f == 2 ? (long long)atomic_load(&s->running) : (long long)atomic_load(&s->waiting);
			dlk_buf_addf(out, "\"} %lld\n", v);
		}
	}
}

struct dlk_gen_req *dlk_gen_req_new(const struct dlk_lm *lm, const char *prompt, size_t len,
                                    const struct dlk_gen_params *p, struct dlk_err *err)
{
	struct dlk_gen_req *r = xcalloc(1, sizeof(*r));
	if (dlk_gen_seq_init(&r->seq, lm, prompt, len, p, err)) {
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	r->refs = 1;
	return r;
}

static void unref(struct dlk_gen_req *r)
{
	pthread_mutex_lock(&r->mu);
	int left = --r->refs;
	pthread_mutex_unlock(&r->mu);
	if (left)
		return;
	dlk_gen_seq_release(&r->seq);
	dlk_buf_release(&r->pending);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

int dlk_gen_req_poll(struct dlk_gen_req *r, struct dlk_buf *out, enum dlk_finish *finish, char *msg, size_t msg_len,
                     void (*arm)(void *), void (*wake)(void *), void *arg)
{
	int rc;
	pthread_mutex_lock(&r->mu);
	size_t had = r->pending.len;
	if (had) {
		dlk_buf_add(out, r->pending.data, had);
		dlk_buf_reset(&r->pending);
	}
	rc = r->done;
	if (rc > 0)
		*finish = r->seq.finish;
	else if (rc < 0)
		snprintf(msg, msg_len, "%s", r->msg);
	else if (!had && arm) {
		arm(arg);
		r->wake = wake;
		r->wake_arg = arg;
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void dlk_gen_req_counts(struct dlk_gen_req *r, long long *prompt_tokens, long long *completion_tokens)
{
	pthread_mutex_lock(&r->mu);
	*prompt_tokens = (long long)r->seq.prompt_tokens;
	*completion_tokens = r->seq.generated;
	pthread_mutex_unlock(&r->mu);
}

void dlk_gen_req_release(struct dlk_gen_req *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->cancelled = 1;
	r->wake = NULL;
	pthread_mutex_unlock(&r->mu);
	unref(r);
}

/* under r->mu: a waiting submitter learns there is more */
static void wake_locked(struct dlk_gen_req *r)
{
	if (r->wake) {
		void (*w)(void *) = r->wake;
		r->wake = NULL;
		w(r->wake_arg);
	}
}

static void fail_req(struct dlk_gen_req *r, const char *msg)
{
	pthread_mutex_lock(&r->mu);
	if (!r->done) {
		r->done = -1;
		snprintf(r->msg, sizeof(r->msg), "%s", msg);
	}
	wake_locked(r);
	pthread_mutex_unlock(&r->mu);
}

static void *sched_main(void *arg)
{
	struct dlk_gen_sched *s = arg;
	const struct dlk_lm *lm = s->lm;
	int *pos = xmalloc((size_t)s->max_seqs * sizeof(int));

	kv_init(s);
	pthread_mutex_lock(&s->mu);
	s->init_done = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->closed && !s->n_active && !s->head)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->closed) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		double now = dlk_now();
		while (s->head && s->n_active < s->max_seqs) {
			struct dlk_gen_req *r = s->head;
			s->head = r->next;
			if (!s->head)
				s->tail = NULL;
			s->active[s->n_active++] = r;
			atomic_fetch_sub(&s->stats->waiting, 1);
			atomic_fetch_add(&s->stats->running, 1);
			atomic_fetch_add(&s->stats->prompt_tokens, r->seq.prompt_tokens);
			dlk_hist_observe(&s->stats->queue, now - r->t_submit);
		}
		pthread_mutex_unlock(&s->mu);

		/* the ones whose submitter left are dropped */
		int n = 0;
		for (int i = 0; i < s->n_active; i++) {
			struct dlk_gen_req *r = s->active[i];
			pthread_mutex_lock(&r->mu);
			int gone = r->cancelled;
			pthread_mutex_unlock(&r->mu);
			if (gone) {
				atomic_fetch_sub(&s->stats->running, 1);
				kv_drop(s, r);
				unref(r);
			} else {
				s->active[n++] = r;
			}
		}
		s->n_active = n;
		if (!n)
			continue;
		struct dlk_err err = DLK_ERR_INIT;
		int rc = 0;
		if (s->kv) {
			/* each sequence one step on its own cache; its logits at position 0 of its row */
			for (int i = 0; i < n && !rc; i++) {
				rc = kv_step(s, s->active[i], i, &err);
				pos[i] = 0;
			}
		} else {
			for (int i = 0; i < n; i++)
				pos[i] = dlk_gen_seq_input(&s->active[i]->seq, lm, s->in + (size_t)i * (size_t)lm->context);
			rc = dlk_batcher_run(s->batcher, s->in, n, s->out, &err);
		}
		now = dlk_now();
		int kept = 0;
		for (int i = 0; i < n; i++) {
			struct dlk_gen_req *r = s->active[i];
			int done;
			pthread_mutex_lock(&r->mu);
			if (rc) {
				r->done = -1;
				snprintf(r->msg, sizeof(r->msg), "%.200s", err.msg);
			} else {
				dlk_gen_seq_push(&r->seq, lm, s->out + (size_t)i * lm->out_size, pos[i]);
				atomic_fetch_add(&s->stats->tokens, 1);
				if (!r->t_first) {
					r->t_first = now;
					dlk_hist_observe(&s->stats->ttft, now - r->t_submit);
				}
				dlk_gen_seq_take(&r->seq, &r->pending);
				if (r->seq.finish) {
					r->done = 1;
					if (r->seq.generated > 1 && now > r->t_first)
						dlk_hist_observe(&s->stats->rate, (r->seq.generated - 1) / (now - r->t_first));
				}
			}
			done = r->done;
			if (done || r->pending.len)
				wake_locked(r);
			pthread_mutex_unlock(&r->mu);
			if (done) {
				atomic_fetch_sub(&s->stats->running, 1);
				kv_drop(s, r);
				unref(r);
			} else {
				s->active[kept++] = r;
			}
		}
		s->n_active = kept;
	}
	/* closed: everything still here fails */
	for (int i = 0; i < s->n_active; i++) {
		fail_req(s->active[i], "the server is shutting down");
		atomic_fetch_sub(&s->stats->running, 1);
		kv_drop(s, s->active[i]);
		unref(s->active[i]);
	}
	s->n_active = 0;
	if (s->kv) {
		s->be->free(s->dev_ids);
		dlk_net_release(&s->net);
	}
	free(pos);
	return NULL;
}

int dlk_gen_sched_kv(const struct dlk_gen_sched *s)
{
	return s->kv;
}

struct dlk_gen_sched *dlk_gen_sched_new(const struct dlk_lm *lm, struct dlk_batcher *batcher, int max_seqs,
                                        struct dlk_gen_stats *stats, const struct dlk_bundle *bundle,
                                        const struct dlk_backend *be)
{
	struct dlk_gen_sched *s = xcalloc(1, sizeof(*s));
	s->lm = lm;
	s->bundle = bundle;
	s->be = be ? be : dlk_backend_cpu();
	s->batcher = batcher;
	s->max_seqs = max_seqs > 0 ? max_seqs : 1;
	s->stats = stats;
	s->active = xcalloc((size_t)s->max_seqs, sizeof(*s->active));
	s->in = xmalloc((size_t)s->max_seqs * (size_t)lm->context * sizeof(float));
	s->out = xmalloc((size_t)s->max_seqs * lm->out_size * sizeof(float));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, sched_main, s)) {
		s->closed = 2; /* no thread: every submission is refused */
		return s;
	}
	/* the thread decides whether it decodes with caches before anything is submitted */
	pthread_mutex_lock(&s->mu);
	while (!s->init_done)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	return s;
}

int dlk_gen_submit(struct dlk_gen_sched *s, struct dlk_gen_req *r)
{
	pthread_mutex_lock(&s->mu);
	if (s->closed) {
		pthread_mutex_unlock(&s->mu);
		return -1;
	}
	pthread_mutex_lock(&r->mu);
	r->refs++;
	r->t_submit = dlk_now();
	pthread_mutex_unlock(&r->mu);
	r->next = NULL;
	if (s->tail)
		s->tail->next = r;
	else
		s->head = r;
	s->tail = r;
	atomic_fetch_add(&s->stats->waiting, 1);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

void dlk_gen_sched_free(struct dlk_gen_sched *s)
{
	struct dlk_gen_req *q;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	int had_thread = s->closed != 2;
	s->closed = 1;
	q = s->head;
	s->head = s->tail = NULL;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (struct dlk_gen_req *r = q, *nx; r; r = nx) {
		nx = r->next;
		fail_req(r, "the server is shutting down");
		atomic_fetch_sub(&s->stats->waiting, 1);
		unref(r);
	}
	if (had_thread)
		pthread_join(s->th, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->active);
	free(s->in);
	free(s->out);
	free(s);
}
