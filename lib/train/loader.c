/* Loader threads: a batch gathered by rows while the step computes. */
#include "lib/train/loader.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/machine.h"
#include "lib/util/mem.h"

struct dlk_loader {
	const struct dlk_dataset *ds;
	int nthreads;
	pthread_t *tids;
	int started;
	float *x, *t;
	int32_t *y;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	/* the job, under mu: its generation, the rows' owners still at work */
	unsigned long gen;
	int busy, posted, quit;
	const size_t *idx;
	size_t n;
	unsigned long long seed;
	int epoch;
};

struct worker_arg {
	struct dlk_loader *l;
	int part;
};

static void do_part(struct dlk_loader *l, int part)
{
	dlk_dataset_gather_train_part(l->ds, l->idx, l->n, l->seed, l->epoch, l->x, l->t, part, l->nthreads);
	/* labels: part 0's, a copy */
	if (part == 0)
		for (size_t b = 0; b < l->n; b++)
			l->y[b] = l->ds->y[l->idx[b]];
}

static void *worker(void *arg)
{
	struct worker_arg *w = arg;
	struct dlk_loader *l = w->l;
	unsigned long seen = 0;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (l->gen == seen && !l->quit)
			pthread_cond_wait(&l->go, &l->mu);
		if (l->quit)
			break;
		seen = l->gen;
		pthread_mutex_unlock(&l->mu);
		do_part(l, w->part);
		pthread_mutex_lock(&l->mu);
		if (--l->busy == 0)
			pthread_cond_broadcast(&l->done);
	}
	pthread_mutex_unlock(&l->mu);
	free(w);
	return NULL;
}

struct dlk_loader *dlk_loader_start(const struct dlk_dataset *ds, int batch, int threads)
{
	struct dlk_loader *l = xcalloc(1, sizeof(*l));
	size_t b = batch > 0 ? (size_t)batch : 1;

	l->ds = ds;
	l->nthreads = threads > 0 ? threads : dlk_machine_cores();
	l->x = xmalloc(sizeof(float) * b * (ds->sample_size ? ds->sample_size : 1));
	l->y = xmalloc(sizeof(int32_t) * b);
	if (dlk_dataset_has_targets(ds))
		l->t = xmalloc(sizeof(float) * b * (ds->target_size ? ds->target_size : 1));
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->go, NULL);
	pthread_cond_init(&l->done, NULL);
	l->tids = xcalloc((size_t)l->nthreads, sizeof(*l->tids));
	/* signals stay the caller's: the threads start with every one blocked */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int k = 0; k < l->nthreads; k++) {
		struct worker_arg *w = xmalloc(sizeof(*w));
		*w = (struct worker_arg){ l, k };
		if (pthread_create(&l->tids[k], NULL, worker, w)) {
			free(w);
			break;
		}
		l->started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return l;
}

int dlk_loader_threads(const struct dlk_loader *l)
{
	return l->nthreads;
}

void dlk_loader_post(struct dlk_loader *l, const size_t *idx, size_t n, unsigned long long seed, int epoch)
{
	pthread_mutex_lock(&l->mu);
	l->idx = idx;
	l->n = n;
	l->seed = seed;
	l->epoch = epoch;
	l->posted = 1;
	l->busy = l->started;
	l->gen++;
	pthread_cond_broadcast(&l->go);
	pthread_mutex_unlock(&l->mu);
	/* parts whose thread could not start: here, now */
	for (int k = l->started; k < l->nthreads; k++)
		do_part(l, k);
}

int dlk_loader_pending(const struct dlk_loader *l, const size_t **idx, size_t *n)
{
	if (!l->posted)
		return 0;
	*idx = l->idx;
	*n = l->n;
	return 1;
}

void dlk_loader_wait(struct dlk_loader *l, const float **x, const int32_t **y, const float **t)
{
	pthread_mutex_lock(&l->mu);
	while (l->busy > 0)
		pthread_cond_wait(&l->done, &l->mu);
	l->posted = 0;
	pthread_mutex_unlock(&l->mu);
	*x = l->x;
	*y = l->y;
	*t = l->t;
}

void dlk_loader_stop(struct dlk_loader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	while (l->busy > 0)
		pthread_cond_wait(&l->done, &l->mu);
	l->quit = 1;
	pthread_cond_broadcast(&l->go);
	pthread_mutex_unlock(&l->mu);
	for (int k = 0; k < l->started; k++)
		pthread_join(l->tids[k], NULL);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->go);
	pthread_cond_destroy(&l->done);
	free(l->tids);
	free(l->x);
	free(l->y);
	free(l->t);
	free(l);
}
