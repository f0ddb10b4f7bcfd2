/* Downloading a data file over http(s) with libcurl.
 *
 * The bytes go to "<dest>.part"; only a complete download is renamed to dest, so a crash or a
 * cut connection never leaves a file that looks complete. A later attempt (in this process or the
 * next) resumes the .part with a Range request; a server that ignores the Range (200 instead of
 * 206) makes us start the file over. Connection errors (a failed name lookup included), 429 and
 * 5xx are retried with exponential back-off, honouring Retry-After; other HTTP errors are final.
 * dlk_http_range() reads a byte range without a file (a rank's part of a plain IDX file). */
#include "lib/data/fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/util/curl.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

struct download {
	CURL *curl;
	FILE *f;
	const char *url;
	const struct dlk_data_opts *opts;
	unsigned long long offset;     /* bytes in the .part before this attempt */
	unsigned long long written;    /* bytes written by this attempt */
	unsigned long long max_bytes;  /* 0 = no limit */
	int checked_status;
	int discard;                   /* an error page: do not keep its body */
	int too_big, aborted, write_failed;
};

static size_t on_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct download *d = ctx;
	size_t n = size * nmemb;

	if (!d->checked_status) {
		long status = 0;
		d->checked_status = 1;
		curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 300) {
			d->discard = 1;
		} else if (d->offset && status != 206) {
			/* The server sent the whole file, not the rest of it: start over. */
			if (fflush(d->f) || ftruncate(fileno(d->f), 0) < 0) {
				d->write_failed = errno ? errno : EIO;
				return 0;
			}
			d->offset = 0;
		}
	}
	if (d->discard)
		return n;
	if (d->max_bytes && d->offset + d->written + n > d->max_bytes) {
		d->too_big = 1;
		return 0;
	}
	if (fwrite(data, 1, n, d->f) != n) {
		d->write_failed = errno ? errno : EIO;
		return 0;
	}
	d->written += n;
	return n;
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	struct download *d = ctx;

	(void)ultotal, (void)ulnow;
	if (!d->opts->progress || d->discard)
		return 0;
	if (d->opts->progress(d->opts->progress_ctx, d->url, d->offset + (unsigned long long)dlnow,
	                      dltotal > 0 ? d->offset + (unsigned long long)dltotal : 0)) {
		d->aborted = 1;
		return 1;
	}
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int retryable(CURLcode res, long status)
{
	switch (res) {
	case CURLE_OK:
		return status == 429 || status >= 500;
	case CURLE_COULDNT_RESOLVE_HOST: /* cluster DNS is often not ready when a pod starts */
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

/* The options every request of a data file has: its URL, no downgrade on redirects, TLS checks,
 * netrc credentials, the timeouts. */
static void setup(CURL *curl, const char *url, int https, const char *netrc, const struct dlk_data_opts *opts,
                  char *errbuf)
{
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, DLK_USER_AGENT);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	/* Never let a redirect downgrade an https source to plain http. */
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
	if (opts->ca_file)
		curl_easy_setopt(curl, CURLOPT_CAINFO, opts->ca_file);
	/* Credentials come from a netrc file, as with curl --netrc-optional: $NETRC, else
	 * ~/.netrc (in a pod, the Secret that data.netrc_secret names). curl sends them to the
	 * host they are written for, never to another host a redirect leads to. */
	curl_easy_setopt(curl, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
	if (netrc && *netrc)
		curl_easy_setopt(curl, CURLOPT_NETRC_FILE, netrc);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT,
	                 (long)(opts->connect_timeout_s > 0 ? opts->connect_timeout_s : 30));
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
	                 (long)(opts->low_speed_time_s > 0 ? opts->low_speed_time_s : 60));
}

