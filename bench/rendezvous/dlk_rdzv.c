/* Time to the first all-reduce of N local ranks with dlk's rendezvous and TCP ring: forks N
 * processes at once; each joins the rendezvous at rank 0 (127.0.0.1), builds the ring and
 * all-reduces one float. Prints "<seconds from the first fork to the last rank's first
 * all-reduce> <seconds to the last rank's rendezvous>".
 * Usage: dlk_rdzv NRANKS */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/comm/comm.h"
#include "lib/comm/rendezvous.h"
#include "lib/comm/sock.h"
#include "lib/util/clock.h"

static int run_rank(int rank, int world, int port, int lfd, int out)
{
	struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;
	struct dist_group g = DIST_GROUP_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_comm *c;
	double t[2];
	float x = 1.0f;

	o.rank = rank;
	o.world = world;
	o.master_addr = "127.0.0.1";
	o.master_port = port;
	o.listen_fd = rank == 0 ? lfd : -1;
	o.run_id = "bench";
	o.timeout_ms = 300000;
	if (dist_rendezvous(&o, &g, &err)) {
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
		return 1;
	}
	t[0] = dlk_now();
	c = comm_tcp_new(&g, 300000);
	dist_group_release(&g);
	if (comm_allreduce(c, &x, 1, COMM_SUM, &err)) {
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
		comm_free(c);
		return 1;
	}
	t[1] = dlk_now();
	comm_free(c);
	if (x != (float)world) {
		fprintf(stderr, "rank %d: the sum is %g, not %d\n", rank, x, world);
		return 1;
	}
	return write(out, t, sizeof(t)) == (ssize_t)sizeof(t) ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	int world, port, lfd, bad = 0, p[2];
	double t0, last_rdzv = 0, last_ar = 0, t[2];

	if (argc != 2 || (world = atoi(argv[1])) < 2 || world > DIST_WORLD_MAX) {
		fprintf(stderr, "usage: %s NRANKS (2 to %d)\n", argv[0], DIST_WORLD_MAX);
		return 2;
	}
	if (pipe(p))
		return 1;
	t0 = dlk_now();
	lfd = net_listen("127.0.0.1", 0, &port, &err);
	if (lfd < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (int r = 0; r < world; r++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(p[0]);
			_exit(run_rank(r, world, port, lfd, p[1]));
		}
	}
	close(lfd);
	close(p[1]);
	while (read(p[0], t, sizeof(t)) == (ssize_t)sizeof(t)) {
		if (t[0] > last_rdzv)
			last_rdzv = t[0];
		if (t[1] > last_ar)
			last_ar = t[1];
	}
	for (int r = 0; r < world; r++) {
		int st;
		wait(&st);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	if (bad)
		return 1;
	printf("%.6f %.6f\n", last_ar - t0, last_rdzv - t0);
	return 0;
}
