#include "lib/comm/rendezvous.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/comm/sock.h"
#include "lib/comm/wire.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/mem.h"

#define HELLO_WAIT_MS 5000   /* one connection may take this long to say hello */
#define REPLY_GRACE_MS 2000
#define CONNECT_ATTEMPT_MS 5000
#define FRAME_MAX (DIST_WORLD_MAX * 300 + DIST_BLOB_MAX + 1024)

struct hello {
	uint32_t magic;
	unsigned version, rank, world, generation, data_port;
	char run_id[DIST_RUN_ID_MAX + 1];
	char host[256];
};

struct peer {
	int fd;
	char host[256]; /* where its data port is */
	int data_port;
};

static void put_hello(struct dlk_buf *b, const struct dist_rdzv_opts *o, int data_port)
{
	const char *adv = o->advertise_host ? o->advertise_host : "";

	put_u32(b, DIST_MAGIC_HELLO);
	put_u16(b, DIST_PROTOCOL_VERSION);
	put_u32(b, (uint32_t)o->rank);
	put_u32(b, (uint32_t)o->world);
	put_u32(b, o->generation);
	put_u16(b, (uint16_t)data_port);
	put_str(b, o->run_id, strlen(o->run_id));
	put_str(b, adv, strlen(adv));
}

static int get_hello(const struct dlk_buf *b, struct hello *h)
{
	struct net_rd r = { (const unsigned char *)b->data, b->len, 0, 0 };

	h->magic = get_u32(&r);
	h->version = get_u16(&r);
	h->rank = get_u32(&r);
	h->world = get_u32(&r);
	h->generation = get_u32(&r);
	h->data_port = get_u16(&r);
	get_str(&r, h->run_id, sizeof(h->run_id));
	get_str(&r, h->host, sizeof(h->host));
	return r.bad || r.off != r.len || h->magic != DIST_MAGIC_HELLO ? -1 : 0;
}

static void send_reject(int fd, int code, int retry, const char *msg)
{
	struct dlk_buf b = DLK_BUF_INIT;

	put_u32(&b, (uint32_t)code);
	put_u32(&b, (uint32_t)retry);
	put_str(&b, msg, strlen(msg) > 1024 ? 1024 : strlen(msg));
	net_send_frame(fd, DIST_FRAME_REJECT, b.data, b.len, dlk_now_ms() + 1000);
	dlk_buf_release(&b);
}

/* One connection attempt may not eat the whole rendezvous: a dropped SYN to one address of
 * several would otherwise leave no time to retry. */
static long long attempt_deadline(long long deadline)
{
	long long cap = dlk_now_ms() + CONNECT_ATTEMPT_MS;
	return cap < deadline ? cap : deadline;
}

static void fmt_secs(char *out, size_t len, int ms)
{
	if (ms % 1000)
		snprintf(out, len, "%.1fs", ms / 1000.0);
	else
		snprintf(out, len, "%ds", ms / 1000);
}

