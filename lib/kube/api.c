#include "lib/kube/api.h"
#include "lib/kube/client_impl.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct kube_resource resources[] = {
	{ "ConfigMap", "v1", "configmaps", 1 },
	{ "ServiceAccount", "v1", "serviceaccounts", 1 },
	{ "Service", "v1", "services", 1 },
	{ "PersistentVolumeClaim", "v1", "persistentvolumeclaims", 1 },
	{ "Pod", "v1", "pods", 1 },
	{ "Event", "v1", "events", 1 },
	{ "Namespace", "v1", "namespaces", 0 },
	{ "Role", "rbac.authorization.k8s.io/v1", "roles", 1 },
	{ "RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", 1 },
	{ "Job", "batch/v1", "jobs", 1 },
	{ "CronJob", "batch/v1", "cronjobs", 1 },
	{ "Deployment", "apps/v1", "deployments", 1 },
	{ "ReplicaSet", "apps/v1", "replicasets", 1 },
	{ "HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", 1 },
	{ "PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", 1 },
	{ "HTTPRoute", "gateway.networking.k8s.io/v1", "httproutes", 1 },
};

const struct kube_resource *kube_resource_for(const char *kind, const char *api_version)
{
	for (size_t i = 0; kind && i < DLK_ARRAY_SIZE(resources); i++)
		if (!strcmp(resources[i].kind, kind) && (!api_version || !strcmp(resources[i].api_version, api_version)))
			return &resources[i];
	return NULL;
}

const char *kube_meta(const cJSON *obj, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), field);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

char *kube_path(const struct kube_resource *res, const char *ns, const char *name, const char *sub)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char *e;

	dlk_buf_addf(&b, "%s/%s", strchr(res->api_version, '/') ? "/apis" : "/api", res->api_version);
	if (res->namespaced && ns) {
		e = kube_escape(ns);
		dlk_buf_addf(&b, "/namespaces/%s", e);
		free(e);
	}
	dlk_buf_addf(&b, "/%s", res->plural);
	if (name) {
		e = kube_escape(name);
		dlk_buf_addf(&b, "/%s", e);
		free(e);
	}
	if (sub)
		dlk_buf_addf(&b, "/%s", sub);
	return dlk_buf_detach(&b, NULL);
}

static void query(struct dlk_buf *b, const char *key, const char *value)
{
	char *e;

	if (!value)
		return;
	e = kube_escape(value);
	dlk_buf_addf(b, "%c%s=%s", strchr(b->data, '?') ? '&' : '?', key, e);
	free(e);
}

static const struct kube_resource *resource_or_fail(const char *kind, const char *api_version, struct dlk_err *err)
{
	const struct kube_resource *res = kube_resource_for(kind, api_version);

	if (!res) {
		if (kube_resource_for(kind, NULL))
			dlk_errf(err, DLK_EXIT_CONFIG, "kind '%s' has apiVersion '%s', wanted '%s'", kind, api_version,
				 kube_resource_for(kind, NULL)->api_version);
		else
			dlk_errf(err, DLK_EXIT_CONFIG, "kind '%s' is not one dlk knows how to send", kind ? kind : "");
	}
	return res;
}

static const char *ns_or_default(struct kube_client *c, const char *ns)
{
	return ns && *ns ? ns : c->cfg.namespace;
}

/* The namespace a list or watch of res asks: none for every namespace or a cluster-scoped kind. */
static const char *list_ns(struct kube_client *c, const struct kube_resource *res, const char *ns,
			   const struct kube_list_opts *o)
{
	return res->namespaced && !(o && o->all_namespaces) ? ns_or_default(c, ns) : NULL;
}

/* Sends a buffered request; a 2xx body is parsed into *out (if out), anything else becomes the
 * Status error. */
