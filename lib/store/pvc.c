/* pvc://CLAIM[/PATH]: a directory store on a PersistentVolumeClaim.
 *
 * In a pod that mounts the claim (a worker: opts->pvc_root), it is that directory. Elsewhere
 * nothing here can read the volume, so dlk starts a short-lived pod that mounts it and serves it
 * (`dlk data serve`, templates/store-pod.yaml) and talks to it through the API server's pod
 * proxy (/api/v1/namespaces/NS/pods/NAME:PORT/proxy/...): plain HTTP requests that the API
 * server authenticates and authorizes (the user needs create on pods and get/create on
 * pods/proxy) and forwards. The pod is deleted when the store is closed; one left behind stops by
 * itself (idle, then its active deadline). The protocol is lib/store/serve.h's. */
#include "lib/store/store_impl.h"
#include "lib/store/serve.h"
#include "lib/store/wire.h"
#include "lib/data/fetch.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/kube/api.h"
#include "lib/kube/client.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#define PVC_PORT 8080
#define PVC_DEADLINE_S 3600
#define PVC_IDLE "10m"

struct pvc {
	struct kube_client *kube;      /* borrowed */
	char *ns, *pod, *claim, *path;
	char token_header[128];
	char *proxy;                   /* "/api/v1/namespaces/NS/pods/NAME:PORT/proxy" */
	int created;
};

/* ---- requests through the pod proxy ---- */

struct sink_ctx {
	dlk_store_sink_fn sink;
	void *ctx;
	struct dlk_err err;
	int failed;
};

static int on_data(const char *data, size_t len, void *ud)
{
	struct sink_ctx *s = ud;

	if (s->sink(s->ctx, data, len, &s->err)) {
		s->failed = 1;
		return 1;
	}
	return 0;
}

/* One request to the store's pod: path below /v1/ (already escaped), an optional body, an
 * optional extra header. 0 when an answer came (r->status), -1 with err otherwise. */
static int call(struct dlk_store *s, const char *method, const char *path, const void *body, size_t len,
                const char *extra, kube_data_fn *fn, void *ud, struct kube_response *r, struct dlk_err *err)
{
	struct pvc *p = s->impl;
	const char *headers[3] = { p->token_header, extra, NULL };
	char *full = xasprintf("%s/v1/%s", p->proxy, path);
	struct kube_request q = { 0 };
	int rc;

	q.method = method;
	q.path = full;
	q.body = body;
	q.body_len = len;
	q.content_type = body ? "application/octet-stream" : NULL;
	q.accept = "application/json, */*";
	/* every call is safe to repeat: a PUT names its offset, a commit checks what is staged */
	q.retry_safe = 1;
	q.on_data = fn;
	q.ud = ud;
	q.stream = fn != NULL;
	q.headers = headers;
	rc = kube_send(p->kube, &q, r, err);
	free(full);
	return rc;
}

/* An error answer: the store's own {"error"} or the API server's Status (the pod went away, the
 * proxy is forbidden...). */
static int fail_answer(struct dlk_store *s, const char *what, const struct kube_response *r, struct dlk_err *err)
{
	struct pvc *p = s->impl;
	cJSON *j = cJSON_ParseWithLength(r->body.data, r->body.len);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
	int rc;

	if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "Status")) {
		struct kube_what w = { "proxy", "pods/proxy", p->ns, p->pod };
		rc = kube_status_error(p->kube, &w, r->status, r->body.data, err);
		dlk_err_prefix(err, "%s", what);
	} else {
		/* 422: the object there is not a file of bytes (a corrupted store, as a bad hash is) */
		rc = dlk_errf(err, r->status == 404 ? DLK_EXIT_NOTFOUND : r->status == 422 ? DLK_EXIT_CONFIG : DLK_EXIT_FAIL,
		              "%s: %s (HTTP %ld from the store's pod)",
		              what, cJSON_IsString(e) ? e->valuestring : "the store refused the request", r->status);
	}
	cJSON_Delete(j);
	return rc;
}