/* Connects this rank's ring link to `next` and accepts the one from `prev`. */
static int ring_connect(const struct dist_rdzv_opts *o, struct dist_group *g, int data_fd,
			const char *next_host, int next_port, long long deadline, struct dlk_err *err)
{
	int next = (o->rank + 1) % o->world, prev = (o->rank + o->world - 1) % o->world;
	struct dlk_buf b = DLK_BUF_INIT;
	char why[256] = "";
	long long backoff = 50;
	int fd = -1, rf, ret = -1;

	put_u32(&b, DIST_MAGIC_RING);
	put_u32(&b, (uint32_t)o->rank);
	put_u32(&b, o->generation);
	put_str(&b, o->run_id, strlen(o->run_id));
	while (fd < 0) {
		long long now = dlk_now_ms();
		if (now >= deadline) {
			dlk_errf(err, DLK_EXIT_RESTARTABLE,
				 "rendezvous: cannot connect to rank %d at '%s' port %d: %s", next,
				 next_host, next_port, why);
			goto out;
		}
		fd = net_connect(next_host, next_port, attempt_deadline(deadline), &rf, why, sizeof(why));
		if (fd >= 0 && net_send_frame(fd, DIST_FRAME_RING, b.data, b.len, deadline) != NET_OK) {
			snprintf(why, sizeof(why), "%s", strerror(errno));
			close(fd);
			fd = -1;
		}
		if (fd < 0) {
			long long left = deadline - dlk_now_ms();
			usleep((useconds_t)((backoff < left ? backoff : left > 0 ? left : 0) * 1000));
			backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
		}
	}
	g->next_fd = fd;

	while (g->prev_fd < 0) {
		struct pollfd p = { data_fd, POLLIN, 0 };
		long long left = deadline - dlk_now_ms();
		struct dlk_buf in = DLK_BUF_INIT;
		uint32_t type;
		int c;

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			dlk_errf(err, DLK_EXIT_RESTARTABLE,
				 "rendezvous: rank %d did not connect its ring link to this rank (%d)", prev, o->rank);
			goto out;
		}
		c = accept4(data_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0)
			continue;
		net_tune(c);
		if (net_recv_frame(c, &type, &in, 4096, dlk_now_ms() + HELLO_WAIT_MS) == NET_OK &&
		    type == DIST_FRAME_RING) {
			struct net_rd r = { (const unsigned char *)in.data, in.len, 0, 0 };
			char run_id[DIST_RUN_ID_MAX + 1];
			uint32_t magic = get_u32(&r), rank = get_u32(&r), gen = get_u32(&r);

			get_str(&r, run_id, sizeof(run_id));
			if (!r.bad && magic == DIST_MAGIC_RING && rank == (uint32_t)prev &&
			    gen == o->generation && !strcmp(run_id, o->run_id)) {
				g->prev_fd = c;
				c = -1;
			}
		}
		dlk_buf_release(&in);
		if (c >= 0)
			close(c); /* not our ring neighbour: a stale worker or a stray connection */
	}
	ret = 0;
out:
	dlk_buf_release(&b);
	return ret;
}

static void put_welcome(struct dlk_buf *b, const struct dist_rdzv_opts *o, const struct peer *peers)
{
	put_u32(b, (uint32_t)o->world);
	for (int r = 0; r < o->world; r++) {
		put_str(b, peers[r].host, strlen(peers[r].host));
		put_u16(b, (uint16_t)peers[r].data_port);
	}
	put_u32(b, (uint32_t)o->blob_len);
	dlk_buf_add(b, o->blob, o->blob_len);
}

/* 1 when the connection is gone (EOF or error), 0 when it still looks alive. */
static int conn_dead(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char c;

	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLERR | POLLHUP))
		return 1;
	return recv(fd, &c, 1, MSG_PEEK) <= 0;
}

static void abort_joined(struct peer *peers, int world, int code, const char *msg)
{
	for (int r = 1; r < world; r++)
		if (peers[r].fd >= 0)
			send_reject(peers[r].fd, code, 0, msg);
}