int dlk_http_download(const char *url, const char *dest, unsigned long long max_bytes,
                      const struct dlk_data_opts *opts, struct dlk_err *err)
{
	static const struct dlk_data_opts no_opts;
	char errbuf[CURL_ERROR_SIZE];
	char *part = xasprintf("%s.part", dest);
	int max_retries, base_ms, max_wait_ms, attempt, ret = -1;
	int https = !strncasecmp(url, "https://", 8);
	const char *netrc = getenv("NETRC");
	CURL *curl = NULL;

	if (!opts)
		opts = &no_opts;
	max_retries = opts->max_retries < 0 ? 0 : opts->max_retries ? opts->max_retries : 5;
	base_ms = opts->retry_base_ms > 0 ? opts->retry_base_ms : 1000;
	max_wait_ms = opts->retry_max_wait_ms > 0 ? opts->retry_max_wait_ms : 60000;
	dlk_curl_global_init();

	for (attempt = 0;; attempt++) {
		struct download d = { 0 };
		struct stat st;
		CURLcode res;
		long status = 0, wait_ms;
		curl_off_t retry_after = 0;

		d.url = url;
		d.opts = opts;
		d.max_bytes = max_bytes;
		if (stat(part, &st) == 0 && S_ISREG(st.st_mode))
			d.offset = (unsigned long long)st.st_size;
		if (max_bytes && d.offset > max_bytes) {
			unlink(part);
			d.offset = 0;
		}
		{
			/* never through a link planted at the .part name (dlk_open_part), appended to */
			int pfd = dlk_open_part(part, err);
			if (pfd < 0)
				goto out;
			if (fcntl(pfd, F_SETFL, fcntl(pfd, F_GETFL) | O_APPEND) < 0 || !(d.f = fdopen(pfd, "ab"))) {
				dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
				close(pfd);
				goto out;
			}
		}
		curl = curl_easy_init();
		if (!curl) {
			fclose(d.f);
			dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot start libcurl", url);
			goto out;
		}
		d.curl = curl;
		errbuf[0] = '\0';
		setup(curl, url, https, netrc, opts, errbuf);
		if (max_bytes > d.offset)
			/* Refuses up front when Content-Length says the rest is too large. */
			curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(max_bytes - d.offset));
		if (d.offset)
			curl_easy_setopt(curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)d.offset);
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &d);
		curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &d);
		curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);

		res = curl_easy_perform(curl);
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after);
		if (fclose(d.f) != 0 && !d.write_failed)
			d.write_failed = errno ? errno : EIO;
		curl_easy_cleanup(curl);
		curl = NULL;

		if (d.write_failed) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(d.write_failed));
			goto out;
		}
		if (d.too_big || res == CURLE_FILESIZE_EXCEEDED) {
			unlink(part);
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is larger than the limit of %llu bytes", url, max_bytes);
			dlk_err_hint(err, "raise data.max_bytes if the data really is this large");
			goto out;
		}
		if (d.aborted) {
			dlk_errf(err, DLK_EXIT_FAIL, "'%s': download interrupted", url);
			goto out;
		}
		if (res == CURLE_OK && status >= 200 && status < 300) {
			if (rename(part, dest) < 0) {
				dlk_errf(err, DLK_EXIT_FAIL, "cannot rename '%s' to '%s': %s", part, dest,
				         strerror(errno));
				goto out;
			}
			ret = 0;
			goto out;
		}
		if (d.offset && (status == 416 || res == CURLE_RANGE_ERROR ||
		                 res == CURLE_BAD_DOWNLOAD_RESUME)) {
			/* The .part does not fit what the server has now: start over (once per try). */
			unlink(part);
			if (attempt < max_retries)
				continue;
		}
		if (!retryable(res, status) || attempt >= max_retries) {
			if (res != CURLE_OK)
				dlk_errf(err, DLK_EXIT_CONNECT, "cannot fetch '%s': %s", url,
				         errbuf[0] ? errbuf : curl_easy_strerror(res));
			else
				dlk_errf(err, DLK_EXIT_CONNECT, "cannot fetch '%s': the server answered HTTP %ld", url,
				         status);
			if (res == CURLE_UNSUPPORTED_PROTOCOL && https)
				dlk_err_hint(err, "an https source is not followed to a plain http address");
			else if (res == CURLE_OK && status == 401 && netrc && *netrc)
				dlk_err_hint(err, "the server wants credentials: check this host's entry in %s ($NETRC)",
				             netrc);
			else if (res == CURLE_OK && status == 401)
				dlk_err_hint(err, "the server wants credentials: put them in ~/.netrc (or a file named by "
				             "$NETRC); in the cluster, name a Secret with the key netrc in "
				             "data.netrc_secret");
			else if (attempt)
				dlk_err_hint(err, "gave up after %d attempts", attempt + 1);
			goto out;
		}
		wait_ms = (long)base_ms << (attempt < 16 ? attempt : 16);
		if (retry_after > 0 && retry_after * 1000 > wait_ms)
			wait_ms = retry_after > 86400 ? 86400000L : (long)retry_after * 1000;
		if (wait_ms > max_wait_ms)
			wait_ms = max_wait_ms;
		sleep_ms(wait_ms);
	}
out:
	if (curl)
		curl_easy_cleanup(curl);
	free(part);
	return ret;
}

/* ---- a byte range of a file (data.shard: a rank's part of a plain IDX file) ---- */

struct ranged {
	CURL *curl;
	dlk_http_sink_fn sink;
	void *sink_ctx;
	struct dlk_err *err;
	unsigned long long got;        /* bytes handed to the sink, over every attempt */
	unsigned long long want;       /* bytes asked for */
	unsigned long long size;       /* the whole file's, from Content-Range; 0 = not seen */
	int checked_status, not_partial, sink_failed;
};

/* Digits only (no sign, no blank: sscanf's %llu took "-1" as 2^64-1), at most what fits in 64
 * bits. Moves *p past them. */
static int read_u64(const char **p, const char *end, unsigned long long *v)
{
	const char *s = *p;

	*v = 0;
	if (s == end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (*v > (ULLONG_MAX - d) / 10)
			return -1;
		*v = *v * 10 + d;
	}
	*p = s;
	return 0;
}

