/* The TCP ring communicator.
 *
 * All-reduce is the bandwidth-optimal ring: a reduce-scatter (w-1 steps: send one chunk to
 * rank+1, receive another from rank-1 and add it in) then an all-gather (w-1 steps of
 * copying). Every byte this rank sends in step s+1 is a byte it received in step s, so the
 * whole collective is two byte streams (to next, from prev) where the send stream may run
 * ahead of the receive stream by exactly one step. One thread drives both with
 * non-blocking sockets and poll(), so sending a slice overlaps receiving and reducing the
 * next: the pipeline granularity is whatever the kernel hands over, from SEND_BATCH to
 * SEND_MAX bytes per send.
 *
 * Chunk c always accumulates in ring order starting at rank c + 1, whatever the timing, so the
 * sums are the same bits on every run; the all-gather copies them, so every rank holds the
 * same bits too.
 *
 * The watchdog: a collective with no progress for the stall timeout fails, and so does
 * one whose neighbour closes its socket. The connections to rank 0 from the rendezvous are
 * the control plane: a failing rank tells rank 0 why (FAIL), rank 0 tells everyone (ABORT),
 * so every survivor names the rank that actually died rather than the neighbour that gave up
 * because of it. */
#include "lib/comm/comm.h"
#include "lib/comm/rendezvous.h"

#include <errno.h>
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

#define STAGE_BYTES (1u << 20) /* receive buffer for bytes that get added, not copied */
#define SEND_BATCH (64u << 10)  /* do not send less than this unless it is all there is */
/* Send at most this much per call, then go back to receiving and reducing. Bigger sends
 * starve the receive side while the kernel copies them: the neighbour upstream fills its
 * socket and sleeps, and on a box with more ranks than cores (4 on 2) the ring then moves
 * in bursts. Together with LINK_BUF_BYTES and the 8-wide add this took 10-30% off 4-64 MiB
 * all-reduces with 4 ranks on 2 cores (bench/README.md). */
#define SEND_MAX (256u << 10)
/* Kernel buffer for each data link (the kernel doubles it). The rendezvous asks for 4 MiB;
 * less queued in the kernel measured faster on loopback with 4 ranks on 2 cores (probably
 * because the bytes are still in cache when the receiver copies them out). 1 MiB (2 MiB in
 * effect) still covers a 10 Gb/s link at 1.6 ms round trip. */
#define LINK_BUF_BYTES (1 << 20)
#define HDR_BYTES 24
#define EXPLAIN_WAIT_MS 1000    /* how long a lost link waits for rank 0 to say why */

enum coll { COLL_ALLREDUCE = 1, COLL_BROADCAST = 2, COLL_BARRIER = 3, COLL_REDUCE_SCATTER = 4, COLL_ALLGATHER = 5 };

static const char *coll_name(int op)
{
	switch (op) {
	case COLL_ALLREDUCE: return "all-reduce";
	case COLL_BROADCAST: return "broadcast";
	case COLL_BARRIER: return "barrier";
	case COLL_REDUCE_SCATTER: return "reduce-scatter";
	case COLL_ALLGATHER: return "all-gather";
	}
	return "collective";
}

struct tcp_comm {
	struct dlk_comm base;
	int next_fd, prev_fd;
	int *ctrl, nctrl;
	char *bye;      /* bye[i]: ctrl[i] said goodbye and is no longer watched */
	int stall_ms;
	int grace_ms;   /* rank 0: how long to collect stall reports before naming a culprit */
	uint32_t seq;
	int broken;
	struct dlk_err broken_err;
	float *stage;
	float *scratch; /* world floats, for the barrier */
};

struct seg {
	char *p;
	size_t n;
	int add; /* receive: add float32s into p instead of copying */
};

struct xfer {
	int op;
	uint64_t nbytes; /* announced in the header, checked against rank-1's */
	int root;
	struct seg *send, *recv;
	int nsend, nrecv;
	size_t head_start; /* send-stream bytes allowed before anything is received */
};