static int size_of(const struct kube_response *r, unsigned long long *size)
{
	return dlk_store_wire_size(r->body.data, r->body.len, size);
}

/* A key in a URL path: its segments escaped, its '/' kept. */
static char *key_path(const char *key)
{
	struct dlk_buf b = DLK_BUF_INIT;
	const char *slash = strchr(key, '/');
	char *rest = kube_escape(slash ? slash + 1 : key);

	if (slash)
		dlk_buf_add(&b, key, (size_t)(slash - key) + 1);
	dlk_buf_adds(&b, rest);
	free(rest);
	return dlk_buf_detach(&b, NULL);
}

static int pvc_stat(struct dlk_store *s, const char *key, unsigned long long *size, struct dlk_err *err)
{
	char *k = key_path(key), *path = xasprintf("stat/%s", k), *where = dlk_store_where(s, key);
	struct kube_response r = KUBE_RESPONSE_INIT;
	int rc = -1;

	if (call(s, "GET", path, NULL, 0, NULL, NULL, NULL, &r, err))
		goto out;
	if (r.status == 200 && !size_of(&r, size))
		rc = 1;
	else if (r.status == 404 && !strstr(r.body.data, "\"Status\""))
		rc = 0;
	else
		rc = fail_answer(s, where, &r, err);
out:
	kube_response_release(&r);
	free(k);
	free(path);
	free(where);
	return rc;
}

static int pvc_verify(struct dlk_store *s, const char *key, const char *hex, unsigned long long size,
                      struct dlk_err *err)
{
	char *k = key_path(key), *path = xasprintf("stat/%s?hash=1", k), *where = dlk_store_where(s, key);
	struct kube_response r = KUBE_RESPONSE_INIT;
	unsigned long long have = 0;
	char got[65];
	int rc = -1;

	if (call(s, "GET", path, NULL, 0, NULL, NULL, NULL, &r, err))
		goto out;
	if (r.status == 200 && !dlk_store_wire_stat(r.body.data, r.body.len, &have, got))
		rc = have == size && !strcmp(got, hex); /* a pod that did not hash it: "" verifies nothing */
	else if (r.status == 404 && !strstr(r.body.data, "\"Status\""))
		rc = 0;
	else
		rc = fail_answer(s, where, &r, err);
out:
	kube_response_release(&r);
	free(k);
	free(path);
	free(where);
	return rc;
}

static int pvc_get(struct dlk_store *s, const char *key, unsigned long long offset, dlk_store_sink_fn sink,
                   void *sink_ctx, struct dlk_err *err)
{
	char *k = key_path(key), *path = xasprintf("object/%s", k), *where = dlk_store_where(s, key);
	struct kube_response r = KUBE_RESPONSE_INIT;
	struct sink_ctx sc = { sink, sink_ctx, DLK_ERR_INIT, 0 };
	char range[64];
	int rc = -1;

	snprintf(range, sizeof(range), "Range: bytes=%llu-", offset);
	if (call(s, "GET", path, NULL, 0, offset ? range : NULL, on_data, &sc, &r, err))
		goto out;
	if (sc.failed) {
		*err = sc.err;
		goto out;
	}
	if (r.status == 200 || r.status == 206)
		rc = 0;
	else
		rc = fail_answer(s, where, &r, err);
out:
	kube_response_release(&r);
	free(k);
	free(path);
	free(where);
	return rc;
}

static int pvc_list(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err)
{
	char *path = xasprintf("list/%s", prefix), *where = dlk_store_where(s, prefix);
	struct kube_response r = KUBE_RESPONSE_INIT;
	int rc = -1;

	if (call(s, "GET", path, NULL, 0, NULL, NULL, NULL, &r, err))
		goto out;
	if (r.status != 200) {
		fail_answer(s, where, &r, err);
		goto out;
	}
	if (dlk_store_wire_list(r.body.data, r.body.len, where, fn, ctx, err))
		goto out;
	rc = 0;
out:
	kube_response_release(&r);
	free(path);
	free(where);
	return rc;
}

