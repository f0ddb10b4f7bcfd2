/* The compute pool and the per-model queues (see batcher.h).
 *
 * The pool owns `workers` slots: a slot is one replica of every model with its batch buffers, and
 * a forward pass runs only while holding a slot, so at most `workers` passes run at once whoever
 * runs them. Each slot has a thread that waits for queued work. When a slot is free and the queue
 * has no reason to wait (max_delay 0), the submitting thread runs the batch itself
 * (dlk_batcher_try_inline): no hand-off to another thread and back, which on a few cores costs
 * more than a small model's forward pass. Jobs that arrive while every slot is busy queue up and
 * are batched by the next slot to come free. One mutex guards everything: the work under it is a
 * few pointer moves per job. */
#include "lib/serve/batcher.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/util/mem.h"

#define DLK_INLINE_EXTRA_BATCHES 4

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
	int gathering;              /* a slot is waiting for this queue to fill */
	pthread_cond_t more;        /* signalled on each submission, for the gathering slot */
	int index;
};

struct slot {
	struct dlk_pool *pool;
	int index;
	pthread_t thread;
	int started;
	int busy;
	void **replicas;            /* per batcher */
	float **in_buf, **out_buf;  /* per batcher: max_batch rows */
};

struct dlk_pool {
	pthread_mutex_t mu;
	pthread_cond_t work;        /* work arrived, a slot came free, or stop */
	pthread_cond_t ready;       /* a slot finished building its replicas */
	struct dlk_batcher **batchers;
	int n_batchers;
	struct slot *slots;
	int n_slots, n_free;
	int inline_ok;              /* every engine may run on any thread */
	int n_ready, n_failed;
	struct dlk_err first_err;
	int stopping;
	int stopped;                /* dlk_pool_stop is done: batchers remain, closed */
	int started;
};

static void cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

struct dlk_pool *dlk_pool_new(int workers)
{
	struct dlk_pool *p = xcalloc(1, sizeof(*p));

	pthread_mutex_init(&p->mu, NULL);
	cond_init_mono(&p->work);
	cond_init_mono(&p->ready);
	p->n_slots = workers < 1 ? 1 : workers;
	p->inline_ok = 1;
	return p;
}

struct dlk_batcher *dlk_pool_add(struct dlk_pool *pool, const struct dlk_engine *engine, int max_batch, int max_delay_us,
                                 struct dlk_model_stats *stats)
{
	struct dlk_batcher *b = xcalloc(1, sizeof(*b));

	b->pool = pool;
	b->engine = *engine;
	b->max_batch = max_batch < 1 ? 1 : max_batch;
	b->max_delay = max_delay_us > 0 ? max_delay_us * 1e-6 : 0;
	b->stats = stats;
	cond_init_mono(&b->more);
	b->index = pool->n_batchers;
	if (!engine->any_thread)
		pool->inline_ok = 0;
	pool->batchers = xrealloc(pool->batchers, (size_t)(pool->n_batchers + 1) * sizeof(*pool->batchers));
	pool->batchers[pool->n_batchers++] = b;
	return b;
}

/* The batcher whose oldest job waited longest and that no slot is gathering. */
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

static struct slot *take_slot(struct dlk_pool *p, struct slot *prefer)
{
	if (prefer && !prefer->busy) {
		prefer->busy = 1;
		p->n_free--;
		return prefer;
	}
	for (int i = 0; i < p->n_slots; i++)
		if (!p->slots[i].busy) {
			p->slots[i].busy = 1;
			p->n_free--;
			return &p->slots[i];
		}
	return NULL;
}

static void release_slot(struct dlk_pool *p, struct slot *s)
{
	s->busy = 0;
	p->n_free++;
	if (p->stopping)
		pthread_cond_broadcast(&p->work); /* dlk_pool_free waits for every slot */
	else if (pick(p))
		pthread_cond_signal(&p->work);
}

/* Takes queued jobs of b after `first` (which may be NULL: then the oldest queued one is first)
 * while they fit in max_batch rows; returns the list and their rows. Under the lock. */
static struct dlk_job *take_jobs(struct dlk_batcher *b, struct dlk_job *first, int *rows_out)
{
	struct dlk_job *last;
	int rows;