static void put_le(unsigned char *o, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		o[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *i, int n)
{
	uint64_t v = 0;
	for (int k = n - 1; k >= 0; k--)
		v = v << 8 | i[k];
	return v;
}

static void fmt_step(const struct tcp_comm *t, char *out, size_t len)
{
	if (t->base.step >= 0)
		snprintf(out, len, " (step %ld)", t->base.step);
	else
		out[0] = '\0';
}

/* Failure reports on the control plane: FAIL (worker -> rank 0) and ABORT (rank 0 -> all)
 * carry {u8 exit code, u8 kind, u16 blamed rank, message}. Kind 'S' is a stall (this rank
 * waited for `blamed` past the timeout), 'E' anything else. */
struct report {
	int kind;
	int blamed;
	struct dlk_err e;
};

enum { CTRL_BYE, CTRL_REPORT, CTRL_CLOSED };

static void send_report(int fd, uint32_t type, int kind, int blamed, const struct dlk_err *e)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_addc(&b, (char)e->code);
	dlk_buf_addc(&b, (char)kind);
	put_u16(&b, (uint16_t)blamed);
	dlk_buf_adds(&b, e->msg);
	net_send_frame(fd, type, b.data, b.len, dlk_now_ms() + 200);
	dlk_buf_release(&b);
}

static int broken_now(struct tcp_comm *t, struct dlk_err *err)
{
	t->broken = 1;
	t->broken_err = *err;
	return -1;
}

/* Remembers the failure, tells the others (best effort, bounded) and returns -1. */
static int fail(struct tcp_comm *t, struct dlk_err *err)
{
	if (t->base.rank == 0) {
		for (int r = 1; r < t->nctrl; r++)
			if (t->ctrl[r] >= 0 && !t->bye[r])
				send_report(t->ctrl[r], DIST_FRAME_ABORT, 'E', 0, err);
	} else if (t->nctrl && t->ctrl[0] >= 0 && !t->bye[0]) {
		send_report(t->ctrl[0], DIST_FRAME_FAIL, 'E', 0, err);
	}
	return broken_now(t, err);
}

/* Reads one control frame from ctrl[idx]: a goodbye (that rank finished and freed its
 * communicator: normal, the link is no longer watched), a report, or a closed link. */
static int ctrl_read(struct tcp_comm *t, int idx, struct report *rep)
{
	struct dlk_buf msg = DLK_BUF_INIT;
	uint32_t type;
	int ret = CTRL_CLOSED;

	if (net_recv_frame(t->ctrl[idx], &type, &msg, 4096, dlk_now_ms() + EXPLAIN_WAIT_MS) == NET_OK) {
		if (type == DIST_FRAME_BYE) {
			t->bye[idx] = 1;
			ret = CTRL_BYE;
		} else if ((type == DIST_FRAME_FAIL || type == DIST_FRAME_ABORT) && msg.len > 4) {
			int code = (unsigned char)msg.data[0];
			struct net_rd r = { (const unsigned char *)msg.data + 2, 2, 0, 0 };

			rep->kind = msg.data[1];
			rep->blamed = get_u16(&r);
			dlk_errf(&rep->e, code ? code : DLK_EXIT_RESTARTABLE, "%s", msg.data + 4);
			ret = CTRL_REPORT;
		}
	}
	if (ret == CTRL_CLOSED)
		t->bye[idx] = 1; /* nothing more will come from it */
	dlk_buf_release(&msg);
	return ret;
}

static int closed_msg(struct tcp_comm *t, int rank, const char *what, struct dlk_err *err)
{
	char step[48];

	fmt_step(t, step, sizeof(step));
	return dlk_errf(err, DLK_EXIT_RESTARTABLE, "rank %d closed its connection during %s%s", rank, what, step);
}

static void fmt_secs(char *out, size_t len, int ms)
{
	if (ms % 1000)
		snprintf(out, len, "%.1fs", ms / 1000.0);
	else
		snprintf(out, len, "%ds", ms / 1000);
}

/* Rank 0, once any rank stalled: every rank still running soon stalls too, each blaming its
 * neighbour, so one report alone may blame an innocent rank that is merely waiting itself.
 * Collect reports for a short grace period; the culprit is the rank that is blamed but never
 * speaks up (frozen, or cut off). Then tell everyone. */
static int resolve_stall(struct tcp_comm *t, const char *what, int first_idx, const struct report *first,
			 struct dlk_err *err)
{
	int w = t->base.world, alive_n = 0, culprit = -1, ret;
	char *alive = xcalloc((size_t)w, 1);
	struct report *reps = xcalloc((size_t)w, sizeof(*reps));
	struct pollfd *pf = xcalloc((size_t)w, sizeof(*pf));
	long long deadline = dlk_now_ms() + t->grace_ms;

