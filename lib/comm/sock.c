#include "lib/comm/sock.h"
#include "lib/comm/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/util/clock.h"

int net_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

void net_tune(int fd)
{
	int one = 1;
	/* 4 MiB lets a whole pipeline slice sit in the kernel on each side; the kernel clamps
	 * it to net.core.[rw]mem_max, which is fine. */
	int sz = 4 << 20;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

static int wait_fd(int fd, short ev, long long deadline)
{
	for (;;) {
		long long left = deadline - dlk_now_ms();
		struct pollfd p = { fd, ev, 0 };
		int n;

		if (left <= 0)
			return 0;
		n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n > 0)
			return 1;
	}
}

static int listen_on(const struct sockaddr *sa, socklen_t sl, int *err_out)
{
	int one = 1, fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0) {
		*err_out = errno;
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6) {
		int zero = 0;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	}
	/* every rank of a gang connects to rank 0 at once: with a backlog of 128, the 129th SYN of a
	 * 256-rank rendezvous was dropped and retried a second later. The kernel caps this at
	 * net.core.somaxconn. */
	if (bind(fd, sa, sl) < 0 || listen(fd, DIST_WORLD_MAX) < 0) {
		*err_out = errno;
		close(fd);
		return -1;
	}
	return fd;
}

int net_listen(const char *host, int port, int *port_out, struct dlk_err *err)
{
	int fd = -1, e = 0;

	if (port < 0 || port > 65535)
		return dlk_errf(err, DLK_EXIT_CONFIG, "listen: port %d is out of range", port);
	if (!host) {
		/* Every address: IPv6 dual-stack, or plain IPv4 where the container has no IPv6. */
		struct sockaddr_in6 s6;
		struct sockaddr_in s4;

		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		s6.sin6_addr = in6addr_any;
		s6.sin6_port = htons((uint16_t)port);
		fd = listen_on((struct sockaddr *)&s6, sizeof(s6), &e);
		if (fd < 0 && e != EADDRINUSE) {
			memset(&s4, 0, sizeof(s4));
			s4.sin_family = AF_INET;
			s4.sin_addr.s_addr = htonl(INADDR_ANY);
			s4.sin_port = htons((uint16_t)port);
			fd = listen_on((struct sockaddr *)&s4, sizeof(s4), &e);
		}
	} else {
		struct addrinfo hints, *res = NULL, *ai;
		char portstr[16];
		int rc;

		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
		snprintf(portstr, sizeof(portstr), "%d", port);
		rc = getaddrinfo(host, portstr, &hints, &res);
		if (rc)
			return dlk_errf(err, DLK_EXIT_CONFIG, "listen: cannot resolve '%s': %s", host,
					gai_strerror(rc));
		for (ai = res; ai && fd < 0; ai = ai->ai_next)
			fd = listen_on(ai->ai_addr, ai->ai_addrlen, &e);
		freeaddrinfo(res);
	}
	if (fd < 0)
		return dlk_errf(err, e == EADDRINUSE ? DLK_EXIT_RESTARTABLE : DLK_EXIT_CONFIG,
				"listen: cannot listen on port %d: %s", port, strerror(e));
	if (port_out) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	return fd;
}

int net_connect(const char *host, int port, long long deadline, int *resolve_failed,
		char *why, size_t why_len)
{
	struct addrinfo hints, *res = NULL, *ai;
	char portstr[16];
	int rc, fd = -1;

	*resolve_failed = 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc) {
		*resolve_failed = 1;
		snprintf(why, why_len, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -1;
	}
	snprintf(why, why_len, "no address");
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			snprintf(why, why_len, "%s", strerror(errno));
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
			snprintf(why, why_len, "%s", strerror(errno));
			goto next;
		}
		rc = wait_fd(fd, POLLOUT, deadline);
		if (rc <= 0) {
			snprintf(why, why_len, "%s", rc == 0 ? "connection timed out" : strerror(errno));
			goto next;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
			snprintf(why, why_len, "%s", strerror(soerr ? soerr : errno));
			goto next;
		}
		net_tune(fd);
		break;
