#include "lib/kube/client_impl.h"
#include "lib/util/clock.h"
#include "lib/util/curl.h"
#include "lib/util/mem.h"

#include <cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <time.h>

#define KUBE_MAX_WARNINGS 64

char *kube_escape(const char *s)
{
	struct dlk_buf b = DLK_BUF_INIT;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~')
			dlk_buf_addc(&b, (char)ch);
		else
			dlk_buf_addf(&b, "%%%02X", ch);
	}
	return dlk_buf_detach(&b, NULL);
}

struct kube_client *kube_client_new(struct kube_config *cfg, const struct kube_client_opts *o, struct dlk_err *err)
{
	static const struct kube_client_opts defaults = KUBE_CLIENT_OPTS_INIT;
	struct kube_client *c;

	dlk_curl_global_init();
	if (!cfg->server)
		return dlk_errf(err, DLK_EXIT_CONFIG, "no API server in the configuration"), NULL;
	c = xcalloc(1, sizeof(*c));
	c->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	c->curl = curl_easy_init();
	if (!c->curl) {
		kube_client_free(c);
		return dlk_errf(err, DLK_EXIT_CONNECT, "cannot start libcurl"), NULL;
	}
	c->o = o ? *o : defaults;
	return c;
}

struct kube_client *kube_client_open(const struct kube_open_opts *o, struct dlk_err *err)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_client *c = NULL;
	int rc = o->in_cluster ? kube_config_in_cluster(o->config.sa_dir, o->config.namespace, &cfg, err)
	                       : kube_config_load(&o->config, &cfg, err);

	if (rc == 0)
		c = kube_client_new(&cfg, &o->client, err);
	kube_config_release(&cfg);
	return c;
}

const char *kube_client_namespace(const struct kube_client *c)
{
	return c->cfg.namespace;
}

const char *kube_client_config_warning(const struct kube_client *c)
{
	return c->cfg.warning;
}

void kube_client_cancel_hook(const struct kube_client *c, kube_cancel_fn **fn, void **ud)
{
	*fn = c->o.cancel;
	*ud = c->o.cancel_ud;
}

void kube_client_set_cancel(struct kube_client *c, kube_cancel_fn *fn, void *ud)
{
	c->o.cancel = fn;
	c->o.cancel_ud = ud;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	kube_config_release(&c->cfg);
	for (size_t i = 0; i < c->nwarnings; i++)
		free(c->warnings[i]);
	free(c->warnings);
	kube_exec_cred_release(&c->cred);
	if (c->file_token)
		memset(c->file_token, 0, strlen(c->file_token));
	free(c->file_token);
	free(c);
}

void kube_response_release(struct kube_response *r)
{
	dlk_buf_release(&r->body);
	r->status = 0;
	r->stopped = r->delivered = 0;
}

char **kube_client_take_warnings(struct kube_client *c)
{
	char **w = c->warnings;

	c->warnings = NULL;
	c->nwarnings = 0;
	return w;
}

