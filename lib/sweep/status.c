/* A sweep's trials as the run history has them: what `dlk status SWEEP` shows and `dlk report
 * SWEEP` draws. */
#include "lib/sweep/sweep.h"
#include "lib/kube/api.h"
#include "lib/runs/runs.h"
#include "lib/util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct collect {
	const char *id;
	cJSON *trials; /* by trial number: the newest record's row */
	char goal[16], metric[32];
};

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static cJSON *row_of(const cJSON *rec, const cJSON *sw)
{
	cJSON *row = cJSON_CreateObject();
	const cJSON *b = get(dlk_run_info(rec), "bundle");
	const char *t;

	cJSON_AddNumberToObject(row, "trial", get(sw, "trial")->valuedouble);
	cJSON_AddStringToObject(row, "run", dlk_run_id(rec));
	cJSON_AddStringToObject(row, "project", dlk_run_project(rec));
	cJSON_AddStringToObject(row, "outcome", dlk_run_outcome_name(dlk_run_outcome(rec)));
	if (cJSON_IsNumber(get(sw, "value")))
		cJSON_AddNumberToObject(row, "value", get(sw, "value")->valuedouble);
	else
		cJSON_AddNullToObject(row, "value");
	cJSON_AddItemToObject(row, "params", cJSON_Duplicate(get(sw, "params"), 1));
	if (cJSON_IsNumber(get(sw, "stopped_at")))
		cJSON_AddNumberToObject(row, "stopped_at", get(sw, "stopped_at")->valuedouble);
	cJSON_AddItemToObject(row, "curve", get(sw, "curve") ? cJSON_Duplicate(get(sw, "curve"), 1) : cJSON_CreateArray());
	if (cJSON_IsString(get(b, "path")))
		cJSON_AddStringToObject(row, "bundle", get(b, "path")->valuestring);
	if ((t = dlk_run_started_at(rec)))
		cJSON_AddStringToObject(row, "started_at", t);
	if ((t = dlk_run_str(rec, "finished_at")))
		cJSON_AddStringToObject(row, "finished_at", t);
	if (cJSON_IsString(get(get(dlk_run_info(rec), "job"), "name")))
		cJSON_AddStringToObject(row, "job", get(get(dlk_run_info(rec), "job"), "name")->valuestring);
	if (cJSON_IsObject(get(dlk_run_info(rec), "usage")))
		cJSON_AddItemToObject(row, "usage", cJSON_Duplicate(get(dlk_run_info(rec), "usage"), 1));
	return row;
}

static void each_store(struct collect *c, struct dlk_run_store *s)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *all = NULL, *rec;

	if (!dlk_runs_list(s, &all, NULL, NULL, &err)) {
		/* newest first: the first record of a trial is the one that counts */
		cJSON_ArrayForEach(rec, all) {
			const cJSON *sw = get(dlk_run_info(rec), "sweep"), *id = get(sw, "id"), *tr = get(sw, "trial");
			char key[32];
			if (!cJSON_IsString(id) || strcmp(id->valuestring, c->id) || !cJSON_IsNumber(tr))
				continue;
			snprintf(key, sizeof(key), "%d", tr->valueint);
			if (get(c->trials, key))
				continue;
			cJSON_AddItemToObject(c->trials, key, row_of(rec, sw));
			if (cJSON_IsString(get(sw, "goal")))
				snprintf(c->goal, sizeof(c->goal), "%s", get(sw, "goal")->valuestring);
			if (cJSON_IsString(get(sw, "metric")))
				snprintf(c->metric, sizeof(c->metric), "%s", get(sw, "metric")->valuestring);
		}
	}
	cJSON_Delete(all);
	dlk_runs_close(s);
}

static int each_project(const char *dir, const char *project, void *ud)
{
	each_store(ud, dlk_runs_open_dir(dir, project));
	return 0;
}

/* The run histories of the trials' projects (ID-N) in the cluster: the ConfigMaps labelled
 * dlk.dev/runs=ID-N. */
static int each_cluster_project(struct collect *c, struct kube_client *kc, const char *ns, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	cJSON *list = NULL;
	const cJSON *cm;
	size_t n = strlen(c->id);

	lo.label_selector = "dlk.dev/runs";
	if (kube_list(kc, "ConfigMap", ns, &lo, &list, err) < 0)
		return -1;
	cJSON_ArrayForEach(cm, get(list, "items")) {
		const char *p = cJSON_GetStringValue(get(get(get(cm, "metadata"), "labels"), "dlk.dev/runs"));
		const char *q;
		if (!p || strncmp(p, c->id, n) || p[n] != '-' || !p[n + 1])
			continue;
		for (q = p + n + 1; *q >= '0' && *q <= '9'; q++)
			;
		if (!*q)
			each_store(c, dlk_runs_open_configmap(kc, ns, p));
	}
	cJSON_Delete(list);
	return 0;
}

