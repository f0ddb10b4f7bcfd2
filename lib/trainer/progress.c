#include "lib/trainer/progress.h"
#include "lib/trainer/trainer.h"
#include "lib/jobs/failure.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/podclient.h"
#include "lib/jobs/podenv.h"
#include "lib/train/progress.h"
#include "lib/kube/api.h"
#include "lib/kube/client.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dlk_job_progress {
	const struct dlk_trainer_sink *sink;
	struct kube_client *kc;
	char *job, *ns;
	double last;
	int warned;
	double accuracy;
	int have_accuracy;
};

/* progress must never hold training up for long */
static struct kube_client *pod_client(struct dlk_err *err)
{
	return dlk_pod_client(3000, 5000, 0, err);
}

static int read_completions(struct kube_client *kc, const char *ns, const char *job, int *n, struct dlk_err *err)
{
	cJSON *obj = NULL;
	const cJSON *c, *m;

	*n = 0;
	if (kube_get(kc, "Job", ns, job, &obj, err) < 0)
		return dlk_err_prefix(err, "cannot read the size of job '%s'", job);
	c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "completions");
	m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "completionMode");
	/* only an Indexed Job (what dlk renders) is resized, and its completions are its workers */
	if (cJSON_IsNumber(c) && c->valuedouble >= 1 && c->valuedouble <= 1e6 && cJSON_IsString(m) &&
	    !strcmp(m->valuestring, "Indexed"))
		*n = (int)c->valuedouble;
	cJSON_Delete(obj);
	return 0;
}

int dlk_job_progress_workers(struct dlk_job_progress *p, int *n, struct dlk_err *err)
{
	*n = 0;
	return p ? read_completions(p->kc, p->ns, p->job, n, err) : 0;
}

int dlk_job_workers(int *n, struct dlk_err *err)
{
	const char *job = getenv(DLK_ENV_JOB_NAME), *trig = getenv(DLK_ENV_TRIGGER);
	struct kube_client *kc;
	int rc;

	*n = 0;
	if (!getenv(DLK_ENV_SERVICE_HOST) || !job || !job[0] || (trig && !strcmp(trig, "schedule")))
		return 0;
	kc = pod_client(err);
	if (!kc)
		return -1;
	rc = read_completions(kc, kube_client_namespace(kc), job, n, err);
	kube_client_free(kc);
	return rc;
}

int dlk_job_world_env(const struct dlk_trainer_sink *sink, struct dlk_err *err)
{
	struct dlk_err e = DLK_ERR_INIT;
	const char *idx = getenv(DLK_ENV_RANK), *world = getenv(DLK_ENV_WORLD_SIZE);
	char buf[16];
	int n = 0;
	long rank;

	if (dlk_job_workers(&n, &e)) {
		dlk_trainer_warn(sink, "%s; training with the %s workers the pod was made for", e.msg,
		                 world && *world ? world : "1");
		return 0;
	}
	/* a pod of dlk's template always has WORLD_SIZE; without it, this is no Job's gang */
	if (n <= 0 || !world || !*world || atoi(world) == n)
		return 0;
	if (!idx || !*idx)
		idx = getenv(DLK_ENV_COMPLETION_INDEX);
	rank = idx && *idx ? strtol(idx, NULL, 10) : 0;
	if (rank >= n)
		/* the Job controller removes this pod: not the job's failure */
		return dlk_errf(err, DLK_EXIT_RESTARTABLE, "rank %ld is outside the job's %d worker%s: it was scaled down",
		                rank, n, n == 1 ? "" : "s");
	if (rank == 0)
		dlk_trainer_info(sink, "the job has %d worker%s now (the pod was made for %s): training with %d", n,
		                 n == 1 ? "" : "s", world, n);
	snprintf(buf, sizeof(buf), "%d", n);
	setenv(DLK_ENV_WORLD_SIZE, buf, 1);
	return 0;
}

