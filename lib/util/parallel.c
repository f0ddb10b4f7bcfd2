/* The compute thread pool of parallel.h (which explains the memory ordering). Linux futexes for
 * sleeping: a worker spins for a few tens of microseconds after its last part (the next job of
 * a training step usually comes sooner than a wake-up would), then sleeps in the kernel, so an
 * idle pool costs no CPU, unlike OpenBLAS' pthread server, which yields in a loop for about 2^28
 * cycles. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/util/parallel.h"

#define MAX_THREADS 256
/* how long an idle thread spins before it sleeps; $DLK_PARALLEL_SPIN_US changes it (0: sleep at
 * once), read by dlk_parallel_set_threads. On the shared 2-core machine of bench/README (load 8),
 * the MLP on 2 threads took 1.56, 1.55, 1.67 and 2.2 ms of CPU per step spinning 0, 10, 50 and
 * 300 us (one thread: 1.51), and its workers took a part of 90%, 87% and 75% of the jobs at 0, 10
 * and 50 us: a spinning thread only burns the time slice its core's other users would have given
 * it. On an AMD EPYC (Zen 5) with AVX-512 GEMMs, whose passes are shorter, the MLP's step on 2
 * threads took 0.417-0.426 ms (CPU 0.78-0.80) spinning 10 us, 0.379-0.395 ms (0.75-0.78) at 30 and
 * 0.379-0.401 ms (0.75-0.79) at 50 on a quiet machine, and 0.80-0.87 against 0.87-1.12 ms at 30
 * and 10 us with two busy processes beside it (the same CPU time): 30 us covers the gaps between
 * the passes of a step. The CNN's step did not move. */
#define SPIN_US_DEFAULT 30

static struct {
	pthread_mutex_t setup;          /* serialises set_threads / shutdown */
	atomic_int threads;             /* workers + the caller */
	int workers;
	pthread_t tid[MAX_THREADS];
	atomic_long spin_ns;

	atomic_flag busy;               /* held by the thread whose job the pool runs */
	/* the job: generation << 32 | nparts << 16 | next part to take */
	_Atomic uint64_t word;
	dlk_parallel_fn fn;             /* plain: published by `word`, see parallel.h */
	void *ctx;
	atomic_int done;                /* parts of the current job finished */
	atomic_int caller_waiting;      /* the caller sleeps on `done` */
	atomic_uint wake;               /* futex word the workers sleep on: the generation */
	atomic_int sleepers;            /* workers asleep or about to be */
	atomic_int stop;

	atomic_ullong jobs, inline_jobs, worker_parts, sleeps;
} P = { .setup = PTHREAD_MUTEX_INITIALIZER, .threads = 1, .busy = ATOMIC_FLAG_INIT, .spin_ns = SPIN_US_DEFAULT * 1000L };

