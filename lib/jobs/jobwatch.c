/* Watching jobs and their pods in the background (see jobwatch.h). */
#include "lib/jobs/jobwatch.h"
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct watch_arg {
	struct dlk_jobwatch *w;
	int pods; /* 0: the Jobs, 1: the pods */
	struct kube_client *c;
};

/* Ctrl-C, as the caller's cancel hook tells it. */
static int cancelled(const struct dlk_jobwatch *w)
{
	return w->open.client.cancel && w->open.client.cancel(w->open.client.cancel_ud);
}

/* A watch thread's client stops for the caller's hook, and when the watch is released. */
static int thread_cancel(void *ud)
{
	struct watch_arg *a = ud;

	return __atomic_load_n(&a->w->stop, __ATOMIC_RELAXED) || cancelled(a->w);
}

static void replace_item(cJSON *set, const cJSON *obj, int remove)
{
	const char *name = kube_meta(obj, "name");

	if (!name)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(set, name);
	if (!remove)
		cJSON_AddItemToObject(set, name, cJSON_Duplicate(obj, 1));
}

static int on_event(const char *type, const cJSON *obj, void *ud, struct dlk_err *err)
{
	struct watch_arg *a = ud;
	struct dlk_jobwatch *w = a->w;
	cJSON **set = a->pods ? &w->pods : &w->jobs;

	(void)err;
	if (!strcmp(type, "BOOKMARK"))
		return __atomic_load_n(&w->stop, __ATOMIC_RELAXED) ? 1 : 0;
	pthread_mutex_lock(&w->mu);
	if (!strcmp(type, "RELIST")) {
		const cJSON *it;
		cJSON_Delete(*set);
		*set = cJSON_CreateObject();
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(obj, "items"))
			replace_item(*set, it, 0);
		if (a->pods)
			w->synced_pods = 1;
		else
			w->synced_jobs = 1;
	} else {
		replace_item(*set, obj, !strcmp(type, "DELETED"));
	}
	w->gen++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return __atomic_load_n(&w->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

static void *watch_thread(void *ud)
{
	struct watch_arg *a = ud;
	struct dlk_jobwatch *w = a->w;
	struct kube_watch_opts o = KUBE_WATCH_OPTS_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	char *sel = NULL, *field = NULL;

	if (w->name) {
		if (a->pods)
			sel = dlk_job_selector(w->project ? w->project : w->name);
		else
			field = xasprintf("metadata.name=%s", w->name);
	} else {
		sel = xstrdup(DLK_LABEL_JOB);
	}
	o.list.label_selector = sel;
	o.list.field_selector = field;
	/* the server ends each watch after a while; the library resumes from the last version */
	o.timeout_s = 300;
	if (kube_watch(a->c, a->pods ? "Pod" : "Job", w->ns, &o, on_event, a, &err) < 0 &&
	    !__atomic_load_n(&w->stop, __ATOMIC_RELAXED) && !cancelled(w)) {
		pthread_mutex_lock(&w->mu);
		if (!w->failed) {
			w->failed = 1;
			w->err = err;
		}
		w->gen++;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
	}
	free(sel);
	free(field);
	kube_client_free(a->c);
	free(a);
	return NULL;
}

static int start(struct dlk_jobwatch *w, const struct kube_open_opts *open, const char *ns, const char *name,
		 const char *project, struct dlk_err *err)
{
	struct watch_arg *args[2] = { NULL, NULL };

	memset(w, 0, sizeof(*w));
	w->open = *open;
	w->ns = xstrdup(ns);
	w->name = name ? xstrdup(name) : NULL;
	w->project = project ? xstrdup(project) : NULL;
	w->jobs = cJSON_CreateObject();
	w->pods = cJSON_CreateObject();
	pthread_mutex_init(&w->mu, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	for (int i = 0; i < 2; i++) {
		args[i] = xcalloc(1, sizeof(*args[i]));
		args[i]->w = w;
		args[i]->pods = i;
		struct kube_open_opts o = *open;
		o.client.cancel = thread_cancel;
		o.client.cancel_ud = args[i];
		args[i]->c = kube_client_open(&o, err);
		if (!args[i]->c)
			goto fail;
	}
	for (int i = 0; i < 2; i++) {
		if (pthread_create(&w->threads[i], NULL, watch_thread, args[i])) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot start a thread: %s", strerror(errno));
			/* the thread already started owns its argument */
			if (i == 1) {
				__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
				pthread_join(w->threads[0], NULL);
				args[0] = NULL;
			}
			goto fail;
		}
		w->started = i + 1;
	}
	return 0;
fail:
	for (int i = w->started; i < 2; i++) {
		if (args[i]) {
			kube_client_free(args[i]->c);
			free(args[i]);
		}
	}
	w->started = 0;
	return -1;
}

int dlk_jobwatch_start(struct dlk_jobwatch *w, const struct kube_open_opts *open, const char *ns, const char *name,
		       struct dlk_err *err)
{
	return start(w, open, ns, name, NULL, err);
}

int dlk_jobwatch_start_run(struct dlk_jobwatch *w, const struct kube_open_opts *open, const char *ns, const char *run,
			   const char *project, struct dlk_err *err)
{
	return start(w, open, ns, run, project, err);
}

void dlk_jobwatch_wait(struct dlk_jobwatch *w, unsigned *seen, double timeout_s)
{
	struct timespec ts;
	double end = dlk_now() + timeout_s;

	pthread_mutex_lock(&w->mu);
	while (w->gen == *seen && !cancelled(w)) {
		/* wake at least every 100 ms so that the cancel hook (Ctrl-C) is heard */
		double now = dlk_now();
		if (now >= end)
			break;
		double until = now + 0.1 < end ? now + 0.1 : end;
		ts.tv_sec = (time_t)until;
		ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	}
	*seen = w->gen;
	pthread_mutex_unlock(&w->mu);
}

void dlk_jobwatch_lock(struct dlk_jobwatch *w)
{
	pthread_mutex_lock(&w->mu);
}

void dlk_jobwatch_unlock(struct dlk_jobwatch *w)
{
	pthread_mutex_unlock(&w->mu);
}

cJSON *dlk_jobwatch_pods_of(struct dlk_jobwatch *w, const char *job)
{
	return dlk_job_pods(w->pods, NULL, job);
}

void dlk_jobwatch_release(struct dlk_jobwatch *w)
{
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < w->started; i++)
		pthread_join(w->threads[i], NULL);
	w->started = 0;
	cJSON_Delete(w->jobs);
	cJSON_Delete(w->pods);
	w->jobs = w->pods = NULL;
	free(w->ns);
	free(w->name);
	free(w->project);
	w->ns = w->name = w->project = NULL;
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}
