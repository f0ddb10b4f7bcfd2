/* `dlk top --cluster`: the training Jobs of a namespace that have not ended, each with what its
 * rank 0 publishes (dlk.dev/progress) and its pods as the API server has them. */
#include "lib/top/top.h"
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/train/progress.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* a pod's line: its rank (the completion index), phase, node, restarts and readiness */
static cJSON *pod_row(const cJSON *pod)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *meta = get(pod, "metadata"), *st = get(pod, "status"), *cs;
	const char *idx = cJSON_GetStringValue(get(get(meta, "annotations"), "batch.kubernetes.io/job-completion-index"));
	const char *node = cJSON_GetStringValue(get(get(pod, "spec"), "nodeName"));
	const char *phase = cJSON_GetStringValue(get(st, "phase"));
	int restarts = 0, ready = 0, n = 0;

	cJSON_ArrayForEach(cs, get(st, "containerStatuses")) {
		restarts += cJSON_IsNumber(get(cs, "restartCount")) ? get(cs, "restartCount")->valueint : 0;
		ready += cJSON_IsTrue(get(cs, "ready"));
		n++;
	}
	cJSON_AddStringToObject(o, "pod", cJSON_GetStringValue(get(meta, "name")) ? get(meta, "name")->valuestring : "?");
	if (idx)
		cJSON_AddNumberToObject(o, "rank", atoi(idx));
	else
		cJSON_AddNullToObject(o, "rank");
	cJSON_AddStringToObject(o, "phase", phase ? phase : "Unknown");
	if (node)
		cJSON_AddStringToObject(o, "node", node);
	else
		cJSON_AddNullToObject(o, "node");
	cJSON_AddNumberToObject(o, "restarts", restarts);
	cJSON_AddBoolToObject(o, "ready", n > 0 && ready == n);
	if (get(meta, "deletionTimestamp"))
		cJSON_AddBoolToObject(o, "terminating", 1);
	return o;
}

static int by_rank(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	const cJSON *rx = get(x, "rank"), *ry = get(y, "rank");
	double vx = cJSON_IsNumber(rx) ? rx->valuedouble : 1e9, vy = cJSON_IsNumber(ry) ? ry->valuedouble : 1e9;
	if (vx != vy)
		return vx < vy ? -1 : 1;
	return strcmp(get(x, "pod")->valuestring, get(y, "pod")->valuestring);
}

/* The pod's rank's shares of its step time, from the progress's "phases", as "step_time" */
static void add_step_time(cJSON *pod, const cJSON *phases)
{
	const cJSON *rank = get(pod, "rank"), *e;

	if (!cJSON_IsNumber(rank))
		return;
	cJSON_ArrayForEach(e, phases) {
		const cJSON *r = get(e, "rank");
		if (!cJSON_IsNumber(r) || r->valuedouble != rank->valuedouble)
			continue;
		cJSON *st = cJSON_AddObjectToObject(pod, "step_time");
		for (int k = 0; k < DLK_PHASES; k++) {
			const cJSON *v = get(e, dlk_step_phase_name(k));
			cJSON_AddNumberToObject(st, dlk_step_phase_name(k), cJSON_IsNumber(v) ? v->valuedouble : 0);
		}
		return;
	}
}

/* The pod's rank's GPU sample, from the progress's "gpus", as "gpu": {"index", "utilization_percent",
 * "memory_used_bytes", "memory_total_bytes", "power_watts", "sm_clock_mhz"} (the last two when
 * reported), the names of `dlk top`'s GPUs here */
