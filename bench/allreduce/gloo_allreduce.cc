// The same benchmark with Gloo's ring all-reduces over its TCP transport on loopback.
// Usage: gloo_allreduce ALGO NRANKS SIZE_BYTES...   (ALGO: ring | ring_chunked)
// Prints from rank 0 one line per size: "<bytes> <seconds per op>".
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#define TRIALS 3

// per trial: about 256 MiB of payload, at least 2 and at most 100 operations (as dlk_allreduce.c)
static int iters_for(size_t bytes)
{
	size_t it = (size_t(256) << 20) / (bytes ? bytes : 1);
	return it < 2 ? 2 : it > 100 ? 100 : int(it);
}

static int run_rank(const std::string &algo, int rank, int world, const std::string &dir, int nsizes, char **sizes)
{
	gloo::transport::tcp::attr attr;
	attr.hostname = "127.0.0.1";
	auto dev = gloo::transport::tcp::CreateDevice(attr);
	gloo::rendezvous::FileStore store(dir);
	auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
	ctx->connectFullMesh(store, dev);
	gloo::BarrierAllToOne barrier(ctx);

	for (int k = 0; k < nsizes; k++) {
		size_t bytes = strtoull(sizes[k], nullptr, 10), n = bytes / sizeof(float);
		std::vector<float> buf(n ? n : 1, 0.0f);
		std::vector<float *> ptrs{buf.data()};
		std::unique_ptr<gloo::Algorithm> ar;
		if (algo == "ring")
			ar.reset(new gloo::AllreduceRing<float>(ctx, ptrs, int(n)));
		else
			ar.reset(new gloo::AllreduceRingChunked<float>(ctx, ptrs, int(n)));
		int iters = iters_for(bytes);
		ar->run(); // warm-up
		barrier.run();
		double best = 1e30;
		for (int tr = 0; tr < TRIALS; tr++) {
			auto t0 = std::chrono::steady_clock::now();
			for (int i = 0; i < iters; i++)
				ar->run();
			auto t1 = std::chrono::steady_clock::now();
			best = std::min(best, std::chrono::duration<double>(t1 - t0).count() / iters);
		}
		barrier.run();
		if (rank == 0)
			printf("%zu %.9f\n", bytes, best);
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s ring|ring_chunked NRANKS SIZE_BYTES...\n", argv[0]);
		return 2;
	}
	std::string algo = argv[1];
	int world = atoi(argv[2]), bad = 0;
	const char *tmpdir = getenv("TMPDIR");
	std::string t = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/gloo-bench-XXXXXX";
	std::vector<char> path(t.begin(), t.end());
	path.push_back('\0');
	if (!mkdtemp(path.data())) {
		perror("mkdtemp");
		return 1;
	}
	std::vector<pid_t> pids(world);
	for (int r = 0; r < world; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(run_rank(algo, r, world, path.data(), argc - 3, argv + 3));
	}
	for (int r = 0; r < world; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	std::string rm = "rm -rf '" + std::string(path.data()) + "'";
	if (system(rm.c_str()) != 0)
		fprintf(stderr, "could not remove %s\n", path.data());
	return bad;
}