static int call_status(struct kube_client *c, const struct kube_request *req, const struct kube_what *w, cJSON **out,
		       long *status, struct dlk_err *err)
{
	struct kube_response r = KUBE_RESPONSE_INIT;
	int rc = -1;

	if (out)
		*out = NULL;
	if (kube_send(c, req, &r, err) < 0)
		goto out;
	if (r.stopped) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s %s: cancelled", w->verb, w->resource);
		goto out;
	}
	if (status)
		*status = r.status;
	if (r.status < 200 || r.status > 299) {
		kube_status_error(c, w, r.status, r.body.data, err);
		goto out;
	}
	if (out) {
		*out = cJSON_ParseWithLength(r.body.data, r.body.len);
		if (!cJSON_IsObject(*out)) {
			cJSON_Delete(*out);
			*out = NULL;
			dlk_errf(err, DLK_EXIT_CONNECT, "%s %s: the server's answer is not a JSON object", w->verb, w->resource);
			goto out;
		}
	}
	rc = 0;
out:
	kube_response_release(&r);
	return rc;
}

static int call(struct kube_client *c, const struct kube_request *req, const struct kube_what *w, cJSON **out,
		struct dlk_err *err)
{
	return call_status(c, req, w, out, NULL, err);
}

struct objinfo {
	const struct kube_resource *res;
	const char *name, *ns;
};

static int obj_info(struct kube_client *c, const cJSON *obj, struct objinfo *oi, struct dlk_err *err)
{
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(obj, "apiVersion");
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(md, "namespace");

	if (!cJSON_IsString(kind) || !cJSON_IsString(av))
		return dlk_errf(err, DLK_EXIT_CONFIG, "object has no kind or apiVersion");
	if (!(oi->res = resource_or_fail(kind->valuestring, av->valuestring, err)))
		return -1;
	if (!cJSON_IsString(name) || !name->valuestring[0])
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s has no metadata.name", kind->valuestring);
	oi->name = name->valuestring;
	oi->ns = oi->res->namespaced ? ns_or_default(c, cJSON_IsString(ns) ? ns->valuestring : NULL) : NULL;
	return 0;
}

/* Sends obj as the body of a write: to the object's own path (apply) or to its collection
 * (create), with the query apply needs. */
static int send_object(struct kube_client *c, const cJSON *obj, const struct kube_request *how, const char *verb,
		       cJSON **out, struct dlk_err *err)
{
	struct kube_request req = *how;
	struct dlk_buf p = DLK_BUF_INIT;
	struct objinfo oi = { NULL, NULL, NULL };
	char *path, *body;
	int rc, apply = !strcmp(verb, "apply");

	if (obj_info(c, obj, &oi, err) < 0)
		return -1;
	path = kube_path(oi.res, oi.ns, apply ? oi.name : NULL, NULL);
	dlk_buf_adds(&p, path);
	free(path);
	if (apply) {
		query(&p, "fieldManager", "dlk");
		query(&p, "force", "true");
	}
	body = cJSON_PrintUnformatted(obj);
	req.path = p.data;
	req.body = body;
	req.body_len = strlen(body);
	struct kube_what w = { verb, oi.res->plural, oi.ns, oi.name };
	rc = call(c, &req, &w, out, err);
	free(body);
	dlk_buf_release(&p);
	return rc;
}

int kube_apply(struct kube_client *c, const cJSON *obj, cJSON **out, struct dlk_err *err)
{
	/* server-side apply is idempotent: retried like a GET */
	struct kube_request how = { .method = "PATCH", .content_type = "application/apply-patch+yaml", .retry_safe = 1 };

	return send_object(c, obj, &how, "apply", out, err);
}

int kube_create(struct kube_client *c, const cJSON *obj, cJSON **out, struct dlk_err *err)
{
	struct kube_request how = { .method = "POST", .content_type = "application/json" };

	return send_object(c, obj, &how, "create", out, err);
}

int kube_serves(struct kube_client *c, const char *kind, int *served, struct dlk_err *err)
{
	const struct kube_resource *res = resource_or_fail(kind, NULL, err);
	cJSON *list = NULL;
	const cJSON *r;
	char *path;
	int rc;

	*served = 0;
	if (!res)
		return -1;
	path = strchr(res->api_version, '/') ? xasprintf("/apis/%s", res->api_version) : xasprintf("/api/%s", res->api_version);
	struct kube_request req = { .method = "GET", .path = path, .retry_safe = 1 };
	struct kube_what w = { "discover", res->plural, NULL, NULL };
	rc = call(c, &req, &w, &list, err);
	free(path);
	if (rc < 0) {
		if (err->code != DLK_EXIT_NOTFOUND)
			return -1;
		dlk_err_clear(err); /* the group/version is not served */
		return 0;
	}
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(list, "resources")) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, res->plural))
			*served = 1;
	}
	cJSON_Delete(list);
	return 0;
}

