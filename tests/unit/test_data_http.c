/* Downloads over http(s) against a loopback server started in this process (libmicrohttpd on
 * 127.0.0.1): retries with Retry-After, resume with Range, 404, size limits, redirects, the
 * cache, pins, and https with a certificate made at test time. Every case is bounded to seconds. */
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/data/fetch.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#define BODY_LEN 300000

static unsigned char body[BODY_LEN];
static struct dlk_buf idx_images = DLK_BUF_INIT, idx_labels = DLK_BUF_INIT;
static char *tmpdir;
static struct dlk_err err = DLK_ERR_INIT;

/* What the server does for a path: data, as in curl's test cases. */
struct behaviour {
	const char *path;
	int status;             /* a fixed answer (404, ...); 0 = serve the body */
	int fail_n;             /* the first fail_n requests get fail_status */
	int fail_status;
	int retry_after;        /* seconds in Retry-After on failures; 0 = none */
	size_t cut_at;          /* the first full answer stops after this many bytes; 0 = never */
	int ignore_range;       /* answer Range requests with the whole file (200) */
	int unknown_length;     /* no Content-Length */
	const char *location;   /* answer 302 with this Location */
	const struct dlk_buf *content; /* NULL = the 300000-byte test body */
	const char *auth;       /* the Authorization a request needs; others get 401 */
};