static int rank0(const struct dist_rdzv_opts *o, struct dist_group *g, int data_fd, int data_port,
		 long long deadline, struct dlk_err *err)
{
	struct peer *peers = xcalloc((size_t)o->world, sizeof(*peers));
	struct dlk_buf in = DLK_BUF_INIT, out = DLK_BUF_INIT;
	int lfd = o->listen_fd, joined = 0, ret = -1;
	char secs[32];

	fmt_secs(secs, sizeof(secs), o->timeout_ms);
	for (int r = 0; r < o->world; r++)
		peers[r].fd = -1;
	if (lfd < 0) {
		lfd = net_listen(NULL, o->master_port, NULL, err);
		if (lfd < 0) {
			dlk_err_prefix(err, "rendezvous");
			goto out;
		}
	}
	if (o->advertise_host)
		snprintf(peers[0].host, sizeof(peers[0].host), "%s", o->advertise_host);
	peers[0].data_port = data_port;

	while (joined < o->world - 1) {
		struct pollfd p = { lfd, POLLIN, 0 };
		long long left = deadline - dlk_now_ms(), hello_deadline;
		struct hello h;
		uint32_t type;
		char msg[512];
		int c;

		if (left <= 0 || poll(&p, 1, (int)(left > 1000000 ? 1000000 : left)) == 0) {
			struct dlk_buf missing = DLK_BUF_INIT;
			int n = 0;

			for (int r = 1; r < o->world; r++)
				if (peers[r].fd < 0)
					dlk_buf_addf(&missing, "%s%d", n++ ? ", " : "", r);
			dlk_errf(err, DLK_EXIT_RESTARTABLE,
				 "rendezvous: %s %s of %d did not join within %s (MASTER_ADDR=%s, MASTER_PORT=%d)",
				 n == 1 ? "rank" : "ranks", missing.data, o->world, secs,
				 o->master_addr ? o->master_addr : "", o->master_port);
			dlk_err_hint(err, "check that every worker pod started and can resolve MASTER_ADDR");
			dlk_buf_release(&missing);
			abort_joined(peers, o->world, err->code, err->msg);
			goto out;
		}
		c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0)
			continue;
		net_tune(c);
		hello_deadline = dlk_now_ms() + HELLO_WAIT_MS;
		if (hello_deadline > deadline)
			hello_deadline = deadline;
		if (net_recv_frame(c, &type, &in, 4096, hello_deadline) != NET_OK ||
		    type != DIST_FRAME_HELLO || get_hello(&in, &h)) {
			close(c); /* not a dlk worker (a probe, a scanner): ignore it */
			continue;
		}
		if (h.version != DIST_PROTOCOL_VERSION) {
			dlk_errf(err, DLK_EXIT_CONFIG,
				 "rendezvous: rank %u speaks protocol version %u, rank 0 speaks %d (mixed dlk versions?)",
				 h.rank, h.version, DIST_PROTOCOL_VERSION);
			goto fatal;
		}
		if (strcmp(h.run_id, o->run_id)) {
			snprintf(msg, sizeof(msg), "rendezvous: rank %u belongs to run '%s', rank 0 to run '%s'",
				 h.rank, h.run_id, o->run_id);
			send_reject(c, DLK_EXIT_RESTARTABLE, 0, msg);
			close(c);
			continue;
		}
		if (h.generation < o->generation) {
			snprintf(msg, sizeof(msg),
				 "rendezvous: rank %u has generation %u, older than rank 0's %u (a worker of an earlier restart)",
				 h.rank, h.generation, o->generation);
			send_reject(c, DLK_EXIT_RESTARTABLE, 0, msg);
			close(c);
			continue;
		}
		if (h.generation > o->generation) {
			/* This rank 0 is the stale one: the peer retries until the new rank 0 is up. */
			dlk_errf(err, DLK_EXIT_RESTARTABLE,
				 "rendezvous: rank %u has generation %u, newer than this rank 0's %u (this worker is stale)",
				 h.rank, h.generation, o->generation);
			send_reject(c, DLK_EXIT_RESTARTABLE, 1, err->msg);
			close(c);
			for (int r = 1; r < o->world; r++)
				if (peers[r].fd >= 0)
					send_reject(peers[r].fd, DLK_EXIT_RESTARTABLE, 1, err->msg);
			goto out;
		}
		if (h.world != (unsigned)o->world) {
			dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: rank %u says the world has %u ranks, rank 0 says %d",
				 h.rank, h.world, o->world);
			goto fatal;
		}
		if (h.rank == 0 || h.rank >= (unsigned)o->world) {
			dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: a worker says it is rank %u in a world of %d",
				 h.rank, o->world);
			goto fatal;
		}
		if (peers[h.rank].fd >= 0) {
			char newhost[256];

			if (conn_dead(peers[h.rank].fd)) {
				/* The same rank restarted before the gang formed: keep the new one. */
				close(peers[h.rank].fd);
				peers[h.rank].fd = -1;
				joined--;
			} else {
				net_peer_host(c, newhost, sizeof(newhost));
				dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: rank %u joined twice (from %s and %s)",
					 h.rank, peers[h.rank].host, newhost);
				dlk_err_hint(err, "every worker needs its own RANK (or JOB_COMPLETION_INDEX)");
				goto fatal;
			}
		}
		peers[h.rank].fd = c;
		peers[h.rank].data_port = (int)h.data_port;
		if (h.host[0])
			snprintf(peers[h.rank].host, sizeof(peers[h.rank].host), "%s", h.host);
		else
			net_peer_host(c, peers[h.rank].host, sizeof(peers[h.rank].host));
		joined++;
		continue;
