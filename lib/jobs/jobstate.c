/* Deciding a job's state from the Job, its pods and events (see jobstate.h). */
#include "lib/jobs/jobstate.h"
#include "lib/kube/api.h"
#include "lib/train/progress.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RANKS 4096 /* a bound on what a Job's completions may make us allocate */

static const cJSON *jget(const cJSON *o, ...)
{
	va_list ap;
	const char *k;

	va_start(ap, o);
	while (o && (k = va_arg(ap, const char *)))
		o = cJSON_GetObjectItemCaseSensitive(o, k);
	va_end(ap);
	return o;
}

static const char *jstr_of(const cJSON *v)
{
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *jstr_or(const cJSON *v, const char *def)
{
	return cJSON_IsString(v) ? v->valuestring : def;
}

static int jint_of(const cJSON *v, int def)
{
	return cJSON_IsNumber(v) ? v->valueint : def;
}

const char *dlk_job_state_name(enum dlk_job_state s)
{
	static const char *const names[] = { "Pending", "Running", "Succeeded", "Failed", "Suspended", "Terminating" };
	return names[s];
}

/* A condition of type t with status "True". */
static const cJSON *condition(const cJSON *obj, const char *t)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, jget(obj, "status", "conditions", NULL)) {
		const char *type = jstr_of(jget(c, "type", NULL)), *st = jstr_of(jget(c, "status", NULL));
		if (type && st && !strcmp(type, t) && !strcmp(st, "True"))
			return c;
	}
	return NULL;
}

int dlk_pod_rank(const cJSON *pod)
{
	const char *v = jstr_of(jget(pod, "metadata", "labels", DLK_LABEL_INDEX, NULL));
	char *end;

	if (!v)
		v = jstr_of(jget(pod, "metadata", "annotations", DLK_LABEL_INDEX, NULL));
	if (!v || !*v)
		return -1;
	long r = strtol(v, &end, 10);
	return *end || r < 0 || r >= MAX_RANKS ? -1 : (int)r;
}

static int pod_live(const cJSON *pod)
{
	const char *ph = jstr_of(jget(pod, "status", "phase", NULL));
	return !ph || !strcmp(ph, "Pending") || !strcmp(ph, "Running");
}

/* Is a newer than b as the pod that speaks for a rank? A live pod beats a finished one (the
 * replacement of a failed pod), then the later creationTimestamp. */
static int pod_newer(const cJSON *a, const cJSON *b)
{
	int la = pod_live(a), lb = pod_live(b);
	if (la != lb)
		return la;
	const char *ta = jstr_of(jget(a, "metadata", "creationTimestamp", NULL));
	const char *tb = jstr_of(jget(b, "metadata", "creationTimestamp", NULL));
	int c = strcmp(ta ? ta : "", tb ? tb : "");
	if (c)
		return c > 0;
	/* same second: the later resourceVersion was created (or changed) later */
	const char *ra = jstr_of(jget(a, "metadata", "resourceVersion", NULL));
	const char *rb = jstr_of(jget(b, "metadata", "resourceVersion", NULL));
	return strtoll(ra ? ra : "0", NULL, 10) > strtoll(rb ? rb : "0", NULL, 10);
}

/* seconds since the epoch, -1 when s is not a time */
static double parse_time(const char *s)
{
	double t;

	return dlk_rfc3339_parse(s, &t) ? -1 : t;
}

