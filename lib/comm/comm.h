/* Collective communication between the ranks of one training run.
 *
 * One interface, several implementations: the TCP ring (CPU, lib/comm/ring.c) and NCCL
 * (GPU). Every call blocks until the collective is done on this rank. A call that fails
 * leaves the communicator broken: every later call fails at once with the same error, and
 * the caller is expected to exit (DLK_EXIT_RESTARTABLE means "restart the whole gang from
 * the last checkpoint"). Buffers are host memory for the TCP ring. */
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
};

struct dlk_comm {
	const struct dlk_comm_ops *ops;
	int rank, world;
	long step; /* the caller's training step, named in watchdog messages; -1 = none */
};

static inline int comm_rank(const struct dlk_comm *c) { return c->rank; }
static inline int comm_world(const struct dlk_comm *c) { return c->world; }
/* Names `step` in later error messages ("... (step 1200)"); pass -1 to stop. */
static inline void comm_set_step(struct dlk_comm *c, long step) { c->step = step; }

int comm_allreduce(struct dlk_comm *c, float *buf, size_t count, enum comm_reduce op, struct dlk_err *err);
int comm_broadcast(struct dlk_comm *c, void *buf, size_t nbytes, int root, struct dlk_err *err);
int comm_barrier(struct dlk_comm *c, struct dlk_err *err);
/* Closes connections and frees c; NULL is allowed. */
void comm_free(struct dlk_comm *c);

/* All-reduces a flat buffer of gradients in buckets of bucket_mib MiB (0 = 25 MiB), one
 * collective per bucket, so that a huge model never needs one giant transfer and the
 * engine can keep all gradients in one contiguous buffer. Same result as one call. */
int comm_allreduce_bucketed(struct dlk_comm *c, float *buf, size_t count, size_t bucket_mib,
			    enum comm_reduce op, struct dlk_err *err);

/* A communicator for a world of one rank: every collective is a no-op (average divides by 1).
 * Never NULL; the caller frees it with comm_free(). */
struct dlk_comm *comm_single_new(void);

#endif