static const struct behaviour behaviours[] = {
	{ "/ok", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/again", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/pinned", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/shared", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/busy", 0, 1, 503, 1, 0, 0, 0, NULL, NULL, NULL },
	{ "/throttled", 0, 2, 429, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/down", 0, 1000, 503, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/cut", 0, 0, 0, 0, 100000, 0, 0, NULL, NULL, NULL },
	{ "/crashed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/norange", 0, 0, 0, 0, 0, 1, 0, NULL, NULL, NULL },
	{ "/missing", 404, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/forbidden", 403, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/big", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/bigstream", 0, 0, 0, 0, 0, 0, 1, NULL, NULL, NULL },
	{ "/moved", 0, 0, 0, 0, 0, 0, 0, "/ok", NULL, NULL },
	{ "/loop", 0, 0, 0, 0, 0, 0, 0, "/loop", NULL, NULL },
	{ "/tohttp", 0, 0, 0, 0, 0, 0, 0, "http://127.0.0.1:1/ok", NULL, NULL },
	{ "/abort", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/images.idx", 0, 0, 0, 0, 0, 0, 0, NULL, &idx_images, NULL },
	{ "/shard/images.idx", 0, 0, 0, 0, 0, 0, 0, NULL, &idx_images, NULL },
	{ "/shard/norange.idx", 0, 0, 0, 0, 0, 1, 0, NULL, &idx_images, NULL },
	{ "/shard/labels.idx", 0, 0, 0, 0, 0, 0, 0, NULL, &idx_labels, NULL },
	{ "/shard/packed", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL },
	{ "/labels.idx", 0, 1, 503, 0, 50, 0, 0, NULL, &idx_labels, NULL },
	{ "/private", 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "Basic YW5uOnMzY3JldA==" }, /* ann:s3cret */
};

#define NB ((int)DLK_ARRAY_SIZE(behaviours))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int requests;
	int cut_done;           /* a cut happened: the next request must resume with Range */
	int range_violation;    /* a resume came without Range */
	char last_range[64];
} state[NB];

struct cut_reader {
	const unsigned char *data;
	size_t len, cut;
};

static ssize_t read_cut(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct cut_reader *r = cls;
	size_t n;

	if (pos >= r->cut)
		return MHD_CONTENT_READER_END_WITH_ERROR;  /* drop the connection mid-body */
	n = r->cut - pos < max ? r->cut - (size_t)pos : max;
	memcpy(buf, r->data + pos, n);
	return (ssize_t)n;
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct cut_reader *r = cls;
	size_t n;

	if (pos >= r->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	n = r->len - pos < max ? r->len - (size_t)pos : max;
	memcpy(buf, r->data + pos, n);
	return (ssize_t)n;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con)
{
	const struct behaviour *b = NULL;
	struct MHD_Response *resp;
	const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	const unsigned char *data = body;
	size_t len = BODY_LEN, from = 0;
	int i, status = 200, nreq;
	enum MHD_Result ret;
	char hdr[128];

	(void)cls, (void)method, (void)version, (void)upload, (void)upload_size, (void)con;
	for (i = 0; i < NB; i++)
		if (!strcmp(url, behaviours[i].path))
			b = &behaviours[i];
	if (!b) {
		resp = MHD_create_response_from_buffer(9, (void *)"not found", MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(c, 404, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	i = (int)(b - behaviours);
	if (b->content)
		data = (const unsigned char *)b->content->data, len = b->content->len;
	pthread_mutex_lock(&lock);
	nreq = ++state[i].requests;
	snprintf(state[i].last_range, sizeof(state[i].last_range), "%s", range ? range : "");
	if (state[i].cut_done && !range)
		state[i].range_violation = 1;
	pthread_mutex_unlock(&lock);

	if (b->auth) {
		const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
		if (!a || strcmp(a, b->auth)) {
			resp = MHD_create_response_from_buffer(12, (void *)"unauthorized", MHD_RESPMEM_PERSISTENT);
			MHD_add_response_header(resp, "WWW-Authenticate", "Basic realm=\"data\"");
			ret = MHD_queue_response(c, 401, resp);
			MHD_destroy_response(resp);
			return ret;
		}
	}
	if (b->status || nreq <= b->fail_n || b->location) {
		status = b->location ? 302 : b->status ? b->status : b->fail_status;
		resp = MHD_create_response_from_buffer(5, (void *)"error", MHD_RESPMEM_PERSISTENT);
		if (b->retry_after) {
			snprintf(hdr, sizeof(hdr), "%d", b->retry_after);
			MHD_add_response_header(resp, "Retry-After", hdr);
		}
		if (b->location)
			MHD_add_response_header(resp, "Location", b->location);
		ret = MHD_queue_response(c, (unsigned)status, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	if (state[i].cut_done && !range) {
		resp = MHD_create_response_from_buffer(8, (void *)"no range", MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(c, 400, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	if (range && !b->ignore_range) {
		unsigned long long off, last;
		/* bytes=FROM- (a resumed download) or bytes=FROM-LAST (a shard's part) */
		if (sscanf(range, "bytes=%llu-%llu", &off, &last) == 2 && last >= off && off < len)
			len = last + 1 < len ? (size_t)last + 1 : len;
		if (sscanf(range, "bytes=%llu-", &off) != 1 || off >= len) {
			resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
			ret = MHD_queue_response(c, 416, resp);
			MHD_destroy_response(resp);
			return ret;
		}
		from = (size_t)off;
		status = 206;
	}
	if (b->cut_at && !state[i].cut_done && !range) {
		static struct cut_reader cr;
		cr.data = data, cr.len = len, cr.cut = b->cut_at < len ? b->cut_at : len / 2;
		pthread_mutex_lock(&lock);
		state[i].cut_done = 1;
		pthread_mutex_unlock(&lock);
		resp = MHD_create_response_from_callback(len, 4096, read_cut, &cr, NULL);
	} else if (b->unknown_length) {
		static struct cut_reader sr;
		sr.data = data, sr.len = len;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, &sr, NULL);
	} else {
		resp = MHD_create_response_from_buffer(len - from, (void *)(data + from), MHD_RESPMEM_PERSISTENT);
	}
	if (status == 206) {
		snprintf(hdr, sizeof(hdr), "bytes %zu-%zu/%zu", from, len - 1,
		         b->content ? b->content->len : (size_t)BODY_LEN);
		MHD_add_response_header(resp, "Content-Range", hdr);
	}
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static struct MHD_Daemon *start(int tls, const char *key, const char *cert, int *port)
{
	struct sockaddr_in sa;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (tls)
		d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL, handle, NULL,
		                     MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_HTTPS_MEM_KEY, key,
		                     MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_CONNECTION_TIMEOUT, 5u,
		                     MHD_OPTION_END);
	else
		d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, NULL,
		                     MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_TIMEOUT, 5u, MHD_OPTION_END);
	if (!d)
		return NULL;
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : 0;
	return d;
}

static int requests(const char *path)
{
	int n = -1;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < NB; i++)
		if (!strcmp(behaviours[i].path, path))
			n = state[i].requests;
	pthread_mutex_unlock(&lock);
	return n;
}

static int state_of(const char *path)
{
	for (int i = 0; i < NB; i++)
		if (!strcmp(behaviours[i].path, path))
			return i;
	return 0;
}

static struct {
	unsigned long long last_done, last_total;
	int calls, abort_after;
} prog;

static int on_progress(void *ctx, const char *what, unsigned long long done, unsigned long long total)
{
	(void)ctx, (void)what;
	prog.calls++;
	prog.last_done = done;
	if (total)
		prog.last_total = total;
	return prog.abort_after && done >= (unsigned long long)prog.abort_after;
}

static char *base;
static struct dlk_data_opts opts;

static int fetch(const char *path, const char *pin, long long max_bytes, struct dlk_fetched *f)
{
	char *url = strstr(path, "://") ? xstrdup(path) : xasprintf("%s%s", base, path);
	struct dlk_source src = { url, (char *)pin };
	struct dlk_data d;
	int r;

	memset(&d, 0, sizeof(d));
	d.max_bytes = max_bytes;
	dlk_fetched_release(f);
	dlk_err_clear(&err);
	r = dlk_fetch(&src, &d, &opts, f, &err);
	free(url);
	return r;
}

static int file_is_body(const char *path)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256];
	int ok = dlk_buf_read_file(&b, path, 0, msg, sizeof(msg)) == 0 && b.len == BODY_LEN &&
	         !memcmp(b.data, body, BODY_LEN);
	dlk_buf_release(&b);
	return ok;
}

static void write_bytes(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	fwrite(data, 1, len, f);
	fclose(f);
}

static char *part_for(const char *path)
{
	char *url = xasprintf("%s%s", base, path), *cache = dlk_cache_path(opts.cache_dir, url);
	char *part = xasprintf("%s.part", cache);
	free(url), free(cache);
	return part;
}

static void make_idx(void)
{
	unsigned char h[16] = { 0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2 };
	dlk_buf_add(&idx_images, h, 16);
	for (int i = 0; i < 12; i++)
		dlk_buf_addc(&idx_images, (char)(i * 20));
	unsigned char l[8] = { 0, 0, 8, 1, 0, 0, 0, 3 };
	dlk_buf_add(&idx_labels, l, 8);
	dlk_buf_add(&idx_labels, "\x02\x00\x01", 3);
}

static void *fetch_shared(void *arg)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_source src = { arg, NULL };
	struct dlk_data d;
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_data_opts o = opts;
	intptr_t ok;

	memset(&d, 0, sizeof(d));
	o.progress = NULL;
	ok = dlk_fetch(&src, &d, &o, &f, &e) == 0 && file_is_body(f.path);
	dlk_fetched_release(&f);
	return (void *)ok;
}

static void plain_cases(void)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	char hex[65], *part;
	double t;
	struct stat st;

	dlk_sha256_hex(body, BODY_LEN, hex);

	/* a plain download lands in the cache, with its digest; the second fetch reuses it */
	CHECK_MSG(fetch("/ok", NULL, 0, &f) == 0, "/ok: %s", err.msg);
	CHECK(f.path && !strncmp(f.path, opts.cache_dir, strlen(opts.cache_dir)) && strstr(f.path, "-ok"));
	CHECK(file_is_body(f.path));
	CHECK_STR(f.sha256, hex);
	CHECK(prog.calls > 0 && prog.last_total == BODY_LEN && prog.last_done == BODY_LEN);
	CHECK(fetch("/ok", hex, 0, &f) == 0);
	CHECK(requests("/ok") == 1);

	/* 503 with Retry-After: 1 waits about a second, though the back-off base is 10 ms */
	t = dlk_now();
	CHECK_MSG(fetch("/busy", NULL, 0, &f) == 0, "/busy: %s", err.msg);
	t = dlk_now() - t;
	CHECK(requests("/busy") == 2);
	CHECK_MSG(t >= 0.9 && t < 4, "Retry-After honoured: waited %.2fs", t);
	CHECK(file_is_body(f.path));

	/* 429 without Retry-After: exponential back-off from 10 ms */
	t = dlk_now();
	CHECK_MSG(fetch("/throttled", NULL, 0, &f) == 0, "/throttled: %s", err.msg);
	CHECK(requests("/throttled") == 3);
	CHECK(dlk_now() - t < 1.0);

	/* a server that stays down: bounded retries, then DLK_EXIT_CONNECT */
	CHECK(fetch("/down", NULL, 0, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT);
	CHECK(requests("/down") == 6);
	CHECK_CONTAINS(err.msg, "/down': the server answered HTTP 503");
	CHECK_STR(err.hint, "gave up after 6 attempts");

	/* a response cut in the middle is resumed with a Range request */
	CHECK_MSG(fetch("/cut", NULL, 0, &f) == 0, "/cut: %s", err.msg);
	CHECK(requests("/cut") == 2);
	CHECK(!state[state_of("/cut")].range_violation);
	CHECK_MSG(!strncmp(state[state_of("/cut")].last_range, "bytes=", 6) &&
	          atol(state[state_of("/cut")].last_range + 6) > 0,
	          "resumed with '%s'", state[state_of("/cut")].last_range);
	CHECK(file_is_body(f.path));

	/* a .part left by a crashed run is resumed on the first request */
	part = part_for("/crashed");
	write_bytes(part, body, 1234);
	CHECK_MSG(fetch("/crashed", NULL, 0, &f) == 0, "/crashed: %s", err.msg);
	CHECK_STR(state[state_of("/crashed")].last_range, "bytes=1234-");
	CHECK(requests("/crashed") == 1);
	CHECK(file_is_body(f.path));
	CHECK(stat(part, &st) == -1);
	free(part);

	/* a server that ignores Range: the stale .part is thrown away, not glued to the new body */
	part = part_for("/norange");
	write_bytes(part, "garbage", 7);
	CHECK_MSG(fetch("/norange", NULL, 0, &f) == 0, "/norange: %s", err.msg);
	/* curl refuses a 200 to a Range request (CURLE_RANGE_ERROR): the second try starts over */
	CHECK(requests("/norange") == 2);
	CHECK_STR(state[state_of("/norange")].last_range, "");
	CHECK(file_is_body(f.path));
	free(part);

	/* 404 and 403 are final: one request, DLK_EXIT_CONNECT naming the URL */
	CHECK(fetch("/missing", NULL, 0, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT);
	{
		char *want = xasprintf("cannot fetch '%s/missing': the server answered HTTP 404", base);
		CHECK_STR(err.msg, want);
		free(want);
	}
	CHECK(requests("/missing") == 1);
	CHECK(fetch("/forbidden", NULL, 0, &f) == -1);
	CHECK(requests("/forbidden") == 1);

	/* credentials come from a netrc file ($NETRC, else ~/.netrc), never from the spec */
	{
		char *home = xasprintf("%s/home", tmpdir), *netrc = xasprintf("%s/netrc", tmpdir);
		char *dotnetrc = xasprintf("%s/.netrc", home);
		const char *entry = "machine 127.0.0.1 login ann password s3cret\n";
		CHECK(mkdir(home, 0700) == 0);
		setenv("HOME", home, 1);
		unsetenv("NETRC");
		CHECK(fetch("/private", NULL, 0, &f) == -1);
		CHECK(err.code == DLK_EXIT_CONNECT);
		CHECK_CONTAINS(err.msg, "/private': the server answered HTTP 401");
		CHECK_CONTAINS(err.hint, "put them in ~/.netrc (or a file named by $NETRC); in the cluster, name a Secret");
		CHECK(requests("/private") == 1); /* 401 is final */
		write_bytes(netrc, "machine 127.0.0.1 login ann password wrong\n", 43);
		setenv("NETRC", netrc, 1);
		CHECK(fetch("/private", NULL, 0, &f) == -1);
		CHECK_CONTAINS(err.hint, "check this host's entry in");
		CHECK(!strstr(err.msg, "wrong") && !strstr(err.hint, "wrong"));
		write_bytes(netrc, entry, strlen(entry));
		CHECK_MSG(fetch("/private", NULL, 0, &f) == 0, "$NETRC: %s", err.msg);
		CHECK(file_is_body(f.path));
		unlink(f.path);
		unsetenv("NETRC");
		write_bytes(dotnetrc, entry, strlen(entry));
		CHECK_MSG(fetch("/private", NULL, 0, &f) == 0, "~/.netrc: %s", err.msg);
		unlink(dotnetrc), unlink(netrc), rmdir(home);
		free(home), free(netrc), free(dotnetrc);
	}

	/* size limits: refused up front on Content-Length, and counted when there is none */
	CHECK(fetch("/big", NULL, 1000, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "/big' is larger than the limit of 1000 bytes");
	part = part_for("/big");
	CHECK(stat(part, &st) == -1);
	free(part);
	CHECK(fetch("/bigstream", NULL, 100000, &f) == -1);
	CHECK_CONTAINS(err.msg, "/bigstream' is larger than the limit of 100000 bytes");
	CHECK(fetch("/bigstream", NULL, BODY_LEN, &f) == 0);
	CHECK(file_is_body(f.path));

	/* redirects are followed, but not forever */
	CHECK_MSG(fetch("/moved", NULL, 0, &f) == 0, "/moved: %s", err.msg);
	CHECK(file_is_body(f.path));
	CHECK(fetch("/loop", NULL, 0, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT);
	CHECK_CONTAINS(err.msg, "redirect");
	CHECK(requests("/loop") == 6);

	/* pins over http: a wrong pin fails before use; a cached copy failing its pin is fetched again */
	CHECK(fetch("/pinned", "1111111111111111111111111111111111111111111111111111111111111111", 0, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "sha256 mismatch: expected 1111111111111111111111111111111111111111111111111111111111111111, got ");
	CHECK_CONTAINS(err.msg, hex);
	CHECK(requests("/pinned") == 1);
	CHECK(fetch("/pinned", hex, 0, &f) == 0);
	CHECK(requests("/pinned") == 1);
	CHECK(fetch("/pinned", "2222222222222222222222222222222222222222222222222222222222222222", 0, &f) == -1);
	CHECK(requests("/pinned") == 2);

	/* the progress callback can stop a download */
	prog.abort_after = 1000;
	CHECK(fetch("/abort", NULL, 0, &f) == -1);
	CHECK_CONTAINS(err.msg, "download interrupted");
	prog.abort_after = 0;

	/* two workers sharing a cache: one downloads, the other waits for it and reuses the file */
	{
		pthread_t t[2];
		void *ok[2] = { NULL, NULL };
		char *url = xasprintf("%s/shared", base);
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, fetch_shared, url);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], &ok[i]);
		CHECK(ok[0] && ok[1]);
		CHECK(requests("/shared") == 1);
		free(url);
	}

	/* nothing listening: curl's error text, DLK_EXIT_CONNECT */
	{
		int s = socket(AF_INET, SOCK_STREAM, 0), port;
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		char *url;
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		bind(s, (struct sockaddr *)&sa, sizeof(sa));
		getsockname(s, (struct sockaddr *)&sa, &sl);
		port = ntohs(sa.sin_port);
		close(s);
		url = xasprintf("http://127.0.0.1:%d/x", port);
		opts.max_retries = -1;
		CHECK(fetch(url, NULL, 0, &f) == -1);
		opts.max_retries = 0;
		CHECK(err.code == DLK_EXIT_CONNECT);
		CHECK_CONTAINS(err.msg, url);
		CHECK_CONTAINS(err.msg, "onnect");
		free(url);
	}

	/* a name that cannot resolve (.invalid is reserved): DLK_EXIT_CONNECT with curl's text; the
	 * connect timeout bounds the resolver where there is no DNS at all */
	{
		double t0 = dlk_now();
		opts.connect_timeout_s = 2;
		opts.max_retries = 1;
		CHECK(fetch("http://dlk-test.invalid/x", NULL, 0, &f) == -1);
		opts.connect_timeout_s = 3;
		opts.max_retries = 0;
		CHECK_STR(err.hint, "gave up after 2 attempts");
		CHECK(err.code == DLK_EXIT_CONNECT);
		CHECK_CONTAINS(err.msg, "cannot fetch 'http://dlk-test.invalid/x': ");
		CHECK_CONTAINS(err.msg, "esolv");
		CHECK(dlk_now() - t0 < 6);
	}

	/* the whole path: an IDX pair over http, one file failing once and cut once */
	{
		struct dlk_data d;
		struct dlk_dataset ds = DLK_DATASET_INIT;
		char *im = xasprintf("%s/images.idx", base), *lb = xasprintf("%s/labels.idx", base);
		memset(&d, 0, sizeof(d));
		d.format = DLK_DATA_IDX;
		d.train.images.url = im;
		d.train.labels.url = lb;
		d.scale = 1, d.std = 1;
		d.max_bytes = 1 << 20;
		CHECK_MSG(dlk_data_load(&d, "train", &opts, &ds, &err) == 0, "idx over http: %s", err.msg);
		CHECK(ds.n == 3 && ds.sample_size == 4 && ds.n_classes == 3 && ds.y[0] == 2);
		float x[12];
		dlk_dataset_gather_range(&ds, 0, 3, x);
		CHECK(ds.storage == DLK_STORE_U8 && x[11] == 220);
		CHECK(ds.n_sources == 2 && !strcmp(ds.sources[1].url, lb));
		dlk_dataset_release(&ds);
		free(im), free(lb);
	}

	/* data.shard over http: rank 1 of 2 reads its part of a plain IDX file by Range requests (the
	 * header, then its bytes); rank 0 fetches the whole file, and so does a rank whose server
	 * ignores Range */
	{
		struct dlk_data d;
		struct dlk_dataset ds = DLK_DATASET_INIT;
		struct dlk_data_opts o = opts;
		char *im = xasprintf("%s/shard/images.idx", base), *lb = xasprintf("%s/shard/labels.idx", base);
		memset(&d, 0, sizeof(d));
		d.format = DLK_DATA_IDX;
		d.train.images.url = im;
		d.train.labels.url = lb;
		d.scale = 1, d.std = 1;
		d.max_bytes = 1 << 20;
		o.cache_dir = xasprintf("%s/cache-shard", tmpdir);
		o.progress = NULL;
		o.shard_rank = 1;
		o.shard_world = 2;
		CHECK_MSG(dlk_data_load(&d, "train", &o, &ds, &err) == 0, "rank 1's part over http: %s", err.msg);
		CHECK(ds.sharded && ds.n == 2 && ds.base == 1 && ds.total == 3 && ds.y[0] == 0 && ds.y[1] == 1);
		CHECK(ds.x8 && ds.x8[0] == 80 && ds.x8[7] == 220);
		CHECK_STR(state[state_of("/shard/images.idx")].last_range, "bytes=20-27");
		CHECK(requests("/shard/images.idx") == 2);
		CHECK(ds.n_sources == 2 && ds.sources[0].sha256[0] == '\0' && strlen(ds.sources[1].sha256) == 64);
		dlk_dataset_release(&ds);
		o.shard_rank = 0;
		CHECK_MSG(dlk_data_load(&d, "train", &o, &ds, &err) == 0, "rank 0's part: %s", err.msg);
		CHECK(ds.n == 1 && ds.base == 0 && strlen(ds.sources[0].sha256) == 64);
		CHECK_STR(state[state_of("/shard/images.idx")].last_range, "");
		dlk_dataset_release(&ds);
		free(im);
		im = xasprintf("%s/shard/norange.idx", base);
		d.train.images.url = im;
		o.shard_rank = 1;
		o.max_retries = -1;
		/* a server that ignores Range: the whole file, as rank 0 fetches it */
		CHECK_MSG(dlk_data_load(&d, "train", &o, &ds, &err) == 0, "no Range: %s", err.msg);
		CHECK(ds.n == 2 && ds.base == 1 && ds.x8[0] == 80 && strlen(ds.sources[0].sha256) == 64);
		CHECK(requests("/shard/norange.idx") == 2);
		dlk_dataset_release(&ds);
		/* not a plain IDX file (a compressed one, say): its first bytes tell, and it is fetched
		 * whole, decoded as a stream, and only the part kept */
		free(im);
		im = xasprintf("%s/shard/packed", base);
		d.train.images.url = im;
		CHECK(dlk_data_load(&d, "train", &o, &ds, &err) == -1);
		CHECK_CONTAINS(err.msg, "not an IDX file: bad magic");
		CHECK(requests("/shard/packed") == 2 && state[state_of("/shard/packed")].last_range[0] == '\0');
		dlk_err_clear(&err);
		free(im), free(lb), free((char *)o.cache_dir);
	}
	dlk_fetched_release(&f);
}

static int run(const char *cmd)
{
	int r = system(cmd);
	return r == 0 ? 0 : -1;
}

static void tls_cases(void)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_buf key = DLK_BUF_INIT, cert = DLK_BUF_INIT;
	struct MHD_Daemon *d = NULL;
	char msg[256], *cmd, *keyp, *certp, *url;
	int port = 0;

	if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
		CHECK_MISSING("libmicrohttpd with TLS (Debian's libmicrohttpd12)");
		return;
	}
	keyp = xasprintf("%s/key.pem", tmpdir);
	certp = xasprintf("%s/cert.pem", tmpdir);
	cmd = xasprintf("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	                "-keyout '%s' -out '%s' -days 2 -subj /CN=127.0.0.1 "
	                "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1", keyp, certp);
	if (run(cmd) < 0 || dlk_buf_read_file(&key, keyp, 0, msg, sizeof(msg)) < 0 ||
	    dlk_buf_read_file(&cert, certp, 0, msg, sizeof(msg)) < 0) {
		CHECK_MISSING("the openssl command (it could not make a certificate)");
		goto out;
	}
	d = start(1, key.data, cert.data, &port);
	CHECK_MSG(d != NULL, "the https server starts");
	if (!d)
		goto out;
	url = xasprintf("https://127.0.0.1:%d/again", port);
	opts.ca_file = certp;
	CHECK_MSG(fetch(url, NULL, 0, &f) == 0, "https with the test CA: %s", err.msg);
	CHECK(f.path && file_is_body(f.path));
	free(url);
	/* an https source may not be redirected to plain http */
	url = xasprintf("https://127.0.0.1:%d/tohttp", port);
	CHECK(fetch(url, NULL, 0, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT);
	CHECK_CONTAINS(err.msg, "\"http\"");
	CHECK_STR(err.hint, "an https source is not followed to a plain http address");
	CHECK(requests("/tohttp") == 1);
	free(url);
	/* verification is always on: without the CA the same server is refused */
	opts.ca_file = NULL;
	url = xasprintf("https://127.0.0.1:%d/ok", port);
	CHECK(fetch(url, NULL, 0, &f) == -1);
	CHECK(err.code == DLK_EXIT_CONNECT);
	CHECK_CONTAINS(err.msg, "certificate");
	free(url);
	MHD_stop_daemon(d);
out:
	dlk_fetched_release(&f);
	dlk_buf_release(&key), dlk_buf_release(&cert);
	free(cmd), free(keyp), free(certp);
}

/* The Content-Range header of a ranged GET: digits only, within 64 bits, nothing after them. */
static void content_range_cases(void)
{
	static const struct {
		const char *line;
		int ok;
		unsigned long long total;
	} cases[] = {
		{ "Content-Range: bytes 0-99/100\r\n", 1, 100 },
		{ "content-range: bytes 10-10/18446744073709551615\r\n", 1, 18446744073709551615ull },
		{ "Content-Range:bytes 0-0/1", 1, 1 },
		{ "Content-Range: bytes -1-5/10\r\n", 0, 0 },           /* %llu took this as 2^64-1 */
		{ "Content-Range: bytes 0--1/10\r\n", 0, 0 },
		{ "Content-Range: bytes 0-5/-1\r\n", 0, 0 },
		{ "Content-Range: bytes 0-5/18446744073709551616\r\n", 0, 0 }, /* past 64 bits */
		{ "Content-Range: bytes 0-5/+10\r\n", 0, 0 },
		{ "Content-Range: bytes 0-5/10x\r\n", 0, 0 },
		{ "Content-Range: bytes 0-5/*\r\n", 0, 0 },
		{ "Content-Range: bytes 6-5/10\r\n", 0, 0 },
		{ "Content-Range: bytes 0-10/10\r\n", 0, 0 },
		{ "Content-Range: items 0-5/10\r\n", 0, 0 },
		{ "Content-Length: 10\r\n", 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned long long t = 7;
		int rc = dlk_http_content_range(cases[i].line, strlen(cases[i].line), &t);
		CHECK_MSG(cases[i].ok ? rc == 0 && t == cases[i].total : rc == -1 && t == 7, "'%.*s': %s",
		          (int)strcspn(cases[i].line, "\r\n"), cases[i].line, rc ? "refused" : "taken");
	}
}

int main(void)
{
	struct MHD_Daemon *d;
	int port = 0;
	char *cache;

	for (size_t i = 0; i < BODY_LEN; i++)
		body[i] = (unsigned char)(i * 7 % 251);
	make_idx();
	tmpdir = test_tmpdir("test-http");
	if (!tmpdir)
		return 1;
	d = start(0, NULL, NULL, &port);
	CHECK_MSG(d != NULL && port > 0, "the loopback server starts on port %d", port);
	if (!d)
		return CHECK_DONE();
	base = xasprintf("http://127.0.0.1:%d", port);
	cache = xasprintf("%s/cache/nested", tmpdir);
	memset(&opts, 0, sizeof(opts));
	opts.cache_dir = cache;
	opts.retry_base_ms = 10;
	opts.retry_max_wait_ms = 2000;
	opts.connect_timeout_s = 3;
	opts.low_speed_time_s = 3;
	opts.progress = on_progress;

	content_range_cases();
	plain_cases();
	MHD_stop_daemon(d);
	tls_cases();

	free(base), free(cache);
	dlk_buf_release(&idx_images), dlk_buf_release(&idx_labels);
	test_tmpdir_remove(tmpdir);
	return CHECK_DONE();
}