	reps[first_idx] = *first;
	alive[0] = alive[first_idx] = 1;
	for (int r = 1; r < w; r++)
		if (t->bye[r])
			alive[r] = 1;
	for (int r = 0; r < w; r++)
		alive_n += alive[r];
	while (alive_n < w - 1) {
		long long left = deadline - dlk_now_ms();
		int np = 0;

		if (left <= 0)
			break;
		for (int r = 1; r < w; r++)
			if (!alive[r])
				pf[np++] = (struct pollfd){ t->ctrl[r], POLLIN, 0 };
		if (poll(pf, (nfds_t)np, (int)left) <= 0)
			continue;
		for (int i = 0; i < np; i++) {
			struct report rep;
			int r;

			if (!pf[i].revents)
				continue;
			for (r = 1; r < w && t->ctrl[r] != pf[i].fd; r++)
				;
			switch (ctrl_read(t, r, &rep)) {
			case CTRL_BYE:
				break;
			case CTRL_REPORT:
				if (rep.kind != 'S') {
					*err = rep.e; /* a real error beats any stall */
					goto verdict;
				}
				reps[r] = rep;
				break;
			default:
				closed_msg(t, r, what, err);
				goto verdict;
			}
			alive[r] = 1;
			alive_n++;
		}
	}
	if (alive_n == w - 1) {
		for (int r = 0; r < w; r++)
			if (!alive[r])
				culprit = r;
	} else {
		for (int r = 0; r < w && culprit < 0; r++)
			if (reps[r].kind == 'S' && reps[r].blamed >= 0 && reps[r].blamed < w && !alive[reps[r].blamed])
				culprit = reps[r].blamed;
	}
	*err = first->e;
	if (culprit >= 0) {
		int found = 0;
		for (int r = 0; r < w && !found; r++)
			if (reps[r].kind == 'S' && reps[r].blamed == culprit) {
				*err = reps[r].e;
				found = 1;
			}
		if (!found) {
			char secs[32], step[48];
			fmt_secs(secs, sizeof(secs), t->stall_ms);
			fmt_step(t, step, sizeof(step));
			dlk_errf(err, DLK_EXIT_RESTARTABLE, "%s: rank %d made no progress for %s%s", what, culprit,
				 secs, step);
		}
	}
verdict:
	ret = fail(t, err);
	free(alive);
	free(reps);
	free(pf);
	return ret;
}

/* This rank waited past the stall timeout for `blamed`. */
static int stalled(struct tcp_comm *t, const char *what, int blamed, struct dlk_err *err)
{
	struct report own = { 'S', blamed, *err };

	if (t->base.rank == 0)
		return resolve_stall(t, what, 0, &own, err);
	if (t->nctrl && !t->bye[0]) {
		struct pollfd p = { t->ctrl[0], POLLIN, 0 };
		struct report verdict;

		send_report(t->ctrl[0], DIST_FRAME_FAIL, 'S', blamed, err);
		if (poll(&p, 1, t->grace_ms + EXPLAIN_WAIT_MS) > 0 && ctrl_read(t, 0, &verdict) == CTRL_REPORT)
			*err = verdict.e;
	}
	return broken_now(t, err);
}

/* Something arrived on the control plane during a collective. */
static int ctrl_event(struct tcp_comm *t, int idx, const char *what, struct dlk_err *err)
{
	struct report rep;

	switch (ctrl_read(t, idx, &rep)) {
	case CTRL_BYE:
		return 0;
	case CTRL_REPORT:
		if (t->base.rank == 0 && rep.kind == 'S')
			return resolve_stall(t, what, idx, &rep, err);
		*err = rep.e;
		return t->base.rank == 0 ? fail(t, err) : broken_now(t, err);
	default:
		closed_msg(t, t->base.rank == 0 ? idx : 0, what, err);
		return fail(t, err);
	}
}

/* A data link to `peer` was lost. If someone already knows why (a report from that peer at
 * rank 0, rank 0's verdict elsewhere), that is the better message: wait a moment for it. */
static int link_lost(struct tcp_comm *t, int peer, const char *what, struct dlk_err *err)
{
	int idx = t->base.rank == 0 ? peer : 0;
	struct pollfd p = { t->bye[idx] ? -1 : t->ctrl[idx], POLLIN, 0 };
	struct report rep;

	if (p.fd >= 0 && poll(&p, 1, EXPLAIN_WAIT_MS) > 0 && ctrl_read(t, idx, &rep) == CTRL_REPORT) {
		*err = rep.e;
		if (t->base.rank != 0)
			return broken_now(t, err);
		if (rep.kind == 'S')
			return resolve_stall(t, what, idx, &rep, err);
		return fail(t, err);
	}
	closed_msg(t, peer, what, err);
	return fail(t, err);
}