fatal:
		send_reject(c, err->code, 0, err->msg);
		close(c);
		abort_joined(peers, o->world, err->code, err->msg);
		goto out;
	}

	put_welcome(&out, o, peers);
	for (int r = 1; r < o->world; r++) {
		if (net_send_frame(peers[r].fd, DIST_FRAME_WELCOME, out.data, out.len, deadline) != NET_OK) {
			dlk_errf(err, DLK_EXIT_RESTARTABLE, "rendezvous: rank %d left before the gang formed", r);
			abort_joined(peers, o->world, err->code, err->msg);
			goto out;
		}
	}
	if (ring_connect(o, g, data_fd, peers[1].host, peers[1].data_port, deadline, err))
		goto out;
	g->nctrl = o->world;
	g->ctrl = xcalloc((size_t)o->world, sizeof(int));
	for (int r = 0; r < o->world; r++) {
		g->ctrl[r] = peers[r].fd;
		peers[r].fd = -1;
	}
	ret = 0;
out:
	for (int r = 0; r < o->world; r++)
		if (peers[r].fd >= 0)
			close(peers[r].fd);
	if (lfd >= 0 && lfd != o->listen_fd)
		close(lfd);
	free(peers);
	dlk_buf_release(&in);
	dlk_buf_release(&out);
	return ret;
}

static int worker(const struct dist_rdzv_opts *o, struct dist_group *g, int data_fd, int data_port,
		  long long deadline, struct dlk_err *err)
{
	struct dlk_buf hello = DLK_BUF_INIT, in = DLK_BUF_INIT;
	char why[256] = "not tried", secs[32], master_host[256];
	long long backoff = 100;
	int fd = -1, ret = -1, next = (o->rank + 1) % o->world;
	char next_host[256] = "";
	int next_port = 0;

	fmt_secs(secs, sizeof(secs), o->timeout_ms);
	put_hello(&hello, o, data_port);
	for (;;) {
		int rf;
		uint32_t type;
		enum net_rc rc;

		if (dlk_now_ms() >= deadline) {
			dlk_errf(err, DLK_EXIT_CONNECT, "rendezvous: cannot reach rank 0 at '%s' port %d within %s: %s",
				 o->master_addr, o->master_port, secs, why);
			dlk_err_hint(err, "check MASTER_ADDR / MASTER_PORT and that rank 0 is running");
			goto out;
		}
		fd = net_connect(o->master_addr, o->master_port, attempt_deadline(deadline), &rf, why, sizeof(why));
		if (fd >= 0 && net_send_frame(fd, DIST_FRAME_HELLO, hello.data, hello.len, deadline) != NET_OK) {
			snprintf(why, sizeof(why), "connection lost while saying hello");
			close(fd);
			fd = -1;
		}
		if (fd >= 0) {
			/* Rank 0 answers at its own deadline at the latest (with the names of the
			 * missing ranks): give it a moment past ours to say so. */
			rc = net_recv_frame(fd, &type, &in, FRAME_MAX, deadline + REPLY_GRACE_MS);
			if (rc == NET_TIMEOUT) {
				dlk_errf(err, DLK_EXIT_RESTARTABLE,
					 "rendezvous: rank 0 at '%s' did not complete the rendezvous within %s",
					 o->master_addr, secs);
				goto out;
			}
			if (rc == NET_OK && type == DIST_FRAME_WELCOME)
				break;
			if (rc == NET_OK && type == DIST_FRAME_REJECT) {
				struct net_rd r = { (const unsigned char *)in.data, in.len, 0, 0 };
				int code = (int)get_u32(&r), retry = (int)get_u32(&r);
				char msg[1100];

				get_str(&r, msg, sizeof(msg));
				if (!retry) {
					dlk_errf(err, code > 0 && code < 256 ? code : DLK_EXIT_FAIL, "%s",
						 r.bad ? "rendezvous: rejected by rank 0" : msg);
					goto out;
				}
				snprintf(why, sizeof(why), "%.200s", msg);
			} else {
				snprintf(why, sizeof(why), "rank 0 closed the connection");
			}
			close(fd);
			fd = -1;
		}
		{
			long long left = deadline - dlk_now_ms();
			usleep((useconds_t)((backoff < left ? backoff : left > 0 ? left : 0) * 1000));
			backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
		}
	}

	{
		struct net_rd r = { (const unsigned char *)in.data, in.len, 0, 0 };
		uint32_t world = get_u32(&r), blob_len;
		const void *blob;

		if (world != (uint32_t)o->world)
			goto bad;
		for (int i = 0; i < o->world; i++) {
			char host[256];
			int port;

			get_str(&r, host, sizeof(host));
			port = get_u16(&r);
			if (i == next) {
				snprintf(next_host, sizeof(next_host), "%s", host);
				next_port = port;
			}
		}
		blob_len = get_u32(&r);
		if (blob_len > DIST_BLOB_MAX)
			goto bad;
		blob = get_bytes(&r, blob_len);
		if (r.bad || r.off != r.len)
			goto bad;
		g->blob = xmalloc(blob_len ? blob_len : 1);
		memcpy(g->blob, blob, blob_len);
		g->blob_len = blob_len;
	}
	if (!next_host[0]) {
		/* Rank 0 left its address to us: the one we reached it at. */
		net_peer_host(fd, master_host, sizeof(master_host));
		snprintf(next_host, sizeof(next_host), "%s", master_host);
	}
	if (ring_connect(o, g, data_fd, next_host, next_port, deadline, err))
		goto out;
	g->nctrl = 1;
	g->ctrl = xcalloc(1, sizeof(int));
	g->ctrl[0] = fd;
	fd = -1;
	ret = 0;
	goto out;
bad:
	dlk_errf(err, DLK_EXIT_FAIL, "rendezvous: malformed address table from rank 0");
out:
	if (fd >= 0)
		close(fd);
	dlk_buf_release(&hello);
	dlk_buf_release(&in);
	return ret;
}

