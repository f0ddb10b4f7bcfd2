/* Rendezvous: how the ranks of one run find each other and form a ring.
 *
 * Rank 0 listens on MASTER_PORT; every other rank resolves MASTER_ADDR (an Indexed Job's
 * stable DNS name, which may not resolve until pod 0 exists: retried with backoff), connects
 * and says hello {magic, protocol version, run id, generation, rank, world, data-plane
 * address and port}. Rank 0 checks every hello, waits for all ranks, then sends each rank the
 * address table (and an opaque blob, e.g. the NCCL unique id). Each rank r then connects to
 * rank r+1's data port and accepts rank r-1. The connections to rank 0 stay open as the
 * control plane: the watchdog uses them to learn which rank failed first. */
#ifndef DLK_COMM_RENDEZVOUS_H
#define DLK_COMM_RENDEZVOUS_H

#include <stddef.h>

#include "lib/util/err.h"

#define DIST_PROTOCOL_VERSION 1
#define DIST_RUN_ID_MAX 128     /* bytes of a run id, without NUL */
#define DIST_BLOB_MAX 65536     /* bytes of the rank-0 blob */
#define DIST_WORLD_MAX 4096
#define DIST_DEFAULT_PORT 29500

/* Rank and world and where rank 0 is, from the environment of the pod. */
struct dist_env {
	int rank, world;
	char master_addr[256]; /* empty when world is 1 and MASTER_ADDR is unset */
	int master_port;
	int local_rank, local_world; /* among the ranks of this machine (pod): picks the GPU */
};

/* Reads RANK (or, when unset, JOB_COMPLETION_INDEX, which an Indexed Job sets), WORLD_SIZE
 * (unset: 1), MASTER_ADDR (required when the world has more than one rank), MASTER_PORT
 * (unset: 29500), LOCAL_RANK (unset: 0) and LOCAL_WORLD_SIZE (unset: 1), as torchrun names
 * them. Fails with DLK_EXIT_CONFIG and a message naming the variable. */
int dist_env_read(struct dist_env *env, struct dlk_err *err);

struct dist_rdzv_opts {
	int rank, world;
	const char *master_addr;  /* how rank > 0 reaches rank 0 (DNS name or address) */
	int master_port;
	int listen_fd;            /* rank 0: an already listening socket to use instead of
				   * master_port (borrowed, not closed); -1: listen on master_port */
	const char *run_id;       /* the run (e.g. the Job's uid); other runs are rejected */
	unsigned generation;      /* restart count of the gang; older generations are rejected */
	int timeout_ms;           /* the whole rendezvous; 0: 300 s */
	const char *advertise_host; /* optional: the address peers should use for this rank's
				     * data port; NULL: the address rank 0 sees it connect from */
	const void *blob;         /* rank 0: sent to every rank (at most DIST_BLOB_MAX bytes) */
	size_t blob_len;
};
#define DIST_RDZV_OPTS_INIT { 0, 1, NULL, DIST_DEFAULT_PORT, -1, "", 0, 0, NULL, NULL, 0 }

/* The result: connected sockets, owned. */
struct dist_group {
	int rank, world;
	int *ctrl;   /* rank 0: ctrl[r] is the connection to rank r (ctrl[0] is -1);
		      * other ranks: ctrl[0] is the connection to rank 0 */
	int nctrl;
	int next_fd, prev_fd; /* the ring: to rank+1, from rank-1; -1 in a world of one */
	void *blob;           /* rank 0's blob (a copy on every rank, rank 0 included) */
	size_t blob_len;
};
#define DIST_GROUP_INIT { 0, 1, NULL, 0, -1, -1, NULL, 0 }

/* Runs the rendezvous. Errors: DLK_EXIT_CONFIG for a world/rank/version mismatch or a
 * duplicate rank, DLK_EXIT_RESTARTABLE for ranks that did not join in time (the message
 * names them), a stale generation or another run, DLK_EXIT_CONNECT when rank 0 cannot be
 * reached. A world of one needs no sockets at all. */
int dist_rendezvous(const struct dist_rdzv_opts *o, struct dist_group *g, struct dlk_err *err);
void dist_group_release(struct dist_group *g);

/* The TCP ring communicator over a rendezvoused group; takes the sockets out of g (g can be
 * released afterwards). stall_timeout_ms (0: 300 s) bounds how long any collective may go
 * without progress before it fails with DLK_EXIT_RESTARTABLE. Never NULL. */
struct dlk_comm *comm_tcp_new(struct dist_group *g, int stall_timeout_ms);

struct dlk_device_comm;
/* Joins the gang: the rendezvous of o (its blob is replaced), then the communicators. *host is
 * the TCP ring over host memory (always; a single-rank one in a world of one). With dc and
 * device given and more than one rank, *device is a device communicator too (comm_device_new):
 * every rank first loads dc's library, rank 0 makes its id and the rendezvous carries it to
 * every rank. Returns 0, or -1 with err (the rendezvous' errors, or the device communicator's). */
int dist_join(const struct dist_rdzv_opts *o, const struct dlk_device_comm *dc, int stall_timeout_ms,
	      struct dlk_comm **host, struct dlk_comm **device, struct dlk_err *err);

#endif
