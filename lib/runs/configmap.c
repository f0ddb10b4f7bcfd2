/* The run history in the cluster: the ConfigMap NAME-runs, one key per run ("<id>.json", the
 * record as compact JSON) and "dropped" (how many older runs the bounds dropped). dlk renders
 * the ConfigMap with the job's other objects; the job's rank 0 may only get and patch it
 * (templates/role.yaml), so writing is a read followed by a merge patch that carries the
 * resourceVersion read: a concurrent writer (two jobs of one project) makes it a 409, and the
 * write starts over from a fresh read. */
#include "lib/runs/store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kube/api.h"
#include "lib/util/mem.h"

#define CONFLICT_RETRIES 8
#define DROPPED_KEY "dropped"

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* 1 when key names a record ("<id>.json") */
static int record_key(const char *key)
{
	size_t l = strlen(key);
	return l > 5 && !strcmp(key + l - 5, ".json");
}

/* The ConfigMap, or NULL (no error) when it does not exist. */
static int read_cm(struct dlk_run_store *s, cJSON **cm, struct dlk_err *err)
{
	*cm = NULL;
	if (kube_get(s->kc, "ConfigMap", s->ns, s->cm, cm, err) == 0)
		return 0;
	if (err->code == DLK_EXIT_NOTFOUND) {
		dlk_err_clear(err);
		return 0;
	}
	return dlk_err_prefix(err, "cannot read the run history (ConfigMap '%s')", s->cm);
}

static int cm_load(struct dlk_run_store *s, cJSON **records, long *dropped, struct dlk_err *err)
{
	cJSON *cm, *arr;
	const cJSON *kv, *data;

	*records = NULL;
	*dropped = 0;
	if (read_cm(s, &cm, err))
		return -1;
	arr = cJSON_CreateArray();
	data = get(cm, "data");
	cJSON_ArrayForEach(kv, data) {
		cJSON *rec;
		if (!cJSON_IsString(kv))
			continue;
		if (!strcmp(kv->string, DROPPED_KEY)) {
			char *end;
			long d = strtol(kv->valuestring, &end, 10);
			/* a count kept in an object anyone may edit: a number or nothing */
			*dropped = end != kv->valuestring && !*end && d > 0 && d <= 2147483647L ? d : 0;
		} else if (record_key(kv->string)) {
			/* not JSON: a null, which the check counts as a bad record */
			rec = cJSON_Parse(kv->valuestring);
			cJSON_AddItemToArray(arr, rec ? rec : cJSON_CreateNull());
		}
	}
	cJSON_Delete(cm);
	*records = arr;
	return 0;
}