int kube_get(struct kube_client *c, const char *kind, const char *ns, const char *name, cJSON **out,
	     struct dlk_err *err)
{
	const struct kube_resource *res = resource_or_fail(kind, NULL, err);
	char *path;
	int rc;

	if (!res)
		return -1;
	ns = res->namespaced ? ns_or_default(c, ns) : NULL;
	path = kube_path(res, ns, name, NULL);
	struct kube_request req = { .method = "GET", .path = path, .retry_safe = 1 };
	struct kube_what w = { "get", res->plural, ns, name };
	rc = call(c, &req, &w, out, err);
	free(path);
	return rc;
}

static void selectors(struct dlk_buf *p, const struct kube_list_opts *o)
{
	if (!o)
		return;
	if (o->label_selector && *o->label_selector)
		query(p, "labelSelector", o->label_selector);
	if (o->field_selector && *o->field_selector)
		query(p, "fieldSelector", o->field_selector);
}

/* Bounds a list so a runaway server cannot page us forever. */
#define KUBE_LIST_MAX_PAGES 10000

int kube_list(struct kube_client *c, const char *kind, const char *ns, const struct kube_list_opts *opts,
	      cJSON **out, struct dlk_err *err)
{
	const struct kube_resource *res = resource_or_fail(kind, NULL, err);
	cJSON *all = NULL, *items, *page = NULL;
	char *base, *cont = NULL, limit[32];
	int rc = -1;

	*out = NULL;
	if (!res)
		return -1;
	ns = list_ns(c, res, ns, opts);
	base = kube_path(res, ns, NULL, NULL);
	all = cJSON_CreateObject();
	items = cJSON_AddArrayToObject(all, "items");
	for (int pages = 0, restarted = 0;; pages++) {
		struct dlk_buf p = DLK_BUF_INIT;
		long status = 0;
		dlk_buf_adds(&p, base);
		selectors(&p, opts);
		if (opts && opts->limit > 0) {
			snprintf(limit, sizeof(limit), "%ld", opts->limit);
			query(&p, "limit", limit);
		}
		query(&p, "continue", cont);
		struct kube_request req = { .method = "GET", .path = p.data, .retry_safe = 1 };
		struct kube_what w = { "list", res->plural, ns, NULL };
		int crc = call_status(c, &req, &w, &page, &status, err);
		dlk_buf_release(&p);
		if (crc < 0 && status == 410 && cont && !restarted) {
			/* The continue token expired (the server compacted): start over, once, from a
			 * fresh list, as kubectl does; the items so far may be stale. */
			restarted = 1;
			free(cont);
			cont = NULL;
			cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(all, "items"));
			items = cJSON_AddArrayToObject(all, "items");
			dlk_err_clear(err);
			continue;
		}
		if (crc < 0)
			goto out;
		cJSON *pi = cJSON_DetachItemFromObjectCaseSensitive(page, "items"), *it;
		while (pi && (it = cJSON_DetachItemViaPointer(pi, pi->child)))
			cJSON_AddItemToArray(items, it);
		cJSON_Delete(pi);
		cJSON *md = cJSON_GetObjectItemCaseSensitive(page, "metadata");
		cJSON *ct = cJSON_GetObjectItemCaseSensitive(md, "continue");
		if (!cJSON_GetObjectItemCaseSensitive(all, "kind")) {
			cJSON *k = cJSON_GetObjectItemCaseSensitive(page, "kind");
			cJSON *av = cJSON_GetObjectItemCaseSensitive(page, "apiVersion");
			cJSON_AddStringToObject(all, "kind", cJSON_IsString(k) ? k->valuestring : "List");
			cJSON_AddStringToObject(all, "apiVersion", cJSON_IsString(av) ? av->valuestring : "v1");
		}
		free(cont);
		cont = NULL;
		if (cJSON_IsString(ct) && ct->valuestring[0]) {
			if (pages >= KUBE_LIST_MAX_PAGES) {
				dlk_errf(err, DLK_EXIT_CONNECT, "list %s: more than %d pages", res->plural, KUBE_LIST_MAX_PAGES);
				goto out;
			}
			cont = xstrdup(ct->valuestring);
			cJSON_Delete(page);
			page = NULL;
			continue;
		}
		/* The last page's resourceVersion is the list's: watch from there. */
		cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
		cJSON *nmd = cJSON_AddObjectToObject(all, "metadata");
		cJSON_AddStringToObject(nmd, "resourceVersion", cJSON_IsString(rv) ? rv->valuestring : "");
		break;
	}
	*out = all;
	all = NULL;
	rc = 0;
