/* S3-compatible object storage: s3://BUCKET[/PREFIX], signed with libcurl's AWS SigV4.
 *
 * Where and who, as the AWS tools read them (never from dlk.yaml, which is stored in a
 * ConfigMap and in every bundle):
 *	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN   the credentials
 *	AWS_REGION, AWS_DEFAULT_REGION                              the region (us-east-1)
 *	AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL                       another endpoint (MinIO, Ceph,
 *	                                                            a gateway): path-style requests
 * In a pod they come from the Secret that data.store_secret names.
 *
 * libcurl 7.88 signs what it sends (method, path, query, every header set here, the host) but
 * takes the path and query as they are and hashes the payload only for POSTFIELDS. So the URL
 * is built already in S3's canonical form (segments encoded by AWS's rules, query parameters
 * sorted, "uploads=" not "uploads"), and every request carries x-amz-content-sha256: the hash of
 * its body, which S3 checks, so an object arrives intact or not at all.
 *
 * Large objects go up in parts (a multipart upload). An upload that was cut off is continued:
 * the next put of the same key finds the upload in ListMultipartUploads, keeps the parts that
 * ListParts shows with the right size and MD5 (the ETag) and sends the rest.
 *
 * An object's name is the sha256 of its bytes, and S3 checks each request's body only against
 * the hash dlk computed of that body: so a put hashes the whole object as it reads it (a small one
 * is read into memory first, a large one part by part) and sends or completes nothing whose bytes
 * are not the ones push hashed. Every put also stores that sha256 with the object
 * (x-amz-meta-dlk-sha256): a HEAD then tells a later push whether the object there is one dlk
 * verified, without reading it back, and an object without it (or of the wrong size) is sent
 * again, which is how a push repairs a corrupted object. */
#include "lib/store/store_impl.h"
#include "lib/store/s3xml.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/curl.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define S3_PART_MIN (8ull << 20)
#define S3_SINGLE_MAX (16ull << 20)   /* larger objects go up in parts */
#define S3_ERROR_BODY_MAX (1u << 20)

struct s3 {
	char *bucket;
	char *prefix;                 /* "" or "a/b/" (ends with '/') */
	char *base;                   /* URL up to the key: "http://host:9000/bucket/" */
	char *region;
	char *access_key, *secret_key, *token;
	char sigv4[160];
	CURL *curl;
};

/* ---- names ---- */

/* S3's URI encoding: unreserved characters as they are, '/' kept when keep_slash, the rest
 * %XX in uppercase hex. */
static void uri_encode(struct dlk_buf *b, const char *s, int keep_slash)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/'))
			dlk_buf_addc(b, (char)*p);
		else
			dlk_buf_addf(b, "%%%02X", *p);
	}
}

static int bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '-' || b[i] == '.'))
			return 0;
	return 1;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* ---- one request ---- */

struct s3_req {
	const char *method;           /* GET HEAD PUT POST DELETE */
	const char *key;              /* the object's whole key (prefix included); NULL: the bucket */
	const char *query;            /* canonical: sorted, encoded; NULL: none */
	const void *body;             /* a body in memory ... */
	size_t body_len;
	int body_fd;                  /* ... or body_len bytes of this file from body_off (-1: none) */
	unsigned long long body_off;
	const char *body_sha256;      /* hex; NULL: the empty body's */
	const char *meta_sha256;      /* the object's sha256, stored with it; NULL: none */
	unsigned long long range_from;
	int range;                    /* send Range: bytes=range_from- (or only that byte: range_one) */
	int range_one;
	dlk_store_sink_fn sink;       /* 2xx bodies go here instead of resp->body */
	void *sink_ctx;
	int no_retry;
};

struct s3_resp {
	long status;
	struct dlk_buf body;
	unsigned long long length;
	int have_length;
	char etag[128];
	/* transfer state */
	CURL *curl;
	unsigned long long skip;      /* bytes to drop: a server that ignored the Range */
	int started, delivered, sink_failed, too_big;
	struct dlk_err sink_err;
	const struct s3_req *req;
	size_t sent;
	char meta_sha256[65];         /* x-amz-meta-dlk-sha256 of a HEAD or GET, "" when none */
};
#define S3_RESP_INIT { 0, DLK_BUF_INIT, 0, 0, "", NULL, 0, 0, 0, 0, 0, DLK_ERR_INIT, NULL, 0, "" }
#define S3_META_SHA256 "x-amz-meta-dlk-sha256"