static void add_gpu(cJSON *pod, const cJSON *gpus)
{
	const cJSON *rank = get(pod, "rank"), *e;
	static const char *const from[] = { "gpu", DLK_PROGRESS_GPU_UTIL, DLK_PROGRESS_GPU_MEM_USED,
		                            DLK_PROGRESS_GPU_MEM_TOTAL, DLK_PROGRESS_GPU_POWER, DLK_PROGRESS_GPU_SM_CLOCK };
	static const char *const to[] = { "index", "utilization_percent", "memory_used_bytes", "memory_total_bytes",
		                          "power_watts", "sm_clock_mhz" };

	if (!cJSON_IsNumber(rank))
		return;
	cJSON_ArrayForEach(e, gpus) {
		const cJSON *r = get(e, "rank");
		if (!cJSON_IsObject(e) || !cJSON_IsNumber(r) || r->valuedouble != rank->valuedouble || !cJSON_IsNumber(get(e, "gpu")))
			continue;
		cJSON *g = cJSON_AddObjectToObject(pod, "gpu");
		for (int k = 0; k < 6; k++)
			if (cJSON_IsNumber(get(e, from[k])) && get(e, from[k])->valuedouble >= 0)
				cJSON_AddNumberToObject(g, to[k], get(e, from[k])->valuedouble);
		return;
	}
}

cJSON *dlk_top_cluster(struct kube_client *c, const char *ns, const char *only, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	cJSON *jobs = NULL, *pods = NULL, *out = NULL, *arr;
	const cJSON *job;
	char sel[320];

	if (only)
		snprintf(sel, sizeof(sel), "dlk.dev/job=%s", only);
	lo.label_selector = only ? sel : "dlk.dev/job";
	if (kube_list(c, "Job", ns, &lo, &jobs, err) < 0 || kube_list(c, "Pod", ns, &lo, &pods, err) < 0)
		goto out;
	out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "namespace", ns);
	arr = cJSON_AddArrayToObject(out, "jobs");
	cJSON_ArrayForEach(job, get(jobs, "items")) {
		struct dlk_job_summary s;
		const char *name = cJSON_GetStringValue(get(get(job, "metadata"), "name"));
		const char *prog = cJSON_GetStringValue(get(get(get(job, "metadata"), "annotations"), DLK_PROGRESS_ANNOTATION));
		const cJSON *pod;
		cJSON *row, *prow, **list;
		int n = 0;

		if (!name)
			continue;
		dlk_job_summarize_job(job, &s);
		/* what has ended uses nothing: top is about what runs */
		if (s.state == JOB_SUCCEEDED || s.state == JOB_FAILED) {
			dlk_job_summary_release(&s);
			continue;
		}
		row = cJSON_CreateObject();
		cJSON_AddStringToObject(row, "job", name);
		cJSON_AddStringToObject(row, "state", dlk_job_state_name(s.state));
		dlk_job_summary_release(&s);
		{
			cJSON *p = prog ? cJSON_Parse(prog) : NULL;
			if (cJSON_IsObject(p))
				cJSON_AddItemToObject(row, "progress", p);
			else {
				cJSON_Delete(p);
				cJSON_AddNullToObject(row, "progress");
			}
		}
		prow = cJSON_AddArrayToObject(row, "pods");
		list = xcalloc((size_t)cJSON_GetArraySize(get(pods, "items")) + 1, sizeof(*list));
		cJSON_ArrayForEach(pod, get(pods, "items")) {
			const char *jn = cJSON_GetStringValue(get(get(get(pod, "metadata"), "labels"), "batch.kubernetes.io/job-name"));
			if (jn && !strcmp(jn, name))
				list[n++] = pod_row(pod);
		}
		qsort(list, (size_t)n, sizeof(*list), by_rank);
		const cJSON *phases = get(get(row, "progress"), DLK_PROGRESS_PHASES);
		const cJSON *gpus = get(get(row, "progress"), DLK_PROGRESS_GPUS);
		for (int i = 0; i < n; i++) {
			add_step_time(list[i], phases);
			add_gpu(list[i], gpus);
			cJSON_AddItemToArray(prow, list[i]);
		}
		cJSON_AddItemToObject(row, "warnings", dlk_top_warnings(phases, gpus));
		free(list);
		cJSON_AddItemToArray(arr, row);
	}
out:
	cJSON_Delete(jobs);
	cJSON_Delete(pods);
	return out;
}