next:
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* All n bytes to or from fd before the deadline; a peer that closes or resets the link is EOF. */
static enum net_rc io_full(int fd, char *c, size_t n, long long deadline, int sending)
{
	while (n) {
		ssize_t k = sending ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);
		if (k > 0) {
			c += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return sending ? NET_ERR : NET_EOF;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int rc = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
			if (rc == 0)
				return NET_TIMEOUT;
			if (rc < 0)
				return NET_ERR;
			continue;
		}
		if (errno == ECONNRESET || (sending && errno == EPIPE))
			return NET_EOF;
		return NET_ERR;
	}
	return NET_OK;
}

enum net_rc net_write_full(int fd, const void *p, size_t n, long long deadline)
{
	return io_full(fd, (char *)p, n, deadline, 1); /* send() only reads it */
}

enum net_rc net_read_full(int fd, void *p, size_t n, long long deadline)
{
	return io_full(fd, p, n, deadline, 0);
}

static void le32(unsigned char *o, uint32_t v)
{
	o[0] = v & 0xff, o[1] = (v >> 8) & 0xff, o[2] = (v >> 16) & 0xff, o[3] = (v >> 24) & 0xff;
}

static uint32_t rd32(const unsigned char *i)
{
	return (uint32_t)i[0] | (uint32_t)i[1] << 8 | (uint32_t)i[2] << 16 | (uint32_t)i[3] << 24;
}

enum net_rc net_send_frame(int fd, uint32_t type, const void *p, size_t n, long long deadline)
{
	unsigned char h[8];
	enum net_rc rc;

	le32(h, type);
	le32(h + 4, (uint32_t)n);
	rc = net_write_full(fd, h, 8, deadline);
	if (rc == NET_OK && n)
		rc = net_write_full(fd, p, n, deadline);
	return rc;
}

enum net_rc net_recv_frame(int fd, uint32_t *type, struct dlk_buf *payload, size_t max, long long deadline)
{
	unsigned char h[8];
	enum net_rc rc;
	size_t n;

	dlk_buf_reset(payload);
	rc = net_read_full(fd, h, 8, deadline);
	if (rc != NET_OK)
		return rc;
	*type = rd32(h);
	n = rd32(h + 4);
	if (n > max) {
		errno = EMSGSIZE;
		return NET_ERR;
	}
	dlk_buf_grow(payload, n);
	rc = net_read_full(fd, payload->data, n, deadline);
	if (rc != NET_OK)
		return rc;
	payload->len = n;
	payload->data[n] = '\0';
	return NET_OK;
}

void net_peer_host(int fd, char *host, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	snprintf(host, len, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host, (socklen_t)len);
		else
			inet_ntop(AF_INET6, &s6->sin6_addr, host, (socklen_t)len);
	} else if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, (socklen_t)len);
	}
}

void put_u16(struct dlk_buf *b, uint16_t v)
{
	unsigned char o[2] = { v & 0xff, v >> 8 };
	dlk_buf_add(b, o, 2);
}

void put_u32(struct dlk_buf *b, uint32_t v)
{
	unsigned char o[4];
	le32(o, v);
	dlk_buf_add(b, o, 4);
}

void put_str(struct dlk_buf *b, const char *s, size_t len)
{
	put_u16(b, (uint16_t)len);
	dlk_buf_add(b, s, len);
}

const void *get_bytes(struct net_rd *r, size_t n)
{
	const void *p;

	if (r->bad || r->len - r->off < n) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

uint16_t get_u16(struct net_rd *r)
{
	const unsigned char *p = get_bytes(r, 2);
	return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t get_u32(struct net_rd *r)
{
	const unsigned char *p = get_bytes(r, 4);
	return p ? rd32(p) : 0;
}

void get_str(struct net_rd *r, char *out, size_t out_len)
{
	size_t n = get_u16(r);
	const char *p = get_bytes(r, n);

	out[0] = '\0';
	if (!p)
		return;
	if (n >= out_len || memchr(p, '\0', n)) {
		r->bad = 1;
		return;
	}
	memcpy(out, p, n);
	out[n] = '\0';
}