static void vlog(struct kube_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vlog(struct kube_client *c, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (!c->o.log || c->o.verbosity <= 0)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	c->o.log(c->o.log_ud, line);
}

static const char *status_text(long s)
{
	switch (s) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}

/* ---- credentials ---- */

static int token_file_fresh(struct kube_client *c, struct dlk_err *err)
{
	struct stat st;
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[512];

	if (stat(c->cfg.token_file, &st) < 0) {
		if (c->file_token)
			return 0; /* mid-rotation: keep the token we have */
		return dlk_errf(err, DLK_EXIT_AUTH, "cannot read token file '%s': %s", c->cfg.token_file, strerror(errno));
	}
	long long stamp[3] = { (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec, (long long)st.st_ino,
			       (long long)st.st_size };
	if (c->file_token && !memcmp(stamp, c->file_token_stamp, sizeof(stamp)))
		return 0;
	if (dlk_buf_read_file(&b, c->cfg.token_file, KUBE_TOKEN_MAX_BYTES, msg, sizeof(msg)) < 0) {
		dlk_buf_release(&b);
		if (c->file_token)
			return 0;
		return dlk_errf(err, DLK_EXIT_AUTH, "%s", msg);
	}
	while (b.len && isspace((unsigned char)b.data[b.len - 1]))
		b.data[--b.len] = '\0';
	if (!b.len) {
		dlk_buf_release(&b);
		if (c->file_token)
			return 0;
		return dlk_errf(err, DLK_EXIT_AUTH, "token file '%s' is empty", c->cfg.token_file);
	}
	if (c->file_token)
		memset(c->file_token, 0, strlen(c->file_token));
	free(c->file_token);
	c->file_token = dlk_buf_detach(&b, NULL);
	memcpy(c->file_token_stamp, stamp, sizeof(stamp));
	return 0;
}

static int exec_fresh(struct kube_client *c, int force, struct dlk_err *err)
{
	if (c->have_cred && !force && (!c->cred.expiry || time(NULL) < c->cred.expiry))
		return 0;
	kube_exec_cred_release(&c->cred);
	c->have_cred = 0;
	c->exec_runs++;
	vlog(c, "running exec credential plugin '%s'", c->cfg.exec->command);
	if (kube_exec_run(&c->cfg, &c->cred, err) < 0)
		return -1;
	c->have_cred = 1;
	return 0;
}

/* ---- one transfer ---- */

struct xfer {
	struct kube_client *c;
	const struct kube_request *req;
	struct kube_response *r;
	long status;          /* from the status line of the final response */
	long retry_after_s;   /* -1 when absent */
	int too_big;
};

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	char line[4096];

	if (len >= sizeof(line))
		return len;
	memcpy(line, data, len);
	line[len] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (!strncmp(line, "HTTP/", 5)) {
		const char *sp = strchr(line, ' ');
		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		x->retry_after_s = -1;
	} else if (!strncasecmp(line, "Retry-After:", 12)) {
		char *end;
		long v = strtol(line + 12, &end, 10);
		/* a day at most: a server's huge value must not overflow the wait in milliseconds
		 * (it is capped by max_wait_ms later anyway) */
		if (end != line + 12 && v >= 0)
			x->retry_after_s = v > 86400 ? 86400 : v;
	} else if (!strncasecmp(line, "Warning:", 8)) {
		/* Warning: 299 - "text": keep the text between the quotes. */
		char *q = strchr(line + 8, '"'), *e = q ? strrchr(q + 1, '"') : NULL;
		char *text = q && e ? xstrndup(q + 1, (size_t)(e - q - 1)) : xstrdup(line + 8 + strspn(line + 8, " "));
		struct kube_client *c = x->c;
		int dup = 0;
		for (size_t i = 0; i < c->nwarnings; i++)
			dup |= !strcmp(c->warnings[i], text);
		if (dup || c->nwarnings >= KUBE_MAX_WARNINGS) {
			free(text);
		} else {
			c->warnings = xrealloc(c->warnings, (c->nwarnings + 2) * sizeof(*c->warnings));
			c->warnings[c->nwarnings++] = text;
			c->warnings[c->nwarnings] = NULL;
		}
	}
	return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;

	if (x->req->on_data && x->status >= 200 && x->status < 300) {
		x->r->delivered = 1;
		if (x->req->on_data(data, len, x->req->ud)) {
			x->r->stopped = 1;
			return 0; /* makes libcurl stop with CURLE_WRITE_ERROR */
		}
		return len;
	}
	if (x->r->body.len + len > KUBE_BODY_MAX) {
		x->too_big = 1;
		return 0;
	}
	dlk_buf_add(&x->r->body, data, len);
	return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct xfer *x = ud;

	(void)dt, (void)dn, (void)ut, (void)un;
	if (x->c->o.cancel && x->c->o.cancel(x->c->o.cancel_ud)) {
		x->r->stopped = 1;
		return 1;
	}
	return 0;
}

/* Sleeps ms, waking to poll the cancel hook; returns nonzero when cancelled. */
static int nap(struct kube_client *c, long ms)
{
	while (ms > 0) {
		if (c->o.cancel && c->o.cancel(c->o.cancel_ud))
			return 1;
		long step = ms > 50 ? 50 : ms;
		struct timespec ts = { step / 1000, (step % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		ms -= step;
	}
	return c->o.cancel && c->o.cancel(c->o.cancel_ud);
}

static int perform(struct kube_client *c, const struct kube_request *req, struct kube_response *r, long *retry_after,
		   CURLcode *cc, char *cerr, struct dlk_err *err)
{
	CURL *h = c->curl;
	struct curl_slist *hdrs = NULL;
	struct xfer x = { c, req, r, 0, -1, 0 };
	char *url = NULL, *connect_to = NULL, *hv = NULL;
	struct curl_slist *conn = NULL;
	const char *token = NULL;
	int rc = -1;

	if (c->cfg.exec && exec_fresh(c, 0, err) < 0)
		return -1;
	if (c->cfg.token_file && !c->cfg.token && token_file_fresh(c, err) < 0)
		return -1;
	token = c->have_cred && c->cred.token ? c->cred.token : c->cfg.token ? c->cfg.token : c->file_token;
	/* Header values come from files and plugins: a line break would smuggle in a header. */
	if (token && strpbrk(token, "\r\n"))
		return dlk_errf(err, DLK_EXIT_AUTH, "the token of user '%s' contains a line break", c->cfg.user_name);
	if (c->cfg.as_user && strpbrk(c->cfg.as_user, "\r\n"))
		return dlk_errf(err, DLK_EXIT_CONFIG, "user '%s': 'as' contains a line break", c->cfg.user_name);
	for (char **g = c->cfg.as_groups; g && *g; g++)
		if (strpbrk(*g, "\r\n"))
			return dlk_errf(err, DLK_EXIT_CONFIG, "user '%s': 'as-groups' contains a line break", c->cfg.user_name);

	curl_easy_reset(h);
	url = xasprintf("%s%s", c->cfg.server, req->path);
	if (c->cfg.tls_server_name) {
		/* Verify (and send SNI) for tls-server-name while connecting to the real host: ask
		 * for the name, and tell libcurl where that name really lives. */
		CURLU *u = curl_url();
		char *host = NULL, *port = NULL;
		if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
		    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
		    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
			connect_to = xasprintf("%s:%s:%s:%s", c->cfg.tls_server_name, port, host, port);
			curl_url_set(u, CURLUPART_HOST, c->cfg.tls_server_name, 0);
			char *nu = NULL;
			if (curl_url_get(u, CURLUPART_URL, &nu, 0) == CURLUE_OK) {
				free(url);
				url = xstrdup(nu);
				curl_free(nu);
			}
			conn = curl_slist_append(NULL, connect_to);
			curl_easy_setopt(h, CURLOPT_CONNECT_TO, conn);
		}
		curl_free(host);
		curl_free(port);
		curl_url_cleanup(u);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	if (!strcmp(req->method, "GET"))
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	if (req->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	}
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
	if (!req->stream)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->o.timeout_ms);
	curl_easy_setopt(h, CURLOPT_USERAGENT, DLK_USER_AGENT);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* A watch or a followed log may stay quiet for long: keepalive probes notice a dead peer
	 * (a node gone, a NAT entry dropped) where no timeout may. */
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 15L);
	if (c->cfg.proxy_url)
		curl_easy_setopt(h, CURLOPT_PROXY, c->cfg.proxy_url);
	if (c->cfg.ca.data) {
		struct curl_blob b = { c->cfg.ca.data, c->cfg.ca.len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	}
	if (c->cfg.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	const struct kube_blob *cert = c->have_cred && c->cred.cert.data ? &c->cred.cert : &c->cfg.client_cert;
	const struct kube_blob *key = c->have_cred && c->cred.key.data ? &c->cred.key : &c->cfg.client_key;
	if (cert->data && key->data) {
		struct curl_blob cb = { cert->data, cert->len, CURL_BLOB_COPY };
		struct curl_blob kb = { key->data, key->len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (token) {
		hv = xasprintf("Authorization: Bearer %s", token);
		hdrs = curl_slist_append(hdrs, hv);
		memset(hv, 0, strlen(hv));
		free(hv);
	} else if (c->cfg.username) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, c->cfg.username);
		curl_easy_setopt(h, CURLOPT_PASSWORD, c->cfg.password);
	}
	if (c->cfg.as_user) {
		hv = xasprintf("Impersonate-User: %s", c->cfg.as_user);
		hdrs = curl_slist_append(hdrs, hv);
		free(hv);
		for (char **g = c->cfg.as_groups; g && *g; g++) {
			hv = xasprintf("Impersonate-Group: %s", *g);
			hdrs = curl_slist_append(hdrs, hv);
			free(hv);
		}
	}
	hv = xasprintf("Accept: %s", req->accept ? req->accept : "application/json");
	hdrs = curl_slist_append(hdrs, hv);
	free(hv);
	if (req->content_type) {
		hv = xasprintf("Content-Type: %s", req->content_type);
		hdrs = curl_slist_append(hdrs, hv);
		free(hv);
	}
	hdrs = curl_slist_append(hdrs, "Expect:");
	for (size_t i = 0; req->headers && req->headers[i]; i++)
		hdrs = curl_slist_append(hdrs, req->headers[i]);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);

	if (c->o.verbosity >= 8) {
		for (struct curl_slist *s = hdrs; s; s = s->next) {
			int extra = 0;
			for (size_t i = 0; req->headers && req->headers[i]; i++)
				extra |= s->data == req->headers[i] || !strcmp(s->data, req->headers[i]);
			if (!strncasecmp(s->data, "Authorization:", 14))
				vlog(c, "Request Header: \"Authorization: Bearer <masked>\"");
			else if (extra)
				vlog(c, "Request Header: \"%.*s: <masked>\"", (int)strcspn(s->data, ":"), s->data);
			else if (strcmp(s->data, "Expect:"))
				vlog(c, "Request Header: \"%s\"", s->data);
		}
		if (c->cfg.username)
			vlog(c, "Request Header: \"Authorization: Basic <masked>\"");
	}

	long long t0 = dlk_now_ms();
	dlk_buf_reset(&r->body);
	*cc = curl_easy_perform(h);
	long ms = (long)(dlk_now_ms() - t0);
	r->status = x.status;
	*retry_after = x.retry_after_s;
	if (x.too_big) {
		dlk_errf(err, DLK_EXIT_CONNECT, "%s %s: response larger than %u MiB", req->method, url, KUBE_BODY_MAX >> 20);
		goto out;
	}
	if (*cc == CURLE_OK || r->stopped)
		vlog(c, "%s %s %ld %s in %ld milliseconds", req->method, url, r->status, status_text(r->status), ms);
	else
		vlog(c, "%s %s failed in %ld milliseconds: %s", req->method, url, ms, cerr[0] ? cerr : curl_easy_strerror(*cc));
	rc = 0;
out:
	curl_slist_free_all(hdrs);
	curl_slist_free_all(conn);
	/* the options point at these; the next request resets the handle before it reads them */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_CONNECT_TO, NULL);
	free(connect_to);
	free(url);
	return rc;
}

int kube_send(struct kube_client *c, const struct kube_request *req, struct kube_response *r, struct dlk_err *err)
{
	int refreshed = 0;
	long backoff = c->o.backoff_ms;

	for (int attempt = 0;; attempt++) {
		char cerr[CURL_ERROR_SIZE] = "";
		CURLcode cc = CURLE_OK;
		long retry_after = -1, wait;

		r->stopped = r->delivered = 0;
		r->status = 0;
		if (perform(c, req, r, &retry_after, &cc, cerr, err) < 0)
			return -1;
		if (r->stopped)
			return 0;
		if (cc != CURLE_OK) {
			if (req->retry_safe && !r->delivered && attempt < c->o.max_retries) {
				wait = backoff;
				backoff = backoff * 2 > c->o.max_wait_ms ? c->o.max_wait_ms : backoff * 2;
				vlog(c, "retrying in %ld milliseconds (%s)", wait, cerr[0] ? cerr : curl_easy_strerror(cc));
				if (nap(c, wait)) {
					r->stopped = 1;
					return 0;
				}
				continue;
			}
			if (r->delivered) {
				/* a stream that broke after data arrived: the caller resumes it */
				r->status = r->status ? r->status : 200;
				return dlk_errf(err, DLK_EXIT_CONNECT, "%s: stream interrupted: %s", c->cfg.server,
						cerr[0] ? cerr : curl_easy_strerror(cc));
			}
			dlk_errf(err, DLK_EXIT_CONNECT, "cannot reach the API server '%s': %s", c->cfg.server,
				 cerr[0] ? cerr : curl_easy_strerror(cc));
			if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
			    cc == CURLE_SSL_CONNECT_ERROR)
				dlk_err_hint(err, "check certificate-authority and tls-server-name of cluster '%s' in %s",
					     c->cfg.cluster_name, c->cfg.source);
			else
				dlk_err_hint(err, "is the cluster up and is cluster '%s' in %s right?", c->cfg.cluster_name,
					     c->cfg.source);
			return -1;
		}
		if (r->status == 401 && c->cfg.exec && !refreshed) {
			/* The cached credential may have been revoked early: run the plugin again, once. */
			refreshed = 1;
			vlog(c, "401 Unauthorized: refreshing the exec credential and retrying");
			if (exec_fresh(c, 1, err) < 0)
				return -1;
			continue;
		}
		if ((r->status == 429 || r->status == 500 || r->status == 502 || r->status == 503 || r->status == 504) &&
		    req->retry_safe && attempt < c->o.max_retries) {
			wait = retry_after >= 0 ? retry_after * 1000 : backoff;
			if (wait > c->o.max_wait_ms)
				wait = c->o.max_wait_ms;
			backoff = backoff * 2 > c->o.max_wait_ms ? c->o.max_wait_ms : backoff * 2;
			vlog(c, "retrying in %ld milliseconds (%ld %s)", wait, r->status, status_text(r->status));
			if (nap(c, wait)) {
				r->stopped = 1;
				return 0;
			}
			continue;
		}
		return 0;
	}
}

