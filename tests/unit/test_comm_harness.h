/* Runs one function per rank in forked processes on loopback and collects what each saw.
 * Results live in shared memory so the parent can read them after the children exit. */
#ifndef DLK_TEST_COMM_HARNESS_H
#define DLK_TEST_COMM_HARNESS_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/comm/comm.h"
#include "lib/comm/sock.h"
#include "lib/comm/rendezvous.h"
#include "lib/util/clock.h"
#include "lib/util/err.h"

#define H_MAX_RANKS 16

struct rank_result {
	int done;          /* the function returned */
	int rc;            /* its return value */
	int code;          /* dlk_err code */
	char msg[2048];
	long long t_end;   /* dlk_now_ms() when it returned */
	long long t0, t1;  /* free for the test */
	int status;        /* wait status, filled by the parent */
	int fails;         /* free for the test: number of failed checks in the child */
	char note[512];    /* free for the test */
	unsigned char data[256];
};

struct h_ctx {
	int rank, world, port, lfd;
	struct rank_result *res;
	void *arg;
};

typedef int (*h_rank_fn)(struct h_ctx *h);

static int h_port, h_lfd = -1;
static pid_t h_pids[H_MAX_RANKS];

/* Starts `world` children running fn; returns the shared results (munmap by h_free). A rank
 * whose bit is set in skip_mask is not started (a rank that never arrives). */
static inline struct rank_result *h_start(int world, unsigned skip_mask, h_rank_fn fn, void *arg)
{
	struct rank_result *res = mmap(NULL, sizeof(*res) * H_MAX_RANKS, PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct dlk_err err = DLK_ERR_INIT;

	memset(res, 0, sizeof(*res) * H_MAX_RANKS);
	h_lfd = net_listen(NULL, 0, &h_port, &err);
	if (h_lfd < 0) {
		fprintf(stderr, "listen: %s\n", err.msg);
		exit(1);
	}
	fflush(stdout);
	for (int r = 0; r < world; r++) {
		h_pids[r] = -1;
		if (skip_mask & (1u << r))
			continue;
		h_pids[r] = fork();
		if (h_pids[r] == 0) {
			struct h_ctx h = { r, world, h_port, h_lfd, &res[r], arg };
			int rc;

			alarm(120);
			if (r != 0)
				close(h_lfd);
			rc = fn(&h);
			res[r].rc = rc;
			res[r].t_end = dlk_now_ms();
			res[r].done = 1;
			exit(0); /* not _exit: let LeakSanitizer check the child too */
		}
	}
	close(h_lfd);
	h_lfd = -1;
	return res;
}

/* Waits for every child, at most timeout_ms; kills the ones still running (status shows it). */
static inline void h_wait(struct rank_result *res, int world, int timeout_ms)
{
	long long deadline = dlk_now_ms() + timeout_ms;

	for (int r = 0; r < world; r++) {
		if (h_pids[r] <= 0)
			continue;
		for (;;) {
			pid_t p = waitpid(h_pids[r], &res[r].status, WNOHANG);
			if (p == h_pids[r]) {
				if (!WIFEXITED(res[r].status) || WEXITSTATUS(res[r].status)) {
					/* e.g. a sanitizer report on the way out */
					printf("# rank %d exited with status %d\n", r, res[r].status);
					res[r].fails++;
				}
				break;
			}
			if (dlk_now_ms() > deadline) {
				kill(h_pids[r], SIGKILL);
				waitpid(h_pids[r], &res[r].status, 0);
				break;
			}
			usleep(10000);
		}
		h_pids[r] = -1;
	}
}

static inline void h_free(struct rank_result *res)
{
	munmap(res, sizeof(*res) * H_MAX_RANKS);
}

static inline void h_opts(struct h_ctx *h, struct dist_rdzv_opts *o)
{
	*o = (struct dist_rdzv_opts)DIST_RDZV_OPTS_INIT;
	o->rank = h->rank;
	o->world = h->world;
	o->master_addr = "127.0.0.1";
	o->master_port = h->port;
	o->listen_fd = h->rank == 0 ? h->lfd : -1;
	o->run_id = "test-run";
	o->generation = 1;
	o->timeout_ms = 20000;
}

/* Rendezvous with the default options, then a TCP comm; on failure records the error. */
static inline struct dlk_comm *h_comm(struct h_ctx *h, int stall_ms)
{
	struct dist_rdzv_opts o;
	struct dist_group g = DIST_GROUP_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_comm *c;

	h_opts(h, &o);
	if (dist_rendezvous(&o, &g, &err)) {
		h->res->code = err.code;
		snprintf(h->res->msg, sizeof(h->res->msg), "%s", err.msg);
		return NULL;
	}
	c = comm_tcp_new(&g, stall_ms);
	dist_group_release(&g);
	return c;
}

static inline void h_record(struct h_ctx *h, const struct dlk_err *err)
{
	h->res->code = err->code;
	snprintf(h->res->msg, sizeof(h->res->msg), "%s", err->msg);
}

#endif