static void resp_release(struct s3_resp *r)
{
	dlk_buf_release(&r->body);
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct s3_resp *r = ctx;
	size_t n = size * nmemb, k;

	if (n > 5 && !strncasecmp(data, "HTTP/", 5)) {
		/* a new response (after 100 Continue): forget the last one's headers */
		r->have_length = 0;
		r->etag[0] = '\0';
		r->meta_sha256[0] = '\0';
		return n;
	}
	if (n > sizeof(S3_META_SHA256) && !strncasecmp(data, S3_META_SHA256 ":", sizeof(S3_META_SHA256))) {
		const char *v = data + sizeof(S3_META_SHA256);
		while (v < data + n && *v == ' ')
			v++;
		/* only 64 hex digits count: anything else is no claim at all */
		if (data + n - v >= 64 && strspn(v, "0123456789abcdef") >= 64 &&
		    (data + n - v == 64 || v[64] == '\r' || v[64] == '\n' || v[64] == ' ')) {
			memcpy(r->meta_sha256, v, 64);
			r->meta_sha256[64] = '\0';
		}
		return n;
	}
	if (n > 5 && !strncasecmp(data, "ETag:", 5)) {
		const char *v = data + 5;
		while (*v == ' ' && v < data + n)
			v++;
		k = (size_t)(data + n - v);
		while (k && (v[k - 1] == '\r' || v[k - 1] == '\n' || v[k - 1] == ' '))
			k--;
		if (k < sizeof(r->etag)) {
			memcpy(r->etag, v, k);
			r->etag[k] = '\0';
		}
	} else if (n > 15 && !strncasecmp(data, "Content-Length:", 15)) {
		char tmp[32];
		k = n - 15 < sizeof(tmp) - 1 ? n - 15 : sizeof(tmp) - 1;
		memcpy(tmp, data + 15, k);
		tmp[k] = '\0';
		r->length = strtoull(tmp, NULL, 10);
		r->have_length = 1;
	}
	return n;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct s3_resp *r = ctx;
	size_t n = size * nmemb;

	if (!r->started) {
		r->started = 1;
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->status);
		/* a server that ignores the Range sends the object from its start */
		if (r->status == 200 && r->req->range)
			r->skip = r->req->range_from;
	}
	if (r->req->sink && r->status >= 200 && r->status < 300) {
		size_t skip = r->skip > n ? n : (size_t)r->skip;
		r->skip -= skip;
		if (n > skip) {
			r->delivered = 1;
			if (r->req->sink(r->req->sink_ctx, data + skip, n - skip, &r->sink_err)) {
				r->sink_failed = 1;
				return 0;
			}
		}
		return n;
	}
	if (r->body.len + n > (r->status >= 300 ? S3_ERROR_BODY_MAX : S3XML_MAX_BYTES)) {
		r->too_big = 1;
		return 0;
	}
	dlk_buf_add(&r->body, data, n);
	return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ctx)
{
	struct s3_resp *r = ctx;
	const struct s3_req *q = r->req;
	size_t want = size * nmemb, left = q->body_len - r->sent;

	if (want > left)
		want = left;
	if (!want)
		return 0;
	if (q->body) {
		memcpy(buf, (const char *)q->body + r->sent, want);
	} else {
		ssize_t got;
		do
			got = pread(q->body_fd, buf, want, (off_t)(q->body_off + r->sent));
		while (got < 0 && errno == EINTR);
		if (got <= 0)
			return CURL_READFUNC_ABORT;
		want = (size_t)got;
	}
	r->sent += want;
	return want;
}

static int on_seek(void *ctx, curl_off_t offset, int origin)
{
	struct s3_resp *r = ctx;

	if (origin != SEEK_SET || offset < 0 || (unsigned long long)offset > r->req->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->sent = (size_t)offset;
	return CURL_SEEKFUNC_OK;
}

static char *object_url(const struct s3 *s3, const char *key, const char *query)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_adds(&b, s3->base);
	if (key)
		uri_encode(&b, key, 1);
	if (query)
		dlk_buf_addf(&b, "?%s", query);
	return dlk_buf_detach(&b, NULL);
}

static void logf_(struct dlk_store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct dlk_store *s, const char *fmt, ...)
{
	struct dlk_buf b = DLK_BUF_INIT;
	va_list ap;

	if (!s->opts.log)
		return;
	va_start(ap, fmt);
	dlk_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	s->opts.log(s->opts.log_ctx, b.data);
	dlk_buf_release(&b);
}