static int sock_fail(struct tcp_comm *t, int peer, const char *what, int e, struct dlk_err *err)
{
	char step[48];

	if (e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ETIMEDOUT || e == EHOSTUNREACH)
		return link_lost(t, peer, what, err);
	fmt_step(t, step, sizeof(step));
	dlk_errf(err, DLK_EXIT_RESTARTABLE, "%s: link with rank %d failed%s: %s", what, peer, step, strerror(e));
	return fail(t, err);
}

/* One non-blocking send to rank+1 or receive from rank-1 of up to len bytes. Returns the bytes
 * moved, 0 when none moved (*ready is cleared when the socket would block: wait for poll before
 * the next try, so a wakeup costs one useful syscall, not a round of failing ones; it is also
 * cleared after a short transfer, which drained the socket), or -1 when the link failed (the
 * peer closing it included; err says why and the communicator is broken). */
static ssize_t link_io(struct tcp_comm *t, int sending, void *p, size_t len, int *ready, const char *what,
		       struct dlk_err *err)
{
	int w = t->base.world, peer = sending ? (t->base.rank + 1) % w : (t->base.rank + w - 1) % w;
	ssize_t n = sending ? send(t->next_fd, p, len, MSG_NOSIGNAL) : recv(t->prev_fd, p, len, 0);

	if (n > 0) {
		*ready = (size_t)n == len;
		return n;
	}
	if (n == 0)
		return sending ? 0 : link_lost(t, peer, what, err);
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		*ready = 0;
		return 0;
	}
	if (errno == EINTR)
		return 0;
	return sock_fail(t, peer, what, errno, err);
}

static size_t total(const struct seg *s, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += s[i].n;
	return t;
}

/* dst[i] += src[i], one rounding per element as in the plain loop, so the bits do not
 * depend on the batch boundaries. Written 8 wide with restrict pointers: GCC at -O2 does not
 * vectorize the plain loop (it would need a run-time alias check), and the scalar adds were
 * an eighth of the CPU time of a large all-reduce. */
static void add_floats(float *restrict dst, const float *restrict src, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		float a0 = dst[i] + src[i], a1 = dst[i + 1] + src[i + 1];
		float a2 = dst[i + 2] + src[i + 2], a3 = dst[i + 3] + src[i + 3];
		float a4 = dst[i + 4] + src[i + 4], a5 = dst[i + 5] + src[i + 5];
		float a6 = dst[i + 6] + src[i + 6], a7 = dst[i + 7] + src[i + 7];

		dst[i] = a0, dst[i + 1] = a1, dst[i + 2] = a2, dst[i + 3] = a3;
		dst[i + 4] = a4, dst[i + 5] = a5, dst[i + 6] = a6, dst[i + 7] = a7;
	}
	for (; i < n; i++)
		dst[i] += src[i];
}

/* Where one collective's two byte streams stand. */
struct xfer_state {
	const struct xfer *x;
	const char *what;
	int next, prev;                     /* the ranks at the two ends */
	unsigned char hdr_out[HDR_BYTES], hdr_in[HDR_BYTES];
	size_t hdr_sent, hdr_recvd;
	size_t send_total, recv_total;
	size_t sent, done;                  /* stream positions */
	int si, ri;                         /* current segments */
	size_t soff, roff;                  /* offsets inside them */
	size_t carry;                       /* bytes of a partial float at the start of stage */
	int can_send, can_recv;             /* no EAGAIN seen since the last poll */
	char step[48];
};

static int xfer_finished(const struct xfer_state *xs)
{
	return xs->hdr_sent == HDR_BYTES && xs->sent == xs->send_total && xs->hdr_recvd == HDR_BYTES &&
	       xs->done == xs->recv_total;
}

/* The header every collective starts with: magic, op, sequence number, root, size. */
static void header_put(struct tcp_comm *t, struct xfer_state *xs)
{
	put_le(xs->hdr_out, DIST_MAGIC_COLL, 4);
	put_le(xs->hdr_out + 4, (uint64_t)xs->x->op, 4);
	put_le(xs->hdr_out + 8, t->seq, 4);
	put_le(xs->hdr_out + 12, (uint64_t)(uint32_t)xs->x->root, 4);
	put_le(xs->hdr_out + 16, xs->x->nbytes, 8);
	t->seq++;
}