out:
	cJSON_Delete(page);
	cJSON_Delete(all);
	free(cont);
	free(base);
	return rc;
}

/* ---- lines ---- */

int kube_lines_feed(struct kube_lines *ls, const char *data, size_t len)
{
	if (!ls->max)
		ls->max = 1u << 20;
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;
		if (ls->pending.len + take > ls->max) {
			/* cut an over-long line: deliver max bytes, keep the rest for the next piece */
			size_t room = ls->max - ls->pending.len;
			dlk_buf_add(&ls->pending, data, room);
			int rc = ls->fn(ls->pending.data, ls->pending.len, ls->ud);
			dlk_buf_reset(&ls->pending);
			if (rc)
				return rc;
			data += room;
			len -= room;
			continue;
		}
		if (!nl) {
			dlk_buf_add(&ls->pending, data, len);
			return 0;
		}
		/* gather the line in pending (also when whole in this chunk) so the callback always
		 * gets a NUL-terminated string */
		dlk_buf_add(&ls->pending, data, take);
		size_t n = ls->pending.len;
		if (n && ls->pending.data[n - 1] == '\r')
			ls->pending.data[--n] = '\0';
		int rc = ls->fn(ls->pending.data, n, ls->ud);
		dlk_buf_reset(&ls->pending);
		if (rc)
			return rc;
		data += take + 1;
		len -= take + 1;
	}
	return 0;
}

int kube_lines_finish(struct kube_lines *ls)
{
	int rc = 0;

	if (ls->pending.len)
		rc = ls->fn(ls->pending.data, ls->pending.len, ls->ud);
	dlk_buf_reset(&ls->pending);
	return rc;
}

void kube_lines_release(struct kube_lines *ls)
{
	dlk_buf_release(&ls->pending);
}

/* ---- watch ---- */

struct watch_state {
	struct kube_client *c;
	kube_watch_fn *fn;
	void *ud;
	struct dlk_err *err;
	char *rv;
	int gone, stop, fail, events;
};

cJSON *kube_watch_event_parse(const char *line, size_t len, const char **type, const cJSON **obj,
			      struct dlk_err *err)
{
	cJSON *ev = cJSON_ParseWithLength(line, len);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(ev, "type");
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(ev, "object");

	if (!cJSON_IsString(t) || !cJSON_IsObject(o)) {
		cJSON_Delete(ev);
		dlk_errf(err, DLK_EXIT_CONNECT, "watch: the server sent a line that is not a watch event");
		return NULL;
	}
	*type = t->valuestring;
	*obj = o;
	return ev;
}

static int watch_line(const char *line, size_t len, void *ud)
{
	struct watch_state *s = ud;
	const char *type;
	const cJSON *obj;
	cJSON *ev;
	int rc = 0;

	if (!len)
		return 0; /* keep-alive newline */
	ev = kube_watch_event_parse(line, len, &type, &obj, s->err);
	if (!ev) {
		s->fail = 1;
		return 1;
	}
	if (!strcmp(type, "ERROR")) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
		if (cJSON_IsNumber(code) && code->valueint == 410) {
			s->gone = 1;
		} else {
			char *body = cJSON_PrintUnformatted(obj);
			kube_status_error(s->c, &(struct kube_what){ "watch", NULL, NULL, NULL },
					  cJSON_IsNumber(code) ? code->valueint : 500, body, s->err);
			free(body);
			s->fail = 1;
		}
		rc = 1;
		goto out;
	}
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");
	if (cJSON_IsString(rv) && rv->valuestring[0]) {
		free(s->rv);
		s->rv = xstrdup(rv->valuestring);
	}
	s->events++;
	int r = s->fn(type, obj, s->ud, s->err);
	if (r > 0)
		s->stop = 1, rc = 1;
	else if (r < 0)
		s->fail = 1, rc = 1;
