/* GET /metrics and nothing else (see metricsd.h). */
#include "lib/serve/metricsd.h"
#include "lib/serve/server.h"
#include "lib/util/mem.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct dlk_metricsd {
	struct MHD_Daemon *daemon;
	dlk_metrics_write_fn fn;
	void *ctx;
	int port;
};

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *ctype, char *body, size_t len,
                              const char *allow)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, body, free);
	enum MHD_Result r;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	if (status == MHD_HTTP_BAD_REQUEST)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct dlk_metricsd *d = cls;
	int get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);

	(void)version;
	(void)upload_data;
	if (!*con_cls) {
		char bad[128];
		/* the first call sees the headers only; answer on the next, but a request framed two
		 * ways is refused before its body is read and the connection closed */
		*con_cls = d;
		if (dlk_http_framing_bad(conn, bad, sizeof(bad))) {
			size_t n = strlen(bad);
			bad[n] = '\n';
			return answer(conn, MHD_HTTP_BAD_REQUEST, "text/plain; charset=utf-8", xstrndup(bad, n + 1), n + 1, NULL);
		}
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body is read and ignored: nothing here takes one */
		return MHD_YES;
	}
	if (strcmp(url, DLK_METRICS_PATH))
		return answer(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", xstrdup("not found: try GET /metrics\n"),
		              strlen("not found: try GET /metrics\n"), NULL);
	if (!get)
		return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", xstrdup("use GET\n"), 8,
		              "GET, HEAD");
	struct dlk_buf b = DLK_BUF_INIT;
	d->fn(d->ctx, &b);
	size_t len = 0;
	char *body = dlk_buf_detach(&b, &len);
	return answer(conn, MHD_HTTP_OK, DLK_METRICS_CONTENT_TYPE, body, len, NULL);
}

static struct dlk_metricsd *start(const char *host, int port, dlk_metrics_write_fn fn, void *ctx, unsigned flags,
                                  struct dlk_err *err)
{
	struct sockaddr_storage ss;
	struct dlk_metricsd *d;

	if (port < 0 || port > 65535)
		return dlk_errf(err, DLK_EXIT_USAGE, "port %d is not a TCP port", port), NULL;
	memset(&ss, 0, sizeof(ss));
	if (host && *host) {
		struct addrinfo hints, *ai = NULL;
		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE;
		int rc = getaddrinfo(host, NULL, &hints, &ai);
		if (rc || !ai)
			return dlk_errf(err, DLK_EXIT_USAGE, "cannot listen on '%s': %s", host, gai_strerror(rc)), NULL;
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		freeaddrinfo(ai);
	} else {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_ANY);
	}
	if (ss.ss_family == AF_INET6) {
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		flags |= MHD_USE_IPv6;
	} else {
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	}
	d = xcalloc(1, sizeof(*d));
	d->fn = fn;
	d->ctx = ctx;
	/* scrapes are rare and small: one thread, a few connections, short timeouts */
	d->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handler, d, MHD_OPTION_SOCK_ADDR, &ss,
	                             MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!d->daemon) {
		free(d);
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot serve metrics on %s port %d%s", host && *host ? host : "every address",
		                port, port ? " (is something else using it?)" : ""),
		       NULL;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d->daemon, MHD_DAEMON_INFO_BIND_PORT);
	d->port = di && di->port ? di->port : port;
	return d;
}

struct dlk_metricsd *dlk_metricsd_start(const char *host, int port, dlk_metrics_write_fn fn, void *ctx,
                                        struct dlk_err *err)
{
	return start(host, port, fn, ctx, MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, err);
}

struct dlk_metricsd *dlk_metricsd_start_polled(const char *host, int port, dlk_metrics_write_fn fn, void *ctx,
                                               struct dlk_err *err)
{
	return start(host, port, fn, ctx, 0, err);
}

void dlk_metricsd_poll(struct dlk_metricsd *d)
{
	if (d)
		MHD_run(d->daemon);
}

int dlk_metricsd_port(const struct dlk_metricsd *d)
{
	return d->port;
}

void dlk_metricsd_stop(struct dlk_metricsd *d)
{
	if (!d)
		return;
	MHD_stop_daemon(d->daemon);
	free(d);
}
