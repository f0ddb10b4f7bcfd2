/* The GPU benchmark's all-reduce, dlk's side (bench/gpu/run.sh): one process per GPU on this
 * machine, joined as `dlk train` joins them (the rendezvous over loopback carries NCCL's id, then
 * lib/comm's device communicator with its watchdog), all-reducing device buffers of 1 to 256 MiB.
 * Prints one JSON object with nccl-tests' figures: algbw = bytes / time, busbw = algbw * 2(n-1)/n.
 *   dlk_allreduce_bench WORLD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/comm/comm.h"
#include "lib/comm/rendezvous.h"
#include "lib/comm/sock.h"
#include "lib/nn/gpu.h"
#include "lib/util/clock.h"

#define SIZES 5
static const int mib[SIZES] = { 1, 4, 16, 64, 256 };

struct row {
	double seconds;
	int ok;
	char why[DLK_ERR_MSG_MAX + 32]; /* "rank N: " and the message */
};

static int rank_main(int rank, int world, int port, int lfd, struct row *rows)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char lib[512];
	snprintf(lib, sizeof(lib), "%s/" DLK_CUDA_LIB_NAME, build);
	const struct dlk_backend *be = dlk_backend_cuda(access(lib, F_OK) == 0 ? lib : NULL, rank, &err);
	struct dlk_comm *host = NULL, *dev = NULL;
	struct dist_rdzv_opts o = DIST_RDZV_OPTS_INIT;

	if (!be)
		goto fail;
	o.rank = rank;
	o.world = world;
	o.master_addr = "127.0.0.1";
	o.master_port = port;
	o.listen_fd = rank == 0 ? lfd : -1;
	o.run_id = "bench";
	o.timeout_ms = 60000;
	if (dist_join(&o, be->comm, 60000, &host, &dev, &err))
		goto fail;
	if (!dev) {
		dlk_errf(&err, DLK_EXIT_FAIL, "no device communicator (the backend has no NCCL)");
		goto fail;
	}
	for (int s = 0; s < SIZES; s++) {
		size_t n = (size_t)mib[s] * 1024 * 1024 / sizeof(float);
		float *buf = be->alloc(sizeof(float) * n);
		if (!buf) {
			dlk_errf(&err, DLK_EXIT_FAIL, "out of device memory for %d MiB", mib[s]);
			goto fail;
		}
		be->fill(buf, n, 1.0f);
		for (int i = 0; i < 5; i++)
			if (comm_allreduce(dev, buf, n, COMM_SUM, &err))
				goto fail;
		/* every rank starts the timed loop together */
		if (comm_barrier(host, &err))
			goto fail;
		double t0 = dlk_now();
		int iters = mib[s] < 64 ? 100 : 20;
		for (int i = 0; i < iters; i++)
			if (comm_allreduce(dev, buf, n, COMM_SUM, &err))
				goto fail;
		rows[s].seconds = (dlk_now() - t0) / iters;
		rows[s].ok = 1;
		be->free(buf);
	}
	comm_free(dev);
	comm_free(host);
	return 0;
fail:
	snprintf(rows[0].why, sizeof(rows[0].why), "rank %d: %s", rank, err.msg);
	comm_free(dev);
	comm_free(host);
	return 1;
}

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	int world = argc > 1 ? atoi(argv[1]) : 0, port = 0, bad = 0;
	if (world < 2 || world > 64) {
		fprintf(stderr, "usage: dlk_allreduce_bench WORLD (2 to 64 GPUs of this machine)\n");
		return 2;
	}
	struct row *rows = mmap(NULL, sizeof(struct row) * SIZES * world, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	                        -1, 0);
	memset(rows, 0, sizeof(struct row) * SIZES * world);
	int lfd = net_listen("127.0.0.1", 0, &port, &err);
	if (lfd < 0) {
		fprintf(stderr, "dlk_allreduce_bench: %s\n", err.msg);
		return 1;
	}
	pid_t pids[64];
	for (int r = 0; r < world; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(rank_main(r, world, port, lfd, rows + (size_t)r * SIZES));
	}
	close(lfd);
	for (int r = 0; r < world; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "dlk_allreduce_bench: %s\n", rows[(size_t)r * SIZES].why[0] ? rows[(size_t)r * SIZES].why : "a rank died");
			bad = 1;
		}
	}
	if (bad)
		return 1;
	printf("{\"impl\": \"dlk\", \"world\": %d, \"rows\": [", world);
	for (int s = 0; s < SIZES; s++) {
		double t = rows[s].seconds, bytes = (double)mib[s] * 1024 * 1024, algbw = bytes / t / 1e9;
		printf("%s{\"bytes\": %.0f, \"time_us\": %.1f, \"algbw_gbs\": %.2f, \"busbw_gbs\": %.2f}", s ? ", " : "", bytes,
		       1e6 * t, algbw, algbw * 2 * (world - 1) / world);
	}
	printf("]}\n");
	return 0;
}
