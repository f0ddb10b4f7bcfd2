/* The HTTP face of a directory store (see serve.h), with libmicrohttpd. */
#include "lib/store/serve.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/store/manifest.h"
#include "lib/store/wire.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

struct server {
	const struct dlk_store_serve_opts *o;
	pthread_mutex_t mu;
	double last;                   /* when the last request began or ended */
	int active;                    /* requests under way */
};

struct request {
	int started;
	/* a PUT of an upload */
	int fd;
	long status;                   /* set when the answer is decided before the body ends */
	char *answer;                  /* its JSON */
	unsigned long long got;        /* staged so far */
	unsigned long long body;       /* bytes of this request's body */
};

int dlk_store_key_check(const char *key)
{
	char why[160];
	const char *rest;

	if (!strncmp(key, "sha256/", 7) || !strncmp(key, "datasets/", 9)) {
		rest = strchr(key, '/') + 1;
		return strlen(rest) == 64 && strspn(rest, "0123456789abcdef") == 64 ? 0 : -1;
	}
	if (!strncmp(key, "logs/", 5)) { /* workers' log archives (lib/jobs/logarchive.h) */
		rest = key + 5;
		return *rest && *rest != '.' && strlen(rest) <= 200 &&
		               strspn(rest, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == strlen(rest)
		           ? 0
		           : -1;
	}
	if (!strncmp(key, "tags/", 5))
		return strchr(key + 5, '@') && !dlk_dataset_tag_check(key + 5, why, sizeof(why)) ? 0 : -1;
	return -1;
}

static int prefix_ok(const char *p)
{
	return !strcmp(p, "sha256/") || !strcmp(p, "datasets/") || !strcmp(p, "tags/") || !strcmp(p, "logs/");
}

static void touch(struct server *s, int delta)
{
	pthread_mutex_lock(&s->mu);
	s->active += delta;
	s->last = dlk_now();
	pthread_mutex_unlock(&s->mu);
}

static MHD_RESULT reply(struct MHD_Connection *c, unsigned status, const char *json)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_MUST_COPY);
	MHD_RESULT ok;

	MHD_add_response_header(r, "Content-Type", "application/json");
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static MHD_RESULT reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static MHD_RESULT reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
	char msg[512];
	cJSON *o = cJSON_CreateObject();
	char *s;
	MHD_RESULT ok;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(o, "error", msg);
	s = cJSON_PrintUnformatted(o);
	ok = reply(c, status, s);
	free(s);
	cJSON_Delete(o);
	return ok;
}

static MHD_RESULT reply_size(struct MHD_Connection *c, unsigned status, unsigned long long size)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "{\"size\": %llu}", size);
	return reply(c, status, buf);
}

static char *staging_path(const char *root, const char *key, const char *sha)
{
	char kh[65];

	dlk_sha256_hex(key, strlen(key), kh);
	return xasprintf("%s/.uploads/%.16s-%s.part", root, kh, sha);
}

static MHD_RESULT do_stat(struct MHD_Connection *c, const char *root, const char *key)
{
	char *p = xasprintf("%s/%s", root, key);
	const char *hash = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "hash");
	struct stat st;
	MHD_RESULT ok;
	int fd = dlk_open_regular(p, 0);

	if (fd < 0 || fstat(fd, &st) < 0) {
		ok = reply_error(c, MHD_HTTP_NOT_FOUND, "no object %s", key);
	} else if (hash && !strcmp(hash, "1")) {
		/* a push asks before it skips an object: hashing here reads the volume, not the network */
		struct dlk_sha256 h;
		char buf[1 << 16], hex[65], json[160];
		ssize_t n;
		dlk_sha256_begin(&h);
		while ((n = read(fd, buf, sizeof(buf))) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			dlk_sha256_update(&h, buf, (size_t)n);
		}
		dlk_sha256_end(&h, hex);
		if (n < 0) {
			ok = reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot read %s: %s", key, strerror(errno));
		} else {
			snprintf(json, sizeof(json), "{\"size\": %llu, \"sha256\": \"%s\"}", (unsigned long long)st.st_size, hex);
			ok = reply(c, MHD_HTTP_OK, json);
		}
	} else {
		ok = reply_size(c, MHD_HTTP_OK, (unsigned long long)st.st_size);
	}
	if (fd >= 0)
		close(fd);
	free(p);
	return ok;
}

