/* Collective communication between the ranks of one training run.
 *
 * One interface, several implementations: the TCP ring (CPU, lib/comm/ring.c) and NCCL
 * (GPU). Every call blocks until the collective is done on this rank. A call that fails
 * leaves the communicator broken: every later call fails at once with the same error, and
 * the caller is expected to exit (DLK_EXIT_RESTARTABLE means "restart the whole gang from
 * the last checkpoint"). Buffers are host memory for the TCP ring and device memory of the
 * compute backend for a device communicator (NCCL, comm_device_new); for the latter "done" means
 * that the backend's later work sees the result. */
#ifndef DLK_COMM_COMM_H
#define DLK_COMM_COMM_H

#include <stddef.h>

#include "lib/util/err.h"

enum comm_reduce {
	COMM_SUM,
	COMM_AVG /* the sum divided by the world size */
};

struct dlk_comm;

struct dlk_comm_ops {
	const char *name; /* "tcp-ring", "nccl" */
	/* In place over count float32s; every rank passes the same count and op. The result is
	 * bit-identical on every rank and from run to run (a fixed reduction order). */
	int (*allreduce)(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			 struct dlk_err *err);
	/* Copies root's nbytes into every other rank's buf. */
	int (*broadcast)(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err);
	/* Returns only after every rank has entered the barrier. */
	int (*barrier)(struct dlk_comm *c, struct dlk_err *err);
	void (*free)(struct dlk_comm *c);
	/* Optional, for communicators that run collectives in the background: starts an
	 * all-reduce and returns; the next wait() finishes every one started. NULL: the gradient
	 * buckets (comm_grads_*) are all reduced in comm_grads_finish(). */
	int (*allreduce_start)(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			       struct dlk_err *err);
	int (*wait)(struct dlk_comm *c, struct dlk_err *err);
	/* The two halves of an all-reduce, for ZeRO (see comm_reduce_scatter, comm_allgather).
	 * NULL: done with allreduce (reduce-scatter) or broadcasts (all-gather). */
	int (*reduce_scatter)(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			      struct dlk_err *err);
	int (*allgather)(struct dlk_comm *c, float *buf, size_t count, struct dlk_err *err);
};

/* The gradient buckets of the step in progress (see comm_grads_ready). */
struct comm_grads {
	float *buf;       /* NULL: no step in progress */
	size_t count;
	size_t ready;     /* buf[ready, count) is final */
	size_t sent;      /* buf[sent, count) has been started, in buckets from the top */
	size_t per;       /* floats in a bucket */
	int in_order;     /* every range so far ended where the previous one began */
};

struct dlk_comm {
	const struct dlk_comm_ops *ops;
	int rank, world;
	long step; /* the caller's training step, named in watchdog messages; -1 = none */
	int device_buffers; /* buffers are the compute backend's device memory (NCCL) */
	struct comm_grads grads;
};

static inline int comm_rank(const struct dlk_comm *c) { return c->rank; }
static inline int comm_world(const struct dlk_comm *c) { return c->world; }
/* Names `step` in later error messages ("... (step 1200)"); pass -1 to stop. */
static inline void comm_set_step(struct dlk_comm *c, long step) { c->step = step; }

int comm_allreduce(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err);
int comm_broadcast(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err);
int comm_barrier(struct dlk_comm *c, struct dlk_err *err);
/* The shard of rank `rank` in a buffer of count floats split over `world` ranks, as
 * comm_reduce_scatter and comm_allgather lay it out: rank r holds [r * per, (r + 1) * per) with
 * per = count / world, and the last rank the rest as well (count % world floats more). One
 * layout for every communicator (NCCL's reduce-scatter needs equal shards; the rest is the
 * last rank's). */
void comm_shard(size_t count, int world, int rank, size_t *off, size_t *len);
/* In place over count floats: afterwards this rank's shard (comm_shard) of buf holds the
 * reduction of every rank's buf over that shard, the same bits as comm_allreduce gives there;
 * the rest of buf is undefined. */
int comm_reduce_scatter(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op,
			struct dlk_err *err);
/* In place over count floats: afterwards buf holds every rank's shard of its own buf. */
int comm_allgather(struct dlk_comm *c, float *buf, size_t count, struct dlk_err *err);
/* Closes connections and frees c; NULL is allowed. */
void comm_free(struct dlk_comm *c);

/* All-reduces a flat buffer of gradients in buckets of bucket_mib MiB (0 = 25 MiB), one
 * collective per bucket, so that a huge model never needs one giant transfer and the
 * engine can keep all gradients in one contiguous buffer. Same result as one call. */
int comm_allreduce_bucketed(struct dlk_comm *c, float *buf, size_t count, size_t bucket_mib,
			    enum comm_reduce op, struct dlk_err *err);

/* Overlapping the gradient all-reduce with backward. As backward finishes the gradients of a
 * layer, comm_grads_ready() says that buf[off, off + n) of the count-float buffer is final;
 * ranges arrive from the end of buf towards its start, each ending where the previous one began
 * (the last layer's gradients are ready first). On a communicator that runs collectives in the
 * background (allreduce_start), each bucket of bucket_mib MiB (0 = 25) starts as soon as it is
 * complete, from the top of buf down, while backward goes on. comm_grads_finish() starts the
 * rest and waits: buf then holds the reduction, the same as comm_allreduce_bucketed(). Every
 * rank must make the same calls (ranks run the same model, so they do). A range out of order
 * is not an error: what is left is reduced in comm_grads_finish(). */
int comm_grads_ready(struct dlk_comm *c, float *buf, size_t count, size_t off, size_t n, size_t bucket_mib,
		     enum comm_reduce op, struct dlk_err *err);
int comm_grads_finish(struct dlk_comm *c, float *buf, size_t count, size_t bucket_mib, enum comm_reduce op,
		      struct dlk_err *err);

struct dlk_device_comm;

/* A communicator over device memory from a backend's collectives (NCCL, lib/nn/backend.h): joins
 * the communicator that `id` names as `rank` of `world` (giving up after stall_timeout_ms, 0:
 * 300 s) and starts its watchdog, which aborts it when the library reports an error or a
 * collective makes no progress for stall_timeout_ms; every later call then fails with
 * DLK_EXIT_RESTARTABLE and the reason. It has allreduce_start/wait (the gradient buckets
 * overlap backward) but no barrier. NULL with err when joining fails. */
struct dlk_comm *comm_device_new(const struct dlk_device_comm *dc, const void *id, int rank, int world,
				 int stall_timeout_ms, struct dlk_err *err);

/* A communicator for a world of one rank: every collective is a no-op (average divides by 1).
 * Never NULL; the caller frees it with comm_free(). */
struct dlk_comm *comm_single_new(void);

#endif