int dlk_http_content_range(const char *data, size_t n, unsigned long long *total)
{
	const char *p = data, *end = data + n;
	unsigned long long a, b, t;

	/* RFC 9110 14.4: Content-Range: bytes FIRST-LAST/COMPLETE (a header line, CRLF at its end) */
	if (n < 14 || strncasecmp(p, "content-range:", 14))
		return -1;
	p += 14;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (end - p < 6 || strncmp(p, "bytes ", 6))
		return -1;
	p += 6;
	if (read_u64(&p, end, &a) || p == end || *p++ != '-' || read_u64(&p, end, &b) || p == end || *p++ != '/' ||
	    read_u64(&p, end, &t))
		return -1;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	if (p != end || a > b || b >= t)
		return -1;
	*total = t;
	return 0;
}

static size_t on_range_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct ranged *g = ctx;
	size_t n = size * nmemb;
	unsigned long long total;

	if (!dlk_http_content_range(data, n, &total))
		g->size = total;
	return n;
}

static size_t on_range_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct ranged *g = ctx;
	size_t n = size * nmemb;

	if (!g->checked_status) {
		long status = 0;
		g->checked_status = 1;
		curl_easy_getinfo(g->curl, CURLINFO_RESPONSE_CODE, &status);
		if (status != 206) {
			/* the whole file (a server that ignores Range) or an error page: not ours */
			g->not_partial = 1;
			return 0;
		}
	}
	if (g->got + n > g->want) {
		g->not_partial = 1; /* more than the range asked for */
		return 0;
	}
	if (g->sink(g->sink_ctx, data, n, g->err) < 0) {
		g->sink_failed = 1;
		return 0;
	}
	g->got += n;
	return n;
}

int dlk_http_range(const char *url, unsigned long long first, unsigned long long len, dlk_http_sink_fn sink,
                   void *sink_ctx, unsigned long long *size, const struct dlk_data_opts *opts, struct dlk_err *err)
{
	static const struct dlk_data_opts no_opts;
	char errbuf[CURL_ERROR_SIZE], range[64];
	int max_retries, base_ms, max_wait_ms, https = !strncasecmp(url, "https://", 8);
	const char *netrc = getenv("NETRC");
	struct ranged g = { 0 };

	if (!opts)
		opts = &no_opts;
	max_retries = opts->max_retries < 0 ? 0 : opts->max_retries ? opts->max_retries : 5;
	base_ms = opts->retry_base_ms > 0 ? opts->retry_base_ms : 1000;
	max_wait_ms = opts->retry_max_wait_ms > 0 ? opts->retry_max_wait_ms : 60000;
	dlk_curl_global_init();
	g.sink = sink;
	g.sink_ctx = sink_ctx;
	g.err = err;
	g.want = len;
	*size = 0;
	if (len == 0)
		return dlk_errf(err, DLK_EXIT_FAIL, "'%s': an empty range", url);
	for (int attempt = 0;; attempt++) {
		CURL *curl = curl_easy_init();
		CURLcode res;
		long status = 0, wait_ms;
		curl_off_t retry_after = 0;

		if (!curl)
			return dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot start libcurl", url);
		unsigned long long before = g.got;
		g.curl = curl;
		g.checked_status = 0;
		errbuf[0] = '\0';
		setup(curl, url, https, netrc, opts, errbuf);
		/* what is left of the range */
		snprintf(range, sizeof(range), "%llu-%llu", first + g.got, first + len - 1);
		curl_easy_setopt(curl, CURLOPT_RANGE, range);
		curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_range_header);
		curl_easy_setopt(curl, CURLOPT_HEADERDATA, &g);
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_range_write);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &g);
		res = curl_easy_perform(curl);
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after);
		curl_easy_cleanup(curl);
		if (g.sink_failed)
			return -1;
		/* all of it, or all the file has of it */
		if (res == CURLE_OK && status == 206 && g.size && (g.got == len || first + g.got >= g.size))
			break;
		if (!g.not_partial && g.got > before) {
			/* a part of the rest came: ask for what is left at once, the tries counted afresh */
			attempt = -1;
			continue;
		}
		if (g.not_partial && (status == 200 || status == 206 || status == 416)) {
			dlk_errf(err, DLK_EXIT_CONNECT, "'%s': the server does not answer the range %s (HTTP %ld)", url, range,
			         status);
			return status == 200 ? -2 : -1;
		}
		if (!retryable(res, status) || attempt >= max_retries) {
			if (res != CURLE_OK && !g.not_partial)
				dlk_errf(err, DLK_EXIT_CONNECT, "cannot fetch '%s' (range %s): %s", url, range,
				         errbuf[0] ? errbuf : curl_easy_strerror(res));
			else
				dlk_errf(err, DLK_EXIT_CONNECT, "cannot fetch '%s' (range %s): the server answered HTTP %ld",
				         url, range, status);
			return attempt ? dlk_err_hint(err, "gave up after %d attempts", attempt + 1) : -1;
		}
		g.not_partial = 0;
		wait_ms = (long)base_ms << (attempt < 16 ? attempt : 16);
		if (retry_after > 0 && retry_after * 1000 > wait_ms)
			wait_ms = retry_after > 86400 ? 86400000L : (long)retry_after * 1000;
		if (wait_ms > max_wait_ms)
			wait_ms = max_wait_ms;
		sleep_ms(wait_ms);
	}
	*size = g.size;
	return 0;
}
