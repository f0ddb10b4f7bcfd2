/* The compute thread pool: every part runs exactly once per call and its writes are seen by the
 * caller, the ranges tile their interval, nested and concurrent calls run inline, an idle pool
 * sleeps, and a forked child (no workers) still runs every part. */
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/util/parallel.h"

#define NP 7

struct job {
	atomic_int calls[NP];
	int nparts_seen[NP];
	long out[NP];
	long base;
	int sleep_us;
};

static void part_fn(void *ctx, int part, int nparts)
{
	struct job *j = ctx;
	atomic_fetch_add(&j->calls[part], 1);
	j->nparts_seen[part] = nparts;
	if (j->sleep_us)
		usleep((useconds_t)j->sleep_us);
	j->out[part] = j->base + part * part; /* plain writes: the caller must see them */
}

/* runs `rounds` jobs; 1 when every part of every job ran once with the right nparts and output */
static int run_rounds(int rounds, int sleep_us)
{
	struct job *j = calloc(1, sizeof(*j));
	int ok = 1;
	for (int r = 0; r < rounds && ok; r++) {
		for (int i = 0; i < NP; i++)
			atomic_store(&j->calls[i], 0);
		j->base = r * 1000L;
		j->sleep_us = sleep_us;
		dlk_parallel_for(NP, part_fn, j);
		for (int i = 0; i < NP; i++)
			ok = ok && atomic_load(&j->calls[i]) == 1 && j->nparts_seen[i] == NP && j->out[i] == r * 1000L + i * i;
	}
	free(j);
	return ok;
}

static void nested_fn(void *ctx, int part, int nparts)
{
	(void)nparts;
	int *ok = ctx;
	ok[part] = run_rounds(3, 0);
}

static void *concurrent(void *arg)
{
	*(int *)arg = run_rounds(2000, 0);
	return NULL;
}

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int main(void)
{
	/* ranges: tile [0, n), boundaries on the alignment, the same for the same arguments */
	int tiles = 1;
	size_t ns[] = { 0, 1, 15, 16, 17, 128, 784, 1000, 235146 };
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (int np = 1; np <= 5; np++)
			for (size_t align = 1; align <= 16; align *= 4) {
				size_t expect = 0, lo, hi;
				for (int p = 0; p < np; p++) {
					dlk_parallel_range(ns[a], p, np, align, &lo, &hi);
					tiles = tiles && lo == expect && hi >= lo && (lo % align == 0 || lo == ns[a]);
					expect = hi;
				}
				tiles = tiles && expect == ns[a];
			}
	CHECK_MSG(tiles, "dlk_parallel_range tiles [0, n) on aligned boundaries");
	size_t lo, hi;
	dlk_parallel_range(128, 1, 2, 16, &lo, &hi);
	CHECK(lo == 64 && hi == 128);
	dlk_parallel_range(10, 1, 2, 16, &lo, &hi);
	CHECK_MSG(lo == 10 && hi == 10, "a part past the end is empty (%zu, %zu)", lo, hi);

	/* one thread: every part in the caller */
	CHECK(dlk_parallel_threads() == 1);
	CHECK_MSG(run_rounds(10, 0), "one thread: every part once, in the caller");

	CHECK(dlk_parallel_set_threads(4) == 4);
	CHECK(dlk_parallel_threads() == 4);
	struct dlk_parallel_stats s0, s1;
	dlk_parallel_stats(&s0);
	CHECK_MSG(run_rounds(20000, 0), "4 threads: 20000 jobs, every part once, outputs seen by the caller");
	/* parts that sleep leave the workers time to take some, however loaded the machine */
	CHECK_MSG(run_rounds(50, 200), "4 threads: parts that sleep");
	dlk_parallel_stats(&s1);
	CHECK_MSG(s1.jobs - s0.jobs == 20050, "the pool ran the jobs (%llu)", s1.jobs - s0.jobs);
	CHECK_MSG(s1.worker_parts > s0.worker_parts, "workers took parts (%llu)", s1.worker_parts - s0.worker_parts);

	/* a call from inside a part runs inline (the pool is busy with the outer job) */
	int nested_ok[NP] = { 0 };
	dlk_parallel_stats(&s0);
	dlk_parallel_for(NP, nested_fn, nested_ok);
	dlk_parallel_stats(&s1);
	int all = 1;
	for (int i = 0; i < NP; i++)
		all = all && nested_ok[i];
	CHECK_MSG(all, "nested calls complete with every part once");
	CHECK_MSG(s1.inline_jobs - s0.inline_jobs == NP * 3, "nested calls ran inline (%llu)",
	          s1.inline_jobs - s0.inline_jobs);

	/* two threads calling at once: one gets the pool, the other runs inline; both correct */
	pthread_t t[2];
	int cok[2] = { 0, 0 };
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, concurrent, &cok[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_MSG(cok[0] && cok[1], "concurrent callers each get every part once");

	/* idle: the workers stop spinning and sleep, so 300 ms of idleness costs (almost) no CPU */
	usleep(20000);
	double c0 = cpu_seconds();
	usleep(300000);
	double idle = cpu_seconds() - c0;
	CHECK_MSG(idle < 0.05, "an idle pool of 4 sleeps (%.3f s of CPU in 0.3 s)", idle);
	CHECK_MSG(run_rounds(100, 0), "sleeping workers wake for the next jobs");

	/* a forked child has no workers: the caller runs every part */
	pid_t pid = fork();
	if (pid == 0)
		_exit(run_rounds(100, 0) && dlk_parallel_threads() == 4 ? 0 : 1);
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child runs every part itself");
	/* and can start a pool of its own (without joining the parent's threads) */
	pid = fork();
	if (pid == 0) {
		struct dlk_parallel_stats a, b;
		dlk_parallel_set_threads(3);
		dlk_parallel_stats(&a);
		int ok = run_rounds(2000, 0) && run_rounds(20, 200);
		dlk_parallel_stats(&b);
		dlk_parallel_shutdown();
		_exit(ok && b.worker_parts > a.worker_parts ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child starts workers of its own");

	/* fewer threads, then none */
	CHECK(dlk_parallel_set_threads(2) == 2);
	CHECK_MSG(run_rounds(1000, 0), "2 threads");
	dlk_parallel_shutdown();
	CHECK(dlk_parallel_threads() == 1);
	dlk_parallel_stats(&s0);
	CHECK_MSG(run_rounds(10, 0), "after shutdown: inline");
	dlk_parallel_stats(&s1);
	CHECK(s1.jobs == s0.jobs);
	CHECK(dlk_parallel_set_threads(0) >= 1);
	CHECK_MSG(run_rounds(100, 0), "all cores");
	dlk_parallel_shutdown();
	return CHECK_DONE();
}