/* One attempt: 1 when another writer came first (read again), 0 when written, -1 on error. */
static int cm_try_save(struct dlk_run_store *s, const char *key, const char *text, const char *const *drop,
                       size_t n_drop, struct dlk_err *err)
{
	cJSON *cm = NULL, *patch = NULL, *data;
	const cJSON *kv, *rv;
	const char **keys = NULL;
	size_t *sizes = NULL, total, n = 0, extra = 0;
	long status = 0, dropped = 0;
	char num[32];
	int rc = -1;

	if (read_cm(s, &cm, err))
		return -1;
	if (!cm) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "the run history (ConfigMap '%s' in namespace '%s') does not exist", s->cm,
		         s->ns);
		dlk_err_hint(err, "'dlk train' creates it with the job; submit with a dlk that knows run histories");
		return -1;
	}
	rv = get(get(cm, "metadata"), "resourceVersion");
	patch = cJSON_CreateObject();
	if (cJSON_IsString(rv))
		cJSON_AddStringToObject(cJSON_AddObjectToObject(patch, "metadata"), "resourceVersion", rv->valuestring);
	data = cJSON_AddObjectToObject(patch, "data");
	cJSON_AddStringToObject(data, key, text);
	total = strlen(key) + strlen(text);
	/* what stays, oldest first once sorted, to drop the oldest while the whole is too large */
	const cJSON *d = get(cm, "data");
	int nd = cJSON_GetArraySize(d);
	keys = xcalloc((size_t)nd + 1, sizeof(*keys));
	sizes = xcalloc((size_t)nd + 1, sizeof(*sizes));
	cJSON *recs = cJSON_CreateArray();
	cJSON_ArrayForEach(kv, d) {
		int dropping = 0;
		if (!cJSON_IsString(kv))
			continue;
		if (!strcmp(kv->string, DROPPED_KEY)) {
			char *end;
			dropped = strtol(kv->valuestring, &end, 10);
			if (end == kv->valuestring || *end || dropped < 0 || dropped > 2147483647L)
				dropped = 0;
			continue;
		}
		if (!strcmp(kv->string, key) || !record_key(kv->string))
			continue;
		for (size_t i = 0; i < n_drop; i++) {
			char *k = xasprintf("%s.json", drop[i]);
			dropping |= !strcmp(k, kv->string);
			free(k);
		}
		if (dropping) {
			cJSON_AddNullToObject(data, kv->string);
			extra++;
			continue;
		}
		/* a record that does not parse sorts as the oldest: it goes first */
		cJSON *rec = cJSON_Parse(kv->valuestring);
		cJSON *holder = cJSON_CreateObject();
		cJSON_AddStringToObject(holder, "key", kv->string);
		cJSON_AddNumberToObject(holder, "size", (double)(strlen(kv->string) + strlen(kv->valuestring)));
		cJSON_AddStringToObject(holder, "started_at", rec && dlk_run_started_at(rec) ? dlk_run_started_at(rec) : "");
		cJSON_Delete(rec);
		cJSON_AddItemToArray(recs, holder);
		total += strlen(kv->string) + strlen(kv->valuestring);
	}
	/* drop the oldest (by started_at; an index insertion sort, n is small) while too large */
	cJSON *it;
	cJSON_ArrayForEach(it, recs) {
		keys[n] = get(it, "key")->valuestring;
		sizes[n] = (size_t)get(it, "size")->valuedouble;
		n++;
	}
	{
		size_t *ord = xcalloc(n + 1, sizeof(*ord));
		for (size_t i = 0; i < n; i++)
			ord[i] = i;
		for (size_t i = 1; i < n; i++) {
			size_t x = ord[i], j = i;
			const char *sx = get(cJSON_GetArrayItem(recs, (int)x), "started_at")->valuestring;
			while (j > 0 && strcmp(get(cJSON_GetArrayItem(recs, (int)ord[j - 1]), "started_at")->valuestring, sx) > 0) {
				ord[j] = ord[j - 1];
				j--;
			}
			ord[j] = x;
		}
		for (size_t i = 0; i < n && total > DLK_RUNS_CONFIGMAP_BYTES; i++) {
			cJSON_AddNullToObject(data, keys[ord[i]]);
			total -= sizes[ord[i]];
			extra++;
		}
		free(ord);
	}
	if (extra) {
		snprintf(num, sizeof(num), "%ld", dropped + (long)extra);
		cJSON_AddStringToObject(data, DROPPED_KEY, num);
	}
	if (kube_merge_patch(s->kc, "ConfigMap", s->ns, s->cm, patch, NULL, &status, err) == 0)
		rc = 0;
	else if (status == 409)
		rc = 1;
	else
		dlk_err_prefix(err, "cannot write the run history (ConfigMap '%s')", s->cm);
	cJSON_Delete(recs);
	free(keys);
	free(sizes);
	cJSON_Delete(patch);
	cJSON_Delete(cm);
	return rc;
}

static int cm_save(struct dlk_run_store *s, const cJSON *rec, const char *const *drop, size_t n_drop,
                   struct dlk_err *err)
{
	char *text = dlk_run_record_compact(rec, DLK_RUNS_RECORD_BYTES);
	char *key = xasprintf("%s.json", dlk_run_id(rec));
	int rc = -1;

	if (!text) {
		dlk_errf(err, DLK_EXIT_FAIL, "run '%s': its record does not fit the run history even shortened",
		         dlk_run_id(rec));
		goto out;
	}
	for (int i = 0; i < CONFLICT_RETRIES; i++) {
		rc = cm_try_save(s, key, text, drop, n_drop, err);
		if (rc != 1)
			break;
		dlk_err_clear(err);
	}
	if (rc == 1)
		rc = dlk_errf(err, DLK_EXIT_FAIL, "cannot write the run history (ConfigMap '%s'): %d writers came first",
		              s->cm, CONFLICT_RETRIES);
out:
	free(key);
	free(text);
	return rc;
}

static const struct dlk_run_store_ops cm_ops = { "cluster", cm_load, cm_save, NULL };

struct dlk_run_store *dlk_runs_open_configmap(struct kube_client *c, const char *ns, const char *project)
{
	struct dlk_run_store *s = xcalloc(1, sizeof(*s));

	s->ops = &cm_ops;
	s->kc = c;
	s->ns = xstrdup(ns ? ns : kube_client_namespace(c));
	s->project = xstrdup(project);
	s->cm = xasprintf("%s%s", project, DLK_RUNS_CONFIGMAP_SUFFIX);
	return s;
}