static MHD_RESULT do_get(struct MHD_Connection *c, const char *root, const char *key)
{
	char *p = xasprintf("%s/%s", root, key);
	const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
	unsigned long long from = 0, size;
	struct MHD_Response *r;
	struct stat st;
	int fd = dlk_open_regular(p, 0); /* a FIFO in the volume must not hang this thread */
	MHD_RESULT ok;

	free(p);
	if (fd < 0 && (errno == EISDIR || errno == EINVAL))
		return reply_error(c, 422, "%s is corrupted: %s", key,
		                   errno == EISDIR ? "a directory, not a file" : "not a regular file");
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return reply_error(c, MHD_HTTP_NOT_FOUND, "no object %s", key);
	}
	size = (unsigned long long)st.st_size;
	if (range && dlk_store_wire_range(range, size, &from)) {
		close(fd);
		return reply_error(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, "range '%s' of %llu bytes", range, size);
	}
	r = MHD_create_response_from_fd_at_offset64(size - from, fd, (uint64_t)from);
	if (!r) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	if (range) {
		char cr[96];
		snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", from, size ? size - 1 : 0, size);
		MHD_add_response_header(r, "Content-Range", cr);
	}
	ok = MHD_queue_response(c, range ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

static MHD_RESULT do_list(struct MHD_Connection *c, const char *root, const char *prefix)
{
	char *p = xasprintf("%s/%.*s", root, (int)strlen(prefix) - 1, prefix);
	cJSON *o = cJSON_CreateObject(), *names = cJSON_AddArrayToObject(o, "names");
	struct dirent *de;
	DIR *d = opendir(p);
	MHD_RESULT ok;
	char *s;

	while (d && (de = readdir(d))) {
		struct stat st;
		char *f, *key;
		if (de->d_name[0] == '.')
			continue;
		key = xasprintf("%s%s", prefix, de->d_name);
		f = xasprintf("%s/%s", p, de->d_name);
		if (!dlk_store_key_check(key) && stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "name", de->d_name);
			cJSON_AddNumberToObject(e, "size", (double)st.st_size);
			cJSON_AddItemToArray(names, e);
		}
		free(f);
		free(key);
	}
	if (d)
		closedir(d);
	s = cJSON_PrintUnformatted(o);
	ok = reply(c, MHD_HTTP_OK, s);
	free(s);
	cJSON_Delete(o);
	free(p);
	return ok;
}

static int sha_arg(struct MHD_Connection *c, const char **sha)
{
	*sha = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sha256");
	return *sha && strlen(*sha) == 64 && strspn(*sha, "0123456789abcdef") == 64 ? 0 : -1;
}

static int u64_arg(struct MHD_Connection *c, const char *name, unsigned long long *v)
{
	const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}

static MHD_RESULT do_upload_status(struct MHD_Connection *c, const char *root, const char *key)
{
	const char *sha;
	char *p;
	struct stat st;
	unsigned long long size = 0, want;

	if (sha_arg(c, &sha) || u64_arg(c, "size", &want))
		return reply_error(c, MHD_HTTP_BAD_REQUEST, "sha256= and size= are needed");
	p = staging_path(root, key, sha);
	if (stat(p, &st) == 0)
		size = (unsigned long long)st.st_size;
	if (size > want) {
		/* more than the object has: never right, start over */
		unlink(p);
		size = 0;
	}
	free(p);
	return reply_size(c, MHD_HTTP_OK, size);
}

/* A PUT: the first call opens the staging file; the body comes in pieces; the last call answers. */
static MHD_RESULT do_upload(struct MHD_Connection *c, const char *root, const char *key, struct request *q,
                            const char *data, size_t *len)
{
	if (!q->started) {
		const char *sha;
		unsigned long long offset;
		struct stat st;
		char *p, *dir;
		q->started = 1;
		q->fd = -1;
		if (sha_arg(c, &sha) || u64_arg(c, "offset", &offset)) {
			q->status = MHD_HTTP_BAD_REQUEST;
			q->answer = xstrdup("{\"error\": \"sha256= and offset= are needed\"}");
			return MHD_YES;
		}
		dir = xasprintf("%s/.uploads", root);
		if (dlk_mkdir_p(dir, NULL)) {
			free(dir);
			q->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
			q->answer = xasprintf("{\"error\": \"cannot create the staging directory: %s\"}", strerror(errno));
			return MHD_YES;
		}
		free(dir);
		p = staging_path(root, key, sha);
		/* a staging file is ours alone: never a link, a FIFO or another file's second name */
		q->fd = dlk_open_part(p, NULL);
		free(p);
		if (q->fd < 0 || fstat(q->fd, &st) < 0) {
			q->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
			q->answer = xasprintf("{\"error\": \"cannot stage the upload: %s\"}", strerror(errno));
			return MHD_YES;
		}
		if ((unsigned long long)st.st_size != offset) {
			/* the client's idea of what is staged is not ours: it asks again and goes on */
			q->status = MHD_HTTP_CONFLICT;
			q->answer = xasprintf("{\"size\": %llu}", (unsigned long long)st.st_size);
			return MHD_YES;
		}
		if (lseek(q->fd, (off_t)offset, SEEK_SET) < 0) {
			q->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
			q->answer = xasprintf("{\"error\": \"%s\"}", strerror(errno));
		}
		q->got = offset;
		return MHD_YES;
	}
	if (*len) {
		q->body += *len;
		if (!q->status && q->body > DLK_STORE_CHUNK) {
			q->status = 413;
			q->answer = xasprintf("{\"error\": \"a body is at most %u bytes\"}", DLK_STORE_CHUNK);
		}
		if (!q->status) {
			const char *p = data;
			size_t left = *len;
			while (left) {
				ssize_t n = write(q->fd, p, left);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0) {
					q->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
					q->answer = xasprintf("{\"error\": \"cannot write the staging file: %s\"}", strerror(errno));
					break;
				}
				p += n;
				left -= (size_t)n;
			}
			q->got += *len;
		}
		*len = 0;
		return MHD_YES;
	}
	if (q->status)
		return reply(c, (unsigned)q->status, q->answer);
	return reply_size(c, MHD_HTTP_OK, q->got);
}

