/* A CronJob and its runs (lib/jobs/cronjob.h). */
#include "lib/jobs/cronjob.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

void dlk_cron_summarize(const cJSON *cj, struct dlk_cron_summary *s)
{
	const cJSON *meta = get(cj, "metadata"), *spec = get(cj, "spec"), *st = get(cj, "status");
	const cJSON *active = get(st, "active");

	memset(s, 0, sizeof(*s));
	copy(s->name, sizeof(s->name), str(meta, "name"));
	copy(s->ns, sizeof(s->ns), str(meta, "namespace"));
	copy(s->uid, sizeof(s->uid), str(meta, "uid"));
	copy(s->schedule, sizeof(s->schedule), str(spec, "schedule"));
	copy(s->time_zone, sizeof(s->time_zone), str(spec, "timeZone"));
	s->suspended = cJSON_IsTrue(get(spec, "suspend"));
	s->active = cJSON_IsArray(active) ? cJSON_GetArraySize(active) : 0;
	copy(s->last_schedule, sizeof(s->last_schedule), str(st, "lastScheduleTime"));
	copy(s->last_success, sizeof(s->last_success), str(st, "lastSuccessfulTime"));
}

static void add_time(cJSON *o, const char *k, const char *v)
{
	if (v[0])
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

cJSON *dlk_cron_summary_json(const struct dlk_cron_summary *s)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "name", s->name);
	cJSON_AddStringToObject(o, "namespace", s->ns);
	cJSON_AddStringToObject(o, "schedule", s->schedule);
	if (s->time_zone[0])
		cJSON_AddStringToObject(o, "timeZone", s->time_zone);
	cJSON_AddBoolToObject(o, "suspended", s->suspended);
	cJSON_AddNumberToObject(o, "active", s->active);
	add_time(o, "lastScheduleTime", s->last_schedule);
	add_time(o, "lastSuccessfulTime", s->last_success);
	return o;
}

/* the job's ownerReference of kind CronJob, or NULL */
static const cJSON *cron_owner(const cJSON *job)
{
	const cJSON *refs = get(get(job, "metadata"), "ownerReferences"), *r;

	if (!cJSON_IsArray(refs))
		return NULL;
	cJSON_ArrayForEach(r, refs) {
		const char *kind = str(r, "kind");
		if (kind && !strcmp(kind, "CronJob") && str(r, "name"))
			return r;
	}
	return NULL;
}

const char *dlk_job_cronjob(const cJSON *job)
{
	return str(cron_owner(job), "name");
}

static int newer_first(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	const char *tx = str(get(x, "metadata"), "creationTimestamp"), *ty = str(get(y, "metadata"), "creationTimestamp");
	const char *nx = str(get(x, "metadata"), "name"), *ny = str(get(y, "metadata"), "name");
	int c = strcmp(ty ? ty : "", tx ? tx : "");

	return c ? c : strcmp(ny ? ny : "", nx ? nx : "");
}

cJSON *dlk_cron_runs(const cJSON *jobs, const cJSON *cronjob)
{
	const char *uid = str(get(cronjob, "metadata"), "uid"), *name = str(get(cronjob, "metadata"), "name");
	const cJSON **v, *j;
	cJSON *out = cJSON_CreateArray();
	int n = 0, cap = cJSON_IsArray(jobs) || cJSON_IsObject(jobs) ? cJSON_GetArraySize(jobs) : 0;

	if (!cap || !name)
		return out;
	v = xcalloc((size_t)cap, sizeof(*v));
	cJSON_ArrayForEach(j, jobs) {
		const cJSON *ref = cron_owner(j);
		const char *ruid = str(ref, "uid"), *rname = str(ref, "name");
		if (!ref || n == cap)
			continue;
		if (uid && ruid ? !strcmp(uid, ruid) : !strcmp(name, rname))
			v[n++] = j;
	}
	qsort(v, (size_t)n, sizeof(*v), newer_first);
	for (int i = 0; i < n; i++)
		cJSON_AddItemReferenceToArray(out, (cJSON *)v[i]);
	free(v);
	return out;
}