static int read_at(const struct dlk_put_src *src, int fd, unsigned long long off, char *buf, size_t len,
                   struct dlk_err *err)
{
	size_t got = 0;

	if (!src->path) {
		memcpy(buf, (const char *)src->data + off, len);
		return 0;
	}
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path,
			                n < 0 ? strerror(errno) : "it got shorter");
		got += (size_t)n;
	}
	return 0;
}

static int pvc_put(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err)
{
	char *k = key_path(key), *where = dlk_store_where(s, key), *path = NULL, *buf = NULL;
	struct kube_response r = KUBE_RESPONSE_INIT;
	unsigned long long have = 0;
	int fd = -1, rc = -1;

	if (src->path && (fd = dlk_open_regular(src->path, 0)) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, dlk_open_strerror(errno));
		goto out;
	}
	buf = xmalloc(DLK_STORE_CHUNK);
	for (int attempt = 0; attempt < 2; attempt++) {
		/* what an interrupted upload of the same content left staged */
		free(path);
		path = xasprintf("upload/%s?sha256=%s&size=%llu", k, src->sha256, src->size);
		if (call(s, "GET", path, NULL, 0, NULL, NULL, NULL, &r, err))
			goto out;
		if (r.status != 200 || size_of(&r, &have)) {
			fail_answer(s, where, &r, err);
			goto out;
		}
		if (!attempt && src->resumed)
			*src->resumed = have;
		while (have < src->size) {
			size_t n = src->size - have < DLK_STORE_CHUNK ? (size_t)(src->size - have) : DLK_STORE_CHUNK;
			if (read_at(src, fd, have, buf, n, err))
				goto out;
			free(path);
			path = xasprintf("upload/%s?sha256=%s&offset=%llu", k, src->sha256, have);
			if (call(s, "PUT", path, buf, n, NULL, NULL, NULL, &r, err))
				goto out;
			if (r.status == 409 && !size_of(&r, &have))
				continue; /* staged is not where we thought: go on from where it is */
			if (r.status != 200 || size_of(&r, &have)) {
				fail_answer(s, where, &r, err);
				goto out;
			}
			if (src->progress && src->progress(src->progress_ctx, src->what, have, src->size)) {
				dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while uploading '%s'", where);
				goto out;
			}
		}
		free(path);
		path = xasprintf("commit/%s?sha256=%s&size=%llu", k, src->sha256, src->size);
		if (call(s, "POST", path, "", 0, NULL, NULL, NULL, &r, err))
			goto out;
		if (r.status == 200) {
			rc = 0;
			goto out;
		}
		if (r.status != 422 && r.status != 409) {
			fail_answer(s, where, &r, err);
			goto out;
		}
		/* the staged bytes were not the file's (the store dropped them): once more from scratch */
		if (attempt && r.status == 422) {
			/* sent from scratch and still not the bytes push hashed: the file changed since;
			 * the pod hashed what it received and stored nothing */
			char got[65] = "";
			const char *at = strstr(r.body.data ? r.body.data : "", " hash to ");
			if (at && strspn(at + 9, "0123456789abcdef") >= 64)
				snprintf(got, sizeof(got), "%.64s", at + 9);
			dlk_store_put_changed(where, src, got[0] ? got : "something else", src->size, err);
			goto out;
		}
		if (attempt) {
			fail_answer(s, where, &r, err);
			goto out;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	kube_response_release(&r);
	free(buf);
	free(path);
	free(k);
	free(where);
	return rc;
}

/* ---- the pod ---- */

static void random_hex(char *out, size_t n)
{
	unsigned char b[32];
	size_t k = n / 2 < sizeof(b) ? n / 2 : sizeof(b);

	if (getrandom(b, k, 0) != (ssize_t)k) {
		/* no entropy source at all: still distinct per process and time */
		unsigned long long x = (unsigned long long)getpid() ^ (unsigned long long)dlk_now_ms() * 6364136223846793005ull;
		for (size_t i = 0; i < k; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
			b[i] = (unsigned char)(x >> 56);
	}
	for (size_t i = 0; i < k; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Why a pod is not running: its container's waiting or terminated reason, its scheduling
 * condition, or the newest event about it. */
static void pod_reason(struct dlk_store *s, const cJSON *pod, struct dlk_buf *b)
{
	struct pvc *p = s->impl;
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(pod, "status"), *c;
	cJSON *ev = NULL;
	struct dlk_err e = DLK_ERR_INIT;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(st, "containerStatuses"))
	{
		const cJSON *state = cJSON_GetObjectItemCaseSensitive(c, "state");
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(state, "waiting");
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(state, "terminated");
		const cJSON *x = w ? w : t;
		const cJSON *reason = cJSON_GetObjectItemCaseSensitive(x, "reason");
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(x, "message");
		if (cJSON_IsString(reason))
			dlk_buf_addf(b, "%s%s%s", reason->valuestring, cJSON_IsString(msg) && *msg->valuestring ? ": " : "",
			             cJSON_IsString(msg) ? msg->valuestring : "");
	}
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(st, "conditions"))
	{
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
		const cJSON *status = cJSON_GetObjectItemCaseSensitive(c, "status");
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c, "message");
		if (!b->len && cJSON_IsString(type) && !strcmp(type->valuestring, "PodScheduled") && cJSON_IsString(status) &&
		    !strcmp(status->valuestring, "False") && cJSON_IsString(msg))
			dlk_buf_addf(b, "not scheduled: %s", msg->valuestring);
	}
	if (!b->len && kube_events_for(p->kube, p->ns, "Pod", p->pod, &ev, &e) == 0) {
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(ev, "items");
		const cJSON *last = cJSON_GetArrayItem(items, cJSON_GetArraySize(items) - 1);
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(last, "message");
		const cJSON *reason = cJSON_GetObjectItemCaseSensitive(last, "reason");
		if (cJSON_IsString(msg))
			dlk_buf_addf(b, "%s: %s", cJSON_IsString(reason) ? reason->valuestring : "event", msg->valuestring);
	}
	cJSON_Delete(ev);
}

static int start_pod(struct dlk_store *s, struct dlk_err *err)
{
	struct pvc *p = s->impl;
	const struct dlk_store_opts *o = &s->opts;
	struct render_templates *set = NULL;
	static const char *const names[] = { "store-pod.yaml", NULL };
	cJSON *ctx = cJSON_CreateObject(), *objs = NULL, *got = NULL;
	char token[65], suffix[9], port[24];
	int timeout_s = o->pod_timeout_s > 0 ? o->pod_timeout_s : 120, rc = -1;
	double t0 = dlk_now();
	char *s_;

	random_hex(token, 64);
	random_hex(suffix, 8);
	snprintf(p->token_header, sizeof(p->token_header), "%s: %s", DLK_STORE_TOKEN_HEADER, token);
	p->pod = xasprintf("dlk-store-%s", suffix);
	cJSON_AddStringToObject(ctx, "name", p->pod);
	cJSON_AddStringToObject(ctx, "namespace", p->ns);
	cJSON_AddStringToObject(ctx, "image", o->image ? o->image : "dlk:" DLK_VERSION);
	cJSON_AddStringToObject(ctx, "version", DLK_VERSION);
	cJSON_AddStringToObject(ctx, "claim", p->claim);
	s_ = xasprintf("%s/%s", DLK_PVC_ROOT, p->claim);
	cJSON_AddStringToObject(ctx, "mount", s_);
	free(s_);
	s_ = *p->path ? xasprintf("%s/%s/%s", DLK_PVC_ROOT, p->claim, p->path) : xasprintf("%s/%s", DLK_PVC_ROOT, p->claim);
	cJSON_AddStringToObject(ctx, "root", s_);
	free(s_);
	cJSON_AddNumberToObject(ctx, "port", PVC_PORT);
	snprintf(port, sizeof(port), ":%d", PVC_PORT);
	cJSON_AddStringToObject(ctx, "listen", port);
	cJSON_AddStringToObject(ctx, "token", token);
	cJSON_AddNumberToObject(ctx, "deadline_seconds", PVC_DEADLINE_S);
	cJSON_AddStringToObject(ctx, "idle", PVC_IDLE);
	set = render_templates_load(o->templates_dir, o->templates_dir_optional, err);
	if (!set || !(objs = render_objects(set, names, ctx, err)))
		goto out;
	if (cJSON_GetArraySize(objs) != 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "store-pod.yaml rendered %d objects, not one pod", cJSON_GetArraySize(objs));
		goto out;
	}
	if (kube_create(p->kube, cJSON_GetArrayItem(objs, 0), NULL, err)) {
		dlk_err_prefix(err, "cannot start the pod that serves '%s'", s->url);
		goto out;
	}
	p->created = 1;
	snprintf(port, sizeof(port), "%d", PVC_PORT);
	p->proxy = xasprintf("/api/v1/namespaces/%s/pods/%s:%s/proxy", p->ns, p->pod, port);
	/* running, then answering */
	for (;;) {
		const cJSON *phase;
		cJSON_Delete(got);
		got = NULL;
		if (kube_get(p->kube, "Pod", p->ns, p->pod, &got, err))
			goto out;
		phase = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(got, "status"), "phase");
		if (cJSON_IsString(phase) && !strcmp(phase->valuestring, "Running")) {
			struct kube_response r = KUBE_RESPONSE_INIT;
			struct dlk_err e = DLK_ERR_INIT;
			int sent = call(s, "GET", "list/tags/", NULL, 0, NULL, NULL, NULL, &r, &e) == 0;
			if (sent && r.status == 200) {
				kube_response_release(&r);
				break;
			}
			/* 503: the proxy cannot reach the server yet; anything else will not get better */
			if (sent && r.status != 503) {
				fail_answer(s, s->url, &r, err);
				if (r.status == 401 && !strstr(r.body.data, "\"Status\""))
					dlk_errf(err, DLK_EXIT_AUTH, "the pod '%s' that serves '%s' refused dlk's token", p->pod, s->url);
				kube_response_release(&r);
				goto out;
			}
			kube_response_release(&r);
		} else if (cJSON_IsString(phase) && (!strcmp(phase->valuestring, "Failed") ||
		                                      !strcmp(phase->valuestring, "Succeeded"))) {
			struct dlk_buf why = DLK_BUF_INIT;
			pod_reason(s, got, &why);
			dlk_errf(err, DLK_EXIT_FAIL, "the pod '%s' that serves '%s' ended: %s", p->pod, s->url,
			         why.len ? why.data : phase->valuestring);
			dlk_err_hint(err, "its image must contain dlk ('%s' now; set image in the project file)",
			             o->image ? o->image : "dlk:" DLK_VERSION);
			dlk_buf_release(&why);
			goto out;
		}
		if (dlk_now() - t0 > timeout_s) {
			struct dlk_buf why = DLK_BUF_INIT;
			pod_reason(s, got, &why);
			dlk_errf(err, DLK_EXIT_TIMEOUT, "the pod '%s' that serves '%s' did not start within %d s%s%s", p->pod,
			         s->url, timeout_s, why.len ? ": " : "", why.data);
			dlk_err_hint(err, "check that the claim '%s' exists in namespace '%s' and can be mounted", p->claim, p->ns);
			dlk_buf_release(&why);
			goto out;
		}
		kube_cancel_fn *cancel;
		void *cancel_ud;
		kube_client_cancel_hook(p->kube, &cancel, &cancel_ud);
		if (cancel && cancel(cancel_ud)) {
			dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while the store's pod was starting");
			goto out;
		}
		sleep_ms(250);
	}
	rc = 0;
