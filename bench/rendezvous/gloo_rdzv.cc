// Time to the first all-reduce of N local ranks with Gloo: forks N processes at once; each
// rendezvouses through a FileStore (waiting up to 300 s for a key), connects the full mesh over TCP on 127.0.0.1 (what
// gloo::rendezvous::Context does, and PyTorch's Gloo process group with it) and all-reduces one
// float (AllreduceRing). Prints "<seconds from the first fork to the last rank's first
// all-reduce> <seconds to the last rank's connected mesh>".
// Usage: gloo_rdzv NRANKS
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// Gloo's FileStore waits 30 s for a key unless told otherwise, and connectFullMesh does not tell
// it: with hundreds of ranks on two cores that is too short, so the peer gets the same 300 s the
// context has (its best configuration here).
struct PatientFileStore : gloo::rendezvous::FileStore {
	using gloo::rendezvous::FileStore::FileStore;
	using gloo::rendezvous::FileStore::wait;
	void wait(const std::vector<std::string> &keys) override
	{
		gloo::rendezvous::FileStore::wait(keys, std::chrono::seconds(300));
	}
};

static double now()
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static int run_rank(int rank, int world, const std::string &dir, int out)
{
	gloo::transport::tcp::attr attr;
	attr.hostname = "127.0.0.1";
	auto dev = gloo::transport::tcp::CreateDevice(attr);
	PatientFileStore store(dir);
	auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
	ctx->setTimeout(std::chrono::seconds(300));
	ctx->connectFullMesh(store, dev);
	double t[2];
	t[0] = now();
	std::vector<float> x(1, 1.0f);
	std::vector<float *> ptrs{x.data()};
	gloo::AllreduceRing<float> ar(ctx, ptrs, 1);
	ar.run();
	t[1] = now();
	if (x[0] != float(world)) {
		fprintf(stderr, "rank %d: the sum is %g, not %d\n", rank, x[0], world);
		return 1;
	}
	return write(out, t, sizeof(t)) == ssize_t(sizeof(t)) ? 0 : 1;
}

int main(int argc, char **argv)
{
	int world = argc == 2 ? atoi(argv[1]) : 0, bad = 0, p[2];
	if (world < 2) {
		fprintf(stderr, "usage: %s NRANKS\n", argv[0]);
		return 2;
	}
	const char *tmpdir = getenv("TMPDIR");
	std::string t = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/gloo-rdzv-XXXXXX";
	std::vector<char> path(t.begin(), t.end());
	path.push_back('\0');
	if (!mkdtemp(path.data()) || pipe(p))
		return 1;
	std::string dir(path.data());
	double t0 = now(), last_mesh = 0, last_ar = 0, tt[2];
	for (int r = 0; r < world; r++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(p[0]);
			_exit(run_rank(r, world, dir, p[1]));
		}
	}
	close(p[1]);
	while (read(p[0], tt, sizeof(tt)) == ssize_t(sizeof(tt))) {
		last_mesh = std::max(last_mesh, tt[0]);
		last_ar = std::max(last_ar, tt[1]);
	}
	for (int r = 0; r < world; r++) {
		int st;
		wait(&st);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	std::string rm = "rm -rf '" + dir + "'";
	if (system(rm.c_str()) != 0)
		bad = 1;
	if (bad)
		return 1;
	printf("%.6f %.6f\n", last_ar - t0, last_mesh - t0);
	return 0;
}