static void fill_rank(struct dlk_rank *r)
{
	const cJSON *cs = cJSON_GetArrayItem(jget(r->pod, "status", "containerStatuses", NULL), 0);
	const cJSON *term = jget(cs, "state", "terminated", NULL), *wait = jget(cs, "state", "waiting", NULL);
	const cJSON *last = jget(cs, "lastState", "terminated", NULL);

	r->phase = jstr_of(jget(r->pod, "status", "phase", NULL));
	if (!r->phase)
		r->phase = "Pending";
	r->ready = cJSON_IsTrue(jget(cs, "ready", NULL)) && !strcmp(r->phase, "Running");
	int rc = jint_of(jget(cs, "restartCount", NULL), 0);
	r->restarts += rc < 0 ? 0 : rc > (1 << 24) ? 1 << 24 : rc; /* what a kubelet could count, not INT_MAX */
	if (term) {
		r->terminated = 1;
		r->exit_code = jint_of(jget(term, "exitCode", NULL), 0);
		snprintf(r->reason, sizeof(r->reason), "%s", jstr_or(jget(term, "reason", NULL), ""));
		snprintf(r->message, sizeof(r->message), "%s", jstr_or(jget(term, "message", NULL), ""));
		snprintf(r->finished, sizeof(r->finished), "%s", jstr_or(jget(term, "finishedAt", NULL), ""));
	} else if (wait) {
		snprintf(r->reason, sizeof(r->reason), "%s", jstr_or(jget(wait, "reason", NULL), ""));
		snprintf(r->message, sizeof(r->message), "%s", jstr_or(jget(wait, "message", NULL), ""));
	} else if (last) {
		/* running again after a restart: the last exit is what the user wants to see */
		snprintf(r->reason, sizeof(r->reason), "%s", jstr_or(jget(last, "reason", NULL), ""));
		r->exit_code = jint_of(jget(last, "exitCode", NULL), 0);
	} else if (!strcmp(r->phase, "Failed") || !strcmp(r->phase, "Pending")) {
		snprintf(r->reason, sizeof(r->reason), "%s", jstr_or(jget(r->pod, "status", "reason", NULL), ""));
		snprintf(r->message, sizeof(r->message), "%s", jstr_or(jget(r->pod, "status", "message", NULL), ""));
	}
	/* the buffers cut long API strings: never inside a character (-o json must stay UTF-8) */
	dlk_utf8_drop_cut(r->reason);
	dlk_utf8_drop_cut(r->message);
	dlk_utf8_drop_cut(r->finished);
}

static void drop_cuts(struct dlk_job_summary *s)
{
	dlk_utf8_drop_cut(s->name);
	dlk_utf8_drop_cut(s->ns);
	dlk_utf8_drop_cut(s->progress_raw);
	dlk_utf8_drop_cut(s->reason);
}

static int is_scheduled(const cJSON *pod)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, jget(pod, "status", "conditions", NULL)) {
		const char *type = jstr_of(jget(c, "type", NULL)), *st = jstr_of(jget(c, "status", NULL));
		if (type && st && !strcmp(type, "PodScheduled"))
			return !strcmp(st, "True");
	}
	return 0;
}

/* The newest event with a reason for an object (events are oldest first; later wins). */
static const cJSON *last_event(const cJSON *events, const char *kind, const char *name, const char *reason)
{
	const cJSON *e, *found = NULL;

	cJSON_ArrayForEach(e, events) {
		const char *k = jstr_of(jget(e, "involvedObject", "kind", NULL));
		const char *n = jstr_of(jget(e, "involvedObject", "name", NULL));
		const char *r = jstr_of(jget(e, "reason", NULL));
		if (k && n && r && !strcmp(k, kind) && !strcmp(n, name) && (!reason || !strcmp(r, reason)))
			found = e;
	}
	return found;
}

/* s on one line (its line breaks as spaces), cut to n bytes at a character's boundary */
static const char *first_line(const char *s, char *buf, size_t n)
{
	size_t len = s ? strnlen(s, n - 1) : 0;

	memcpy(buf, s ? s : "", len);
	buf[len] = '\0';
	dlk_utf8_drop_cut(buf);
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return buf;
}

/* A waiting reason that means "this will not start by itself". */
static int waiting_matters(const char *reason)
{
	return reason[0] && strcmp(reason, "ContainerCreating") && strcmp(reason, "PodInitializing");
}

/* Whether the first podFailurePolicy rule matches a failed pod: its exit code (onExitCodes, with
 * Kubernetes' In/NotIn, NotIn never matching 0) or one of its conditions (onPodConditions). */