static int retryable(CURLcode res, long status)
{
	if (res == CURLE_OK)
		return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
	return res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST || res == CURLE_OPERATION_TIMEDOUT ||
	       res == CURLE_PARTIAL_FILE || res == CURLE_RECV_ERROR || res == CURLE_SEND_ERROR ||
	       res == CURLE_GOT_NOTHING || res == CURLE_SSL_CONNECT_ERROR;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Sends req; 0 when a response arrived (any status) or -1 (DLK_EXIT_CONNECT, or what the sink
 * said). Connection errors, 429 and 5xx are retried while no byte reached the sink. */
static int s3_send(struct dlk_store *s, const struct s3_req *req, struct s3_resp *r, struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	char *url = object_url(s3, req->key, req->query);
	char errbuf[CURL_ERROR_SIZE];
	int max_retries = s->opts.max_retries < 0 ? 0 : s->opts.max_retries ? s->opts.max_retries : 4;
	long base_ms = s->opts.retry_base_ms > 0 ? s->opts.retry_base_ms : 500;
	int rc = -1;

	for (int attempt = 0;; attempt++) {
		struct curl_slist *h = NULL;
		char line[300];
		CURLcode res;
		double t0 = dlk_now();
		CURL *c = s3->curl;

		resp_release(r);
		r->status = 0;
		r->have_length = 0;
		r->etag[0] = '\0';
		r->meta_sha256[0] = '\0';
		r->started = r->delivered = r->sink_failed = r->too_big = 0;
		r->sent = 0;
		r->req = req;
		r->skip = 0;
		r->curl = s3->curl;
		curl_easy_reset(c);
		errbuf[0] = '\0';
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_USERAGENT, DLK_USER_AGENT);
		curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
		if (s->opts.ca_file)
			curl_easy_setopt(c, CURLOPT_CAINFO, s->opts.ca_file);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
		curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s3->sigv4);
		curl_easy_setopt(c, CURLOPT_USERNAME, s3->access_key);
		curl_easy_setopt(c, CURLOPT_PASSWORD, s3->secret_key);
		snprintf(line, sizeof(line), "x-amz-content-sha256: %s", req->body_sha256 ? req->body_sha256 : EMPTY_SHA256);
		h = curl_slist_append(h, line);
		if (req->meta_sha256) {
			snprintf(line, sizeof(line), S3_META_SHA256 ": %s", req->meta_sha256);
			h = curl_slist_append(h, line);
		}
		if (s3->token) {
			char *t = xasprintf("x-amz-security-token: %s", s3->token);
			h = curl_slist_append(h, t);
			free(t);
		}
		if (req->range) {
			if (req->range_one)
				snprintf(line, sizeof(line), "Range: bytes=%llu-%llu", req->range_from, req->range_from);
			else
				snprintf(line, sizeof(line), "Range: bytes=%llu-", req->range_from);
			h = curl_slist_append(h, line);
		}
		if (!strcmp(req->method, "HEAD")) {
			curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
		} else if (!strcmp(req->method, "PUT") || !strcmp(req->method, "POST")) {
			if (!strcmp(req->method, "PUT"))
				curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
			else {
				curl_easy_setopt(c, CURLOPT_POST, 1L);
				h = curl_slist_append(h, "Content-Type: application/xml");
			}
			curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(c, CURLOPT_READDATA, r);
			curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
			curl_easy_setopt(c, CURLOPT_SEEKDATA, r);
			if (!strcmp(req->method, "PUT"))
				curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
			else
				curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
		} else if (strcmp(req->method, "GET")) {
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
		}
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
		res = curl_easy_perform(c);
		curl_slist_free_all(h);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
		logf_(s, "%s s3://%s/%s%s%s%s %ld in %.0f ms", req->method, s3->bucket, req->key ? req->key : "",
		      req->query ? "?" : "", req->query ? req->query : "", req->range ? " (a range)" : "", r->status,
		      (dlk_now() - t0) * 1000);
		if (r->sink_failed) {
			*err = r->sink_err;
			goto out;
		}
		if (res == CURLE_OK && !retryable(res, r->status)) {
			rc = 0;
			goto out;
		}
		if (req->no_retry || r->delivered || !retryable(res, r->status) || attempt >= max_retries) {
			if (res == CURLE_OK) {
				rc = 0; /* a 5xx after the retries: the caller says what it was */
				goto out;
			}
			dlk_errf(err, DLK_EXIT_CONNECT, "cannot reach '%s': %s", url, errbuf[0] ? errbuf : curl_easy_strerror(res));
			if (attempt)
				dlk_err_hint(err, "gave up after %d attempts", attempt + 1);
			goto out;
		}
		sleep_ms(base_ms << (attempt < 10 ? attempt : 10));
	}
out:
	free(url);
	return rc;
}

