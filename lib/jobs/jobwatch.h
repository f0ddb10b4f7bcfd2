/* Watching dlk jobs and their pods in the background: two threads, one watching the Jobs (one by
 * name, or every dlk Job of a namespace), one their pods, each with a client of its own, both
 * keeping a current copy that the caller reads under the lock. Watches, not polling: the API
 * server says when anything changes, and lib/kube resumes dropped streams and relists after 410. */
#ifndef DLK_JOBS_JOBWATCH_H
#define DLK_JOBS_JOBWATCH_H

#include <pthread.h>

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/util/err.h"

struct dlk_jobwatch {
	struct kube_open_opts open; /* how the threads' clients are made; its cancel hook also stops waits */
	char *ns;
	char *name;              /* NULL: every dlk job */
	char *project;           /* a CronJob's run: the CronJob, whose dlk.dev/job its pods carry */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	cJSON *jobs;             /* object: name -> Job */
	cJSON *pods;             /* object: name -> Pod */
	unsigned gen;            /* counts changes */
	int synced_jobs, synced_pods;
	int stop;
	int failed;              /* a watch gave up: err says why */
	struct dlk_err err;
	pthread_t threads[2];
	int started;
};

/* Starts watching the jobs of ns with clients made from open (borrowed strings must outlive the
 * watch). Returns 0, or -1 with err (the clients could not be made, a thread could not start). */
int dlk_jobwatch_start(struct dlk_jobwatch *w, const struct kube_open_opts *open, const char *ns, const char *name,
		       struct dlk_err *err);
/* The same for run, a Job a CronJob started: its pods are labelled dlk.dev/job=project (the
 * CronJob's name) and told apart by the Job controller's job-name label. */
int dlk_jobwatch_start_run(struct dlk_jobwatch *w, const struct kube_open_opts *open, const char *ns, const char *run,
			   const char *project, struct dlk_err *err);
/* Waits until gen differs from *seen, timeout_s passes or open's cancel hook fires; updates
 * *seen. Call without the lock held. */
void dlk_jobwatch_wait(struct dlk_jobwatch *w, unsigned *seen, double timeout_s);
void dlk_jobwatch_lock(struct dlk_jobwatch *w);
void dlk_jobwatch_unlock(struct dlk_jobwatch *w);
/* The pods of one job (a new array of borrowed items: free with cJSON_Delete). Lock held. */
cJSON *dlk_jobwatch_pods_of(struct dlk_jobwatch *w, const char *job);
/* Stops the threads and frees everything. */
void dlk_jobwatch_release(struct dlk_jobwatch *w);

#endif