static int rule_matches(const cJSON *rule, const cJSON *pod, int exit_code)
{
	const cJSON *on = jget(rule, "onExitCodes", NULL), *c, *pc;

	if (on) {
		const char *op = jstr_or(jget(on, "operator", NULL), "");
		const char *cn = jstr_of(jget(on, "containerName", NULL));
		const char *name = jstr_of(jget(cJSON_GetArrayItem(jget(pod, "status", "containerStatuses", NULL), 0), "name", NULL));
		int in = 0;
		if (cn && (!name || strcmp(cn, name)))
			return 0;
		cJSON_ArrayForEach(c, jget(on, "values", NULL))
			in |= cJSON_IsNumber(c) && c->valuedouble == exit_code;
		return !strcmp(op, "In") ? in : !strcmp(op, "NotIn") ? !in && exit_code != 0 : 0;
	}
	cJSON_ArrayForEach(c, jget(rule, "onPodConditions", NULL)) {
		const char *t = jstr_of(jget(c, "type", NULL)), *st = jstr_or(jget(c, "status", NULL), "True");
		cJSON_ArrayForEach(pc, jget(pod, "status", "conditions", NULL)) {
			const char *pt = jstr_of(jget(pc, "type", NULL)), *ps = jstr_of(jget(pc, "status", NULL));
			if (t && pt && ps && !strcmp(t, pt) && !strcmp(st, ps))
				return 1;
		}
	}
	return 0;
}

/* What the Job controller does with a rank's failed pod, as the Job's spec says it will: the
 * first podFailurePolicy rule that matches decides, then the index's retries
 * (backoffLimitPerIndex against the failures its pods' annotation counts). Writes the words that
 * follow "rank N exited with code C". */
static void retry_words(const cJSON *job, const struct dlk_rank *r, char *out, size_t n)
{
	const cJSON *rule, *lim = jget(job, "spec", "backoffLimitPerIndex", NULL);
	const char *fc = jstr_of(jget(r->pod, "metadata", "annotations", "batch.kubernetes.io/job-index-failure-count", NULL));

	cJSON_ArrayForEach(rule, jget(job, "spec", "podFailurePolicy", "rules", NULL)) {
		if (!rule_matches(rule, r->pod, r->exit_code))
			continue;
		const char *a = jstr_or(jget(rule, "action", NULL), "");
		if (!strcmp(a, "FailJob")) {
			snprintf(out, n, "its exit code fails the Job (podFailurePolicy)");
			return;
		}
		if (!strcmp(a, "FailIndex")) {
			snprintf(out, n, "its exit code fails its index (podFailurePolicy)");
			return;
		}
		if (!strcmp(a, "Ignore")) {
			snprintf(out, n, "not counted (podFailurePolicy); waiting for its retry");
			return;
		}
		break; /* Count: as any failure */
	}
	if (cJSON_IsNumber(lim) && fc) {
		char *end;
		long used = strtol(fc, &end, 10) + 1, max = (long)lim->valuedouble;
		if (end != fc && !*end && used >= 1 && max >= 0) {
			if (used > max)
				snprintf(out, n, "out of retries (backoffLimitPerIndex %ld): its index has failed", max);
			else
				snprintf(out, n, "waiting for its retry (%ld of %ld)", used, max);
			return;
		}
	}
	snprintf(out, n, "waiting for its retry");
}

static int rank_failure(const struct dlk_rank *r, struct dlk_failure *f);