/* rank-1's header must announce the collective this rank is in */
static int header_check(struct tcp_comm *t, const struct xfer_state *xs, struct dlk_err *err)
{
	const struct xfer *x = xs->x;
	uint64_t magic = get_le(xs->hdr_in, 4), op = get_le(xs->hdr_in + 4, 4);
	uint64_t seq = get_le(xs->hdr_in + 8, 4), root = get_le(xs->hdr_in + 12, 4);
	uint64_t nb = get_le(xs->hdr_in + 16, 8);

	if (magic == DIST_MAGIC_COLL && op == (uint64_t)x->op && seq == t->seq - 1 &&
	    root == (uint64_t)(uint32_t)x->root && nb == x->nbytes)
		return 0;
	dlk_errf(err, DLK_EXIT_FAIL,
		 "%s: rank %d is in %s #%llu of %llu bytes (root %llu), this rank in %s #%u of %llu bytes (root %d)%s",
		 xs->what, xs->prev, magic == DIST_MAGIC_COLL ? coll_name((int)op) : "garbage", (unsigned long long)seq,
		 (unsigned long long)nb, (unsigned long long)root, xs->what, t->seq - 1, (unsigned long long)x->nbytes,
		 x->root, xs->step);
	dlk_err_hint(err, "every rank must call the same collectives with the same sizes in the same order");
	return fail(t, err);
}

/* Moves more of a header: ours to rank+1, or rank-1's to us. Returns the bytes moved, -1 when
 * the link failed. */
static ssize_t header_io(struct tcp_comm *t, struct xfer_state *xs, int sending, int *want, int *progress,
			 struct dlk_err *err)
{
	unsigned char *h = sending ? xs->hdr_out : xs->hdr_in;
	size_t *at = sending ? &xs->hdr_sent : &xs->hdr_recvd;
	int *ready = sending ? &xs->can_send : &xs->can_recv;
	ssize_t n;

	if (*at == HDR_BYTES)
		return 0;
	*want = 1;
	if (!*ready)
		return 0;
	n = link_io(t, sending, h + *at, HDR_BYTES - *at, ready, xs->what, err);
	if (n < 0)
		return -1;
	*at += (size_t)n;
	*progress |= n > 0;
	return n;
}

/* The send stream: the header, then the segments, never more than head_start bytes ahead of what
 * was received. Sets *want when it has something to send; -1 when the link failed. */
static int send_some(struct tcp_comm *t, struct xfer_state *xs, int *want, int *progress, struct dlk_err *err)
{
	const struct xfer *x = xs->x;
	ssize_t n;

	if (header_io(t, xs, 1, want, progress, err) < 0)
		return -1;
	if (xs->hdr_sent < HDR_BYTES || xs->sent == xs->send_total)
		return 0;
	size_t allowed = x->head_start == SIZE_MAX ? xs->send_total : x->head_start + xs->done;
	if (allowed > xs->send_total)
		allowed = xs->send_total;
	while (x->send[xs->si].n == xs->soff) {
		xs->si++;
		xs->soff = 0;
	}
	if (allowed <= xs->sent)
		return 0;
	size_t avail = allowed - xs->sent, in_seg = x->send[xs->si].n - xs->soff;
	size_t len = avail < in_seg ? avail : in_seg;
	if (len > SEND_MAX)
		len = SEND_MAX;
	/* batch: no tiny sends while more is about to arrive */
	if (len < SEND_BATCH && len != in_seg && allowed != xs->send_total)
		return 0;
	*want = 1;
	if (!xs->can_send)
		return 0;
	n = link_io(t, 1, x->send[xs->si].p + xs->soff, len, &xs->can_send, xs->what, err);
	if (n < 0)
		return -1;
	xs->sent += (size_t)n;
	xs->soff += (size_t)n;
	*progress |= n > 0;
	return 0;
}

/* The receive stream: the header (checked), then the segments, copied or added in. Sets *want
 * when it waits for bytes; -1 when the link failed or the header does not match. */
static int recv_some(struct tcp_comm *t, struct xfer_state *xs, int *want, int *progress, struct dlk_err *err)
{
	const struct xfer *x = xs->x;
	ssize_t n = header_io(t, xs, 0, want, progress, err);

	if (n < 0 || (n > 0 && xs->hdr_recvd == HDR_BYTES && header_check(t, xs, err)))
		return -1;
	if (xs->hdr_recvd < HDR_BYTES || xs->done == xs->recv_total)
		return 0;
	*want = 1;
	while (xs->can_recv && x->recv[xs->ri].n == xs->roff) {
		xs->ri++;
		xs->roff = 0;
	}
	if (!xs->can_recv)
		return 0;
	struct seg *sg = &x->recv[xs->ri];
	if (sg->add) {
		size_t room = STAGE_BYTES - xs->carry, left = sg->n - xs->roff - xs->carry;
		char *st = (char *)t->stage;

		n = link_io(t, 0, st + xs->carry, left < room ? left : room, &xs->can_recv, xs->what, err);
		if (n > 0) {
			size_t have = xs->carry + (size_t)n, whole = have / sizeof(float) * sizeof(float);

			add_floats((float *)(sg->p + xs->roff), t->stage, whole / sizeof(float));
			xs->roff += whole;
			xs->done += whole;
			xs->carry = have - whole;
			if (xs->carry)
				memmove(st, st + whole, xs->carry);
		}
	} else {
		n = link_io(t, 0, sg->p + xs->roff, sg->n - xs->roff, &xs->can_recv, xs->what, err);
		if (n > 0) {
			xs->roff += (size_t)n;
			xs->done += (size_t)n;
		}
	}
	if (n < 0)
		return -1;
	*progress |= n > 0;
	return 0;
}

