/* Rounds of stream records through the server's dynamic batcher. */
#include "lib/stream/served.h"

#include <stdio.h>
#include <string.h>

#include "lib/util/mem.h"

static void job_done(struct dlk_job *job)
{
	struct dlk_stream_served *s = job->arg;

	pthread_mutex_lock(&s->mu);
	s->left--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static int score(void *ctx, const float *x, int n, float *logits, struct dlk_err *err)
{
	struct dlk_stream_served *s = ctx;
	int n_jobs = (n + s->max_batch - 1) / s->max_batch, submitted = 0, rc = 0;
	struct dlk_job *jobs = xcalloc((size_t)n_jobs, sizeof(*jobs));

	s->left = 0;
	for (int j = 0; j < n_jobs; j++) {
		int first = j * s->max_batch;
		jobs[j].in = x + (size_t)first * s->in_size;
		jobs[j].rows = n - first < s->max_batch ? n - first : s->max_batch;
		jobs[j].out = logits + (size_t)first * s->out_size;
		jobs[j].done = job_done;
		jobs[j].arg = s;
		pthread_mutex_lock(&s->mu);
		s->left++;
		pthread_mutex_unlock(&s->mu);
		if (dlk_batcher_submit(s->batcher, &jobs[j])) {
			pthread_mutex_lock(&s->mu);
			s->left--;
			pthread_mutex_unlock(&s->mu);
			rc = dlk_errf(err, DLK_EXIT_FAIL, "the model's batcher is closed (the server is shutting down)");
			break;
		}
		submitted++;
	}
	pthread_mutex_lock(&s->mu);
	while (s->left > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	for (int j = 0; !rc && j < submitted; j++)
		if (jobs[j].status)
			rc = dlk_errf(err, DLK_EXIT_FAIL, "scoring failed: %s", jobs[j].msg);
	free(jobs);
	return rc;
}

void dlk_stream_served_init(struct dlk_stream_served *s, struct dlk_serve_model *m, int max_batch)
{
	memset(s, 0, sizeof(*s));
	s->batcher = m->batcher;
	s->max_batch = max_batch > 0 ? max_batch : 64;
	s->in_size = m->sig.in_size;
	s->out_size = (size_t)m->sig.n_classes;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	snprintf(s->digest, sizeof(s->digest), "sha256:%s", m->bundle.weights_sha256);
	s->sc.score = score;
	s->sc.ctx = s;
	s->sc.sig = &m->sig;
	s->sc.digest = s->digest;
}

void dlk_stream_served_release(struct dlk_stream_served *s)
{
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}