static void pending_reason(const cJSON *job, const cJSON *events, struct dlk_job_summary *s)
{
	char msg[400];
	const cJSON *e;

	/* the Job itself: quota refused pods (FailedCreate), a Kueue message */
	if ((e = last_event(events, "Job", s->name, "FailedCreate"))) {
		snprintf(s->reason, sizeof(s->reason), "cannot create pods: %s",
			 first_line(jstr_of(jget(e, "message", NULL)), msg, sizeof(msg)));
		return;
	}
	for (int i = 0; i < s->total; i++) {
		struct dlk_rank *r = &s->ranks[i];
		if (r->pod && !r->terminated && waiting_matters(r->reason)) {
			snprintf(s->reason, sizeof(s->reason), "rank %d: %s%s%s", i, r->reason, r->message[0] ? ": " : "",
				 first_line(r->message, msg, sizeof(msg)));
			return;
		}
	}
	for (int i = 0; i < s->total; i++) {
		struct dlk_rank *r = &s->ranks[i];
		const char *pn = jstr_of(jget(r->pod, "metadata", "name", NULL));
		if (!r->pod || !pn || is_scheduled(r->pod) || strcmp(r->phase, "Pending"))
			continue;
		if ((e = last_event(events, "Pod", pn, "FailedScheduling"))) {
			snprintf(s->reason, sizeof(s->reason), "rank %d unschedulable: %s", i,
				 first_line(jstr_of(jget(e, "message", NULL)), msg, sizeof(msg)));
			return;
		}
		const cJSON *c;
		cJSON_ArrayForEach(c, jget(r->pod, "status", "conditions", NULL)) {
			const char *type = jstr_of(jget(c, "type", NULL)), *m = jstr_of(jget(c, "message", NULL));
			if (type && !strcmp(type, "PodScheduled") && m && *m) {
				snprintf(s->reason, sizeof(s->reason), "rank %d unschedulable: %s", i,
					 first_line(m, msg, sizeof(msg)));
				return;
			}
		}
	}
	if (s->state == JOB_SUSPENDED) {
		const char *q = jstr_of(jget(job, "metadata", "labels", "kueue.x-k8s.io/queue-name", NULL));
		e = last_event(events, "Job", s->name, NULL);
		if (q)
			snprintf(s->reason, sizeof(s->reason), "suspended: not admitted by Kueue yet (queue '%s')%s%s", q,
				 e ? ": " : "", e ? first_line(jstr_of(jget(e, "message", NULL)), msg, sizeof(msg)) : "");
		else
			snprintf(s->reason, sizeof(s->reason), "suspended (spec.suspend is true)");
		return;
	}
	int missing = 0;
	for (int i = 0; i < s->total; i++) {
		const struct dlk_rank *r = &s->ranks[i];
		missing += !r->pod;
		if (r->pod && r->terminated && r->exit_code) {
			/* why, when its worker published it (its termination message): the retry to
			 * come may fail another way, and this attempt's cause is then gone */
			char what[96], cause[240] = "";
			struct dlk_failure f;
			retry_words(job, r, what, sizeof(what));
			if (!rank_failure(r, &f) && f.message[0])
				snprintf(cause, sizeof(cause), ": %s", first_line(f.message, msg, sizeof(msg)));
			snprintf(s->reason, sizeof(s->reason), "rank %d exited with code %d%s%s%s%s; %s", i, r->exit_code,
				 r->reason[0] ? " (" : "", r->reason, r->reason[0] ? ")" : "", cause, what);
			return;
		}
	}
	if (missing)
		snprintf(s->reason, sizeof(s->reason), "%d of %d worker pods not created yet", missing, s->total);
	else
		snprintf(s->reason, sizeof(s->reason), "waiting for worker pods to start");
}

/* The failure a rank's worker wrote as its termination message, if it did. */
static int rank_failure(const struct dlk_rank *r, struct dlk_failure *f)
{
	const cJSON *cs = cJSON_GetArrayItem(jget(r->pod, "status", "containerStatuses", NULL), 0);
	const cJSON *term = jget(cs, "state", "terminated", NULL);

	if (!term)
		term = jget(cs, "lastState", "terminated", NULL);
	if (dlk_failure_parse(jstr_of(jget(term, "message", NULL)), f))
		return -1;
	if (f->rank < 0)
		f->rank = r->rank;
	if (!f->pod[0])
		snprintf(f->pod, sizeof(f->pod), "%s", jstr_or(jget(r->pod, "metadata", "name", NULL), ""));
	return 0;
}

