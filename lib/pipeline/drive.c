/* The driver of a pipeline on a cluster: the stages lib/pipeline/run.c decides must run become
 * the Jobs of the pipeline's ConfigMap, created and followed through an API of four calls. */
#include "lib/pipeline/drive.h"
#include "lib/jobs/failure.h"
#include "lib/kube/api.h"
#include "lib/pipeline/cluster.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the API over a kube_client ---- */

static int kube_get_job(void *ud, const char *name, cJSON **out, struct dlk_err *err)
{
	struct dlk_pipeline_kube *k = ud;
	return kube_get(k->client, "Job", k->namespace_, name, out, err) < 0 ? -1 : 0;
}

static int kube_create_job(void *ud, const cJSON *job, cJSON **out, struct dlk_err *err)
{
	struct dlk_pipeline_kube *k = ud;
	return kube_create(k->client, job, out, err) < 0 ? -1 : 0;
}

static int kube_delete_job(void *ud, const char *name, struct dlk_err *err)
{
	struct dlk_pipeline_kube *k = ud;
	return kube_delete(k->client, "Job", k->namespace_, name, err) < 0 ? -1 : 0;
}

static int kube_annotate(void *ud, const char *name, const char *key, const char *value, struct dlk_err *err)
{
	struct dlk_pipeline_kube *k = ud;
	return kube_annotate_job(k->client, k->namespace_, name, &key, &value, 1, err) < 0 ? -1 : 0;
}

static void half_second(void *ud)
{
	struct timespec ts = { 0, 500 * 1000 * 1000 };
	(void)ud;
	nanosleep(&ts, NULL);
}

void dlk_pipeline_api_kube(struct dlk_pipeline_api *api, struct dlk_pipeline_kube *k)
{
	api->get_job = kube_get_job;
	api->create_job = kube_create_job;
	api->delete_job = kube_delete_job;
	api->annotate_job = kube_annotate;
	api->nap = half_second;
	api->ud = k;
}

/* ---- Jobs ---- */

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *annotation(const cJSON *o, const char *key)
{
	return jstr(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations"), key);
}

/* the condition of type Complete or Failed that is True, or NULL */
static const cJSON *final_condition(const cJSON *job)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "status"), "conditions"))
	{
		const char *t = jstr(c, "type"), *st = jstr(c, "status");
		if (t && st && !strcmp(st, "True") && (!strcmp(t, "Complete") || !strcmp(t, "Failed")))
			return c;
	}
	return NULL;
}

const char *dlk_pipeline_job_state(const cJSON *job)
{
	const cJSON *c = final_condition(job);
	return !c ? "running" : !strcmp(jstr(c, "type"), "Complete") ? "succeeded" : "failed";
}

cJSON *dlk_pipeline_stage_jobs(const cJSON *cm, const char *cm_name, struct dlk_err *err)
{
	const char *text = jstr(cJSON_GetObjectItemCaseSensitive(cm, "data"), "jobs.json");
	cJSON *jobs = text ? cJSON_Parse(text) : NULL;

	if (!cJSON_IsObject(jobs)) {
		cJSON_Delete(jobs);
		dlk_errf(err, DLK_EXIT_CONFIG, "configmap '%s' holds no jobs.json of stage Jobs", cm_name);
		dlk_err_hint(err, "submit the pipeline again with 'dlk pipeline run'");
		return NULL;
	}
	return jobs;
}

void dlk_pipeline_job_failure(const cJSON *job, char *out, size_t n)
{
	struct dlk_failure f;
	const char *name = kube_meta(job, "name"), *why = annotation(job, DLK_FAILURE_ANNOTATION);
	const cJSON *c = final_condition(job);
	char text[1400];

	if (why && !dlk_failure_parse(why, &f)) {
		dlk_failure_text(&f, text, sizeof(text));
		snprintf(out, n, "its job '%s' failed: %s", name, text);
	} else if (c && (jstr(c, "reason") || jstr(c, "message"))) {
		/* no worker said why (killed, never started): what the Job controller says */
		snprintf(out, n, "its job '%s' failed: %s%s%s", name, jstr(c, "reason") ? jstr(c, "reason") : "",
		         jstr(c, "reason") && jstr(c, "message") ? ": " : "", jstr(c, "message") ? jstr(c, "message") : "");
	} else {
		snprintf(out, n, "its job '%s' failed", name);
	}
}

