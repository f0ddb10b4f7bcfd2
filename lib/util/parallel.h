/* One process-wide pool of compute threads that sleep when idle (futex after a short spin).
 *
 * dlk_parallel_for(nparts, fn, ctx) calls fn(ctx, part, nparts) once for every part in
 * [0, nparts), spread over the pool's threads and the calling thread, and returns when all have
 * returned. Parts are claimed one at a time from a shared counter, so the caller itself works
 * through the parts no worker has taken: a worker that another process keeps off its core (a
 * loaded machine) slows nothing down, and a pool without workers (one thread, a forked child)
 * simply runs every part in the caller.
 *
 * Results stay bit-identical run to run as long as what a part computes depends only on
 * (part, nparts) and never on which thread runs it: choose nparts from the problem's shape and
 * dlk_parallel_threads(), and split the work by output (rows or columns of a GEMM's C, element
 * ranges), never reduce across parts in the order they finish.
 *
 * A call made while the pool is busy (from another thread, or from inside a part) runs all its
 * parts in the calling thread, in order: the same results, no deadlock, no oversubscription.
 *
 * Memory ordering (for readers checking races): the caller writes the job (fn, ctx) with plain
 * stores and then publishes it with a release store of `word` (generation, nparts, next part); a
 * thread takes part i with an acquire compare-and-swap of `word` and reads the job only after
 * that succeeds, so it sees the caller's job and everything the caller wrote before the call.
 * The job cannot change under it: the next job is written only after every part of this one
 * has counted itself in `done` (a release increment after the part's last access), and the
 * caller returns only after its acquire load of `done` reached nparts, so the parts' writes
 * happen before the caller goes on. Sleeping uses the futex "announce then re-check" pattern with
 * sequentially consistent accesses on both sides (`sleepers` / `wake`, `caller_waiting` /
 * `done`): either the waker sees the sleeper, or the sleeper sees the new value; futex_wait's own
 * compare closes the remaining window. */
#ifndef DLK_UTIL_PARALLEL_H
#define DLK_UTIL_PARALLEL_H

#include <stddef.h>

/* The number of threads that take part (the pool's workers plus the caller): n <= 0 means the
 * online cores. Starts or stops workers; call it from one thread while no dlk_parallel_for runs
 * (setup time). Worker threads block every signal. Returns the count now in effect. */
int dlk_parallel_set_threads(int n);

/* The count set last (1 before any call). */
int dlk_parallel_threads(void);

typedef void (*dlk_parallel_fn)(void *ctx, int part, int nparts);

/* Runs fn(ctx, part, nparts) for every part in [0, nparts) and returns when all are done.
 * nparts <= 1 (or a pool of one thread) runs in the caller without any synchronisation. */
void dlk_parallel_for(int nparts, dlk_parallel_fn fn, void *ctx);

/* [*lo, *hi): part's share of [0, n) cut into nparts pieces whose boundaries are multiples of
 * align (except n itself); the pieces only depend on (n, part, nparts, align). */
void dlk_parallel_range(size_t n, int part, int nparts, size_t align, size_t *lo, size_t *hi);

/* Joins the workers (the pool goes back to one thread); for tests and leak checkers. */
void dlk_parallel_shutdown(void);

/* What the pool has done since the process started (for tests and benchmarks): jobs run by the
 * pool, jobs run inline because the pool was busy, parts taken by workers (not the caller), and
 * the times a worker stopped spinning and went to sleep. */
struct dlk_parallel_stats {
	unsigned long long jobs, inline_jobs, worker_parts, sleeps;
};
void dlk_parallel_stats(struct dlk_parallel_stats *s);

#endif