static void failure_reason(const cJSON *job, struct dlk_job_summary *s)
{
	const struct dlk_rank *first = NULL;
	const cJSON *c = condition(job, "Failed");
	char msg[300];

	if (!c)
		c = condition(job, "FailureTarget");
	if (s->ranks && s->total > 0) {
		/* pods say only their exit codes: a death by a signal is 128 + N, a cause like any other */
		struct dlk_rank_end *ends = xcalloc((size_t)s->total, sizeof(*ends));
		int cause;
		for (int i = 0; i < s->total; i++) {
			const struct dlk_rank *r = &s->ranks[i];
			ends[i].seq = -1;
			if (!r->pod || !r->terminated || r->exit_code == 0)
				continue;
			ends[i].exit_code = r->exit_code;
			ends[i].finished = r->finished;
		}
		cause = dlk_failure_cause(ends, s->total);
		first = cause >= 0 ? &s->ranks[cause] : NULL;
		free(ends);
	}
	if (first && !rank_failure(first, &s->failure)) {
		s->have_failure = 1;
		s->failed_rank = first->rank;
		dlk_failure_text(&s->failure, s->reason, sizeof(s->reason));
		return;
	}
	if (first) {
		s->failed_rank = first->rank;
		int n = snprintf(s->reason, sizeof(s->reason), "rank %d exited with code %d", first->rank, first->exit_code);
		if (first->reason[0] && n > 0 && (size_t)n < sizeof(s->reason))
			n += snprintf(s->reason + n, sizeof(s->reason) - (size_t)n, " (%s)", first->reason);
		if (first->message[0] && n > 0 && (size_t)n < sizeof(s->reason))
			snprintf(s->reason + n, sizeof(s->reason) - (size_t)n, ": %s",
				 first_line(first->message, msg, sizeof(msg)));
		return;
	}
	/* the pods are gone (or never told): what the failing worker wrote on the Job */
	if (!dlk_failure_parse(jstr_of(jget(job, "metadata", "annotations", DLK_FAILURE_ANNOTATION, NULL)), &s->failure)) {
		s->have_failure = 1;
		if (s->failure.rank >= 0 && s->failure.rank < s->total)
			s->failed_rank = s->ranks ? s->failure.rank : -1;
		dlk_failure_text(&s->failure, s->reason, sizeof(s->reason));
		return;
	}
	if (c)
		snprintf(s->reason, sizeof(s->reason), "%s: %s", jstr_or(jget(c, "reason", NULL), "Failed"),
			 first_line(jstr_of(jget(c, "message", NULL)), msg, sizeof(msg)));
}

/* GPUs a worker asks for: the sum of its containers' nvidia.com/gpu limits (a number, or a
 * quantity string). Values outside what a node could have are clamped, not trusted. */
#define MAX_GPUS (1 << 16)
static int gpus_of(const cJSON *job)
{
	const cJSON *c;
	long long n = 0;

	cJSON_ArrayForEach(c, jget(job, "spec", "template", "spec", "containers", NULL)) {
		const cJSON *v = jget(c, "resources", "limits", "nvidia.com/gpu", NULL);
		double g = 0;
		if (cJSON_IsNumber(v))
			g = v->valuedouble;
		else if (cJSON_IsString(v))
			g = strtod(v->valuestring, NULL);
		if (g > 0)
			n += g < MAX_GPUS ? (long long)g : MAX_GPUS;
	}
	return n < MAX_GPUS ? (int)n : MAX_GPUS;
}

/* What the Job alone says: names, workers, GPUs, age, progress. */
static void summary_head(const cJSON *job, struct dlk_job_summary *s)
{
	const char *ann;

	memset(s, 0, sizeof(*s));
	s->failed_rank = -1;
	s->age_s = -1;
	snprintf(s->name, sizeof(s->name), "%s", jstr_or(jget(job, "metadata", "name", NULL), ""));
	snprintf(s->ns, sizeof(s->ns), "%s", jstr_or(jget(job, "metadata", "namespace", NULL), ""));
	s->total = jint_of(jget(job, "spec", "completions", NULL), jint_of(jget(job, "spec", "parallelism", NULL), 1));
	if (s->total < 1)
		s->total = 1;
	if (s->total > MAX_RANKS)
		s->total = MAX_RANKS;
	s->gpus_per_worker = gpus_of(job);
	s->gpus = s->gpus_per_worker * s->total; /* at most 2^16 * 2^12: no overflow */

	double created = parse_time(jstr_of(jget(job, "metadata", "creationTimestamp", NULL)));
	if (created >= 0)
		s->age_s = (double)time(NULL) - created;

	ann = jstr_of(jget(job, "metadata", "annotations", DLK_PROGRESS_ANNOTATION, NULL));
	if (ann) {
		s->owned = strlen(ann) < 4096 ? cJSON_Parse(ann) : NULL;
		if (cJSON_IsObject(s->owned)) {
			s->progress = s->owned;
		} else {
			cJSON_Delete(s->owned);
			s->owned = NULL;
			first_line(ann, s->progress_raw, sizeof(s->progress_raw));
		}
	}
}

