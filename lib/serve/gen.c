/* The generation scheduler (gen.h). */
#include "lib/serve/gen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

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
				unref(r);
			} else {
				s->active[n++] = r;
			}
		}
		s->n_active = n;
		if (!n)
			continue;
		for (int i = 0; i < n; i++)
			pos[i] = dlk_gen_seq_input(&s->active[i]->seq, lm, s->in + (size_t)i * (size_t)lm->context);
		struct dlk_err err = DLK_ERR_INIT;
		int rc = dlk_batcher_run(s->batcher, s->in, n, s->out, &err);
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
		unref(s->active[i]);
	}
	s->n_active = 0;
	free(pos);
	return NULL;
}

struct dlk_gen_sched *dlk_gen_sched_new(const struct dlk_lm *lm, struct dlk_batcher *batcher, int max_seqs,
                                        struct dlk_gen_stats *stats)
{
	struct dlk_gen_sched *s = xcalloc(1, sizeof(*s));
	s->lm = lm;
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
	}
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
