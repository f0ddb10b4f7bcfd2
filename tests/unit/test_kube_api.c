/* API operations against the test API server: apply, create, get, list with paging and
 * selectors, watch (bookmarks, 410 relist, reconnect after a reset), delete with propagation,
 * pod logs (follow, split and unterminated lines, tail, previous, reset), events, annotations,
 * and cancelling a stream. */
#include "tests/unit/check.h"
#include "tests/unit/test_kube_server.h"
#include "lib/kube/client_impl.h"
#include "lib/kube/api.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

static struct kt_server srv;

static struct kube_client *client(struct dlk_err *err)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;

	kt_write(kt_path("kc"), "clusters:\n- name: c\n  cluster: {server: '%s', certificate-authority: certs/ca.crt}\n"
		 "users:\n- name: u\n  user: {token: test-token}\n"
		 "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", srv.url);
	o.kubeconfig = kt_path("kc");
	if (kube_config_load(&o, &cfg, err) < 0)
		return NULL;
	struct kube_client *c = kube_client_new(&cfg, NULL, err);
	c->o.backoff_ms = 20;
	return c;
}

static cJSON *obj(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *obj(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cJSON *j = cJSON_Parse(buf);
	if (!j)
		printf("# bad JSON in test: %s\n", buf);
	return j;
}

static const char *str_at(const cJSON *o, const char *a, const char *b, const char *c)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	if (c)
		v = cJSON_GetObjectItemCaseSensitive(v, c);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *JOB = "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},"
			 "\"spec\":{\"completions\":%d,\"parallelism\":%d,\"completionMode\":\"Indexed\",\"backoffLimit\":0,"
			 "\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\",\"image\":\"busybox\"}]}}}}";

/* ---- line splitter ---- */
struct lines {
	char got[16][128];
	int n;
};
static int collect(const char *line, size_t len, void *ud)
{
	struct lines *l = ud;
	if (l->n < 16)
		snprintf(l->got[l->n++], 128, "%.*s", (int)len, line);
	return 0;
}

/* Waits for the first pod of a job to leave Pending; returns its name (static) or NULL. */
static const char *pod_of(struct kube_client *c, const char *ns, const char *job, int running, struct dlk_err *err)
{
	static char name[256];
	char sel[128];
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	snprintf(sel, sizeof(sel), "job-name=%s", job);
	lo.label_selector = sel;
	for (int i = 0; i < 200; i++) {
		cJSON *l = NULL;
		if (kube_list(c, "Pod", ns, &lo, &l, err) < 0)
			return NULL;
		cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "items"), 0);
		const char *phase = str_at(p, "status", "phase", NULL);
		if (p && (!running || (phase && strcmp(phase, "Pending")))) {
			snprintf(name, sizeof(name), "%s", str_at(p, "metadata", "name", NULL));
			cJSON_Delete(l);
			return name;
		}
		cJSON_Delete(l);
		kt_sleep_ms(10);
	}
	return NULL;
}

/* ---- watch callbacks ---- */
struct wstate {
	struct kube_client *other; /* changes are made on a second client: the first is streaming */
	char seen[64][64];
	int n, relists, bookmarks, relist_items, stop_after_bookmarks;
	const char *add_on_bookmark;
	const char *stop_on_add;
};
static int on_event(const char *type, const cJSON *o, void *ud, struct dlk_err *err)
{
	struct wstate *s = ud;
	if (!strcmp(type, "RELIST")) {
		s->relists++;
		s->relist_items = cJSON_GetArraySize(cJSON_GetObjectItem(o, "items"));
		return 0;
	}
	if (!strcmp(type, "BOOKMARK")) {
		s->bookmarks++;
		if (s->add_on_bookmark) {
			cJSON *cm = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"}}", s->add_on_bookmark);
			s->add_on_bookmark = NULL;
			int rc = kube_apply(s->other, cm, NULL, err);
			cJSON_Delete(cm);
			return rc;
		}
		return s->stop_after_bookmarks && s->bookmarks >= s->stop_after_bookmarks;
	}
	const char *name = str_at(o, "metadata", "name", NULL);
	if (s->n < 64)
		snprintf(s->seen[s->n++], 64, "%s %s", type, name ? name : "?");
	return s->stop_on_add && !strcmp(type, "ADDED") && name && !strcmp(name, s->stop_on_add);
}