/* err from a response that was not a success: S3's Error document named and mapped. */
static int s3_fail(struct dlk_store *s, const char *what, const struct s3_resp *r, struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	struct s3_error e;
	int is_err = s3xml_error(r->body.data, r->body.len, &e);
	int code = r->status == 404 ? DLK_EXIT_NOTFOUND
	           : r->status == 401 || r->status == 403 ? DLK_EXIT_AUTH
	           : r->status >= 500 ? DLK_EXIT_CONNECT : DLK_EXIT_FAIL;

	if (!is_err) {
		dlk_errf(err, code, "%s: the object store answered HTTP %ld", what, r->status);
		if (r->status == 301)
			dlk_err_hint(err, "the bucket is elsewhere: set AWS_REGION to its region, or AWS_ENDPOINT_URL");
		return -1;
	}
	if (!strcmp(e.code, "SignatureDoesNotMatch")) {
		dlk_errf(err, DLK_EXIT_AUTH,
		         "%s: the object store refused the request's signature (SignatureDoesNotMatch): the secret key "
		         "is not the one of access key '%s'", what, s3->access_key);
		return dlk_err_hint(err, "check AWS_SECRET_ACCESS_KEY (in the cluster: the Secret that data.store_secret "
		                         "names)");
	}
	/* AWS and MinIO say InvalidAccessKeyId; the Versity gateway XAdminUserNotFound */
	if (!strcmp(e.code, "InvalidAccessKeyId") || !strcmp(e.code, "XAdminUserNotFound")) {
		dlk_errf(err, DLK_EXIT_AUTH, "%s: the object store does not know access key '%s' (InvalidAccessKeyId)", what,
		         s3->access_key);
		return dlk_err_hint(err, "check AWS_ACCESS_KEY_ID (in the cluster: the Secret that data.store_secret "
		                         "names)");
	}
	if (!strcmp(e.code, "NoSuchBucket")) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "%s: there is no bucket '%s' (NoSuchBucket)", what, s3->bucket);
		return dlk_err_hint(err, "create it first, or check AWS_ENDPOINT_URL and the store URL");
	}
	if (!strcmp(e.code, "NoSuchKey") || !strcmp(e.code, "NoSuchUpload"))
		code = DLK_EXIT_NOTFOUND;
	else if (!strcmp(e.code, "XAmzContentSHA256Mismatch") || !strcmp(e.code, "BadDigest"))
		code = DLK_EXIT_FAIL;
	dlk_errf(err, code, "%s: %s (%s)", what, e.message[0] ? e.message : "the object store refused the request",
	         e.code);
	if (!strcmp(e.code, "RequestTimeTooSkewed"))
		dlk_err_hint(err, "this machine's clock is off: signatures carry the time");
	else if (!strcmp(e.code, "AccessDenied"))
		dlk_err_hint(err, "the credentials of access key '%s' may not do this", s3->access_key);
	else if (!strcmp(e.code, "AuthorizationHeaderMalformed") || !strcmp(e.code, "PermanentRedirect"))
		dlk_err_hint(err, "check AWS_REGION (now '%s')", s3->region);
	return -1;
}

static char *full_key(const struct s3 *s3, const char *key)
{
	return xasprintf("%s%s", s3->prefix, key);
}

/* ---- the store operations ---- */

static int s3_stat(struct dlk_store *s, const char *key, unsigned long long *size, struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	char *k = full_key(s3, key), *where = dlk_store_where(s, key);
	struct s3_req q = { .method = "HEAD", .key = k, .body_fd = -1 };
	struct s3_resp r = S3_RESP_INIT;
	int rc = -1;

	if (s3_send(s, &q, &r, err))
		goto out;
	if (r.status == 200) {
		*size = r.length;
		rc = 1;
	} else if (r.status == 404) {
		rc = 0;
	} else {
		/* a HEAD has no body to say why: ask again with a GET of no bytes, whose error does */
		struct s3_req g = { .method = "GET", .key = k, .body_fd = -1, .range = 1, .range_one = 1 };
		struct s3_resp r2 = S3_RESP_INIT;
		struct s3_error e;
		long first = r.status;
		if (s3_send(s, &g, &r2, err) == 0) {
			if (r2.status == 404 && (!s3xml_error(r2.body.data, r2.body.len, &e) || !strcmp(e.code, "NoSuchKey")))
				rc = 0;
			else if (r2.status >= 300 || r2.status < 200)
				rc = s3_fail(s, where, &r2, err);
			else {
				r.status = first;
				rc = s3_fail(s, where, &r, err);
			}
		}
		resp_release(&r2);
	}
out:
	resp_release(&r);
	free(k);
	free(where);
	return rc;
}

static int s3_get(struct dlk_store *s, const char *key, unsigned long long offset, dlk_store_sink_fn sink,
                  void *sink_ctx, struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	char *k = full_key(s3, key), *where = dlk_store_where(s, key);
	struct s3_req q = { .method = "GET", .key = k, .body_fd = -1, .sink = sink, .sink_ctx = sink_ctx,
	                    .range = offset > 0, .range_from = offset };
	struct s3_resp r = S3_RESP_INIT;
	int rc = -1;

	if (s3_send(s, &q, &r, err))
		goto out;
	if (r.status == 200 || r.status == 206)
		rc = 0;
	else
		rc = s3_fail(s, where, &r, err);
out:
	resp_release(&r);
	free(k);
	free(where);
	return rc;
}