out:
	cJSON_Delete(ev);
	return rc;
}

static int watch_data(const char *data, size_t len, void *ud)
{
	struct kube_lines *ls = ud;
	return kube_lines_feed(ls, data, len);
}

static int relist(struct kube_client *c, const char *kind, const char *ns, const struct kube_watch_opts *o,
		  struct watch_state *s, struct dlk_err *err)
{
	cJSON *list = NULL;
	struct kube_list_opts lo = o->list;

	lo.limit = 0;
	if (kube_list(c, kind, ns, &lo, &list, err) < 0)
		return -1;
	cJSON *rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(list, "metadata"), "resourceVersion");
	free(s->rv);
	s->rv = xstrdup(cJSON_IsString(rv) ? rv->valuestring : "");
	int r = s->fn("RELIST", list, s->ud, err);
	cJSON_Delete(list);
	if (r > 0)
		s->stop = 1;
	return r < 0 ? -1 : 0;
}

int kube_watch(struct kube_client *c, const char *kind, const char *ns, const struct kube_watch_opts *opts,
	       kube_watch_fn *fn, void *ud, struct dlk_err *err)
{
	struct kube_watch_opts none = KUBE_WATCH_OPTS_INIT;
	const struct kube_resource *res = resource_or_fail(kind, NULL, err);
	struct watch_state s = { c, fn, ud, err, NULL, 0, 0, 0, 0 };
	char *base = NULL;
	int rc = -1, failures = 0, max;
	long backoff = c->o.backoff_ms;

	if (!res)
		return -1;
	if (!opts)
		opts = &none;
	max = opts->max_reconnects > 0 ? opts->max_reconnects : 5;
	ns = list_ns(c, res, ns, &opts->list);
	base = kube_path(res, ns, NULL, NULL);
	if (opts->resource_version && *opts->resource_version)
		s.rv = xstrdup(opts->resource_version);
	else if (relist(c, kind, ns, opts, &s, err) < 0)
		goto out;
	while (!s.stop) {
		struct dlk_buf p = DLK_BUF_INIT;
		struct kube_lines ls = KUBE_LINES_INIT(watch_line, &s);
		struct kube_response r = KUBE_RESPONSE_INIT;
		char tmo[32];
		struct dlk_err serr = DLK_ERR_INIT;

		ls.max = 16u << 20;
		dlk_buf_adds(&p, base);
		query(&p, "watch", "1");
		query(&p, "allowWatchBookmarks", "true");
		query(&p, "resourceVersion", s.rv);
		selectors(&p, &opts->list);
		if (opts->timeout_s > 0) {
			snprintf(tmo, sizeof(tmo), "%d", opts->timeout_s);
			query(&p, "timeoutSeconds", tmo);
		}
		struct kube_request req = { .method = "GET", .path = p.data, .retry_safe = 1, .on_data = watch_data,
					    .ud = &ls, .stream = 1 };
		int events_before = s.events;
		s.gone = 0;
		int src = kube_send(c, &req, &r, &serr);
		/* A clean end may leave a last event without its newline. */
		if (src == 0 && !r.stopped && r.status == 200 && !s.stop && !s.fail && !s.gone)
			kube_lines_finish(&ls);
		kube_lines_release(&ls);
		dlk_buf_release(&p);
		long status = r.status;
		int stopped = r.stopped;
		if (src == 0 && !stopped && status != 200 && status != 410 && !s.fail) {
			struct kube_what w = { "watch", res->plural, ns, NULL };
			kube_status_error(c, &w, status, r.body.data, err);
			kube_response_release(&r);
			goto out;
		}
		kube_response_release(&r);
		if (s.fail)
			goto out;
		if (s.stop)
			break;
		if (stopped && !s.gone) {
			break; /* cancelled */
		}
		if (s.gone || status == 410) {
			if (c->o.log && c->o.verbosity > 0)
				c->o.log(c->o.log_ud, "watch: resourceVersion too old (410 Gone): relisting");
			if (relist(c, kind, ns, opts, &s, err) < 0)
				goto out;
			failures = 0;
			continue;
		}
		/* Streams that brought events, or ended cleanly (the server's timeoutSeconds), resume
		 * at once; only connections that fail without an event count towards giving up. A
		 * clean end without events still waits a moment, so a server that hangs up at once
		 * is not hammered. */
		long wait_ms = 0;
		if (s.events > events_before) {
			failures = 0;
			backoff = c->o.backoff_ms;
		} else if (src == 0) {
			wait_ms = c->o.backoff_ms;
		} else if (++failures > max) {
			*err = serr;
			goto out;
		} else {
			wait_ms = backoff;
			backoff = backoff * 2 > c->o.max_wait_ms ? c->o.max_wait_ms : backoff * 2;
		}
		if (c->o.log && c->o.verbosity > 0) {
			char line[256];
			snprintf(line, sizeof(line), "watch: stream ended, resuming from resourceVersion %s", s.rv ? s.rv : "");
			c->o.log(c->o.log_ud, line);
		}
		while (wait_ms > 0 && !(c->o.cancel && c->o.cancel(c->o.cancel_ud))) {
			long step = wait_ms > 50 ? 50 : wait_ms;
			struct timespec ts = { 0, step * 1000000L };
			nanosleep(&ts, NULL);
			wait_ms -= step;
		}
		if (c->o.cancel && c->o.cancel(c->o.cancel_ud))
			break;
	}
	rc = 0;
out:
	free(s.rv);
	free(base);
	return rc;
}