/* Nothing moved: waits for the data links (those that want to move) and the control plane, at
 * most until the stall timeout since the last progress. Returns -1 when the collective failed
 * (a stall, a report on the control plane), 0 to go on. */
static int wait_links(struct tcp_comm *t, struct xfer_state *xs, struct pollfd *pf, int want_send, int want_recv,
		      long long last, struct dlk_err *err)
{
	long long left;
	int np = 0, rc;

	if (want_send)
		pf[np++] = (struct pollfd){ t->next_fd, POLLOUT, 0 };
	if (want_recv)
		pf[np++] = (struct pollfd){ t->prev_fd, POLLIN, 0 };
	for (int r = 0; r < t->nctrl; r++)
		pf[np++] = (struct pollfd){ t->bye[r] ? -1 : t->ctrl[r], POLLIN, 0 };
	left = last + t->stall_ms - dlk_now_ms();
	if (left <= 0) {
		char secs[32];
		fmt_secs(secs, sizeof(secs), t->stall_ms);
		if (xs->hdr_recvd < HDR_BYTES || xs->done < xs->recv_total) {
			dlk_errf(err, DLK_EXIT_RESTARTABLE, "%s: no data from rank %d for %s%s", xs->what, xs->prev, secs,
			         xs->step);
			return stalled(t, xs->what, xs->prev, err);
		}
		dlk_errf(err, DLK_EXIT_RESTARTABLE, "%s: rank %d took no data for %s%s", xs->what, xs->next, secs,
		         xs->step);
		return stalled(t, xs->what, xs->next, err);
	}
	rc = poll(pf, (nfds_t)np, (int)(left > 1000000 ? 1000000 : left));
	if (rc < 0 && errno != EINTR) {
		dlk_errf(err, DLK_EXIT_FAIL, "%s: poll: %s", xs->what, strerror(errno));
		return fail(t, err);
	}
	/* Data first: a rank that finished this collective and exited closes its control link too,
	 * and what it sent before must still be read. */
	int data_ready = 0;
	for (int i = 0; i < np; i++) {
		if (pf[i].fd == t->next_fd && pf[i].revents)
			data_ready = xs->can_send = 1;
		if (pf[i].fd == t->prev_fd && pf[i].revents)
			data_ready = xs->can_recv = 1;
	}
	if (data_ready)
		return 0;
	for (int i = 0; i < np; i++) {
		int r;
		if (pf[i].fd == t->next_fd || pf[i].fd == t->prev_fd || !pf[i].revents)
			continue;
		/* Something on the control plane: only ever a failure notice or a closed link. */
		for (r = 0; r < t->nctrl && t->ctrl[r] != pf[i].fd; r++)
			;
		if (ctrl_event(t, r, xs->what, err))
			return -1;
	}
	return 0;
}

/* Runs one collective: both streams until they are complete, waiting when neither moves. */
static int run_xfer(struct tcp_comm *t, const struct xfer *x, struct dlk_err *err)
{
	struct xfer_state xs = { .x = x, .what = coll_name(x->op), .can_send = 1, .can_recv = 1 };
	struct pollfd *pf = xcalloc((size_t)t->nctrl + 2, sizeof(*pf));
	long long last = dlk_now_ms();
	int ret = -1;

	xs.next = (t->base.rank + 1) % t->base.world;
	xs.prev = (t->base.rank + t->base.world - 1) % t->base.world;
	xs.send_total = total(x->send, x->nsend);
	xs.recv_total = total(x->recv, x->nrecv);
	fmt_step(t, xs.step, sizeof(xs.step));
	header_put(t, &xs);
	while (!xfer_finished(&xs)) {
		int progress = 0, want_send = 0, want_recv = 0;

		if (send_some(t, &xs, &want_send, &progress, err) || recv_some(t, &xs, &want_recv, &progress, err))
			goto out;
		if (progress) {
			last = dlk_now_ms();
			continue;
		}
		if (wait_links(t, &xs, pf, want_send, want_recv, last, err))
			goto out;
	}
	ret = 0;
out:
	free(pf);
	return ret;
}

