/* `dlk top --cluster`: the training Jobs of a namespace that have not ended, each with what its
 * rank 0 publishes (dlk.dev/progress) and its pods as the API server has them. */
#include "lib/top/top.h"
#include "lib/jobs/jobstate.h"
#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/train/progress.h"
#include "lib/util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* ---- served models ---- */

static const char *const served_fams[] = { "dlk_inference_request_success_total", "dlk_inference_request_failure_total",
	                                   "dlk_inference_count_total", "dlk_inference_request_duration_seconds_sum" };
#define SERVED_FAMS 4

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the container port named http of a pod (else its first container's first port), 0: none */
static int pod_http_port(const cJSON *pod)
{
	const cJSON *ct, *p;
	int first = 0;

	cJSON_ArrayForEach(ct, get(get(pod, "spec"), "containers")) {
		cJSON_ArrayForEach(p, get(ct, "ports")) {
			const cJSON *n = get(p, "containerPort");
			if (!cJSON_IsNumber(n) || n->valuedouble < 1 || n->valuedouble > 65535)
				continue;
			if (cJSON_IsString(get(p, "name")) && !strcmp(get(p, "name")->valuestring, "http"))
				return n->valueint;
			if (!first)
				first = n->valueint;
		}
	}
	return first;
}

/* a pod that serves: Running, every container ready, not being deleted */
static int pod_serves(const cJSON *pod)
{
	const cJSON *st = get(pod, "status"), *cs;
	int n = 0, ready = 0;

	if (get(get(pod, "metadata"), "deletionTimestamp") || !cJSON_IsString(get(st, "phase")) ||
	    strcmp(get(st, "phase")->valuestring, "Running"))
		return 0;
	cJSON_ArrayForEach(cs, get(st, "containerStatuses")) {
		n++;
		ready += cJSON_IsTrue(get(cs, "ready"));
	}
	return n > 0 && ready == n;
}

/* GET the pod's /metrics through the API server's pod proxy into sums[SERVED_FAMS]; -1 with why */
static int proxy_scrape(struct kube_client *c, const char *ns, const char *pod, int port, double *sums, char *why,
                        size_t why_len)
{
	char *ens = kube_escape(ns), *epod = kube_escape(pod), *path = xasprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics",
	                                                                          ens, epod, port);
	struct kube_request req = { 0 };
	struct kube_response r = KUBE_RESPONSE_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	int rc = -1;

	req.method = "GET";
	req.path = path;
	req.accept = "text/plain";
	if (kube_send(c, &req, &r, &err))
		snprintf(why, why_len, "%s", err.msg);
	else if (r.status != 200) {
		/* 503 when the API server cannot reach the pod, 403 when the user may not use the
		 * proxy (or the server may not dial the pod): its Status message says which */
		cJSON *st = r.body.len ? cJSON_ParseWithLength(r.body.data, r.body.len) : NULL;
		const char *msg = cJSON_GetStringValue(get(st, "message"));
		snprintf(why, why_len, "the API server's pod proxy answered %ld for pod %s%s%.200s", r.status, pod,
		         msg ? ": " : "", msg ? msg : "");
		cJSON_Delete(st);
	}
	else {
		dlk_buf_addc(&r.body, 0);
		for (int k = 0; k < SERVED_FAMS; k++)
			sums[k] = dlk_top_metric_sum(r.body.data, served_fams[k], NULL);
		rc = 0;
	}
	kube_response_release(&r);
	free(path);
	free(ens);
	free(epod);
	return rc;
}

static double served_delta(double a, double b)
{
	/* a counter that fell (the server restarted between the samples) counts from 0 */
	if (isnan(b))
		return NAN;
	if (isnan(a) || b < a)
		return b;
	return b - a;
}