int dist_rendezvous(const struct dist_rdzv_opts *o, struct dist_group *g, struct dlk_err *err)
{
	struct dist_rdzv_opts opts = *o;
	int data_fd = -1, data_port = 0, ret;
	long long deadline;

	*g = (struct dist_group)DIST_GROUP_INIT;
	if (!opts.run_id)
		opts.run_id = "";
	if (!opts.timeout_ms)
		opts.timeout_ms = 300000;
	if (opts.world < 1 || opts.world > DIST_WORLD_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: world size %d is not from 1 to %d",
				opts.world, DIST_WORLD_MAX);
	if (opts.rank < 0 || opts.rank >= opts.world)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: rank %d is out of range for a world of %d",
				opts.rank, opts.world);
	if (strlen(opts.run_id) > DIST_RUN_ID_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: run id is longer than %d bytes", DIST_RUN_ID_MAX);
	if (opts.advertise_host && strlen(opts.advertise_host) > 255)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: advertised host is longer than 255 bytes");
	if (opts.blob_len > DIST_BLOB_MAX)
		return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: blob of %zu bytes is over %d",
				opts.blob_len, DIST_BLOB_MAX);
	g->rank = opts.rank;
	g->world = opts.world;
	if (opts.world == 1) {
		g->blob = xmalloc(opts.blob_len ? opts.blob_len : 1);
		if (opts.blob_len)
			memcpy(g->blob, opts.blob, opts.blob_len);
		g->blob_len = opts.blob_len;
		return 0;
	}
	if (opts.rank > 0 && (!opts.master_addr || !*opts.master_addr))
		return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: no address for rank 0 (MASTER_ADDR)");
	if (opts.master_port < 1 || opts.master_port > 65535)
		if (!(opts.rank == 0 && opts.listen_fd >= 0))
			return dlk_errf(err, DLK_EXIT_CONFIG, "rendezvous: MASTER_PORT %d is out of range",
					opts.master_port);
	deadline = dlk_now_ms() + opts.timeout_ms;
	data_fd = net_listen(NULL, 0, &data_port, err);
	if (data_fd < 0)
		return dlk_err_prefix(err, "rendezvous: data port");
	if (opts.rank == 0) {
		ret = rank0(&opts, g, data_fd, data_port, deadline, err);
		if (!ret) {
			g->blob = xmalloc(opts.blob_len ? opts.blob_len : 1);
			if (opts.blob_len)
				memcpy(g->blob, opts.blob, opts.blob_len);
			g->blob_len = opts.blob_len;
		}
	} else {
		ret = worker(&opts, g, data_fd, data_port, deadline, err);
	}
	close(data_fd);
	if (ret)
		dist_group_release(g);
	return ret;
}

void dist_group_release(struct dist_group *g)
{
	for (int i = 0; i < g->nctrl; i++)
		if (g->ctrl[i] >= 0)
			close(g->ctrl[i]);
	free(g->ctrl);
	if (g->next_fd >= 0)
		close(g->next_fd);
	if (g->prev_fd >= 0)
		close(g->prev_fd);
	free(g->blob);
	g->ctrl = NULL;
	g->nctrl = 0;
	g->next_fd = g->prev_fd = -1;
	g->blob = NULL;
	g->blob_len = 0;
}