static int s3_list(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	char *token = NULL, *p = full_key(s3, prefix), *where = dlk_store_where(s, prefix);
	size_t plen = strlen(p);
	int rc = -1;

	for (int page = 0; page < 100000; page++) {
		struct dlk_buf query = DLK_BUF_INIT;
		struct s3_listing l = S3_LISTING_INIT;
		struct s3_resp r = S3_RESP_INIT;
		struct s3_req q = { .method = "GET", .body_fd = -1 };
		int stop = 0;

		if (token) {
			dlk_buf_adds(&query, "continuation-token=");
			uri_encode(&query, token, 0);
			dlk_buf_addc(&query, '&');
		}
		dlk_buf_adds(&query, "list-type=2&prefix=");
		uri_encode(&query, p, 0);
		q.query = query.data;
		if (s3_send(s, &q, &r, err) || (r.status != 200 && s3_fail(s, where, &r, err)) ||
		    s3xml_list_objects(r.body.data, r.body.len, &l, err)) {
			dlk_buf_release(&query);
			resp_release(&r);
			goto out;
		}
		dlk_buf_release(&query);
		resp_release(&r);
		for (size_t i = 0; i < l.n && !stop; i++) {
			const char *name = l.v[i].key;
			if (strncmp(name, p, plen) || !name[plen] || strchr(name + plen, '/'))
				continue;
			stop = fn(ctx, name + plen, l.v[i].size);
		}
		free(token);
		token = l.truncated && !stop ? xstrdup(l.next_token) : NULL;
		s3_listing_release(&l);
		if (!token) {
			rc = 0;
			goto out;
		}
	}
	dlk_errf(err, DLK_EXIT_FAIL, "%s: the listing does not end", where);
out:
	free(token);
	free(p);
	free(where);
	return rc;
}

/* ---- puts ---- */

static unsigned long long part_size_for(unsigned long long size)
{
	unsigned long long p = S3_PART_MIN;

	/* at most 10000 parts; the size depends on the object only, so a resumed upload lines up */
	while (size / p >= 10000)
		p *= 2;
	return p;
}

static int put_single(struct dlk_store *s, const char *k, const char *where, const struct dlk_put_src *src,
                      struct dlk_err *err)
{
	struct s3_req q = { .method = "PUT", .key = k, .body = src->data, .body_len = (size_t)src->size, .body_fd = -1,
	                    .body_sha256 = src->sha256, .meta_sha256 = src->sha256 };
	struct s3_resp r = S3_RESP_INIT;
	char *copy = NULL, got[65];
	int fd = -1, rc = -1;
	size_t n = 0;

	if (src->path) {
		/* read it whole (at most S3_SINGLE_MAX) and hash what is read: those bytes, and only
		 * they, are sent, so a file that changed since push hashed it cannot be stored */
		fd = dlk_open_regular(src->path, 0);
		if (fd < 0)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, dlk_open_strerror(errno));
		copy = xmalloc((size_t)src->size + 1);
		for (;;) {
			ssize_t got_n = read(fd, copy + n, (size_t)src->size + 1 - n);
			if (got_n < 0 && errno == EINTR)
				continue;
			if (got_n < 0) {
				dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, strerror(errno));
				goto out;
			}
			if (got_n == 0 || (n += (size_t)got_n) > src->size)
				break;
		}
		q.body = copy;
	} else {
		n = (size_t)src->size;
	}
	dlk_sha256_hex(q.body, n <= src->size ? n : (size_t)src->size, got);
	if (n != src->size || strcmp(got, src->sha256)) {
		dlk_store_put_changed(where, src, got, n, err);
		goto out;
	}
	if (s3_send(s, &q, &r, err))
		goto out;
	if (r.status != 200) {
		s3_fail(s, where, &r, err);
		goto out;
	}
	if (src->progress)
		src->progress(src->progress_ctx, src->what, src->size, src->size);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(copy);
	resp_release(&r);
	return rc;
}

/* The multipart upload of k that is under way, or NULL. */
static int find_upload(struct dlk_store *s, const char *k, const char *where, char **upload_id, struct dlk_err *err)
{
	struct dlk_buf query = DLK_BUF_INIT;
	struct s3_req q = { .method = "GET", .body_fd = -1 };
	struct s3_resp r = S3_RESP_INIT;
	int rc = -1;

	dlk_buf_adds(&query, "prefix=");
	uri_encode(&query, k, 0);
	dlk_buf_adds(&query, "&uploads=");
	q.query = query.data;
	if (s3_send(s, &q, &r, err))
		goto out;
	if (r.status != 200) {
		s3_fail(s, where, &r, err);
		goto out;
	}
	rc = s3xml_find_upload(r.body.data, r.body.len, k, upload_id, err);
out:
	dlk_buf_release(&query);
	resp_release(&r);
	return rc;
}