int kube_delete(struct kube_client *c, const char *kind, const char *ns, const char *name, struct dlk_err *err)
{
	const struct kube_resource *res = resource_or_fail(kind, NULL, err);
	struct dlk_buf p = DLK_BUF_INIT;
	char *path;
	int rc;

	if (!res)
		return -1;
	ns = res->namespaced ? ns_or_default(c, ns) : NULL;
	path = kube_path(res, ns, name, NULL);
	dlk_buf_adds(&p, path);
	free(path);
	/* A Job deleted without a policy orphans its pods (the server warns): never do that. */
	query(&p, "propagationPolicy", "Background");
	struct kube_request req = { .method = "DELETE", .path = p.data };
	struct kube_what w = { "delete", res->plural, ns, name };
	rc = call(c, &req, &w, NULL, err);
	dlk_buf_release(&p);
	return rc;
}

int kube_evict(struct kube_client *c, const char *ns, const char *pod, struct dlk_err *err)
{
	const struct kube_resource *res = kube_resource_for("Pod", "v1");
	cJSON *ev = cJSON_CreateObject(), *md;
	char *path, *body;
	int rc;

	ns = ns_or_default(c, ns);
	cJSON_AddStringToObject(ev, "apiVersion", "policy/v1");
	cJSON_AddStringToObject(ev, "kind", "Eviction");
	md = cJSON_AddObjectToObject(ev, "metadata");
	cJSON_AddStringToObject(md, "name", pod);
	cJSON_AddStringToObject(md, "namespace", ns);
	body = cJSON_PrintUnformatted(ev);
	path = kube_path(res, ns, pod, "eviction");
	struct kube_request req = { .method = "POST", .path = path, .content_type = "application/json", .body = body,
				    .body_len = strlen(body) };
	struct kube_what w = { "create", "pods/eviction", ns, pod }; /* what RBAC names it */
	rc = call(c, &req, &w, NULL, err);
	free(body);
	free(path);
	cJSON_Delete(ev);
	return rc;
}

struct log_state {
	struct kube_lines ls;
};

static int log_data(const char *data, size_t len, void *ud)
{
	struct log_state *s = ud;
	return kube_lines_feed(&s->ls, data, len);
}