struct dlk_job_progress *dlk_job_progress_new(const struct dlk_trainer_sink *sink)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_job_progress *p;
	const char *job = getenv(DLK_ENV_JOB_NAME);
	struct kube_client *kc;

	if (!getenv(DLK_ENV_SERVICE_HOST) || !job || !job[0])
		return NULL;
	kc = pod_client(&err);
	if (!kc) {
		dlk_trainer_warn(sink, "progress will not be published on job '%s': %s", job, err.msg);
		return NULL;
	}
	p = xcalloc(1, sizeof(*p));
	p->sink = sink;
	p->kc = kc;
	p->ns = xstrdup(kube_client_namespace(kc));
	p->job = xstrdup(job);
	p->last = -1e9;
	return p;
}

void dlk_job_progress_event(struct dlk_job_progress *p, const struct dlk_train_event *ev, const char *metrics)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *keys[2] = { DLK_PROGRESS_ANNOTATION, DLK_METRICS_ANNOTATION }, *vals[2];
	char updated[32], *val;
	double now = dlk_now();

	if (!p)
		return;
	if (ev->eval && ev->eval->n && ev->eval->task == DLK_TASK_CLASSIFICATION) {
		p->accuracy = ev->eval->accuracy;
		p->have_accuracy = 1;
	}
	if (ev->kind == DLK_TRAIN_STEP && now - p->last < DLK_PROGRESS_INTERVAL_SEC)
		return;
	p->last = now;
	dlk_rfc3339_now(updated);
	val = dlk_progress_json(ev, p->accuracy, p->have_accuracy, updated);
	vals[0] = val;
	vals[1] = metrics;
	if (kube_annotate_job(p->kc, p->ns, p->job, keys, vals, metrics && ev->kind != DLK_TRAIN_STEP ? 2 : 1, &err) &&
	    !p->warned) {
		p->warned = 1;
		dlk_trainer_warn(p->sink,
		                 "cannot publish progress on job '%s' (training goes on; further failures are not shown): %s",
		                 p->job, err.msg);
	}
	free(val);
}

void dlk_job_progress_raw(struct dlk_job_progress *p, const char *json, int at_once)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *keys[1] = { DLK_PROGRESS_ANNOTATION }, *vals[1] = { json };
	double now = dlk_now();

	if (!p || (!at_once && now - p->last < DLK_PROGRESS_INTERVAL_SEC))
		return;
	p->last = now;
	if (kube_annotate_job(p->kc, p->ns, p->job, keys, vals, 1, &err) && !p->warned) {
		p->warned = 1;
		dlk_trainer_warn(p->sink,
		                 "cannot publish progress on job '%s' (the program goes on; further failures are not shown): %s",
		                 p->job, err.msg);
	}
}

void dlk_job_progress_metrics(struct dlk_job_progress *p, const char *metrics)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *keys[1] = { DLK_METRICS_ANNOTATION }, *vals[1] = { metrics };

	if (!p || !metrics)
		return;
	if (kube_annotate_job(p->kc, p->ns, p->job, keys, vals, 1, &err) && !p->warned) {
		p->warned = 1;
		dlk_trainer_warn(p->sink, "cannot publish the bundle's metrics on job '%s': %s", p->job, err.msg);
	}
}

void dlk_job_progress_free(struct dlk_job_progress *p)
{
	if (!p)
		return;
	kube_client_free(p->kc);
	free(p->job);
	free(p->ns);
	free(p);
}

/* The termination message: the file the template names in $DLK_TERMINATION_LOG (the kubelet
 * reads it when the container ends). -1 with err when it cannot be written. */
static int write_termination_log(const char *path, const char *text, struct dlk_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len = strlen(text), off = 0;

	if (fd < 0)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot write the termination message '%s': %s", path, strerror(errno));
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot write the termination message '%s': %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	return close(fd) ? dlk_errf(err, DLK_EXIT_FAIL, "cannot write the termination message '%s': %s", path,
	                            strerror(errno))
	                 : 0;
}

void dlk_train_publish_failure(const struct dlk_trainer_sink *sink, int exit_code, const char *message)
{
	dlk_train_publish_failure_class(sink, exit_code, NULL, message);
}

