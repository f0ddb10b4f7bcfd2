/* The compute pool and the per-model queues (see batcher.h). One mutex guards every queue: the
 * work under it is a few pointer moves per job, and one lock lets an idle worker pick the oldest
 * work across models without lock ordering. */
#include "lib/serve/batcher.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/util/mem.h"

struct dlk_batcher {
	struct dlk_pool *pool;
	struct dlk_engine engine;
	int max_batch;
	double max_delay;           /* seconds */
	struct dlk_model_stats *stats;
	struct dlk_job *head, *tail; /* queued, oldest first */
	long long queued_rows;
	int pending;                /* submitted, not done */
	int closed;
	int gathering;              /* a worker is waiting for this queue to fill */
	pthread_cond_t more;        /* signalled on each submission, for the gathering worker */
	int index;
};

struct worker {
	struct dlk_pool *pool;
	pthread_t thread;
	int started;
	void **replicas;            /* per batcher */
	float **in_buf, **out_buf;  /* per batcher: max_batch rows */
};

struct dlk_pool {
	pthread_mutex_t mu;
	pthread_cond_t work;        /* work arrived or stop */
	pthread_cond_t ready;       /* a worker finished building its replicas */
	struct dlk_batcher **batchers;
	int n_batchers;
	struct worker *workers;
	int n_workers;
	int n_ready, n_failed;
	struct dlk_err first_err;
	int stopping;
	int started;
};

double dlk_mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct dlk_pool *dlk_pool_new(int workers)
{
	struct dlk_pool *p = xcalloc(1, sizeof(*p));
	pthread_condattr_t ca;

	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->work, &ca);
	pthread_cond_init(&p->ready, &ca);
	pthread_condattr_destroy(&ca);
	p->n_workers = workers < 1 ? 1 : workers;
	return p;
}

struct dlk_batcher *dlk_pool_add(struct dlk_pool *pool, const struct dlk_engine *engine, int max_batch, int max_delay_us,
                                 struct dlk_model_stats *stats)
{
	struct dlk_batcher *b = xcalloc(1, sizeof(*b));
	pthread_condattr_t ca;

	b->pool = pool;
	b->engine = *engine;
	b->max_batch = max_batch < 1 ? 1 : max_batch;
	b->max_delay = max_delay_us > 0 ? max_delay_us * 1e-6 : 0;
	b->stats = stats;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->more, &ca);
	pthread_condattr_destroy(&ca);
	b->index = pool->n_batchers;
	pool->batchers = xrealloc(pool->batchers, (size_t)(pool->n_batchers + 1) * sizeof(*pool->batchers));
	pool->batchers[pool->n_batchers++] = b;
	return b;
}

static void finish(struct dlk_batcher *b, struct dlk_job *j)
{
	j->t_end = dlk_mono_now();
	pthread_mutex_lock(&b->pool->mu);
	b->pending--;
	pthread_mutex_unlock(&b->pool->mu);
	if (b->stats)
		atomic_fetch_sub(&b->stats->pending, 1);
	j->done(j);
}

/* The batcher whose oldest job waited longest and that no other worker is gathering. */
static struct dlk_batcher *pick(struct dlk_pool *p)
{
	struct dlk_batcher *best = NULL;
	for (int i = 0; i < p->n_batchers; i++) {
		struct dlk_batcher *b = p->batchers[i];
		if (b->head && !b->gathering && (!best || b->head->t_submit < best->head->t_submit))
			best = b;
	}
	return best;
}