static int g_maximize;
static int group(const cJSON *row)
{
	const char *o = cJSON_GetObjectItemCaseSensitive(row, "outcome")->valuestring;
	return !strcmp(o, "succeeded") ? 0 : !strcmp(o, "stopped") ? 1 : 2;
}
static int cmp_rows(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	const cJSON *vx = get(x, "value"), *vy = get(y, "value");
	int hx = cJSON_IsNumber(vx), hy = cJSON_IsNumber(vy);
	/* the trials that ran to the end first: a stopped trial's value is from an earlier rung
	 * and does not compare with theirs */
	int gx = group(x), gy = group(y);
	if (gx != gy)
		return gx - gy;
	if (hx != hy)
		return hy - hx;
	if (hx && vx->valuedouble != vy->valuedouble)
		return (g_maximize ? vx->valuedouble < vy->valuedouble : vx->valuedouble > vy->valuedouble) ? 1 : -1;
	return get(x, "trial")->valueint - get(y, "trial")->valueint;
}

cJSON *dlk_sweep_status(const char *spec_file, const char *id, struct dlk_err *err)
{
	return dlk_sweep_status_in(spec_file, id, NULL, NULL, err);
}

cJSON *dlk_sweep_status_in(const char *spec_file, const char *id, struct kube_client *kc, const char *ns,
                           struct dlk_err *err)
{
	struct collect c = { id, cJSON_CreateObject(), "maximize", "accuracy" };
	cJSON *doc, *arr, **rows, *it, *best = NULL;
	int n = 0, i = 0;

	if (kc) {
		if (each_cluster_project(&c, kc, ns, err)) {
			cJSON_Delete(c.trials);
			return NULL;
		}
	} else {
		dlk_runs_local_each(spec_file, each_project, &c);
	}
	n = cJSON_GetArraySize(c.trials);
	if (!n) {
		cJSON_Delete(c.trials);
		if (kc) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "no trials of a sweep '%s' in the run histories of namespace '%s'", id, ns);
			dlk_err_hint(err, "'dlk sweep' runs the sweep of the project file's sweep: section in the cluster");
		} else {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "no trials of a sweep '%s' in the local histories here", id);
			dlk_err_hint(err, "'dlk sweep --local' runs the sweep of the project file's sweep: section");
		}
		return NULL;
	}
	rows = xcalloc((size_t)n, sizeof(*rows));
	while (c.trials->child)
		rows[i++] = cJSON_DetachItemViaPointer(c.trials, c.trials->child);
	g_maximize = strcmp(c.goal, "minimize") != 0;
	qsort(rows, (size_t)n, sizeof(*rows), cmp_rows);
	doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "sweep", id);
	cJSON_AddStringToObject(doc, "metric", c.metric);
	cJSON_AddStringToObject(doc, "goal", c.goal);
	arr = cJSON_AddArrayToObject(doc, "trials");
	for (i = 0; i < n; i++) {
		it = rows[i];
		cJSON_AddItemToArray(arr, it);
		if (!best && !strcmp(get(it, "outcome")->valuestring, "succeeded") && cJSON_IsNumber(get(it, "value")))
			best = it;
	}
	cJSON_AddItemToObject(doc, "best", best ? cJSON_Duplicate(best, 1) : cJSON_CreateNull());
	{
		/* what the sweep held and used, in all (the budget's measure: sweep.gpu_hours) */
		static const char *const keys[] = { "wall_seconds", "gpu_seconds", "cpu_seconds", "cpu_reserved_seconds" };
		double sums[4] = { 0 };
		cJSON *u = cJSON_AddObjectToObject(doc, "usage");
		cJSON_ArrayForEach(it, arr)
			for (int k = 0; k < 4; k++)
				sums[k] += cJSON_GetNumberValue(get(get(it, "usage"), keys[k])) > 0
				                   ? cJSON_GetNumberValue(get(get(it, "usage"), keys[k]))
				                   : 0;
		for (int k = 0; k < 4; k++)
			cJSON_AddNumberToObject(u, keys[k], sums[k]);
	}
	free(rows);
	cJSON_Delete(c.trials);
	return doc;
}