void dlk_train_publish_failure_class(const struct dlk_trainer_sink *sink, int exit_code, const char *cls,
                                     const char *message)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_failure f;
	struct dlk_job_progress *p;
	const char *rank = getenv(DLK_ENV_RANK), *pod = getenv(DLK_ENV_POD_NAME), *path = getenv(DLK_ENV_TERMINATION_LOG);
	char *json;

	if (!cls)
		cls = dlk_exit_name(exit_code);

	memset(&f, 0, sizeof(f));
	f.rank = rank && *rank ? atoi(rank) : -1;
	snprintf(f.pod, sizeof(f.pod), "%s", pod ? pod : "");
	snprintf(f.cls, sizeof(f.cls), "%s", cls ? cls : "");
	f.exit_code = exit_code;
	snprintf(f.message, sizeof(f.message), "%s", message && *message ? message : "failed");
	dlk_rfc3339_now(f.time);
	json = dlk_failure_json(&f);
	if (path && *path && write_termination_log(path, json, &err)) {
		dlk_trainer_warn(sink, "%s", err.msg);
		dlk_err_clear(&err);
	}
	/* the Job's annotation outlives the pods. A worker that only lost a peer does not hide the
	 * cause a peer published before it. */
	p = dlk_job_progress_new(sink);
	if (p) {
		const char *keys[1] = { DLK_FAILURE_ANNOTATION }, *vals[1] = { json };
		cJSON *job = NULL;
		struct dlk_failure old;
		int keep = 0;
		if (exit_code == DLK_EXIT_RESTARTABLE && !kube_get(p->kc, "Job", p->ns, p->job, &job, &err)) {
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
				DLK_FAILURE_ANNOTATION);
			keep = cJSON_IsString(a) && !dlk_failure_parse(a->valuestring, &old) && old.exit_code != DLK_EXIT_RESTARTABLE;
		}
		dlk_err_clear(&err);
		cJSON_Delete(job);
		if (!keep && kube_annotate_job(p->kc, p->ns, p->job, keys, vals, 1, &err))
			dlk_trainer_warn(sink, "cannot publish the failure on job '%s': %s", p->job, err.msg);
		dlk_job_progress_free(p);
	}
	free(json);
}

int dlk_train_gang_gone(const struct dlk_trainer_sink *sink, int rank, struct dlk_err *err)
{
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_job_progress *p = dlk_job_progress_new(sink);
	cJSON *job = NULL;
	int done = 0;

	if (!p)
		return 0;
	if (!kube_get(p->kc, "Job", p->ns, p->job, &job, &e) && (done = dlk_job_peers_done(job, rank)) > 0) {
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(job, "spec");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(job, "status");
		const cJSON *ci = cJSON_GetObjectItemCaseSensitive(st, "completedIndexes");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(spec, "completions");
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
			DLK_FAILURE_ANNOTATION);
		struct dlk_failure f;
		/* what the earlier attempt published, when it was this rank's: the cause to fix */
		int said = cJSON_IsString(a) && !dlk_failure_parse(a->valuestring, &f) && f.rank == rank && f.message[0];
		dlk_errf(err, DLK_EXIT_RESTARTABLE,
		         "%d of the other %d ranks have already completed (the Job's completedIndexes: %s), so the gang "
		         "cannot form again and rank %d cannot resume%s%.600s",
		         done, cJSON_IsNumber(n) ? (int)n->valuedouble - 1 : done,
		         dlk_visible(cJSON_IsString(ci) ? ci->valuestring : ""), rank,
		         said ? "; its earlier attempt failed: " : "", said ? f.message : "");
		dlk_err_hint(err, "an earlier attempt of rank %d failed after its peers had finished: see what it printed "
		                  "('dlk logs --rank %d %s'), then train again to run the whole gang from its checkpoint",
		             rank, rank, dlk_visible(p->job));
	}
	cJSON_Delete(job);
	dlk_job_progress_free(p);
	return done > 0 ? -1 : 0;
}

int dlk_train_job_failure(const struct dlk_trainer_sink *sink, struct dlk_failure *f)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_job_progress *p = dlk_job_progress_new(sink);
	cJSON *job = NULL;
	int rc = -1;

	if (!p)
		return -1;
	if (!kube_get(p->kc, "Job", p->ns, p->job, &job, &err)) {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"),
			DLK_FAILURE_ANNOTATION);
		rc = cJSON_IsString(a) ? dlk_failure_parse(a->valuestring, f) : -1;
	}
	cJSON_Delete(job);
	dlk_job_progress_free(p);
	return rc;
}