/* The one rule for a job's state: what the Job's conditions say, else Pending while a rank has
 * no running (or finished) pod. */
static void decide_state(const cJSON *job, struct dlk_job_summary *s, int pending, int running)
{
	if (jget(job, "metadata", "deletionTimestamp", NULL))
		s->state = JOB_TERMINATING;
	else if (condition(job, "Complete") || condition(job, "SuccessCriteriaMet"))
		s->state = JOB_SUCCEEDED;
	else if (condition(job, "Failed") || condition(job, "FailureTarget"))
		s->state = JOB_FAILED;
	else if (cJSON_IsTrue(jget(job, "spec", "suspend", NULL)))
		s->state = JOB_SUSPENDED;
	else if (pending || (!running && s->succeeded < s->total))
		s->state = JOB_PENDING;
	else
		s->state = JOB_RUNNING;
}

/* How many indexes a completedIndexes string ("0-3,5") names, at most max; *has (when given)
 * set when index `self` is one of them. */
static int count_indexes(const char *s, int max, int self, int *has)
{
	long n = 0;

	if (has)
		*has = 0;
	while (s && *s && n < max) {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s || a < 0)
			break;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a)
				break;
		}
		if (has && self >= a && self <= b)
			*has = 1;
		if (b - a >= max - n)
			return max; /* also keeps a huge range from overflowing n */
		n += b - a + 1;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
	return n > max ? max : (int)n;
}

int dlk_job_peers_done(const cJSON *job, int self)
{
	const char *done = jstr_of(jget(job, "status", "completedIndexes", NULL));
	int total = jint_of(jget(job, "spec", "completions", NULL), 0), has, n;

	if (!done || total <= 0)
		return 0;
	n = count_indexes(done, total, self, &has);
	return n - (has && n > 0);
}

static int count_of(const cJSON *job, const char *field, int max)
{
	int v = jint_of(jget(job, "status", field, NULL), 0);
	return v < 0 ? 0 : v > max ? max : v;
}

void dlk_job_summarize_job(const cJSON *job, struct dlk_job_summary *s)
{
	const char *done = jstr_of(jget(job, "status", "completedIndexes", NULL));

	summary_head(job, s);
	s->ready = count_of(job, "ready", s->total);
	s->succeeded = done ? count_indexes(done, s->total, -1, NULL) : count_of(job, "succeeded", s->total);
	s->failed = count_of(job, "failed", s->total);
	/* a rank with a ready pod runs: dlk's pods have no readiness probe */
	int running = s->ready, pending = s->total - running - s->succeeded;
	decide_state(job, s, pending > 0 ? pending : 0, running);
	if (s->state == JOB_FAILED)
		failure_reason(job, s);
	drop_cuts(s);
}