out:
	cJSON_Delete(got);
	cJSON_Delete(objs);
	cJSON_Delete(ctx);
	render_templates_free(set);
	return rc;
}

static void pvc_close(struct dlk_store *s)
{
	struct pvc *p = s->impl;

	if (p->created) {
		/* gone at once: it holds nothing that needs a grace period */
		char *path = xasprintf("/api/v1/namespaces/%s/pods/%s", p->ns, p->pod);
		struct kube_request q = { 0 };
		struct kube_response r = KUBE_RESPONSE_INIT;
		struct dlk_err e = DLK_ERR_INIT;
		q.method = "DELETE";
		q.path = path;
		q.body = "{\"gracePeriodSeconds\": 0}";
		q.body_len = strlen(q.body);
		q.content_type = "application/json";
		q.retry_safe = 1;
		kube_send(p->kube, &q, &r, &e); /* a pod left behind ends by itself anyway */
		kube_response_release(&r);
		free(path);
	}
	free(p->ns);
	free(p->pod);
	free(p->claim);
	free(p->path);
	free(p->proxy);
	free(p);
}

static const struct dlk_store_ops pvc_ops = {
	pvc_stat, pvc_put, pvc_get, pvc_list, NULL, pvc_verify, pvc_close,
};

struct dlk_store *dlk_store_open_pvc(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err)
{
	const char *rest = url + strlen("pvc://"), *slash = strchr(rest, '/');
	size_t cl = slash ? (size_t)(slash - rest) : strlen(rest);
	struct dlk_buf path = DLK_BUF_INIT;
	struct dlk_store *s;
	struct pvc *p;

