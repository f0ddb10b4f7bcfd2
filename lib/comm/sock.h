/* Socket plumbing shared by the rendezvous and the TCP ring: deadlines, framed messages,
 * little-endian packing. Internal to lib/comm. All sockets are non-blocking and every wait
 * is a poll() bounded by an absolute deadline on the monotonic clock. */
#ifndef DLK_COMM_SOCK_H
#define DLK_COMM_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

enum net_rc { NET_OK = 0, NET_EOF, NET_TIMEOUT, NET_ERR /* errno is set */ };

int net_set_nonblock(int fd);
/* TCP_NODELAY, large socket buffers, keepalive: for every connected data/control socket. */
void net_tune(int fd);

/* Listens on host (NULL: every address, IPv6 dual-stack when available) and port (0: any
 * free one, reported in *port_out). SO_REUSEADDR, non-blocking, close-on-exec. */
int net_listen(const char *host, int port, int *port_out, struct dlk_err *err);

/* One attempt to connect to host:port (every address getaddrinfo gives), waiting at most
 * until deadline. Returns the non-blocking fd, or -1 with the reason in why. *resolve_failed
 * is set when the name did not resolve (the caller retries: Indexed Job DNS names appear
 * only once the pod exists). */
int net_connect(const char *host, int port, long long deadline, int *resolve_failed,
		char *why, size_t why_len);

enum net_rc net_write_full(int fd, const void *p, size_t n, long long deadline);
enum net_rc net_read_full(int fd, void *p, size_t n, long long deadline);

/* Frames: u32 type, u32 length, payload. */
enum net_rc net_send_frame(int fd, uint32_t type, const void *p, size_t n, long long deadline);
/* Reads one frame into payload (reset first); a length over max fails with NET_ERR/EMSGSIZE. */
enum net_rc net_recv_frame(int fd, uint32_t *type, struct dlk_buf *payload, size_t max, long long deadline);

/* Numeric address of the peer of fd ("10.0.0.5", "::1"); IPv4-mapped IPv6 is shown as IPv4. */
void net_peer_host(int fd, char *host, size_t len);

void put_u16(struct dlk_buf *b, uint16_t v);
void put_u32(struct dlk_buf *b, uint32_t v);
void put_str(struct dlk_buf *b, const char *s, size_t len); /* u16 length + bytes */

/* A bounds-checked reader over a received payload: a short read sets bad and yields zeros. */
struct net_rd {
	const unsigned char *p;
	size_t len, off;
	int bad;
};
uint16_t get_u16(struct net_rd *r);
uint32_t get_u32(struct net_rd *r);
/* Copies a u16-length string into out (NUL-terminated); longer than out_len - 1 sets bad. */
void get_str(struct net_rd *r, char *out, size_t out_len);
const void *get_bytes(struct net_rd *r, size_t n);

#endif
