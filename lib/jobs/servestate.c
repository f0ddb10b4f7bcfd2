#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/util/err.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);

	/* the range first: converting 4e45 to an int to test it is undefined */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= INT_MIN && v->valuedouble <= INT_MAX))
		return 0;
	return (int)v->valuedouble;
}

char *dlk_serve_selector(const char *name, const char *track)
{
	if (track)
		return xasprintf("%s=%s,%s=%s", DLK_LABEL_SERVE, name, DLK_LABEL_TRACK, track);
	return xasprintf("%s=%s", DLK_LABEL_SERVE, name);
}

/* Waiting reasons that do not go away by waiting (the kubelet's names). */
static int hopeless(const char *reason)
{
	static const char *const bad[] = {
		"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CrashLoopBackOff", "CreateContainerConfigError",
		"CreateContainerError", "RunContainerError", "StartError", NULL,
	};
	for (int i = 0; reason && bad[i]; i++)
		if (!strcmp(reason, bad[i]))
			return 1;
	return 0;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* A pod that fails the rollout: sets t->pod and t->reason and returns 1. Otherwise notes, when
 * nothing is noted yet, what the pod waits for (a waiting reason, the scheduler's). */
static int pod_verdict(const cJSON *pod, struct dlk_serve_track *t)
{
	const cJSON *meta = get(pod, "metadata"), *st = get(pod, "status"), *cs, *c;
	const char *name = str(meta, "name") ? str(meta, "name") : "?";

	if (get(meta, "deletionTimestamp"))
		return 0; /* an old pod going away */
	cJSON_ArrayForEach(cs, get(st, "containerStatuses")) {
		const cJSON *w = get(get(cs, "state"), "waiting");
		const cJSON *term = get(get(cs, "state"), "terminated");
		const cJSON *last = get(get(cs, "lastState"), "terminated");
		const cJSON *tm = term ? term : last;
		const char *wr = str(w, "reason");
		if (hopeless(wr)) {
			snprintf(t->pod, sizeof(t->pod), "%s", name);
			if (last && num(last, "exitCode") != 0) /* a crash loop: why it crashed says more */
				snprintf(t->reason, sizeof(t->reason), "%s: the server exited with code %d (%s)%s%.400s", wr,
				         num(last, "exitCode"), str(last, "reason") ? str(last, "reason") : "Error",
				         str(last, "message") ? ": " : "", or_empty(str(last, "message")));
			else
				snprintf(t->reason, sizeof(t->reason), "%s%s%.400s", wr, str(w, "message") ? ": " : "",
				         or_empty(str(w, "message")));
			return 1;
		}
		/* a serving container never exits on its own: one that did (and was restarted) is broken */
		if (tm && num(tm, "exitCode") != 0 && (term || num(cs, "restartCount") > 0)) {
			snprintf(t->pod, sizeof(t->pod), "%s", name);
			snprintf(t->reason, sizeof(t->reason), "the server exited with code %d (%s)%s%.400s", num(tm, "exitCode"),
			         str(tm, "reason") ? str(tm, "reason") : "Error", str(tm, "message") ? ": " : "",
			         or_empty(str(tm, "message")));
			return 1;
		}
		if (wr && !t->reason[0]) {
			snprintf(t->pod, sizeof(t->pod), "%s", name);
			snprintf(t->reason, sizeof(t->reason), "%s", wr);
		}
	}
	cJSON_ArrayForEach(c, get(st, "conditions")) {
		const char *type = str(c, "type"), *s = str(c, "status");
		if (type && s && !strcmp(type, "PodScheduled") && !strcmp(s, "False") && !t->reason[0]) {
			snprintf(t->pod, sizeof(t->pod), "%s", name);
			snprintf(t->reason, sizeof(t->reason), "%s%s%.400s", str(c, "reason") ? str(c, "reason") : "Unschedulable",
			         str(c, "message") ? ": " : "", or_empty(str(c, "message")));
		}
	}
	if (str(st, "phase") && !strcmp(str(st, "phase"), "Failed")) {
		snprintf(t->pod, sizeof(t->pod), "%s", name);
		snprintf(t->reason, sizeof(t->reason), "the pod failed%s%.400s", str(st, "reason") ? ": " : "",
		         or_empty(str(st, "reason")));
		return 1;
	}
	return 0;
}

static void summarize(const cJSON *deploy, const cJSON *pods, struct dlk_serve_track *t)
{
	const cJSON *meta = get(deploy, "metadata"), *spec = get(deploy, "spec"), *st = get(deploy, "status");
	const cJSON *labels = get(meta, "labels"), *ann = get(meta, "annotations"), *c, *p;
	char deadline[600] = "";
	const char *s;

	memset(t, 0, sizeof(*t));
	snprintf(t->deployment, sizeof(t->deployment), "%s", or_empty(str(meta, "name")));
	snprintf(t->name, sizeof(t->name), "%s", or_empty(str(labels, DLK_LABEL_SERVE)));
	snprintf(t->track, sizeof(t->track), "%s", str(labels, DLK_LABEL_TRACK) ? str(labels, DLK_LABEL_TRACK) : "stable");
	snprintf(t->sha256, sizeof(t->sha256), "%s", or_empty(str(ann, DLK_ANN_MODEL_SHA256)));
	snprintf(t->accuracy, sizeof(t->accuracy), "%s", or_empty(str(ann, DLK_ANN_ACCURACY)));
	snprintf(t->source, sizeof(t->source), "%s", or_empty(str(ann, DLK_ANN_MODEL_SOURCE)));
	s = str(ann, DLK_ANN_CANARY_PERCENT);
	/* from an annotation anyone with access can edit: digits only, 0..100, else none (atoi
	 * took "1e9" as 1 and overflowed on "99999999999") */
	t->canary_percent = 0;
	if (s && *s && strlen(s) <= 3 && strspn(s, "0123456789") == strlen(s) && atoi(s) <= 100)
		t->canary_percent = atoi(s);
	/* without replicas (an autoscaler owns it) the API server's default is 1 */
	t->desired = cJSON_IsNumber(get(spec, "replicas")) ? num(spec, "replicas") : 1;
	t->ready = num(st, "readyReplicas");
	t->updated = num(st, "updatedReplicas");
	t->available = num(st, "availableReplicas");
	t->total = num(st, "replicas");

	cJSON_ArrayForEach(c, get(st, "conditions")) {
		const char *type = str(c, "type"), *reason = str(c, "reason");
		if (type && reason && !strcmp(type, "Progressing") && !strcmp(reason, "ProgressDeadlineExceeded"))
			snprintf(deadline, sizeof(deadline), "ProgressDeadlineExceeded%s%.400s", str(c, "message") ? ": " : "",
			         or_empty(str(c, "message")));
	}
	t->rollout = ROLLOUT_PROGRESSING;
	cJSON_ArrayForEach(p, pods) {
		const char *tr = str(get(get(p, "metadata"), "labels"), DLK_LABEL_TRACK);
		if (tr && strcmp(tr, t->track))
			continue;
		if (pod_verdict(p, t)) {
			/* the pod says more than the deadline would */
			t->rollout = ROLLOUT_FAILED;
			return;
		}
	}
	if (deadline[0]) {
		t->rollout = ROLLOUT_FAILED;
		if (!t->pod[0] || !t->reason[0])
			snprintf(t->reason, sizeof(t->reason), "%s", deadline);
		else {
			char r[600];
			snprintf(r, sizeof(r), "%s", t->reason);
			snprintf(t->reason, sizeof(t->reason), "ProgressDeadlineExceeded (%.500s)", r);
		}
		return;
	}
	if (num(st, "observedGeneration") >= num(meta, "generation") && t->updated >= t->desired && t->total <= t->updated &&
	    t->available >= t->desired && t->ready >= t->desired) {
		t->rollout = ROLLOUT_DONE;
		t->pod[0] = t->reason[0] = '\0';
	}
}

void dlk_serve_track_summarize(const cJSON *deploy, const cJSON *pods, struct dlk_serve_track *t)
{
	summarize(deploy, pods, t);
	/* the buffers cut long API strings: never inside a character (-o json must stay UTF-8) */
	dlk_utf8_drop_cut(t->name);
	dlk_utf8_drop_cut(t->deployment);
	dlk_utf8_drop_cut(t->track);
	dlk_utf8_drop_cut(t->sha256);
	dlk_utf8_drop_cut(t->accuracy);
	dlk_utf8_drop_cut(t->source);
	dlk_utf8_drop_cut(t->pod);
	dlk_utf8_drop_cut(t->reason);
}

static const char *bare_sha(const char *s)
{
	return s && !strncmp(s, "sha256:", 7) ? s + 7 : s;
}

static int by_name_track(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	int c = strcmp(str(x, "name"), str(y, "name"));

	return c ? c : strcmp(str(x, "track"), str(y, "track"));
}

cJSON *dlk_served_with_weights(struct kube_client *c, const char *ns, const char *const *weights, size_t n,
                               struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	cJSON *deps = NULL, *out = cJSON_CreateArray(), **v;
	const cJSON *d;
	int k = 0;

	lo.label_selector = DLK_LABEL_SERVE;
	if (kube_list(c, "Deployment", ns, &lo, &deps, err) < 0) {
		cJSON_Delete(out);
		return NULL;
	}
	cJSON_ArrayForEach(d, get(deps, "items")) {
		struct dlk_serve_track t;
		const char *w;
		size_t i;
		dlk_serve_track_summarize(d, NULL, &t);
		w = bare_sha(t.sha256);
		for (i = 0; i < n; i++)
			if (w && *w && !strcmp(w, bare_sha(weights[i])))
				break;
		if (i == n)
			continue;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", t.name);
		cJSON_AddStringToObject(o, "track", t.track);
		cJSON_AddStringToObject(o, "deployment", t.deployment);
		cJSON_AddStringToObject(o, "namespace", or_empty(str(get(d, "metadata"), "namespace")));
		cJSON_AddStringToObject(o, "weights_sha256", w);
		cJSON_AddNumberToObject(o, "ready", t.ready);
		cJSON_AddNumberToObject(o, "desired", t.desired);
		cJSON_AddItemToArray(out, o);
	}
	cJSON_Delete(deps);
	/* a stable order: by model, then track */
	v = xcalloc((size_t)cJSON_GetArraySize(out) + 1, sizeof(*v));
	while (cJSON_GetArraySize(out) > 0)
		v[k++] = cJSON_DetachItemFromArray(out, 0);
	qsort(v, (size_t)k, sizeof(*v), by_name_track);
	for (int i = 0; i < k; i++)
		cJSON_AddItemToArray(out, v[i]);
	free(v);
	return out;
}