/* Every part of upload_id, in *parts (by number: parts[i] is part i + 1, size 0 when absent). */
static int list_parts(struct dlk_store *s, const char *k, const char *where, const char *upload_id, size_t n_parts,
                      struct s3_part *parts, int *gone, struct dlk_err *err)
{
	int marker = 0;

	*gone = 0;
	for (int page = 0; page < 10001; page++) {
		struct dlk_buf query = DLK_BUF_INIT;
		struct s3_req q = { .method = "GET", .key = k, .body_fd = -1 };
		struct s3_resp r = S3_RESP_INIT;
		struct s3_parts p = S3_PARTS_INIT;
		int rc = 0;

		if (marker)
			dlk_buf_addf(&query, "part-number-marker=%d&", marker);
		dlk_buf_adds(&query, "uploadId=");
		uri_encode(&query, upload_id, 0);
		q.query = query.data;
		rc = s3_send(s, &q, &r, err);
		if (!rc && r.status == 404) {
			*gone = 1; /* finished or aborted meanwhile: start a new one */
		} else if (!rc && r.status != 200) {
			rc = s3_fail(s, where, &r, err);
		} else if (!rc) {
			rc = s3xml_list_parts(r.body.data, r.body.len, &p, err);
		}
		dlk_buf_release(&query);
		resp_release(&r);
		if (rc || *gone)
			return rc;
		for (size_t i = 0; i < p.n; i++)
			if ((size_t)p.v[i].number <= n_parts)
				parts[p.v[i].number - 1] = p.v[i];
		marker = p.truncated ? p.next_marker : 0;
		s3_parts_release(&p);
		if (!marker)
			return 0;
	}
	return dlk_errf(err, DLK_EXIT_FAIL, "%s: the list of parts does not end", where);
}