int dlk_pipeline_is_driver_run(const cJSON *job, const char *name)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(job, "metadata"), *ref;
	const char *n = jstr(meta, "name");
	size_t len = strlen(name);
	int yes = 0;

	if (n && !strncmp(n, name, len) && !strcmp(n + len, "-pipeline"))
		return 1;
	cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences"))
	{
		const char *k = jstr(ref, "kind"), *on = jstr(ref, "name");
		if (k && on && !strcmp(k, "CronJob") && !strncmp(on, name, len) && !strcmp(on + len, "-pipeline"))
			yes = 1;
	}
	return yes;
}

/* newest first, by creationTimestamp (RFC 3339 UTC: by its text), then by name */
static int newest_first(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	const char *cx = jstr(x, "created"), *cy = jstr(y, "created");
	int c = strcmp(cy ? cy : "", cx ? cx : "");

	return c ? c : strcmp(jstr(y, "job"), jstr(x, "job"));
}

cJSON *dlk_pipeline_driver_runs(const cJSON *jobs, const char *name)
{
	cJSON *out = cJSON_CreateArray(), **v;
	const cJSON *j;
	int n = 0;

	cJSON_ArrayForEach(j, jobs)
	{
		const char *st = annotation(j, DLK_PIPELINE_STATUS_ANNOTATION), *created = kube_meta(j, "creationTimestamp");
		cJSON *r, *doc = st ? cJSON_Parse(st) : NULL;
		if (!dlk_pipeline_is_driver_run(j, name) || !kube_meta(j, "name")) {
			cJSON_Delete(doc);
			continue;
		}
		r = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "job", kube_meta(j, "name"));
		cJSON_AddStringToObject(r, "state", dlk_pipeline_job_state(j));
		if (created)
			cJSON_AddStringToObject(r, "created", created);
		else
			cJSON_AddNullToObject(r, "created");
		if (cJSON_IsObject(doc))
			cJSON_AddItemToObject(r, "status", doc);
		else {
			cJSON_Delete(doc);
			cJSON_AddNullToObject(r, "status");
		}
		cJSON_AddItemToArray(out, r);
		n++;
	}
	v = xcalloc((size_t)n + 1, sizeof(*v));
	for (int i = 0; i < n; i++)
		v[i] = cJSON_DetachItemFromArray(out, 0);
	qsort(v, (size_t)n, sizeof(*v), newest_first);
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(out, v[i]);
	free(v);
	return out;
}

/* ---- the driver ---- */

struct driver {
	const struct dlk_pipeline *p;
	const cJSON *jobs;
	const struct dlk_pipeline_api *api;
	const struct dlk_pipeline_sink *sink;
};