	if (!first) {
		first = b->head;
		b->head = first->next;
		if (!b->head)
			b->tail = NULL;
		b->queued_rows -= first->rows;
		first->next = NULL;
	}
	rows = first->rows;
	last = first;
	while (b->head && rows + b->head->rows <= b->max_batch) {
		struct dlk_job *j = b->head;
		b->head = j->next;
		if (!b->head)
			b->tail = NULL;
		b->queued_rows -= j->rows;
		rows += j->rows;
		j->next = NULL;
		last->next = j;
		last = j;
	}
	*rows_out = rows;
	return first;
}

/* The CLOCK_MONOTONIC time (what the condition variables wait on) at dlk_now() time t. */
static void abs_deadline(double t, struct timespec *ts)
{
	double left = t - dlk_now();
	clock_gettime(CLOCK_MONOTONIC, ts);
	if (left <= 0)
		return;
	ts->tv_sec += (time_t)left;
	ts->tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
	if (ts->tv_nsec >= 1000000000L)
		ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

/* Runs jobs (rows in all) on slot s, then finishes each: status, timings, and its done
 * callback (none for a job the caller runs inline). Called without the lock. */
static void run_batch(struct slot *s, struct dlk_batcher *b, struct dlk_job *jobs, int rows)
{
	const struct dlk_engine *e = &b->engine;
	void *rep = s->replicas[b->index];
	struct dlk_err err = DLK_ERR_INIT;
	int rc = 0, passes = 0, n_jobs = 0;
	double t0 = dlk_now();

	for (struct dlk_job *j = jobs; j; j = j->next)
		j->t_start = t0;
	if (!jobs->next) {
		/* one job: run straight from its buffers, in max_batch pieces when it is larger */
		struct dlk_job *j = jobs;
		for (int off = 0; off < j->rows && !rc; off += b->max_batch) {
			int n = j->rows - off < b->max_batch ? j->rows - off : b->max_batch;
			double ts = dlk_now();
			rc = e->run(rep, j->in + (size_t)off * e->in_size, n, j->out + (size_t)off * e->out_size, &err);
			passes++;
			if (b->stats) {
				dlk_hist_observe(&b->stats->compute, dlk_now() - ts);
				dlk_hist_observe(&b->stats->batch, n);
			}
			j->batch_rows = n;
		}
	} else {
		float *in = s->in_buf[b->index], *out = s->out_buf[b->index];
		size_t o = 0;
		for (struct dlk_job *j = jobs; j; j = j->next) {
			memcpy(in + o * e->in_size, j->in, (size_t)j->rows * e->in_size * sizeof(float));
			o += (size_t)j->rows;
		}
		rc = e->run(rep, in, rows, out, &err);
		passes = 1;
		if (b->stats) {
			dlk_hist_observe(&b->stats->compute, dlk_now() - t0);
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
	for (struct dlk_job *j = jobs; j; j = j->next)
		n_jobs++;
	if (b->stats) {
		atomic_fetch_add(&b->stats->executions, (uint64_t)passes);
		if (!rc)
			atomic_fetch_add(&b->stats->inferences, (uint64_t)rows);
		atomic_fetch_sub(&b->stats->pending, n_jobs);
	}
	pthread_mutex_lock(&b->pool->mu);
	b->pending -= n_jobs;
	pthread_mutex_unlock(&b->pool->mu);
	double t_end = dlk_now();
	for (struct dlk_job *j = jobs, *next; j; j = next) {
		next = j->next;
		j->next = NULL;
		if (b->stats)
			dlk_hist_observe(&b->stats->queue, j->t_start - j->t_submit);
		j->status = rc ? -1 : 0;
		if (rc)
			snprintf(j->msg, sizeof(j->msg), "%.255s", err.msg[0] ? err.msg : "the forward pass failed");
		j->t_end = t_end;
		if (j->done)
			j->done(j);
	}
}

static void free_slot(struct slot *s, struct dlk_pool *p)
{
	for (int i = 0; i < p->n_batchers; i++) {
		if (s->replicas && s->replicas[i])
			p->batchers[i]->engine.replica_free(s->replicas[i]);
		if (s->in_buf)
			free(s->in_buf[i]);
		if (s->out_buf)
			free(s->out_buf[i]);
	}
	free(s->replicas);
	free(s->in_buf);
	free(s->out_buf);
	s->replicas = NULL;
	s->in_buf = s->out_buf = NULL;
}

static void *slot_main(void *arg)
{
	struct slot *me = arg;
	struct dlk_pool *p = me->pool;
	struct dlk_err err = DLK_ERR_INIT;
	int ok = 1;

	/* the replicas are built in this thread: a device context may belong to it */
	me->replicas = xcalloc((size_t)p->n_batchers, sizeof(void *));
	me->in_buf = xcalloc((size_t)p->n_batchers, sizeof(float *));
	me->out_buf = xcalloc((size_t)p->n_batchers, sizeof(float *));
	for (int i = 0; i < p->n_batchers && ok; i++) {
		struct dlk_batcher *b = p->batchers[i];
		me->replicas[i] = b->engine.replica_new(b->engine.ctx, b->max_batch, &err);
		if (!me->replicas[i]) {
			ok = 0;
			break;
		}
		me->in_buf[i] = xmalloc((size_t)b->max_batch * b->engine.in_size * sizeof(float));
		me->out_buf[i] = xmalloc((size_t)b->max_batch * b->engine.out_size * sizeof(float));
	}
	pthread_mutex_lock(&p->mu);
	if (ok)
		p->n_ready++;
	else if (!p->n_failed++)
		p->first_err = err;
	pthread_cond_broadcast(&p->ready);
	/* every thread waits here until all are ready or one failed: then all run or all leave */
	while (p->n_ready + p->n_failed < p->n_slots)
		pthread_cond_wait(&p->ready, &p->mu);
	if (p->n_failed) {
		pthread_mutex_unlock(&p->mu);
		return NULL;
	}
	while (!p->stopping) {
		struct dlk_batcher *b = pick(p);
		struct slot *s = NULL;
		/* engines bound to their thread run only on its own slot, which nobody else takes */
		if (b)
			s = p->inline_ok ? take_slot(p, me) : me->busy ? NULL : take_slot(p, me);
		if (!s) {
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		if (b->max_delay > 0 && b->queued_rows < b->max_batch) {
			/* wait for the batch to fill, at most max_delay after its oldest job arrived */
			struct timespec ts;
			abs_deadline(b->head->t_submit + b->max_delay, &ts);
			b->gathering = 1;
			while (b->queued_rows < b->max_batch && !p->stopping &&
			       pthread_cond_timedwait(&b->more, &p->mu, &ts) != ETIMEDOUT)
				;
			b->gathering = 0;
		}
		int rows;
		struct dlk_job *jobs = take_jobs(b, NULL, &rows);
		if (b->head)
			pthread_cond_signal(&p->work); /* more work left for another slot */
		pthread_mutex_unlock(&p->mu);
		run_batch(s, b, jobs, rows);
		pthread_mutex_lock(&p->mu);
		release_slot(p, s);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int dlk_pool_start(struct dlk_pool *p, struct dlk_err *err)
{
	int n = 0;

	p->slots = xcalloc((size_t)p->n_slots, sizeof(*p->slots));
	p->n_free = p->n_slots;
	for (int i = 0; i < p->n_slots; i++) {
		p->slots[i].pool = p;
		p->slots[i].index = i;
		if (pthread_create(&p->slots[i].thread, NULL, slot_main, &p->slots[i])) {
			pthread_mutex_lock(&p->mu);
			if (!p->n_failed)
				dlk_errf(&p->first_err, DLK_EXIT_FAIL, "cannot start compute worker %d: %s", i, strerror(errno));
			/* the missing threads count as failed so that the started ones stop waiting */
			p->n_failed += p->n_slots - i;
			pthread_cond_broadcast(&p->ready);
			pthread_mutex_unlock(&p->mu);
			break;
		}
		p->slots[i].started = 1;
		n++;
	}
	pthread_mutex_lock(&p->mu);
	while (p->n_ready + p->n_failed < p->n_slots)
		pthread_cond_wait(&p->ready, &p->mu);
	int failed = p->n_failed;
	pthread_mutex_unlock(&p->mu);
	if (failed) {
		for (int i = 0; i < n; i++) {
			pthread_join(p->slots[i].thread, NULL);
			p->slots[i].started = 0;
			free_slot(&p->slots[i], p);
		}
		if (err)
			*err = p->first_err;
		return -1;
	}
	p->started = 1;
	return 0;
}

void dlk_pool_stop(struct dlk_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->stopped) {
		pthread_mutex_unlock(&p->mu);
		return;
	}
	p->stopping = 1;
	pthread_cond_broadcast(&p->work);
	for (int i = 0; i < p->n_batchers; i++) {
		p->batchers[i]->closed = 1;
		pthread_cond_broadcast(&p->batchers[i]->more);
	}
	/* a submitter running a batch inline holds a slot: wait until every slot is back */
	while (p->started && p->n_free < p->n_slots)
		pthread_cond_wait(&p->work, &p->mu);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; p->slots && i < p->n_slots; i++)
		if (p->slots[i].started) {
			pthread_join(p->slots[i].thread, NULL);
			p->slots[i].started = 0;
			free_slot(&p->slots[i], p);
		}
	/* what no slot took: answered, so that no submitter waits forever */
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->n_batchers; i++) {
		struct dlk_batcher *b = p->batchers[i];
		struct dlk_job *j = b->head;
		b->head = b->tail = NULL;
		b->queued_rows = 0;
		while (j) {
			struct dlk_job *next = j->next;
			j->next = NULL;
			j->status = -1;
			snprintf(j->msg, sizeof(j->msg), "the server is shutting down");
			j->t_end = dlk_now();
			b->pending--;
			if (b->stats)
				atomic_fetch_sub(&b->stats->pending, 1);
			if (j->done)
				j->done(j);
			j = next;
		}
	}
	p->stopped = 1;
	pthread_mutex_unlock(&p->mu);
}

void dlk_pool_free(struct dlk_pool *p)
{
	if (!p)
		return;
	dlk_pool_stop(p);
	for (int i = 0; i < p->n_batchers; i++) {
		pthread_cond_destroy(&p->batchers[i]->more);
		free(p->batchers[i]);
	}
	free(p->batchers);
	free(p->slots);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->ready);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

static void prepare(struct dlk_job *job)
{
	job->next = NULL;
	job->status = 0;
	job->msg[0] = '\0';
	job->t_submit = dlk_now();
}

int dlk_batcher_try_inline(struct dlk_batcher *b, struct dlk_job *job)
{
	struct dlk_pool *p = b->pool;
	struct slot *s;
	int rows;

	if (!p->inline_ok || b->max_delay > 0)
		return 0;
	prepare(job);
	pthread_mutex_lock(&p->mu);
	if (b->closed || p->stopping || !p->started) {
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	if (!(s = take_slot(p, NULL))) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	b->pending++;
	if (b->stats)
		atomic_fetch_add(&b->stats->pending, 1);
	/* this job first, then what queued while every slot was busy, as far as it fits */
	job->done = NULL;
	struct dlk_job *jobs = take_jobs(b, job, &rows);
	pthread_mutex_unlock(&p->mu);
	run_batch(s, b, jobs, rows);
	pthread_mutex_lock(&p->mu);
	/* Holding the slot, run what queued meanwhile (a few batches at most, so that this job's own
	 * answer is not held back for long): no slot thread has to be woken and no hand-off paid, and
	 * the queued jobs run as batches. */
	for (int extra = 0; extra < DLK_INLINE_EXTRA_BATCHES && b->head && !p->stopping; extra++) {
		jobs = take_jobs(b, NULL, &rows);
		pthread_mutex_unlock(&p->mu);
		run_batch(s, b, jobs, rows);
		pthread_mutex_lock(&p->mu);
	}
	release_slot(p, s);
	pthread_mutex_unlock(&p->mu);
	return 1;
}

int dlk_batcher_submit(struct dlk_batcher *b, struct dlk_job *job)
{
	struct dlk_pool *p = b->pool;

	prepare(job);
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
	else if (p->n_free)
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
	int rc;

	if (rows < 1)
		return dlk_errf(err, DLK_EXIT_FAIL, "no rows to run");
	memset(&job, 0, sizeof(job));
	job.in = in;
	job.rows = rows;
	job.out = out;
	rc = dlk_batcher_try_inline(b, &job);
	if (rc == 0) {
		job.done = wake_waiter;
		job.arg = &w;
		rc = dlk_batcher_submit(b, &job) ? -1 : 1;
		if (rc == 1) {
			pthread_mutex_lock(&w.mu);
			while (!w.finished)
				pthread_cond_wait(&w.cv, &w.mu);
			pthread_mutex_unlock(&w.mu);
		}
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	if (rc < 0)
		return dlk_errf(err, DLK_EXIT_FAIL, "the model is not accepting work (the server is shutting down)");
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