cJSON *dlk_top_cluster_served(struct kube_client *c, const char *ns, const char *only, double interval_s,
                              struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	cJSON *deps = NULL, *pods = NULL, *out = NULL;
	const cJSON *d, *p;
	char sel[320];
	int scraped_any = 0;
	double t0;

	if (only)
		snprintf(sel, sizeof(sel), "%s=%s", DLK_LABEL_SERVE, only);
	lo.label_selector = only ? sel : DLK_LABEL_SERVE;
	if (kube_list(c, "Deployment", ns, &lo, &deps, err) < 0 || kube_list(c, "Pod", ns, &lo, &pods, err) < 0)
		goto out;
	out = cJSON_CreateArray();
	t0 = mono();
	/* the first sample of each serving pod */
	cJSON_ArrayForEach(d, get(deps, "items")) {
		struct dlk_serve_track t;
		cJSON *row = cJSON_CreateObject(), *mine = cJSON_CreateArray(), *sp = cJSON_CreateArray();
		char why[DLK_ERR_MSG_MAX] = "";
		const cJSON *sel_labels = get(get(get(d, "spec"), "selector"), "matchLabels");
		cJSON_ArrayForEach(p, get(pods, "items")) {
			/* the Deployment's pods: those its selector matches */
			const cJSON *l = get(get(p, "metadata"), "labels"), *kv;
			int match = cJSON_IsObject(sel_labels) && sel_labels->child;
			cJSON_ArrayForEach(kv, sel_labels) {
				const cJSON *v = get(l, kv->string);
				if (!cJSON_IsString(kv) || !cJSON_IsString(v) || strcmp(kv->valuestring, v->valuestring))
					match = 0;
			}
			if (match)
				cJSON_AddItemReferenceToArray(mine, (cJSON *)p);
		}
		dlk_serve_track_summarize(d, mine, &t);
		cJSON_AddStringToObject(row, "name", t.name);
		cJSON_AddStringToObject(row, "track", t.track[0] ? t.track : "stable");
		cJSON_AddStringToObject(row, "deployment", t.deployment);
		cJSON_AddNumberToObject(row, "ready", t.ready);
		cJSON_AddNumberToObject(row, "desired", t.desired);
		cJSON_AddStringToObject(row, "rollout", t.rollout == ROLLOUT_DONE     ? "Complete"
		                                        : t.rollout == ROLLOUT_FAILED ? "Failed"
		                                                                      : "Progressing");
		if (t.rollout != ROLLOUT_DONE && t.reason[0])
			cJSON_AddStringToObject(row, "reason", t.reason);
		cJSON_ArrayForEach(p, mine) {
			const char *name = cJSON_GetStringValue(get(get(p, "metadata"), "name"));
			int port = pod_http_port(p);
			double sums[SERVED_FAMS];
			cJSON *one;
			if (!name || !pod_serves(p))
				continue;
			if (!port) {
				snprintf(why, sizeof(why), "pod %s declares no container port", name);
				continue;
			}
			if (proxy_scrape(c, ns, name, port, sums, why, sizeof(why)))
				continue;
			one = cJSON_CreateObject();
			cJSON_AddStringToObject(one, "pod", name);
			cJSON_AddNumberToObject(one, "port", port);
			cJSON_AddItemToObject(one, "first", cJSON_CreateDoubleArray(sums, SERVED_FAMS));
			cJSON_AddItemToArray(sp, one);
			scraped_any = 1;
		}
		if (!cJSON_GetArraySize(sp) && !why[0])
			snprintf(why, sizeof(why), "no pod is ready");
		cJSON_AddItemToObject(row, "scraping", sp);
		cJSON_AddStringToObject(row, "why", why);
		cJSON_Delete(mine);
		cJSON_AddItemToArray(out, row);
	}
	/* the second, the interval after */
	if (scraped_any) {
		double wait = interval_s - (mono() - t0);
		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
	}
	{
		cJSON *row;
		double secs = mono() - t0;
		cJSON_ArrayForEach(row, out) {
			const cJSON *one;
			double tot[SERVED_FAMS] = { 0, 0, 0, 0 };
			int n = 0;
			char why[DLK_ERR_MSG_MAX];
			snprintf(why, sizeof(why), "%s", get(row, "why")->valuestring);
			cJSON_ArrayForEach(one, get(row, "scraping")) {
				double sums[SERVED_FAMS];
				if (proxy_scrape(c, ns, get(one, "pod")->valuestring, get(one, "port")->valueint, sums, why, sizeof(why)))
					continue;
				for (int k = 0; k < SERVED_FAMS; k++) {
					double dd = served_delta(cJSON_GetArrayItem(get(one, "first"), k)->valuedouble, sums[k]);
					tot[k] += isnan(dd) ? 0 : dd;
				}
				n++;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(row, "scraping");
			cJSON_DeleteItemFromObjectCaseSensitive(row, "why");
			cJSON_AddNumberToObject(row, "pods_scraped", n);
			if (!n || !(secs > 0)) {
				cJSON_AddStringToObject(row, "metrics", why[0] ? why : "no pod is ready");
				cJSON_AddNullToObject(row, "requests_per_s");
				cJSON_AddNullToObject(row, "errors_per_s");
				cJSON_AddNullToObject(row, "rows_per_s");
				cJSON_AddNullToObject(row, "latency_ms");
				continue;
			}
			cJSON_AddNumberToObject(row, "requests_per_s", round(tot[0] / secs * 10) / 10);
			cJSON_AddNumberToObject(row, "errors_per_s", round(tot[1] / secs * 10) / 10);
			cJSON_AddNumberToObject(row, "rows_per_s", round(tot[2] / secs * 10) / 10);
			if (tot[0] + tot[1] > 0)
				cJSON_AddNumberToObject(row, "latency_ms", round(tot[3] / (tot[0] + tot[1]) * 1e6) / 1e3);
			else
				cJSON_AddNullToObject(row, "latency_ms");
		}
	}
out:
	cJSON_Delete(deps);
	cJSON_Delete(pods);
	return out;
}