int kube_logs(struct kube_client *c, const char *ns, const char *pod, const struct kube_log_opts *opts,
	      kube_line_fn *fn, void *ud, struct dlk_err *err)
{
	struct kube_log_opts none = KUBE_LOG_OPTS_INIT;
	const struct kube_resource *res = kube_resource_for("Pod", "v1");
	struct dlk_buf p = DLK_BUF_INIT;
	struct kube_response r = KUBE_RESPONSE_INIT;
	struct log_state s = { KUBE_LINES_INIT(fn, ud) };
	char num[32], *path;
	int rc = -1;

	if (!opts)
		opts = &none;
	ns = ns_or_default(c, ns);
	path = kube_path(res, ns, pod, "log");
	dlk_buf_adds(&p, path);
	free(path);
	if (opts->container)
		query(&p, "container", opts->container);
	if (opts->follow)
		query(&p, "follow", "true");
	if (opts->timestamps)
		query(&p, "timestamps", "true");
	if (opts->previous)
		query(&p, "previous", "true");
	if (opts->since_seconds > 0) {
		snprintf(num, sizeof(num), "%ld", opts->since_seconds);
		query(&p, "sinceSeconds", num);
	}
	if (opts->tail_lines >= 0) {
		snprintf(num, sizeof(num), "%ld", opts->tail_lines);
		query(&p, "tailLines", num);
	}
	struct kube_request req = { .method = "GET", .path = p.data, .accept = "*/*", .retry_safe = 1,
				    .on_data = log_data, .ud = &s, .stream = opts->follow };
	struct kube_what w = { "get", "pods/log", ns, pod };
	int src = kube_send(c, &req, &r, err);
	if (src < 0) {
		/* keep the unterminated tail the server did send: it is what the pod printed */
		kube_lines_finish(&s.ls);
		goto out;
	}
	if (r.stopped) {
		rc = 0;
		goto out;
	}
	if (r.status < 200 || r.status > 299) {
		kube_status_error(c, &w, r.status, r.body.data, err);
		goto out;
	}
	kube_lines_finish(&s.ls);
	rc = 0;
out:
	kube_lines_release(&s.ls);
	kube_response_release(&r);
	dlk_buf_release(&p);
	return rc;
}

int kube_events_for(struct kube_client *c, const char *ns, const char *kind, const char *name, cJSON **out,
		    struct dlk_err *err)
{
	struct kube_list_opts o = KUBE_LIST_OPTS_INIT;
	char *fs = xasprintf("involvedObject.name=%s,involvedObject.kind=%s", name, kind);
	int rc;

	o.field_selector = fs;
	rc = kube_list(c, "Event", ns, &o, out, err);
	free(fs);
	return rc;
}

int kube_merge_patch(struct kube_client *c, const char *kind, const char *ns, const char *name, const cJSON *patch,
		     cJSON **out, long *status, struct dlk_err *err)
{
	const struct kube_resource *res = resource_or_fail(kind, NULL, err);
	char *path, *body;
	int rc;

	if (status)
		*status = 0;
	if (!res)
		return -1;
	ns = res->namespaced ? ns_or_default(c, ns) : NULL;
	body = cJSON_PrintUnformatted(patch);
	path = kube_path(res, ns, name, NULL);
	struct kube_request req = { .method = "PATCH", .path = path, .content_type = "application/merge-patch+json",
				    .body = body, .body_len = strlen(body), .retry_safe = 1 };
	struct kube_what w = { "patch", res->plural, ns, name };
	rc = call_status(c, &req, &w, out, status, err);
	free(body);
	free(path);
	return rc;
}

int kube_annotate_job(struct kube_client *c, const char *ns, const char *job, const char *const *keys,
		      const char *const *values, size_t n, struct dlk_err *err)
{
	const struct kube_resource *res = kube_resource_for("Job", "batch/v1");
	cJSON *patch = cJSON_CreateObject();
	cJSON *ann = cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "metadata"), "annotations");
	char *path, *body;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (values[i])
			cJSON_AddStringToObject(ann, keys[i], values[i]);
		else
			cJSON_AddNullToObject(ann, keys[i]);
	}
	body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	ns = ns_or_default(c, ns);
	path = kube_path(res, ns, job, NULL);
	/* Setting the same annotations twice gives the same object: safe to retry. */
	struct kube_request req = { .method = "PATCH", .path = path, .content_type = "application/merge-patch+json",
				    .body = body, .body_len = strlen(body), .retry_safe = 1 };
	struct kube_what w = { "patch", "jobs", ns, job };
	rc = call(c, &req, &w, NULL, err);
	free(body);
	free(path);
	return rc;
}