void dlk_job_summarize(const cJSON *job, const cJSON *pods, const cJSON *events, struct dlk_job_summary *s)
{
	const cJSON *p;

	summary_head(job, s);
	s->ranks = xcalloc((size_t)s->total, sizeof(*s->ranks));
	for (int i = 0; i < s->total; i++) {
		s->ranks[i].rank = i;
		s->ranks[i].phase = "";
	}
	cJSON_ArrayForEach(p, pods) {
		const char *owner = jstr_of(jget(p, "metadata", "labels", DLK_LABEL_JOB, NULL));
		const char *jn = jstr_of(jget(p, "metadata", "labels", DLK_LABEL_JOB_NAME, NULL));
		int r = dlk_pod_rank(p);
		if (!jn)
			jn = jstr_of(jget(p, "metadata", "labels", "job-name", NULL));
		if (r < 0 || r >= s->total)
			continue;
		if (!(owner && !strcmp(owner, s->name)) && !(jn && !strcmp(jn, s->name)))
			continue;
		s->ranks[r].pods++;
		if (!s->ranks[r].pod || pod_newer(p, s->ranks[r].pod))
			s->ranks[r].pod = p;
	}
	int pending = 0, running = 0;
	for (int i = 0; i < s->total; i++) {
		struct dlk_rank *r = &s->ranks[i];
		if (!r->pod) {
			pending++;
			continue;
		}
		r->restarts = r->pods - 1;
		fill_rank(r);
		s->ready += r->ready;
		if (!strcmp(r->phase, "Running"))
			running++;
		else if (!strcmp(r->phase, "Succeeded"))
			s->succeeded++;
		else if (!strcmp(r->phase, "Failed"))
			s->failed++, pending++; /* a failed rank not yet replaced is not running */
		else
			pending++;
	}
	decide_state(job, s, pending, running);
	if (s->state == JOB_PENDING || s->state == JOB_SUSPENDED)
		pending_reason(job, events, s);
	else if (s->state == JOB_FAILED)
		failure_reason(job, s);
	drop_cuts(s);
}

void dlk_job_summary_release(struct dlk_job_summary *s)
{
	free(s->ranks);
	cJSON_Delete(s->owned);
	s->ranks = NULL;
	s->owned = NULL;
	s->progress = NULL;
}

static double pnum(const cJSON *p, const char *k, int *have)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, k);
	*have = cJSON_IsNumber(v);
	return *have ? v->valuedouble : 0;
}

void dlk_job_progress_text(const struct dlk_job_summary *s, char *out, size_t n)
{
	int h1, h2;
	size_t len = 0;

	out[0] = '\0';
	if (!s->progress) {
		snprintf(out, n, "%s", s->progress_raw);
		return;
	}
	double ep = pnum(s->progress, DLK_PROGRESS_EPOCH, &h1), eps = pnum(s->progress, DLK_PROGRESS_EPOCHS, &h2);
	if (h1)
		len += (size_t)snprintf(out + len, n - len, h2 ? "epoch %.0f/%.0f" : "epoch %.0f", ep, eps);
	double st = pnum(s->progress, DLK_PROGRESS_STEP, &h1), sts = pnum(s->progress, DLK_PROGRESS_TOTAL_STEPS, &h2);
	if (h1 && len < n)
		len += (size_t)snprintf(out + len, n - len, h2 ? "%sstep %.0f/%.0f" : "%sstep %.0f", len ? " " : "", st, sts);
	double loss = pnum(s->progress, DLK_PROGRESS_LOSS, &h1);
	if (h1 && len < n)
		snprintf(out + len, n - len, "%sloss %.4g", len ? " " : "", loss);
}