static void abs_deadline(double t, struct timespec *ts)
{
	ts->tv_sec = (time_t)t;
	ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
	if (ts->tv_nsec >= 1000000000L)
		ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

static void run_batch(struct worker *w, struct dlk_batcher *b, struct dlk_job *jobs, int rows)
{
	const struct dlk_engine *e = &b->engine;
	void *rep = w->replicas[b->index];
	struct dlk_err err = DLK_ERR_INIT;
	int rc = 0, passes = 0;
	double t0 = dlk_mono_now();

	for (struct dlk_job *j = jobs; j; j = j->next)
		j->t_start = t0;
	if (!jobs->next) {
		/* one job: run straight from its buffers, in max_batch pieces when it is larger */
		struct dlk_job *j = jobs;
		for (int off = 0; off < j->rows && !rc; off += b->max_batch) {
			int n = j->rows - off < b->max_batch ? j->rows - off : b->max_batch;
			double ts = dlk_mono_now();
			rc = e->run(rep, j->in + (size_t)off * e->in_size, n, j->out + (size_t)off * e->out_size, &err);
			passes++;
			if (b->stats) {
				dlk_hist_observe(&b->stats->compute, dlk_mono_now() - ts);
				dlk_hist_observe(&b->stats->batch, n);
			}
			j->batch_rows = n;
		}
	} else {
		float *in = w->in_buf[b->index], *out = w->out_buf[b->index];
		size_t o = 0;
		for (struct dlk_job *j = jobs; j; j = j->next) {
			memcpy(in + o * e->in_size, j->in, (size_t)j->rows * e->in_size * sizeof(float));
			o += (size_t)j->rows;
		}
		rc = e->run(rep, in, rows, out, &err);
		passes = 1;
		if (b->stats) {
			dlk_hist_observe(&b->stats->compute, dlk_mono_now() - t0);
			dlk_hist_observe(&b->stats->batch, rows);
		}
		o = 0;
		for (struct dlk_job *j = jobs; j; j = j->next) {
			if (!rc)
				memcpy(j->out, out + o * e->out_size, (size_t)j->rows * e->out_size * sizeof(float));
			o += (size_t)j->rows;
			j->batch_rows = rows;
		}
	}
	if (b->stats) {
		atomic_fetch_add(&b->stats->executions, (uint64_t)passes);
		if (!rc)
			atomic_fetch_add(&b->stats->inferences, (uint64_t)rows);
	}
	for (struct dlk_job *j = jobs, *next; j; j = next) {
		next = j->next;
		j->next = NULL;
		if (b->stats)
			dlk_hist_observe(&b->stats->queue, j->t_start - j->t_submit);
		j->status = rc ? -1 : 0;
		if (rc)
			snprintf(j->msg, sizeof(j->msg), "%.255s", err.msg[0] ? err.msg : "the forward pass failed");
		finish(b, j);
	}
}

static void free_replicas(struct worker *w, struct dlk_pool *p)
{
	for (int i = 0; i < p->n_batchers; i++) {
		if (w->replicas && w->replicas[i])
			p->batchers[i]->engine.replica_free(w->replicas[i]);
		if (w->in_buf)
			free(w->in_buf[i]);
		if (w->out_buf)
			free(w->out_buf[i]);
	}
	free(w->replicas);
	free(w->in_buf);
	free(w->out_buf);
	w->replicas = NULL;
	w->in_buf = w->out_buf = NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct dlk_pool *p = w->pool;
	struct dlk_err err = DLK_ERR_INIT;
	int ok = 1;

	w->replicas = xcalloc((size_t)p->n_batchers, sizeof(void *));
	w->in_buf = xcalloc((size_t)p->n_batchers, sizeof(float *));
	w->out_buf = xcalloc((size_t)p->n_batchers, sizeof(float *));
	for (int i = 0; i < p->n_batchers && ok; i++) {
		struct dlk_batcher *b = p->batchers[i];
		w->replicas[i] = b->engine.replica_new(b->engine.ctx, b->max_batch, &err);
		if (!w->replicas[i]) {
			ok = 0;
			break;
		}
		w->in_buf[i] = xmalloc((size_t)b->max_batch * b->engine.in_size * sizeof(float));
		w->out_buf[i] = xmalloc((size_t)b->max_batch * b->engine.out_size * sizeof(float));
	}
	pthread_mutex_lock(&p->mu);
	if (ok) {
		p->n_ready++;
	} else {
		if (!p->n_failed++)
			p->first_err = err;
	}
	pthread_cond_broadcast(&p->ready);
	/* every worker waits here until all are ready or one failed: then all run or all leave */
	while (p->n_ready + p->n_failed < p->n_workers)
		pthread_cond_wait(&p->ready, &p->mu);
	if (p->n_failed) {
		pthread_mutex_unlock(&p->mu);
		free_replicas(w, p);
		return NULL;
	}
	while (!p->stopping) {
		struct dlk_batcher *b = pick(p);
		if (!b) {
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		if (b->max_delay > 0 && b->queued_rows < b->max_batch && !p->stopping) {
			/* wait for the batch to fill, at most max_delay after its oldest job arrived */
			struct timespec ts;
			abs_deadline(b->head->t_submit + b->max_delay, &ts);
			b->gathering = 1;
			while (b->queued_rows < b->max_batch && !p->stopping &&
			       pthread_cond_timedwait(&b->more, &p->mu, &ts) != ETIMEDOUT)
				;
			b->gathering = 0;
		}
		/* take the oldest job, and more while they fit */
		struct dlk_job *first = b->head, *last = first;
		int rows = first->rows;
		while (last->next && rows + last->next->rows <= b->max_batch) {
			last = last->next;
			rows += last->rows;
		}
		b->head = last->next;
		if (!b->head)
			b->tail = NULL;
		last->next = NULL;
		b->queued_rows -= rows;
		if (b->head)
			pthread_cond_signal(&p->work); /* more work left for another worker */
		pthread_mutex_unlock(&p->mu);
		run_batch(w, b, first, rows);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	free_replicas(w, p);
	return NULL;
}

int dlk_pool_start(struct dlk_pool *p, struct dlk_err *err)
{
	int n = 0;

	p->workers = xcalloc((size_t)p->n_workers, sizeof(*p->workers));
	for (int i = 0; i < p->n_workers; i++) {
		p->workers[i].pool = p;
		if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i])) {
			pthread_mutex_lock(&p->mu);
			p->n_failed++;
			if (p->n_failed == 1)
				dlk_errf(&p->first_err, DLK_EXIT_FAIL, "cannot start compute worker %d: %s", i, strerror(errno));
			/* the missing workers count as failed so that the started ones stop waiting */
			p->n_failed += p->n_workers - i - 1;
			pthread_cond_broadcast(&p->ready);
			pthread_mutex_unlock(&p->mu);
			break;
		}
		p->workers[i].started = 1;
		n++;
	}
	pthread_mutex_lock(&p->mu);
	while (p->n_ready + p->n_failed < p->n_workers)
		pthread_cond_wait(&p->ready, &p->mu);
	int failed = p->n_failed;
	pthread_mutex_unlock(&p->mu);
	if (failed) {
		for (int i = 0; i < n; i++)
			pthread_join(p->workers[i].thread, NULL);
		for (int i = 0; i < p->n_workers; i++)
			p->workers[i].started = 0;
		if (err)
			*err = p->first_err;
		return -1;
	}
	p->started = 1;
	return 0;
}