static int check_broken(struct tcp_comm *t, struct dlk_err *err)
{
	if (!t->broken)
		return 0;
	if (err)
		*err = t->broken_err;
	return -1;
}

/* The ring's phases over count floats, as segments: reduce-scatter (w - 1 steps: send one chunk to
 * rank+1, receive another from rank-1 and add it in) then all-gather (w - 1 steps of copying).
 * Chunks are comm_shard's, and the order is such that rank r ends the reduce-scatter with chunk
 * r whole, which is what ZeRO's shard is: the all-reduce and its halves share this one layout. */
static void ring_segments(int w, int r, float *buf, size_t count, struct seg *send, struct seg *recv)
{
	int steps = w - 1;

	for (int s = 0; s < steps; s++) {
		int sc = ((r - s - 1) % w + w) % w, rc = ((r - s - 2) % w + w) % w;
		size_t off, len;

		comm_shard(count, w, sc, &off, &len);
		send[s] = (struct seg){ (char *)(buf + off), len * sizeof(float), 0 };
		comm_shard(count, w, rc, &off, &len);
		recv[s] = (struct seg){ (char *)(buf + off), len * sizeof(float), 1 };
	}
	for (int s = 0; s < steps; s++) {
		int sc = ((r - s) % w + w) % w, rc = ((r - s - 1) % w + w) % w;
		size_t off, len;

		comm_shard(count, w, sc, &off, &len);
		send[steps + s] = (struct seg){ (char *)(buf + off), len * sizeof(float), 0 };
		comm_shard(count, w, rc, &off, &len);
		recv[steps + s] = (struct seg){ (char *)(buf + off), len * sizeof(float), 0 };
	}
}

enum { PHASE_RS = 1, PHASE_AG = 2 };

/* Runs the phases asked for (PHASE_RS, PHASE_AG or both) as collective `op`. Both phases with
 * COMM_SUM are one transfer, the all-gather's sends starting as the reduce-scatter's last
 * receive completes; with COMM_AVG the chunk this rank owns is divided once the reduce-scatter
 * has finished, before the all-gather forwards it. */
static int ring_run(struct tcp_comm *t, int op, int phases, float *buf, size_t count, enum comm_reduce red,
		    struct dlk_err *err)
{
	int w = t->base.world, r = t->base.rank, steps = w - 1;
	struct seg *send = xcalloc((size_t)steps * 2, sizeof(*send));
	struct seg *recv = xcalloc((size_t)steps * 2, sizeof(*recv));
	struct xfer x = { op, (uint64_t)count * sizeof(float), 0, send, recv, 2 * steps, 2 * steps, 0 };
	int ret = 0;

	ring_segments(w, r, buf, count, send, recv);
	x.head_start = send[0].n;
	if (phases == (PHASE_RS | PHASE_AG) && red == COMM_SUM) {
		ret = run_xfer(t, &x, err);
		goto out;
	}
	if (phases & PHASE_RS) {
		struct xfer a = x;
		size_t off, len;

		a.nsend = a.nrecv = steps;
		ret = run_xfer(t, &a, err);
		if (!ret && red == COMM_AVG) {
			comm_shard(count, w, r, &off, &len);
			for (size_t i = 0; i < len; i++)
				buf[off + i] /= (float)w;
		}
	}
	if (!ret && (phases & PHASE_AG)) {
		struct xfer b = x;

		b.send += steps;
		b.recv += steps;
		b.nsend = b.nrecv = steps;
		b.head_start = b.send[0].n;
		ret = run_xfer(t, &b, err);
	}
out:
	free(send);
	free(recv);
	return ret;
}

static int ring_allreduce_op(struct tcp_comm *t, int op, float *buf, size_t count, enum comm_reduce red,
			     struct dlk_err *err)
{
	return ring_run(t, op, PHASE_RS | PHASE_AG, buf, count, red, err);
}

static int check_size(size_t count, const char *what, struct dlk_err *err)
{
	if (count > SIZE_MAX / sizeof(float) / 2)
		return dlk_errf(err, DLK_EXIT_FAIL, "%s: %zu elements is too many", what, count);
	return 0;
}

static int tcp_reduce_scatter(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			      struct dlk_err *err)
{
	struct tcp_comm *t = (struct tcp_comm *)c;

	if (check_broken(t, err) || check_size(count, "reduce-scatter", err))
		return -1;
	return ring_run(t, COLL_REDUCE_SCATTER, PHASE_RS, buf, count, op, err);
}