	if (!cl || cl > 253) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a pvc store is pvc://CLAIM[/PATH]", url);
		return NULL;
	}
	for (size_t i = 0; i < cl; i++)
		if (!((rest[i] >= 'a' && rest[i] <= 'z') || (rest[i] >= '0' && rest[i] <= '9') || rest[i] == '-' ||
		      rest[i] == '.')) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the claim name must be a Kubernetes name", url);
			return NULL;
		}
	for (const char *seg = slash ? slash + 1 : ""; *seg;) {
		size_t n = strcspn(seg, "/");
		if ((n == 1 && seg[0] == '.') || (n == 2 && !strncmp(seg, "..", 2))) {
			dlk_buf_release(&path);
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': '.' and '..' are not allowed in a pvc:// path", url);
			return NULL;
		}
		if (n) {
			dlk_buf_addf(&path, "%s%.*s", path.len ? "/" : "", (int)n, seg);
		}
		seg += n;
		while (*seg == '/')
			seg++;
	}
	if (opts->pvc_root) {
		/* the claim is mounted here (a worker's pod) */
		char *dir = path.len ? xasprintf("%s/%.*s/%s", opts->pvc_root, (int)cl, rest, path.data)
		                     : xasprintf("%s/%.*s", opts->pvc_root, (int)cl, rest);
		dlk_buf_release(&path);
		s = dlk_store_open_dir(url, dir, opts, err);
		free(dir);
		return s;
	}
	if (!opts->kube) {
		dlk_buf_release(&path);
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a pvc:// store is reached through the cluster, and there is none here",
		         url);
		return NULL;
	}
	p = xcalloc(1, sizeof(*p));
	p->kube = opts->kube;
	p->ns = xstrdup(kube_namespace_pick(opts->namespace_, NULL, NULL));
	p->claim = xstrndup(rest, cl);
	p->path = dlk_buf_detach(&path, NULL);
	s = xcalloc(1, sizeof(*s));
	s->ops = &pvc_ops;
	s->url = xstrdup(url);
	s->opts = *opts;
	s->impl = p;
	if (start_pod(s, err)) {
		dlk_store_close(s);
		return NULL;
	}
	return s;
}
