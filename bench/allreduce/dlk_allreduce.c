/* All-reduce benchmark of dlk's TCP ring on loopback: forks N ranks, all-reduces float32
 * buffers of each size, and prints from rank 0 one line per size: "<bytes> <seconds per op>".
 * Usage: dlk_allreduce NRANKS SIZE_BYTES...  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/comm/comm.h"
#include "lib/comm/sock.h"
#include "lib/comm/rendezvous.h"
#include "lib/util/clock.h"

#define TRIALS 3

/* per trial: about 256 MiB of payload, at least 2 and at most 100 operations */
static int iters_for(size_t bytes)
{
	size_t it = (size_t)(256u << 20) / (bytes ? bytes : 1);
	return it < 2 ? 2 : it > 100 ? 100 : (int)it;
}

static int run_rank(int rank, int world, int port, int lfd, int nsizes, char **sizes)
{
	struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;
	struct dist_group g = DIST_GROUP_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_comm *c;

	o.rank = rank;
	o.world = world;
	o.master_addr = "127.0.0.1";
	o.master_port = port;
	o.listen_fd = rank == 0 ? lfd : -1;
	o.run_id = "bench";
	o.timeout_ms = 30000;
	if (dist_rendezvous(&o, &g, &err)) {
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
		return 1;
	}
	c = comm_tcp_new(&g, 60000);
	dist_group_release(&g);
	for (int k = 0; k < nsizes; k++) {
		size_t bytes = strtoull(sizes[k], NULL, 10), n = bytes / sizeof(float);
		float *buf = calloc(n ? n : 1, sizeof(float));
		int iters = iters_for(bytes);
		double t0, t1, best;

		if (comm_allreduce(c, buf, n, COMM_SUM, &err)) /* warm-up */
			goto fail;
		if (comm_barrier(c, &err))
			goto fail;
		/* TRIALS back-to-back timed runs; the fastest one counts, because the machine
		 * this runs on is shared and a neighbour's burst should not decide the figure */
		best = 1e30;
		for (int tr = 0; tr < TRIALS; tr++) {
			t0 = dlk_now();
			for (int i = 0; i < iters; i++)
				if (comm_allreduce(c, buf, n, COMM_SUM, &err))
					goto fail;
			t1 = dlk_now();
			if ((t1 - t0) / iters < best)
				best = (t1 - t0) / iters;
		}
		if (rank == 0)
			printf("%zu %.9f\n", bytes, best);
		fflush(stdout);
		free(buf);
		continue;
fail:
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
		free(buf);
		comm_free(c);
		return 1;
	}
	comm_free(c);
	return 0;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	int world, port, lfd, bad = 0;
	pid_t pids[64];

	if (argc < 3 || (world = atoi(argv[1])) < 1 || world > 64) {
		fprintf(stderr, "usage: %s NRANKS SIZE_BYTES...\n", argv[0]);
		return 2;
	}
	lfd = net_listen("127.0.0.1", 0, &port, &err);
	if (lfd < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (int r = 0; r < world; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(run_rank(r, world, port, lfd, argc - 2, argv + 2));
	}
	close(lfd);
	for (int r = 0; r < world; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return bad;
}