static void md5_hex(const void *data, size_t len, char out[33])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	EVP_Digest(data, len, md, &n, EVP_md5(), NULL);
	for (unsigned i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int put_multipart(struct dlk_store *s, const char *k, const char *where, const struct dlk_put_src *src,
                         struct dlk_err *err)
{
	unsigned long long psize = part_size_for(src->size);
	size_t n_parts = (size_t)((src->size + psize - 1) / psize), kept = 0;
	unsigned long long kept_bytes = 0;
	struct s3_part *have = xcalloc(n_parts, sizeof(*have));
	char (*etags)[128] = xcalloc(n_parts, sizeof(*etags));
	char *upload_id = NULL, *buf = xmalloc((size_t)psize);
	struct dlk_buf query = DLK_BUF_INIT, xml = DLK_BUF_INIT;
	struct s3_resp r = S3_RESP_INIT;
	struct dlk_sha256 whole = DLK_SHA256_INIT;
	char got[65];
	int fd = -1, rc = -1, gone = 0;
	long delay_ms = 0;

	if (getenv("DLK_TEST_S3_PART_DELAY_MS"))
		delay_ms = strtol(getenv("DLK_TEST_S3_PART_DELAY_MS"), NULL, 10);
	if (src->path && (fd = dlk_open_regular(src->path, 0)) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, dlk_open_strerror(errno));
		goto out;
	}
	if (find_upload(s, k, where, &upload_id, err))
		goto out;
	if (upload_id) {
		if (list_parts(s, k, where, upload_id, n_parts, have, &gone, err))
			goto out;
		if (gone) {
			free(upload_id);
			upload_id = NULL;
			memset(have, 0, n_parts * sizeof(*have));
		}
	}
	if (!upload_id) {
		struct s3_req q = { .method = "POST", .key = k, .query = "uploads=", .body = "", .body_fd = -1,
		                    .meta_sha256 = src->sha256 };
		if (s3_send(s, &q, &r, err))
			goto out;
		if (r.status != 200) {
			s3_fail(s, where, &r, err);
			goto out;
		}
		if (s3xml_upload_id(r.body.data, r.body.len, &upload_id, err))
			goto out;
	}
	/* every part is read in order, kept or sent: the whole object is hashed on the way */
	dlk_sha256_begin(&whole);
	for (size_t i = 0; i < n_parts; i++) {
		unsigned long long off = i * psize, len = src->size - off < psize ? src->size - off : psize;
		char sha[65], md5[33], expect[40];
		struct s3_req q = { .method = "PUT", .key = k, .body = buf, .body_len = (size_t)len, .body_fd = -1,
		                    .body_sha256 = sha };

		if (src->path) {
			size_t got = 0;
			while (got < len) {
				ssize_t n = pread(fd, buf + got, (size_t)(len - got), (off_t)(off + got));
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0) {
					dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path,
					         n < 0 ? strerror(errno) : "it got shorter");
					goto out;
				}
				got += (size_t)n;
			}
		} else {
			memcpy(buf, (const char *)src->data + off, (size_t)len);
		}
		dlk_sha256_update(&whole, buf, (size_t)len);
		md5_hex(buf, (size_t)len, md5);
		snprintf(expect, sizeof(expect), "\"%s\"", md5);
		if (have[i].number && have[i].size == len && !strcasecmp(have[i].etag, expect)) {
			snprintf(etags[i], sizeof(etags[i]), "%s", have[i].etag);
			kept++;
			kept_bytes += len;
		} else {
			dlk_sha256_hex(buf, (size_t)len, sha);
			dlk_buf_reset(&query);
			dlk_buf_addf(&query, "partNumber=%zu&uploadId=", i + 1);
			uri_encode(&query, upload_id, 0);
			q.query = query.data;
			if (s3_send(s, &q, &r, err))
				goto out;
			if (r.status != 200) {
				s3_fail(s, where, &r, err);
				goto out;
			}
			snprintf(etags[i], sizeof(etags[i]), "%s", r.etag[0] ? r.etag : expect);
			if (delay_ms > 0)
				sleep_ms(delay_ms);
		}
		if (src->progress && src->progress(src->progress_ctx, src->what, off + len, src->size)) {
			dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while uploading '%s'", where);
			goto out;
		}
	}
	dlk_sha256_end(&whole, got);
	if (strcmp(got, src->sha256)) {
		/* the file changed after push hashed it: complete nothing, and drop the parts */
		struct s3_req q = { .method = "DELETE", .key = k, .body_fd = -1, .no_retry = 1 };
		struct dlk_err ignored = DLK_ERR_INIT;
		dlk_buf_reset(&query);
		dlk_buf_adds(&query, "uploadId=");
		uri_encode(&query, upload_id, 0);
		q.query = query.data;
		s3_send(s, &q, &r, &ignored);
		dlk_store_put_changed(where, src, got, src->size, err);
		goto out;
	}
	if (kept)
		logf_(s, "%s: continued an upload: %zu of its %zu parts were already there", where, kept, n_parts);
	dlk_buf_adds(&xml, "<CompleteMultipartUpload>");
	for (size_t i = 0; i < n_parts; i++) {
		dlk_buf_addf(&xml, "<Part><PartNumber>%zu</PartNumber><ETag>", i + 1);
		for (const char *p = etags[i]; *p; p++)
			if (*p == '"')
				dlk_buf_adds(&xml, "&quot;");
			else if (*p == '&')
				dlk_buf_adds(&xml, "&amp;");
			else if (*p == '<')
				dlk_buf_adds(&xml, "&lt;");
			else
				dlk_buf_addc(&xml, *p);
		dlk_buf_adds(&xml, "</ETag></Part>");
	}
	dlk_buf_adds(&xml, "</CompleteMultipartUpload>");
	{
		char sha[65];
		struct s3_req q = { .method = "POST", .key = k, .body = xml.data, .body_len = xml.len, .body_fd = -1,
		                    .body_sha256 = sha };
		dlk_sha256_hex(xml.data, xml.len, sha);
		dlk_buf_reset(&query);
		dlk_buf_adds(&query, "uploadId=");
		uri_encode(&query, upload_id, 0);
		q.query = query.data;
		/* completing twice is harmless, but a retried complete of a finished upload says
		 * NoSuchUpload: the object is then checked instead */
		if (s3_send(s, &q, &r, err))
			goto out;
		if (r.status != 200) {
			s3_fail(s, where, &r, err);
			goto out;
		}
		if (s3xml_complete_ok(r.body.data, r.body.len, err)) {
			dlk_err_prefix(err, "%s", where);
			goto out;
		}
	}
	if (src->resumed)
		*src->resumed = kept_bytes;
	rc = 0;
out:
	if (whole.ctx)
		dlk_sha256_end(&whole, got);
	if (fd >= 0)
		close(fd);
	resp_release(&r);
	dlk_buf_release(&query);
	dlk_buf_release(&xml);
	free(upload_id);
	free(buf);
	free(etags);
	free(have);
	return rc;
}

static int s3_put(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	char *k = full_key(s3, key), *where = dlk_store_where(s, key);
	int rc;

	if (src->size > S3_SINGLE_MAX)
		rc = put_multipart(s, k, where, src, err);
	else
		rc = put_single(s, k, where, src, err);
	free(k);
	free(where);
	return rc;
}

static void s3_close(struct dlk_store *s)
{
	struct s3 *s3 = s->impl;

	if (s3->curl)
		curl_easy_cleanup(s3->curl);
	free(s3->bucket);
	free(s3->prefix);
	free(s3->base);
	free(s3->region);
	free(s3->access_key);
	if (s3->secret_key)
		memset(s3->secret_key, 0, strlen(s3->secret_key));
	free(s3->secret_key);
	free(s3->token);
	free(s3);
}