cJSON *dlk_job_summary_json(const struct dlk_job_summary *s)
{
	cJSON *o = cJSON_CreateObject(), *w = cJSON_CreateObject(), *ranks = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "name", s->name);
	cJSON_AddStringToObject(o, "namespace", s->ns);
	cJSON_AddStringToObject(o, "state", dlk_job_state_name(s->state));
	cJSON_AddNumberToObject(w, "ready", s->ready);
	cJSON_AddNumberToObject(w, "total", s->total);
	cJSON_AddNumberToObject(w, "succeeded", s->succeeded);
	cJSON_AddNumberToObject(w, "failed", s->failed);
	cJSON_AddItemToObject(o, "workers", w);
	cJSON_AddNumberToObject(o, "gpus", s->gpus);
	if (s->progress)
		cJSON_AddItemToObject(o, "progress", cJSON_Duplicate(s->progress, 1));
	else if (s->progress_raw[0])
		cJSON_AddStringToObject(o, "progress", s->progress_raw);
	if (s->age_s >= 0)
		cJSON_AddNumberToObject(o, "ageSeconds", (double)(long)s->age_s);
	if (s->reason[0])
		cJSON_AddStringToObject(o, "reason", s->reason);
	if (s->have_failure) {
		cJSON *f = cJSON_AddObjectToObject(o, "failure");
		if (s->failure.rank >= 0)
			cJSON_AddNumberToObject(f, "rank", s->failure.rank);
		if (s->failure.pod[0])
			cJSON_AddStringToObject(f, "pod", s->failure.pod);
		cJSON_AddStringToObject(f, "class", s->failure.cls);
		cJSON_AddNumberToObject(f, "exitCode", s->failure.exit_code);
		cJSON_AddStringToObject(f, "message", s->failure.message);
		if (s->failure.time[0])
			cJSON_AddStringToObject(f, "time", s->failure.time);
	}
	for (int i = 0; s->ranks && i < s->total; i++) {
		const struct dlk_rank *r = &s->ranks[i];
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "rank", i);
		if (r->pod) {
			cJSON_AddStringToObject(x, "pod", jstr_or(jget(r->pod, "metadata", "name", NULL), ""));
			const char *node = jstr_of(jget(r->pod, "spec", "nodeName", NULL));
			if (node)
				cJSON_AddStringToObject(x, "node", node);
			cJSON_AddStringToObject(x, "phase", r->phase);
			cJSON_AddBoolToObject(x, "ready", r->ready);
			cJSON_AddNumberToObject(x, "restarts", r->restarts);
			if (r->terminated || r->exit_code)
				cJSON_AddNumberToObject(x, "exitCode", r->exit_code);
			if (r->reason[0])
				cJSON_AddStringToObject(x, "reason", r->reason);
		} else {
			cJSON_AddStringToObject(x, "phase", "NotCreated");
		}
		cJSON_AddItemToArray(ranks, x);
	}
	if (s->ranks)
		cJSON_AddItemToObject(o, "ranks", ranks);
	else
		cJSON_Delete(ranks);
	return o;
}

static void events_for(struct kube_client *c, const char *ns, const char *kind, const char *name, cJSON *into)
{
	cJSON *list = NULL;
	struct dlk_err err = DLK_ERR_INIT;
	const cJSON *e;

	/* events are a help, not a must: a namespace whose events we may not read still has a status */
	if (kube_events_for(c, ns, kind, name, &list, &err) < 0)
		return;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(list, "items"))
		cJSON_AddItemToArray(into, cJSON_Duplicate(e, 1));
	cJSON_Delete(list);
}

cJSON *dlk_job_events(struct kube_client *c, const char *ns, const char *name, const struct dlk_job_summary *pre)
{
	cJSON *ev = cJSON_CreateArray();
	int asked = 0;

	events_for(c, ns, "Job", name, ev);
	for (int i = 0; i < pre->total && asked < 8; i++) {
		const struct dlk_rank *r = &pre->ranks[i];
		if (!r->pod || strcmp(r->phase, "Pending"))
			continue;
		events_for(c, ns, "Pod", kube_meta(r->pod, "name"), ev);
		asked++;
	}
	return ev;
}

int dlk_job_list_pods(struct kube_client *c, const char *ns, const char *name, cJSON **pods, struct dlk_err *err)
{
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	char *sel = dlk_job_selector(name);
	int rc;

	lo.label_selector = sel;
	rc = kube_list(c, "Pod", ns, &lo, pods, err);
	free(sel);
	return rc;
}

cJSON *dlk_job_pods(const cJSON *pods, const char *ns, const char *job)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *p;

	cJSON_ArrayForEach(p, pods) {
		const char *owner = jstr_of(jget(p, "metadata", "labels", DLK_LABEL_JOB, NULL));
		const char *jn = jstr_of(jget(p, "metadata", "labels", DLK_LABEL_JOB_NAME, NULL));
		const char *pns = jstr_of(jget(p, "metadata", "namespace", NULL));
		/* a plain job's pods carry its name in dlk.dev/job; a CronJob's run's carry the
		 * CronJob's there, and the run's in the Job controller's label */
		if (((owner && !strcmp(owner, job)) || (jn && !strcmp(jn, job))) && (!ns || !pns || !strcmp(pns, ns)))
			cJSON_AddItemReferenceToArray(arr, (cJSON *)p);
	}
	return arr;
}

char *dlk_job_selector(const char *name)
{
	return xasprintf("%s=%s", DLK_LABEL_JOB, name);
}