static int job_failed(const char *type, const cJSON *o, void *ud, struct dlk_err *err)
{
	(void)err;
	if (strcmp(type, "MODIFIED") && strcmp(type, "ADDED"))
		return 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "conditions")) {
		const char *t = str_at(c, "type", NULL, NULL);
		if (t && (!strcmp(t, "Failed") || !strcmp(t, "Complete"))) {
			snprintf(ud, 64, "%s", t);
			return 1;
		}
	}
	return 0;
}

static double cancel_at;
static int cancel_after(void *ud)
{
	(void)ud;
	return dlk_now() >= cancel_at;
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c, *c2;
	cJSON *o = NULL, *out = NULL;
	char *p;

	/* resource mapping and paths */
	CHECK(kube_resource_for("Job", NULL) && !strcmp(kube_resource_for("Job", NULL)->plural, "jobs"));
	CHECK(kube_resource_for("Job", "v1") == NULL);
	p = kube_path(kube_resource_for("Job", NULL), "ml", "train", NULL);
	CHECK_STR(p, "/apis/batch/v1/namespaces/ml/jobs/train");
	free(p);
	p = kube_path(kube_resource_for("Pod", NULL), "ml", "train-0-abc", "log");
	CHECK_STR(p, "/api/v1/namespaces/ml/pods/train-0-abc/log");
	free(p);
	p = kube_path(kube_resource_for("RoleBinding", NULL), "ml", NULL, NULL);
	CHECK_STR(p, "/apis/rbac.authorization.k8s.io/v1/namespaces/ml/rolebindings");
	free(p);
	p = kube_path(kube_resource_for("PersistentVolumeClaim", NULL), "a b", "x/y", NULL);
	CHECK_STR(p, "/api/v1/namespaces/a%20b/persistentvolumeclaims/x%2Fy");
	free(p);
	const char *kinds[] = { "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Service", "PersistentVolumeClaim",
				"Job", "CronJob", "Pod", "Event" };
	int all = 1;
	for (size_t i = 0; i < DLK_ARRAY_SIZE(kinds); i++)
		all &= kube_resource_for(kinds[i], NULL) != NULL;
	CHECK(all);

	/* line splitter: partial lines across chunks, CRLF, a final unterminated line, over-long lines */
	{
		struct lines l = { .n = 0 };
		struct kube_lines ls = KUBE_LINES_INIT(collect, &l);
		kube_lines_feed(&ls, "ab", 2);
		kube_lines_feed(&ls, "c\nde", 4);
		kube_lines_feed(&ls, "f\r\n\ng", 5);
		CHECK(l.n == 3);
		kube_lines_finish(&ls);
		CHECK(l.n == 4);
		CHECK_STR(l.got[0], "abc");
		CHECK_STR(l.got[1], "def");
		CHECK_STR(l.got[2], "");
		CHECK_STR(l.got[3], "g");
		ls.max = 4;
		kube_lines_feed(&ls, "123456789\n", 10);
		CHECK(l.n == 7);
		CHECK_STR(l.got[4], "1234");
		CHECK_STR(l.got[6], "9");
		kube_lines_release(&ls);
	}

	if (!kt_have("node") || !kt_have("openssl")) {
		CHECK_MISSING("node or openssl");
		return CHECK_DONE();
	}
	kt_certs();
	if (kt_server_start(&srv, "training.json") < 0) {
		printf("not ok 1 - the test API server starts\n1..1\n");
		return 1;
	}
	c = client(&err);
	c2 = client(&err);

	/* server-side apply creates, then merges */
	o = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cfg\"},\"data\":{\"a\":\"1\"}}");
	CHECK(kube_apply(c, o, &out, &err) == 0);
	CHECK_STR(str_at(out, "metadata", "namespace", NULL), "default");
	cJSON_Delete(out);
	cJSON_Delete(o);
	o = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cfg\"},\"data\":{\"b\":\"2\"}}");
	CHECK(kube_apply(c, o, &out, &err) == 0);
	CHECK_STR(str_at(out, "data", "a", NULL), "1");
	CHECK_STR(str_at(out, "data", "b", NULL), "2");
	CHECK(kt_log_count(&srv, "\"method\":\"PATCH\",\"path\":\"/api/v1/namespaces/default/configmaps/cfg\","
				 "\"query\":\"?fieldManager=dlk&force=true\",\"code\":201") == 1);
	CHECK(kt_log_count(&srv, "application/apply-patch+yaml") == 2);
	cJSON_Delete(out);

	/* create: 409 AlreadyExists is told apart */
	CHECK(kube_create(c, o, NULL, &err) == -1);
	CHECK(err.code == DLK_EXIT_EXISTS);
	CHECK_CONTAINS(err.msg, "create configmaps 'cfg' in namespace 'default': AlreadyExists: configmaps \"cfg\" already exists");
	CHECK_CONTAINS(err.hint, "--replace");
	cJSON_Delete(o);
	/* 422 names the field */
	o = obj("{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"template\":{\"spec\":{\"restartPolicy\":\"Never\"}}}}");
	CHECK(kube_apply(c, o, NULL, &err) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "Invalid: Job \"bad\" is invalid");
	CHECK_CONTAINS(err.hint, "'spec.template.spec.containers'");
	cJSON_Delete(o);
	o = obj("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"x\"}}");
	CHECK(kube_apply(c, o, NULL, &err) == -1 && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "kind 'Secret'");
	cJSON_Delete(o);

	/* get */
	CHECK(kube_get(c, "ConfigMap", NULL, "cfg", &out, &err) == 0);
	CHECK_STR(str_at(out, "data", "b", NULL), "2");
	cJSON_Delete(out);

	/* list: every page, selectors */
	for (int i = 0; i < 5; i++) {
		o = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p%d\",\"namespace\":\"page\","
			"\"labels\":{\"app\":\"x\",\"tier\":\"%s\"}}}", i, i % 2 ? "db" : "web");
		CHECK(kube_create(c, o, NULL, &err) == 0);
		cJSON_Delete(o);
	}
	{
		struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
		lo.limit = 2;
		lo.label_selector = "app=x";
		CHECK(kube_list(c, "ConfigMap", "page", &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 5);
		CHECK(str_at(out, "metadata", "resourceVersion", NULL) != NULL);
		CHECK_STR(str_at(out, "kind", NULL, NULL), "ConfigMapList");
		CHECK(kt_log_count(&srv, "continue=") == 2);
		cJSON_Delete(out);
		lo.limit = 0;
		lo.label_selector = "app in (x,y),tier!=db";
		CHECK(kube_list(c, "ConfigMap", "page", &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 3);
		cJSON_Delete(out);
		/* an expired continue token: the list starts over, nothing is counted twice */
		for (int i = 0; i < 3; i++) {
			o = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"e%d\",\"namespace\":\"expire\"}}", i);
			CHECK(kube_create(c, o, NULL, &err) == 0);
			cJSON_Delete(o);
		}
		lo.label_selector = NULL;
		lo.limit = 2;
		CHECK(kube_list(c, "ConfigMap", "expire", &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 3);
		CHECK(kt_log_count(&srv, "/namespaces/expire/configmaps\",\"query\":\"?limit=2&continue=") == 2);
		cJSON_Delete(out);
		lo.limit = 0;
		lo.field_selector = "metadata.name=p3";
		CHECK(kube_list(c, "ConfigMap", "page", &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 1);
		cJSON_Delete(out);
		/* every namespace: the collection without one, paged like the others */
		lo.field_selector = NULL;
		lo.label_selector = "app=x";
		lo.limit = 2;
		lo.all_namespaces = 1;
		CHECK(kube_list(c, "ConfigMap", "expire", &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 5);
		CHECK(kt_log_count(&srv, "\"/api/v1/configmaps\",\"query\":\"?labelSelector=app%3Dx&limit=2&continue=") == 2);
		cJSON_Delete(out);
	}

	/* watch: bookmark, then an object added meanwhile (from another client) arrives */
	{
		struct wstate s = { .other = c2, .add_on_bookmark = "w-new", .stop_on_add = "w-new" };
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		CHECK(kube_watch(c, "ConfigMap", NULL, &wo, on_event, &s, &err) == 0);
		CHECK(s.relists == 1 && s.relist_items >= 1);
		CHECK(s.bookmarks >= 1);
		CHECK(s.n == 1);
		CHECK_STR(s.seen[0], "ADDED w-new");
		CHECK(kt_log_count(&srv, "allowWatchBookmarks=true") >= 1);
	}
	/* a dropped stream resumes from the last resourceVersion: nothing lost, nothing twice */
	{
		struct wstate s = { .stop_after_bookmarks = 1 };
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.resource_version = "1";
		CHECK(kube_watch(c, "ConfigMap", "wreset", &wo, on_event, &s, &err) == 0);
		CHECK(s.n == 3);
		CHECK_STR(s.seen[0], "ADDED a");
		CHECK_STR(s.seen[1], "ADDED b");
		CHECK_STR(s.seen[2], "ADDED c");
		CHECK(kt_log_count(&srv, "/api/v1/namespaces/wreset/configmaps\",\"query\":\"?watch=1") == 2);
	}
	/* 410 as an ERROR event: relist, then watch on from the new resourceVersion */
	{
		struct kube_response r = KUBE_RESPONSE_INIT;
		struct kube_request req = { .method = "GET", .path = "/_test/compact" };
		CHECK(kube_send(c, &req, &r, &err) == 0 && r.status == 200);
		kube_response_release(&r);
		struct wstate s = { .stop_after_bookmarks = 1 };
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.resource_version = "2";
		CHECK(kube_watch(c, "ConfigMap", "page", &wo, on_event, &s, &err) == 0);
		CHECK(s.relists == 1);
		CHECK(s.relist_items == 5);
		CHECK(s.n == 0);
	}

	/* the server ending a watch (timeoutSeconds) is not an error: it resumes */
	{
		struct wstate s = { .stop_after_bookmarks = 7 };
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.timeout_s = 1;
		wo.max_reconnects = 1;
		CHECK(kube_watch(c, "ConfigMap", "quiet", &wo, on_event, &s, &err) == 0);
		CHECK(s.bookmarks == 7);
		CHECK(kt_log_count(&srv, "/namespaces/quiet/configmaps\",\"query\":\"?watch=1") >= 2);
	}

	/* logs: follow with timestamps; a line split across chunks and a last line without newline */
	o = obj(JOB, "logs", "default", 1, 1);
	CHECK(kube_apply(c, o, NULL, &err) == 0);
	cJSON_Delete(o);
	const char *pod = pod_of(c, "default", "logs", 1, &err);
	CHECK(pod != NULL);
	char podname[256];
	snprintf(podname, sizeof(podname), "%s", pod ? pod : "none");
	CHECK(!strncmp(podname, "logs-0-", 7));
	{
		struct lines l = { .n = 0 };
		struct kube_log_opts lo = KUBE_LOG_OPTS_INIT;
		lo.follow = 1;
		lo.timestamps = 1;
		CHECK(kube_logs(c, NULL, podname, &lo, collect, &l, &err) == 0);
		CHECK(l.n == 4);
		CHECK_CONTAINS(l.got[0], "Z epoch 1 loss 0.91");
		CHECK(strlen(l.got[0]) > 31 && l.got[0][4] == '-' && l.got[0][10] == 'T');
		CHECK_CONTAINS(l.got[2], "Z a line the kubelet flushes in two chunks");
		CHECK_CONTAINS(l.got[3], "Z final line without a newline");
		CHECK(kt_log_count(&srv, "/log\",\"query\":\"?follow=true&timestamps=true\"") == 1);
	}
	{
		struct lines l = { .n = 0 };
		struct kube_log_opts lo = KUBE_LOG_OPTS_INIT;
		lo.tail_lines = 2;
		lo.since_seconds = 3600;
		lo.container = "main";
		CHECK(kube_logs(c, NULL, podname, &lo, collect, &l, &err) == 0);
		CHECK(l.n == 2);
		CHECK_STR(l.got[0], "a line the kubelet flushes in two chunks");
		CHECK_STR(l.got[1], "final line without a newline");
		lo.previous = 1;
		l.n = 0;
		CHECK(kube_logs(c, NULL, podname, &lo, collect, &l, &err) == 0);
		CHECK(l.n == 1);
		CHECK_STR(l.got[0], "previous run: CUDA error: out of memory");
		lo.previous = 0;
		lo.container = "sidecar";
		CHECK(kube_logs(c, NULL, podname, &lo, collect, &l, &err) == -1);
		CHECK_CONTAINS(err.msg, "container sidecar is not valid for pod");
		CHECK(kube_logs(c, NULL, "no-such-pod", NULL, collect, &l, &err) == -1);
		CHECK(err.code == DLK_EXIT_NOTFOUND);
	}
	/* a log stream that breaks: the lines that came are delivered, then a connection error */
	o = obj(JOB, "logs", "logreset", 1, 1);
	CHECK(kube_apply(c, o, NULL, &err) == 0);
	cJSON_Delete(o);
	pod = pod_of(c, "logreset", "logs", 1, &err);
	{
		struct lines l = { .n = 0 };
		struct kube_log_opts lo = KUBE_LOG_OPTS_INIT;
		lo.follow = 1;
		CHECK(pod && kube_logs(c, "logreset", pod, &lo, collect, &l, &err) == -1);
		CHECK(err.code == DLK_EXIT_CONNECT);
		CHECK(l.n == 2);
		CHECK_STR(l.got[1], "epoch 2 loss 0.55");
	}
	/* cancelling a stream that would never end */
	o = obj(JOB, "forever", "default", 1, 1);
	CHECK(kube_apply(c, o, NULL, &err) == 0);
	cJSON_Delete(o);
	pod = pod_of(c, "default", "forever", 1, &err);
	{
		struct lines l = { .n = 0 };
		struct kube_log_opts lo = KUBE_LOG_OPTS_INIT;
		lo.follow = 1;
		c->o.cancel = cancel_after;
		cancel_at = dlk_now() + 0.3;
		double t0 = dlk_now();
		CHECK(pod && kube_logs(c, "default", pod, &lo, collect, &l, &err) == 0);
		CHECK(dlk_now() - t0 < 1.5);
		CHECK(l.n == 1);
		c->o.cancel = NULL;
	}

	/* a scripted failure: FailedScheduling, ImagePullBackOff, progress, OOMKilled, Job Failed */
	o = obj(JOB, "gpu-train", "gpu", 1, 1);
	CHECK(kube_apply(c, o, NULL, &err) == 0);
	cJSON_Delete(o);
	{
		char how[64] = "";
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.list.field_selector = "metadata.name=gpu-train";
		CHECK(kube_watch(c, "Job", "gpu", &wo, job_failed, how, &err) == 0);
		CHECK_STR(how, "Failed");
		pod = pod_of(c, "gpu", "gpu-train", 0, &err);
		CHECK(pod != NULL);
		snprintf(podname, sizeof(podname), "%s", pod ? pod : "none");
		CHECK(kube_events_for(c, "gpu", "Pod", podname, &out, &err) == 0);
		cJSON *items = cJSON_GetObjectItem(out, "items");
		CHECK(cJSON_GetArraySize(items) == 2);
		CHECK_STR(str_at(cJSON_GetArrayItem(items, 0), "reason", NULL, NULL), "FailedScheduling");
		CHECK_STR(str_at(cJSON_GetArrayItem(items, 0), "message", NULL, NULL),
			  "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.");
		cJSON_Delete(out);
		CHECK(kube_get(c, "Pod", "gpu", podname, &out, &err) == 0);
		cJSON *cs = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "status"), "containerStatuses"), 0);
		CHECK_STR(str_at(cs, "state", "terminated", "reason"), "OOMKilled");
		CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cs, "state"), "terminated"), "exitCode")->valueint == 137);
		CHECK_STR(str_at(out, "metadata", "annotations", "batch.kubernetes.io/job-completion-index"), "0");
		cJSON_Delete(out);
		CHECK(kube_get(c, "Job", "gpu", "gpu-train", &out, &err) == 0);
		CHECK_STR(str_at(out, "metadata", "annotations", "dlk.dev/progress"), "{\"step\":10,\"loss\":0.5}");
		cJSON_Delete(out);
	}

	/* two indexed pods succeed: Complete; workers' progress annotations via merge patch */
	o = obj(JOB, "pair", "default", 2, 2);
	CHECK(kube_apply(c, o, NULL, &err) == 0);
	cJSON_Delete(o);
	{
		char how[64] = "";
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.list.field_selector = "metadata.name=pair";
		CHECK(kube_watch(c, "Job", NULL, &wo, job_failed, how, &err) == 0);
		CHECK_STR(how, "Complete");
		const char *keys[] = { "dlk.dev/progress", "dlk.dev/eta" };
		const char *vals[] = { "{\"epoch\":3}", "120" };
		CHECK(kube_annotate_job(c, NULL, "pair", keys, vals, 2, &err) == 0);
		vals[1] = NULL;
		CHECK(kube_annotate_job(c, NULL, "pair", keys, vals, 2, &err) == 0);
		CHECK(kube_get(c, "Job", NULL, "pair", &out, &err) == 0);
		CHECK_STR(str_at(out, "metadata", "annotations", "dlk.dev/progress"), "{\"epoch\":3}");
		CHECK(str_at(out, "metadata", "annotations", "dlk.dev/eta") == NULL);
		cJSON *conds = cJSON_GetObjectItem(cJSON_GetObjectItem(out, "status"), "conditions");
		CHECK_STR(str_at(cJSON_GetArrayItem(conds, 0), "type", NULL, NULL), "SuccessCriteriaMet");
		CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "status"), "succeeded")->valueint == 2);
		cJSON_Delete(out);
		CHECK(kt_log_count(&srv, "application/merge-patch+json") == 2);
	}

	/* delete: Background propagation takes the Job's pods along, and draws no warning */
	{
		struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
		lo.label_selector = "job-name=pair";
		CHECK(kube_list(c, "Pod", NULL, &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 2);
		cJSON_Delete(out);
		CHECK(kube_delete(c, "Job", NULL, "pair", &err) == 0);
		CHECK(kube_list(c, "Pod", NULL, &lo, &out, &err) == 0);
		CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(out, "items")) == 0);
		cJSON_Delete(out);
		CHECK(kube_client_take_warnings(c) == NULL);
		CHECK(kt_log_count(&srv, "propagationPolicy=Background") == 1);
		CHECK(kube_delete(c, "Job", NULL, "pair", &err) == -1 && err.code == DLK_EXIT_NOTFOUND);
	}
	kube_client_free(c);
	kube_client_free(c2);
	kt_server_stop(&srv);

	/* a watch on a server that is gone gives up with a connection error */
	{
		struct kube_client *dead = client(&err);
		char *u = dead->cfg.server;
		dead->cfg.server = xstrdup("https://127.0.0.1:1");
		free(u);
		dead->o.max_retries = 0;
		struct wstate s = { .stop_after_bookmarks = 1 };
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.resource_version = "1";
		wo.max_reconnects = 2;
		double t0 = dlk_now();
		CHECK(kube_watch(dead, "ConfigMap", NULL, &wo, on_event, &s, &err) == -1);
		CHECK(err.code == DLK_EXIT_CONNECT && dlk_now() - t0 < 2.0);
		CHECK_CONTAINS(err.msg, "cannot reach the API server 'https://127.0.0.1:1'");
		kube_client_free(dead);
	}

	/* 410 as an HTTP status */
	CHECK(kt_server_start(&srv, "watch-gone-http.json") == 0);
	c = client(&err);
	{
		struct kube_response r = KUBE_RESPONSE_INIT;
		struct kube_request req = { .method = "GET", .path = "/_test/compact" };
		CHECK(kube_send(c, &req, &r, &err) == 0 && r.status == 200);
		kube_response_release(&r);
		struct wstate s = { .stop_after_bookmarks = 1 };
		struct kube_watch_opts wo = KUBE_WATCH_OPTS_INIT;
		wo.resource_version = "1";
		CHECK(kube_watch(c, "ConfigMap", NULL, &wo, on_event, &s, &err) == 0);
		CHECK(s.relists == 1 && s.relist_items == 1);
		CHECK(kt_log_count(&srv, "\"code\":410") == 1);
	}
	kube_client_free(c);
	kt_server_stop(&srv);
	return CHECK_DONE();
}