static void note(const struct driver *d, int warn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(const struct driver *d, int warn, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!d->sink || !d->sink->note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->sink->note(d->sink->ud, warn, msg);
}

static void nap(const struct driver *d)
{
	if (d->api->nap)
		d->api->nap(d->api->ud);
}

/* Until Job name is gone, by GET alone: the driver's Role lists nothing (it may get only its
 * stage Jobs, by name). */
static int wait_gone(const struct driver *d, const char *name, struct dlk_err *err)
{
	for (int i = 0; i < 240; i++) {
		cJSON *j = NULL;
		int r = d->api->get_job(d->api->ud, name, &j, err);
		cJSON_Delete(j);
		if (r < 0 && err->code == DLK_EXIT_NOTFOUND) {
			dlk_err_clear(err);
			return 0;
		}
		if (r < 0)
			return -1;
		nap(d);
	}
	return dlk_errf(err, DLK_EXIT_TIMEOUT, "job '%s' is still there 120 s after it was deleted", name);
}

/* run.c's remote: the stage's Job, created (or found running for this key) and followed */
static int drive_stage(void *ud, const struct dlk_stage *s, const char *key, char *reason, size_t reason_len,
                       struct dlk_err *err)
{
	const struct driver *d = ud;
	const struct dlk_pipeline *p = d->p;
	const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(d->jobs, s->name);
	cJSON *job = NULL, *cur = NULL, *meta, *ann;
	const char *name, *had;
	int rc = -1, follow = 0;

	/* the driver touches no Job without its pipeline's label, whatever RBAC would allow */
	if (!tmpl || !dlk_pipeline_owns(tmpl, p->name)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "stage '%s' has no Job of pipeline %s in the pipeline's ConfigMap", s->name,
		         p->name);
		dlk_err_hint(err, "submit the pipeline again with 'dlk pipeline run'");
		return -1;
	}
	job = cJSON_Duplicate(tmpl, 1);
	name = kube_meta(job, "name");
	if (!name) {
		dlk_errf(err, DLK_EXIT_CONFIG, "stage '%s': its Job in the pipeline's ConfigMap has no name", s->name);
		goto out;
	}
	if (d->api->get_job(d->api->ud, name, &cur, err) == 0) {
		if (!dlk_pipeline_owns(cur, p->name)) {
			dlk_errf(err, DLK_EXIT_FAIL, "job '%s' is not pipeline %s's (its label %s): the driver leaves it alone",
			         name, p->name, DLK_PIPELINE_LABEL);
			dlk_err_hint(err, "rename or delete that job, or rename the pipeline");
			goto out;
		}
		/* a driver that was stopped left this stage's Job running: follow it, do not start it again */
		had = annotation(cur, DLK_PIPELINE_KEY_ANNOTATION);
		follow = had && !strcmp(had, key) && !strcmp(dlk_pipeline_job_state(cur), "running");
		if (!follow && (d->api->delete_job(d->api->ud, name, err) < 0 || wait_gone(d, name, err) < 0))
			goto out;
	} else if (err->code != DLK_EXIT_NOTFOUND) {
		goto out;
	}
	dlk_err_clear(err);
	if (!follow) {
		meta = cJSON_GetObjectItemCaseSensitive(job, "metadata");
		if (!(ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations")))
			ann = cJSON_AddObjectToObject(meta, "annotations");
		cJSON_DeleteItemFromObjectCaseSensitive(ann, DLK_PIPELINE_KEY_ANNOTATION);
		cJSON_AddStringToObject(ann, DLK_PIPELINE_KEY_ANNOTATION, key);
		cJSON_Delete(cur);
		cur = NULL;
		if (d->api->create_job(d->api->ud, job, &cur, err) < 0) {
			dlk_err_prefix(err, "stage '%s': cannot create job '%s'", s->name, name);
			goto out;
		}
	} else {
		note(d, 0, "stage %s: its job '%s' runs already (key %.12s): following it", s->name, name, key);
	}
	for (;;) {
		const char *st = dlk_pipeline_job_state(cur);
		if (!strcmp(st, "succeeded")) {
			rc = 0;
			break;
		}
		if (!strcmp(st, "failed")) {
			dlk_pipeline_job_failure(cur, reason, reason_len);
			rc = 1;
			break;
		}
		nap(d);
		cJSON_Delete(cur);
		cur = NULL;
		if (d->api->get_job(d->api->ud, name, &cur, err) < 0) {
			dlk_err_prefix(err, "stage '%s': following job '%s'", s->name, name);
			goto out;
		}
	}
out:
	cJSON_Delete(cur);
	cJSON_Delete(job);
	return rc;
}

int dlk_pipeline_drive(const struct dlk_pipeline *p, const cJSON *jobs, const struct dlk_pipeline_api *api,
                       const char *driver_job, const struct dlk_pipeline_run_opts *o,
                       const struct dlk_pipeline_sink *sink, struct dlk_err *err)
{
	struct driver d = { p, jobs, api, sink };
	struct dlk_pipeline_run_opts ro = *o;
	struct dlk_err serr = DLK_ERR_INIT;
	cJSON *st;
	char *text;
	int rc;

	ro.remote = drive_stage;
	ro.remote_ud = &d;
	ro.parallel = 1;
	rc = dlk_pipeline_run_local(p, &ro, sink, err);
	if (!driver_job || o->dry_run)
		return rc;
	/* what `dlk pipeline status NAME` shows afterwards, on the driver's own Job */
	if (!(st = dlk_pipeline_read_status(p, &serr))) {
		note(&d, 1, "cannot publish the pipeline's status on job '%s': %s", driver_job, serr.msg);
		return rc;
	}
	text = dlk_json_print(st);
	if (api->annotate_job(api->ud, driver_job, DLK_PIPELINE_STATUS_ANNOTATION, text, &serr) < 0)
		note(&d, 1, "cannot publish the pipeline's status on job '%s': %s", driver_job, serr.msg);
	free(text);
	cJSON_Delete(st);
	return rc;
}