static int tcp_allgather(struct dlk_comm *c, float *buf, size_t count, struct dlk_err *err)
{
	struct tcp_comm *t = (struct tcp_comm *)c;

	if (check_broken(t, err) || check_size(count, "all-gather", err))
		return -1;
	return ring_run(t, COLL_ALLGATHER, PHASE_AG, buf, count, COMM_SUM, err);
}

static int tcp_allreduce(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err)
{
	struct tcp_comm *t = (struct tcp_comm *)c;

	if (check_broken(t, err))
		return -1;
	if (check_size(count, "all-reduce", err))
		return -1;
	return ring_allreduce_op(t, COLL_ALLREDUCE, buf, count, op, err);
}

static int tcp_broadcast(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err)
{
	struct tcp_comm *t = (struct tcp_comm *)c;
	int w = t->base.world, r = t->base.rank;
	struct seg s = { buf, nbytes, 0 }, none = { NULL, 0, 0 };
	struct xfer x = { COLL_BROADCAST, nbytes, root, &s, &s, 1, 1, 0 };

	if (check_broken(t, err))
		return -1;
	if (r == root) {
		x.recv = &none;
		x.head_start = SIZE_MAX;
	}
	if ((r + 1) % w == root)
		x.send = &none; /* the last rank of the chain forwards nothing */
	return run_xfer(t, &x, err);
}

static int tcp_barrier(struct dlk_comm *c, struct dlk_err *err)
{
	struct tcp_comm *t = (struct tcp_comm *)c;

	if (check_broken(t, err))
		return -1;
	/* An all-reduce of one float per rank: every rank's chunk has to travel the whole ring
	 * before anyone returns, so nobody leaves before everyone arrived. */
	memset(t->scratch, 0, (size_t)t->base.world * sizeof(float));
	return ring_allreduce_op(t, COLL_BARRIER, t->scratch, (size_t)t->base.world, COMM_SUM, err);
}

static void tcp_free(struct dlk_comm *c)
{
	struct tcp_comm *t = (struct tcp_comm *)c;
	long long dl = dlk_now_ms() + 100;

	/* Say goodbye first, so that a rank still finishing its last collective can tell a
	 * clean exit from a crash. */
	for (int i = 0; i < t->nctrl; i++)
		if (t->ctrl[i] >= 0 && !t->broken)
			net_send_frame(t->ctrl[i], DIST_FRAME_BYE, NULL, 0, dl);
	/* the links go back to a group, which closes them */
	struct dist_group g = DIST_GROUP_INIT;
	g.ctrl = t->ctrl;
	g.nctrl = t->nctrl;
	g.next_fd = t->next_fd;
	g.prev_fd = t->prev_fd;
	dist_group_release(&g);
	free(t->bye);
	free(t->stage);
	free(t->scratch);
	free(t);
}

static const struct dlk_comm_ops tcp_ops = {
	.name = "tcp-ring",
	.allreduce = tcp_allreduce,
	.broadcast = tcp_broadcast,
	.barrier = tcp_barrier,
	.free = tcp_free,
	.reduce_scatter = tcp_reduce_scatter,
	.allgather = tcp_allgather,
};

struct dlk_comm *comm_tcp_new(struct dist_group *g, int stall_timeout_ms)
{
	struct tcp_comm *t;

	if (g->world <= 1)
		return comm_single_new();
	t = xcalloc(1, sizeof(*t));
	t->base.ops = &tcp_ops;
	t->base.rank = g->rank;
	t->base.world = g->world;
	t->base.step = -1;
	t->stall_ms = stall_timeout_ms > 0 ? stall_timeout_ms : 300000;
	t->grace_ms = t->stall_ms / 2 < 500 ? 500 : t->stall_ms / 2 > 5000 ? 5000 : t->stall_ms / 2;
	t->next_fd = g->next_fd;
	t->prev_fd = g->prev_fd;
	t->ctrl = g->ctrl;
	t->nctrl = g->nctrl;
	t->bye = xcalloc((size_t)(g->nctrl ? g->nctrl : 1), 1);
	g->next_fd = g->prev_fd = -1;
	g->ctrl = NULL;
	g->nctrl = 0;
	for (int i = 0; i < 2; i++) {
		int fd = i ? t->prev_fd : t->next_fd, sz = LINK_BUF_BYTES;

		/* best effort: a refusal leaves the rendezvous' sizes, which work too */
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	t->stage = xmalloc(STAGE_BYTES);
	t->scratch = xcalloc((size_t)g->world, sizeof(float));
	return &t->base;
}