static MHD_RESULT do_commit(struct MHD_Connection *c, const char *root, const char *key)
{
	const char *sha;
	unsigned long long size;
	char *staged, *dest = NULL, *slash, got[65];
	struct stat st;
	MHD_RESULT ok;
	int fd;

	if (sha_arg(c, &sha) || u64_arg(c, "size", &size))
		return reply_error(c, MHD_HTTP_BAD_REQUEST, "sha256= and size= are needed");
	/* a content-addressed name holds only the bytes it names */
	if (strncmp(key, "tags/", 5) && strcmp(strchr(key, '/') + 1, sha))
		return reply_error(c, MHD_HTTP_BAD_REQUEST, "%s cannot hold content %s", key, sha);
	staged = staging_path(root, key, sha);
	if (stat(staged, &st) < 0) {
		ok = reply_error(c, MHD_HTTP_CONFLICT, "nothing staged for %s", key);
		goto out;
	}
	if ((unsigned long long)st.st_size != size) {
		ok = reply_error(c, MHD_HTTP_CONFLICT, "%llu bytes staged for %s, not %llu", (unsigned long long)st.st_size,
		                 key, size);
		goto out;
	}
	if (dlk_sha256_file(staged, got) < 0 || strcmp(got, sha)) {
		unlink(staged);
		ok = reply_error(c, 422, "the bytes staged for %s hash to %s, not %s", key, got, sha);
		goto out;
	}
	if ((fd = open(staged, O_RDONLY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	dest = xasprintf("%s/%s", root, key);
	slash = strrchr(dest, '/');
	*slash = '\0';
	if (dlk_mkdir_p(dest, NULL)) {
		ok = reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot create %s: %s", dest, strerror(errno));
		goto out;
	}
	*slash = '/';
	if (rename(staged, dest) < 0) {
		ok = reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot rename into %s: %s", key, strerror(errno));
		goto out;
	}
	*slash = '\0';
	if ((fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	ok = reply_size(c, MHD_HTTP_OK, size);
out:
	free(staged);
	free(dest);
	return ok;
}

static MHD_RESULT handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                         const char *version, const char *data, size_t *len, void **con_cls)
{
	struct server *s = cls;
	struct request *q = *con_cls;
	const char *token, *root = s->o->root, *path, *rest;
	MHD_RESULT ok;

	(void)version;
	if (!q) {
		q = xcalloc(1, sizeof(*q));
		q->fd = -1;
		*con_cls = q;
		touch(s, 1);
		token = MHD_lookup_connection_value(c, MHD_HEADER_KIND, DLK_STORE_TOKEN_HEADER);
		if (!token || strlen(token) != strlen(s->o->token) ||
		    CRYPTO_memcmp(token, s->o->token, strlen(token)) != 0) {
			q->status = MHD_HTTP_UNAUTHORIZED;
			q->answer = xstrdup("{\"error\": \"this store wants its token in " DLK_STORE_TOKEN_HEADER "\"}");
		}
		if (strcmp(method, "PUT") && strcmp(method, "POST") && strcmp(method, "GET")) {
			q->status = MHD_HTTP_METHOD_NOT_ALLOWED;
			q->answer = xasprintf("{\"error\": \"%s is not supported\"}", method);
		}
		if (!q->status && !strcmp(method, "PUT"))
			goto route; /* opens the staging file on this first call */
		return MHD_YES;
	}
	if (q->status && !q->started) {
		/* refused before the body: read it to its end, then say why */
		if (*len) {
			*len = 0;
			return MHD_YES;
		}
		return reply(c, (unsigned)q->status, q->answer);
	}
route:
	if (strncmp(url, "/v1/", 4)) {
		q->status = q->status ? q->status : MHD_HTTP_NOT_FOUND;
		if (*len) {
			*len = 0;
			return MHD_YES;
		}
		return reply_error(c, MHD_HTTP_NOT_FOUND, "no such route: %s", url);
	}
	path = url + 4;
	rest = strchr(path, '/');
	rest = rest ? rest + 1 : "";
	if (!strncmp(path, "list/", 5))
		ok = prefix_ok(rest) ? do_list(c, root, rest) : reply_error(c, MHD_HTTP_NOT_FOUND, "no list %s", rest);
	else if (dlk_store_key_check(rest)) {
		if (*len) {
			*len = 0;
			return MHD_YES;
		}
		ok = reply_error(c, MHD_HTTP_NOT_FOUND, "'%s' is not a key of a store", rest);
	} else if (!strncmp(path, "stat/", 5) && !strcmp(method, "GET"))
		ok = do_stat(c, root, rest);
	else if (!strncmp(path, "object/", 7) && !strcmp(method, "GET"))
		ok = do_get(c, root, rest);
	else if (!strncmp(path, "upload/", 7) && !strcmp(method, "GET"))
		ok = do_upload_status(c, root, rest);
	else if (!strncmp(path, "upload/", 7) && !strcmp(method, "PUT"))
		ok = do_upload(c, root, rest, q, data, len);
	else if (!strncmp(path, "commit/", 7) && !strcmp(method, "POST")) {
		if (*len) {
			*len = 0;
			return MHD_YES;
		}
		ok = do_commit(c, root, rest);
	} else {
		if (*len) {
			*len = 0;
			return MHD_YES;
		}
		ok = reply_error(c, MHD_HTTP_NOT_FOUND, "no such route: %s %s", method, url);
	}
	return ok;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
	struct server *s = cls;
	struct request *q = *con_cls;

	(void)c, (void)tc;
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q->answer);
	free(q);
	*con_cls = NULL;
	touch(s, -1);
}

static void log_request(void *cls, const char *fmt, va_list ap)
{
	(void)cls, (void)fmt, (void)ap; /* libmicrohttpd's own messages: library code does not print */
}

int dlk_store_serve(const struct dlk_store_serve_opts *o, struct dlk_err *err)
{
	struct server s = { .o = o };
	struct sockaddr_in sa = { 0 };
	const char *colon = strrchr(o->listen ? o->listen : "", ':');
	const char *port_s = colon ? colon + 1 : o->listen;
	char host[64] = "";
	struct MHD_Daemon *d;
	long port;
	char *end;

	if (!o->token || !*o->token)
		return dlk_errf(err, DLK_EXIT_CONFIG, "a store served over HTTP needs a token ($DLK_STORE_TOKEN)");
	if (!o->listen || !*port_s)
		return dlk_errf(err, DLK_EXIT_CONFIG, "nothing to listen on: give HOST:PORT or :PORT");
	port = strtol(port_s, &end, 10);
	if (*end || port < 0 || port > 65535)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a port", o->listen);
	if (colon && colon > o->listen)
		snprintf(host, sizeof(host), "%.*s", (int)(colon - o->listen), o->listen);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (*host && inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the host is not an IPv4 address", o->listen);
	if (!*host)
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	pthread_mutex_init(&s.mu, NULL);
	s.last = dlk_now();
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0, NULL,
	                     NULL, handle, &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	                     MHD_OPTION_NOTIFY_COMPLETED, completed, &s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
	                     MHD_OPTION_EXTERNAL_LOGGER, log_request, NULL, MHD_OPTION_END);
	if (!d) {
		pthread_mutex_destroy(&s.mu);
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot listen on %s: %s", o->listen, strerror(errno ? errno : EADDRINUSE));
	}
	if (o->ready) {
		const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
		o->ready(o->ready_ctx, info ? info->port : (int)port);
	}
	for (;;) {
		struct timespec ts = { 0, 200 * 1000000L };
		int idle;
		nanosleep(&ts, NULL);
		if (o->stop && *o->stop)
			break;
		pthread_mutex_lock(&s.mu);
		idle = o->idle_s > 0 && !s.active && dlk_now() - s.last > o->idle_s;
		pthread_mutex_unlock(&s.mu);
		if (idle)
			break;
	}
	MHD_stop_daemon(d);
	pthread_mutex_destroy(&s.mu);
	return 0;
}