static void futex_wait(void *addr, unsigned val)
{
	/* EAGAIN (the value changed), EINTR and spurious wake-ups: the callers re-check */
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(void *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Takes and runs parts of the current job until none is left; returns how many it ran. */
static int run_parts(void)
{
	int ran = 0;
	uint64_t w = atomic_load_explicit(&P.word, memory_order_acquire);
	for (;;) {
		unsigned nparts = (unsigned)(w >> 16) & 0xffff, next = (unsigned)w & 0xffff;
		if (next >= nparts)
			return ran;
		if (!atomic_compare_exchange_weak_explicit(&P.word, &w, w + 1, memory_order_acq_rel,
		                                           memory_order_acquire))
			continue; /* w now holds the current word */
		/* part `next` is ours: the job cannot change until we count it done */
		P.fn(P.ctx, (int)next, (int)nparts);
		ran++;
		int d = atomic_fetch_add(&P.done, 1) + 1; /* seq_cst: pairs with caller_waiting */
		if (d == (int)nparts && atomic_load(&P.caller_waiting))
			futex_wake(&P.done, 1);
		w = atomic_load_explicit(&P.word, memory_order_acquire);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	unsigned seen = atomic_load(&P.wake);
	while (!atomic_load_explicit(&P.stop, memory_order_acquire)) {
		unsigned g = atomic_load_explicit(&P.wake, memory_order_acquire);
		if (g == seen) {
			long until = now_ns() + atomic_load_explicit(&P.spin_ns, memory_order_relaxed);
			for (int i = 0; (g = atomic_load_explicit(&P.wake, memory_order_acquire)) == seen; i++) {
				cpu_relax();
				if ((i & 31) == 31 && now_ns() >= until)
					break;
			}
		}
		if (g == seen) {
			atomic_fetch_add(&P.sleepers, 1);
			atomic_fetch_add_explicit(&P.sleeps, 1, memory_order_relaxed);
			while ((g = atomic_load(&P.wake)) == seen && !atomic_load(&P.stop))
				futex_wait(&P.wake, seen);
			atomic_fetch_sub(&P.sleepers, 1);
			continue; /* re-checks stop */
		}
		seen = g;
		int ran = run_parts();
		if (ran)
			atomic_fetch_add_explicit(&P.worker_parts, (unsigned long long)ran, memory_order_relaxed);
	}
	return NULL;
}

static void stop_workers(void)
{
	if (!P.workers)
		return;
	atomic_store(&P.stop, 1);
	atomic_fetch_add(&P.wake, 1);
	futex_wake(&P.wake, INT_MAX);
	for (int i = 0; i < P.workers; i++)
		pthread_join(P.tid[i], NULL);
	P.workers = 0;
	atomic_store(&P.stop, 0);
}

/* fork(): the child has none of the parent's workers. It keeps the thread count (so its parts,
 * and its results, are the parent's), runs every part in the calling thread until it sets a
 * count of its own, and must not join threads it does not have. */
static void atfork_prepare(void) { pthread_mutex_lock(&P.setup); }
static void atfork_parent(void) { pthread_mutex_unlock(&P.setup); }
static void atfork_child(void)
{
	P.workers = 0;
	atomic_store(&P.sleepers, 0);
	atomic_store(&P.caller_waiting, 0);
	atomic_flag_clear(&P.busy);
	pthread_mutex_unlock(&P.setup);
}

static void register_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

int dlk_parallel_set_threads(int n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, register_atfork);
	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (int)c : 1;
	}
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	pthread_mutex_lock(&P.setup);
	/* a job of another thread may still run: wait for it (set-up time, so this is rare) */
	while (atomic_flag_test_and_set_explicit(&P.busy, memory_order_acquire))
		sched_yield();
	const char *s = getenv("DLK_PARALLEL_SPIN_US");
	long spin = s && *s ? 1000L * atol(s) : SPIN_US_DEFAULT * 1000L;
	atomic_store_explicit(&P.spin_ns, spin > 0 ? spin : 0, memory_order_relaxed);
	if (n != P.workers + 1) {
		stop_workers();
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		while (P.workers < n - 1 && !pthread_create(&P.tid[P.workers], NULL, worker, NULL))
			P.workers++;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	/* a thread that could not be created only means fewer workers: the parts still all run */
	atomic_store_explicit(&P.threads, n, memory_order_relaxed);
	atomic_flag_clear_explicit(&P.busy, memory_order_release);
	pthread_mutex_unlock(&P.setup);
	return n;
}

int dlk_parallel_threads(void) { return atomic_load_explicit(&P.threads, memory_order_relaxed); }

void dlk_parallel_shutdown(void)
{
	pthread_mutex_lock(&P.setup);
	while (atomic_flag_test_and_set_explicit(&P.busy, memory_order_acquire))
		sched_yield();
	stop_workers();
	atomic_store_explicit(&P.threads, 1, memory_order_relaxed);
	atomic_flag_clear_explicit(&P.busy, memory_order_release);
	pthread_mutex_unlock(&P.setup);
}

void dlk_parallel_for(int nparts, dlk_parallel_fn fn, void *ctx)
{
	if (nparts <= 0)
		return;
	if (nparts > 0xffff)
		nparts = 0xffff; /* never reached by dlk's callers; keeps the word's fields apart */
	int mine = nparts > 1 && !atomic_flag_test_and_set_explicit(&P.busy, memory_order_acquire);
	/* P.workers changes only under `busy` */
	if (!mine || P.workers == 0) {
		if (mine)
			atomic_flag_clear_explicit(&P.busy, memory_order_release);
		else if (nparts > 1)
			atomic_fetch_add_explicit(&P.inline_jobs, 1, memory_order_relaxed);
		for (int i = 0; i < nparts; i++)
			fn(ctx, i, nparts);
		return;
	}
	P.fn = fn;
	P.ctx = ctx;
	atomic_store_explicit(&P.done, 0, memory_order_relaxed);
	uint64_t gen = (atomic_load_explicit(&P.word, memory_order_relaxed) >> 32) + 1;
	atomic_store_explicit(&P.word, gen << 32 | (uint64_t)nparts << 16, memory_order_seq_cst);
	atomic_fetch_add(&P.wake, 1);
	int sleepers = atomic_load(&P.sleepers);
	if (sleepers > 0)
		futex_wake(&P.wake, sleepers < nparts - 1 ? sleepers : nparts - 1);
	run_parts();
	if (atomic_load_explicit(&P.done, memory_order_acquire) < nparts) {
		/* the last parts run in workers: spin a little, then sleep until the last one ends */
		long until = now_ns() + atomic_load_explicit(&P.spin_ns, memory_order_relaxed);
		for (int i = 0; atomic_load_explicit(&P.done, memory_order_acquire) < nparts; i++) {
			cpu_relax();
			if ((i & 31) == 31 && now_ns() >= until) {
				atomic_store(&P.caller_waiting, 1);
				int d;
				while ((d = atomic_load(&P.done)) < nparts)
					futex_wait(&P.done, (unsigned)d);
				atomic_store(&P.caller_waiting, 0);
				break;
			}
		}
	}
	atomic_fetch_add_explicit(&P.jobs, 1, memory_order_relaxed);
	atomic_flag_clear_explicit(&P.busy, memory_order_release);
}

void dlk_parallel_range(size_t n, int part, int nparts, size_t align, size_t *lo, size_t *hi)
{
	if (align == 0)
		align = 1;
	size_t units = (n + align - 1) / align, np = nparts > 0 ? (size_t)nparts : 1, p = (size_t)part;
	/* the first units % np parts get one unit more */
	size_t base = units / np, extra = units % np;
	size_t a = p * base + (p < extra ? p : extra), b = a + base + (p < extra ? 1 : 0);
	a *= align;
	b *= align;
	*lo = a < n ? a : n;
	*hi = b < n ? b : n;
}

void dlk_parallel_stats(struct dlk_parallel_stats *s)
{
	s->jobs = atomic_load_explicit(&P.jobs, memory_order_relaxed);
	s->inline_jobs = atomic_load_explicit(&P.inline_jobs, memory_order_relaxed);
	s->worker_parts = atomic_load_explicit(&P.worker_parts, memory_order_relaxed);
	s->sleeps = atomic_load_explicit(&P.sleeps, memory_order_relaxed);
}