static int s3_verify(struct dlk_store *s, const char *key, const char *hex, unsigned long long size,
                     struct dlk_err *err)
{
	struct s3 *s3 = s->impl;
	char *k = full_key(s3, key);
	struct s3_req q = { .method = "HEAD", .key = k, .body_fd = -1 };
	struct s3_resp r = S3_RESP_INIT;
	unsigned long long have;
	int rc = -1;

	if (s3_send(s, &q, &r, err))
		goto out;
	if (r.status == 200)
		/* the sha256 dlk stored with the object when it sent bytes that hashed to it */
		rc = r.have_length && r.length == size && !strcmp(r.meta_sha256, hex);
	else if (r.status == 404)
		rc = 0;
	else
		rc = s3_stat(s, key, &have, err) < 0 ? -1 : 0; /* it says why */
out:
	resp_release(&r);
	free(k);
	return rc;
}

static const struct dlk_store_ops s3_ops = {
	s3_stat, s3_put, s3_get, s3_list, NULL, s3_verify, s3_close,
};

struct dlk_store *dlk_store_open_s3(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err)
{
	const char *rest = url + 5, *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	const char *endpoint = env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3") : env("AWS_ENDPOINT_URL");
	const char *region = env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
	struct dlk_buf prefix = DLK_BUF_INIT;
	struct dlk_store *s;
	struct s3 *s3;

	if (!bucket_ok(rest, blen)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the bucket name must be 3 to 63 lowercase letters, digits, '-' or '.'",
		         url);
		dlk_err_hint(err, "an S3 store is s3://BUCKET or s3://BUCKET/PREFIX");
		return NULL;
	}
	if (slash) {
		/* the prefix, segment by segment: no empty, "." or ".." segments */
		for (const char *p = slash + 1; *p;) {
			size_t n = strcspn(p, "/");
			if ((n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2))) {
				dlk_buf_release(&prefix);
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': '.' and '..' are not allowed in the prefix", url);
				return NULL;
			}
			for (size_t i = 0; i < n; i++)
				if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\') {
					dlk_buf_release(&prefix);
					dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the prefix has a control character or a backslash", url);
					return NULL;
				}
			if (n) {
				dlk_buf_add(&prefix, p, n);
				dlk_buf_addc(&prefix, '/');
			}
			p += n;
			while (*p == '/')
				p++;
		}
	}
	if (!env("AWS_ACCESS_KEY_ID") || !env("AWS_SECRET_ACCESS_KEY")) {
		dlk_buf_release(&prefix);
		dlk_errf(err, DLK_EXIT_AUTH, "'%s': no credentials for the object store", url);
		dlk_err_hint(err, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in the cluster, name a Secret holding "
		                  "them in data.store_secret)");
		return NULL;
	}
	if (endpoint && strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) {
		dlk_buf_release(&prefix);
		dlk_errf(err, DLK_EXIT_CONFIG, "AWS_ENDPOINT_URL '%s' is not an http:// or https:// URL", endpoint);
		return NULL;
	}
	s3 = xcalloc(1, sizeof(*s3));
	s3->bucket = xstrndup(rest, blen);
	s3->prefix = dlk_buf_detach(&prefix, NULL);
	s3->region = xstrdup(region ? region : "us-east-1");
	s3->access_key = xstrdup(env("AWS_ACCESS_KEY_ID"));
	s3->secret_key = xstrdup(env("AWS_SECRET_ACCESS_KEY"));
	s3->token = env("AWS_SESSION_TOKEN") ? xstrdup(env("AWS_SESSION_TOKEN")) : NULL;
	snprintf(s3->sigv4, sizeof(s3->sigv4), "aws:amz:%s:s3", s3->region);
	if (endpoint) {
		size_t n = strlen(endpoint);
		while (n && endpoint[n - 1] == '/')
			n--;
		s3->base = xasprintf("%.*s/%s/", (int)n, endpoint, s3->bucket);
	} else if (strchr(s3->bucket, '.')) {
		/* a dotted bucket does not match the wildcard certificate of a virtual host */
		s3->base = xasprintf("https://s3.%s.amazonaws.com/%s/", s3->region, s3->bucket);
	} else {
		s3->base = xasprintf("https://%s.s3.%s.amazonaws.com/", s3->bucket, s3->region);
	}
	dlk_curl_global_init();
	s3->curl = curl_easy_init();
	s = xcalloc(1, sizeof(*s));
	s->ops = &s3_ops;
	s->url = xstrdup(url);
	s->opts = *opts;
	s->impl = s3;
	if (!s3->curl) {
		dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot start libcurl", url);
		dlk_store_close(s);
		return NULL;
	}
	return s;
}
