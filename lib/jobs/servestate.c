#include "lib/jobs/servestate.h"
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