void dlk_pool_free(struct dlk_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	pthread_cond_broadcast(&p->work);
	for (int i = 0; i < p->n_batchers; i++) {
		p->batchers[i]->closed = 1;
		pthread_cond_broadcast(&p->batchers[i]->more);
	}
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; p->workers && i < p->n_workers; i++)
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
	/* what no worker took: answered, so that no submitter waits forever */
	for (int i = 0; i < p->n_batchers; i++) {
		struct dlk_batcher *b = p->batchers[i];
		struct dlk_job *j = b->head;
		b->head = b->tail = NULL;
		while (j) {
			struct dlk_job *next = j->next;
			j->next = NULL;
			j->status = -1;
			snprintf(j->msg, sizeof(j->msg), "the server is shutting down");
			finish(b, j);
			j = next;
		}
		pthread_cond_destroy(&b->more);
		free(b);
	}
	free(p->batchers);
	free(p->workers);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->ready);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

int dlk_batcher_submit(struct dlk_batcher *b, struct dlk_job *job)
{
	struct dlk_pool *p = b->pool;

	job->next = NULL;
	job->status = 0;
	job->msg[0] = '\0';
	job->t_submit = dlk_mono_now();
	pthread_mutex_lock(&p->mu);
	if (b->closed || p->stopping || !p->started) {
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	if (b->tail)
		b->tail->next = job;
	else
		b->head = job;
	b->tail = job;
	b->queued_rows += job->rows;
	b->pending++;
	if (b->stats)
		atomic_fetch_add(&b->stats->pending, 1);
	if (b->gathering)
		pthread_cond_signal(&b->more);
	else
		pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int finished;
};

static void wake_waiter(struct dlk_job *job)
{
	struct waiter *w = job->arg;
	pthread_mutex_lock(&w->mu);
	w->finished = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int dlk_batcher_run(struct dlk_batcher *b, const float *in, int rows, float *out, struct dlk_err *err)
{
	struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	struct dlk_job job;

	memset(&job, 0, sizeof(job));
	job.in = in;
	job.rows = rows;
	job.out = out;
	job.done = wake_waiter;
	job.arg = &w;
	if (rows < 1)
		return dlk_errf(err, DLK_EXIT_FAIL, "no rows to run");
	if (dlk_batcher_submit(b, &job))
		return dlk_errf(err, DLK_EXIT_FAIL, "the model is not accepting work (the server is shutting down)");
	pthread_mutex_lock(&w.mu);
	while (!w.finished)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	if (job.status)
		return dlk_errf(err, DLK_EXIT_FAIL, "%s", job.msg);
	return 0;
}

void dlk_batcher_close(struct dlk_batcher *b)
{
	pthread_mutex_lock(&b->pool->mu);
	b->closed = 1;
	pthread_mutex_unlock(&b->pool->mu);
}

int dlk_batcher_pending(struct dlk_batcher *b)
{
	pthread_mutex_lock(&b->pool->mu);
	int n = b->pending;
	pthread_mutex_unlock(&b->pool->mu);
	return n;
}