/* ---- Status errors ---- */

int kube_status_error(const struct kube_client *c, const struct kube_what *w, long status, const char *body,
		      struct dlk_err *err)
{
	cJSON *st = body ? cJSON_Parse(body) : NULL;
	const char *reason = NULL, *message = NULL, *field = NULL;
	struct dlk_buf fields = DLK_BUF_INIT, what = DLK_BUF_INIT;
	const char *user = c && c->cfg.user_name && c->cfg.user_name[0] ? c->cfg.user_name : "(anonymous)";
	const char *verb = w && w->verb ? w->verb : "request";
	const char *res = w && w->resource ? w->resource : "objects";
	int code;

	if (cJSON_IsObject(st)) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(st, "reason");
		reason = cJSON_IsString(v) ? v->valuestring : NULL;
		v = cJSON_GetObjectItemCaseSensitive(st, "message");
		message = cJSON_IsString(v) ? v->valuestring : NULL;
		cJSON *causes = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "details"), "causes"), *it;
		cJSON_ArrayForEach(it, causes) {
			cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "field");
			cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "message");
			if (!cJSON_IsString(f) || !f->valuestring[0])
				continue;
			if (!field)
				field = f->valuestring;
			if (fields.len < 1024)
				dlk_buf_addf(&fields, "%s%s: %s", fields.len ? "; " : "", f->valuestring,
					     cJSON_IsString(m) ? m->valuestring : "invalid");
		}
	}
	dlk_buf_addf(&what, "%s %s", verb, res);
	if (w && w->name)
		dlk_buf_addf(&what, " '%s'", w->name);
	if (w && w->ns)
		dlk_buf_addf(&what, " in namespace '%s'", w->ns);
	if (message) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: %s%s%s%s%s", what.data, reason ? reason : "", reason ? ": " : "", message,
			 fields.len ? " (" : "", fields.len ? fields.data : "");
		if (fields.len)
			strncat(err->msg, ")", sizeof(err->msg) - strlen(err->msg) - 1);
	} else {
		/* Not a Status: show a little of what came back, without control characters. */
		char snip[201];
		size_t n = 0;
		for (const char *p = body ? body : ""; *p && n < 200; p++)
			snip[n++] = isprint((unsigned char)*p) ? *p : ' ';
		snip[n] = '\0';
		dlk_errf(err, DLK_EXIT_FAIL, "%s: HTTP %ld %s%s%s", what.data, status, status_text(status), n ? ": " : "", snip);
	}
	switch (status) {
	case 401:
		code = DLK_EXIT_AUTH;
		dlk_err_hint(err, "the server did not accept the credentials of user '%s' (%s): re-authenticate "
				  "(log in again or refresh the token) and retry", user, c ? c->cfg.source : "kubeconfig");
		break;
	case 403:
		code = DLK_EXIT_AUTH;
		dlk_err_hint(err, "user '%s' may not %s %s%s%s: ask a cluster admin for a Role that grants it", user, verb,
			     res, w && w->ns ? " in namespace " : "", w && w->ns ? w->ns : "");
		break;
	case 404:
		code = DLK_EXIT_NOTFOUND;
		if (w && w->ns)
			dlk_err_hint(err, "looked in namespace '%s': check the name, or pick another namespace with --namespace",
				     w->ns);
		else
			dlk_err_hint(err, "check the name and that the cluster serves %s", res);
		break;
	case 409:
		if (reason && !strcmp(reason, "AlreadyExists")) {
			code = DLK_EXIT_EXISTS;
			dlk_err_hint(err, "it already exists: pass --replace to replace it, or pick another name");
		} else {
			code = DLK_EXIT_FAIL;
			dlk_err_hint(err, "someone else changed it at the same time: retry");
		}
		break;
	case 422:
		code = DLK_EXIT_CONFIG;
		if (field)
			dlk_err_hint(err, "the server rejected the field '%s': fix it and retry", field);
		else
			dlk_err_hint(err, "the server rejected the object as invalid: fix it and retry");
		break;
	case 429:
		code = DLK_EXIT_CONNECT;
		dlk_err_hint(err, "the API server is throttling requests: try again later");
		break;
	case 502:
	case 503:
	case 504:
		code = DLK_EXIT_CONNECT;
		dlk_err_hint(err, "the API server is unavailable: try again later");
		break;
	default:
		code = DLK_EXIT_FAIL;
		break;
	}
	err->code = code;
	cJSON_Delete(st);
	dlk_buf_release(&fields);
	dlk_buf_release(&what);
	return -1;
}
