/* NCCL for the CUDA backend: the collectives over device memory that lib/comm drives through
 * struct dlk_device_comm (lib/nn/backend.h).
 *
 * NCCL is dlopen()ed here, on first use, never linked: libdlk-cuda.so loads without it (a
 * single-GPU run needs none), and `dlk version` can say exactly why it is missing. The
 * communicator is non-blocking (ncclConfig_t.blocking = 0), so that no call can hang: joining,
 * collectives and waits all return at once or poll, and another thread (lib/comm's watchdog) can
 * ask for the health of the communicator and abort it. Collectives run on their own stream,
 * ordered after the compute stream's work at the moment they are started; wait() orders the
 * compute stream after them again. */
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/cuda.h"

#define NCCL_MIN_VERSION NCCL_VERSION(2, 14, 0) /* ncclCommInitRankConfig, non-blocking comms */
#define INFLIGHT 256                            /* collectives in flight before a start waits */

static struct {
	int tried, ok, version;
	char why[1536];
	ncclResult_t (*GetVersion)(int *);
	ncclResult_t (*GetUniqueId)(ncclUniqueId *);
	ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
	ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
	ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
	ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
	ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
	ncclResult_t (*CommAbort)(ncclComm_t);
	ncclResult_t (*CommFinalize)(ncclComm_t);
	ncclResult_t (*CommDestroy)(ncclComm_t);
	const char *(*GetErrorString)(ncclResult_t);
	const char *(*GetLastError)(ncclComm_t);
} N;

/* Where libnccl.so.2 is looked for: $DLK_NCCL_LIB alone when set; else beside this library (an
 * install or an image puts it there), the NCCL this library was built with, and the dynamic
 * linker's search path. Explicit paths, not this library's RUNPATH: a dlopen() that a sanitizer
 * intercepts is made on behalf of the executable, whose RUNPATH is not ours. */
static void *open_nccl(char *file, size_t flen)
{
	const char *env = getenv("DLK_NCCL_LIB");
	char first_err[384] = "";
	Dl_info self;
	void *h;

	if (env && *env) {
		snprintf(file, flen, "%s", env);
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			snprintf(N.why, sizeof(N.why), "cannot load NCCL '%s': %s", env, dlerror());
		return h;
	}
	const char *cand[3] = { NULL, NULL, "libnccl.so.2" };
	char beside[1024] = "", built[1024] = "";
	if (dladdr((void *)open_nccl, &self) && self.dli_fname && strrchr(self.dli_fname, '/')) {
		snprintf(beside, sizeof(beside), "%.*s/libnccl.so.2", (int)(strrchr(self.dli_fname, '/') - self.dli_fname),
		         self.dli_fname);
		cand[0] = beside;
	}
#ifdef DLK_NCCL_LIBDIR
	snprintf(built, sizeof(built), "%s/libnccl.so.2", DLK_NCCL_LIBDIR);
	cand[1] = built;
#endif
	for (int i = 0; i < 3; i++) {
		if (!cand[i] || (i < 2 && access(cand[i], F_OK) != 0))
			continue;
		snprintf(file, flen, "%s", cand[i]);
		h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "'%s': %s", cand[i], dlerror());
	}
	snprintf(N.why, sizeof(N.why), "cannot load NCCL %s", first_err);
	return NULL;
}

static int load(void)
{
	char file[1024];
	void *h;

	if (N.tried)
		return N.ok ? 0 : -1;
	N.tried = 1;
	h = open_nccl(file, sizeof(file));
	if (!h)
		return -1;
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "ncclGetVersion", (void **)&N.GetVersion },
		{ "ncclGetUniqueId", (void **)&N.GetUniqueId },
		{ "ncclCommInitRankConfig", (void **)&N.CommInitRankConfig },
		{ "ncclAllReduce", (void **)&N.AllReduce },
		{ "ncclBroadcast", (void **)&N.Broadcast },
		{ "ncclReduceScatter", (void **)&N.ReduceScatter },
		{ "ncclAllGather", (void **)&N.AllGather },
		{ "ncclCommGetAsyncError", (void **)&N.CommGetAsyncError },
		{ "ncclCommAbort", (void **)&N.CommAbort },
		{ "ncclCommFinalize", (void **)&N.CommFinalize },
		{ "ncclCommDestroy", (void **)&N.CommDestroy },
		{ "ncclGetErrorString", (void **)&N.GetErrorString },
		{ "ncclGetLastError", (void **)&N.GetLastError },
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(N.why, sizeof(N.why), "'%s' has no symbol '%s': not NCCL 2.14 or newer", file, syms[i].name);
			dlclose(h);
			return -1;
		}
	}
	if (N.GetVersion(&N.version) != ncclSuccess || N.version < NCCL_MIN_VERSION) {
		snprintf(N.why, sizeof(N.why), "'%s' is NCCL version code %d; dlk needs 2.14 or newer", file, N.version);
		dlclose(h);
		return -1;
	}
	N.ok = 1; /* stays loaded for the life of the process */
	return 0;
}

static void nccl_describe(char *out, size_t len)
{
	if (load())
		snprintf(out, len, "%s", N.why);
	else
		snprintf(out, len, "NCCL %d.%d.%d", N.version / 10000, N.version / 100 % 100, N.version % 100);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void pause_us(long us)
{
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
}

struct ncomm {
	ncclComm_t comm;
	int rank, world, device;
	int timeout_ms;
	cudaStream_t stream;
	cudaEvent_t before, done;
	/* guards everything below and every use of comm: abort() may come from another thread */
	pthread_mutex_t mu;
	int aborted;
	cudaEvent_t ev[INFLIGHT];      /* recorded after each collective, oldest at head */
	double started[INFLIGHT];
	const char *what[INFLIGHT];
	int head, n;
};

static int fail(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *nccl_err(ncclComm_t comm, ncclResult_t r)
{
	const char *last = N.GetLastError ? N.GetLastError(comm) : NULL;
	return last && *last ? last : N.GetErrorString(r);
}

static int nccl_load(char *msg, size_t len)
{
	if (load())
		return fail(msg, len, "%s", N.why);
	return 0;
}

static int nccl_make_id(void *id, char *msg, size_t len)
{
	ncclUniqueId u;
	ncclResult_t r;

	if (load())
		return fail(msg, len, "%s", N.why);
	if ((r = N.GetUniqueId(&u)) != ncclSuccess)
		return fail(msg, len, "ncclGetUniqueId: %s", N.GetErrorString(r));
	memcpy(id, &u, sizeof(u));
	return 0;
}

/* Polls until the communicator's pending operation settles: 0 done, -1 error or aborted. */
static int settle(struct ncomm *c, const char *what, double deadline, char *msg, size_t len)
{
	long us = 20;
	for (;;) {
		ncclResult_t st = ncclSuccess, r;
		pthread_mutex_lock(&c->mu);
		if (c->aborted) {
			pthread_mutex_unlock(&c->mu);
			return fail(msg, len, "%s: the NCCL communicator was aborted", what);
		}
		r = N.CommGetAsyncError(c->comm, &st);
		if (r == ncclSuccess && st != ncclInProgress) {
			if (st == ncclSuccess) {
				pthread_mutex_unlock(&c->mu);
				return 0;
			}
			snprintf(msg, len, "%s: %s", what, nccl_err(c->comm, st));
			pthread_mutex_unlock(&c->mu);
			return -1;
		}
		pthread_mutex_unlock(&c->mu);
		if (r != ncclSuccess)
			return fail(msg, len, "%s: ncclCommGetAsyncError: %s", what, N.GetErrorString(r));
		if (deadline > 0 && now_ms() > deadline)
			return fail(msg, len, "%s: NCCL did not finish in time", what);
		pause_us(us);
		us = us < 1000 ? us * 2 : 1000;
	}
}

static void nccl_close(void *vc);

static void *nccl_open(const void *id, int rank, int world, int timeout_ms, char *msg, size_t len)
{
	struct ncomm *c;
	ncclUniqueId u;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclResult_t r;
	cudaError_t e;
	int lo = 0, hi = 0;

	if (load()) {
		fail(msg, len, "%s", N.why);
		return NULL;
	}
	if (dlk_cu_device < 0) {
		fail(msg, len, "the CUDA backend has not taken a device yet");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		fail(msg, len, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->rank = rank;
	c->world = world;
	c->device = dlk_cu_device;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 300000;
	cudaSetDevice(c->device);
	/* collectives get the higher priority: a bucket should not queue behind backward's kernels */
	cudaDeviceGetStreamPriorityRange(&lo, &hi);
	if ((e = cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, hi)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&c->before, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)) != cudaSuccess) {
		fail(msg, len, "NCCL stream: %s", cudaGetErrorString(e));
		goto bad;
	}
	for (int i = 0; i < INFLIGHT; i++)
		if ((e = cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming)) != cudaSuccess) {
			fail(msg, len, "NCCL events: %s", cudaGetErrorString(e));
			goto bad;
		}
	memcpy(&u, id, sizeof(u));
	cfg.blocking = 0;
	r = N.CommInitRankConfig(&c->comm, world, u, rank, &cfg);
	if (r != ncclSuccess && r != ncclInProgress) {
		fail(msg, len, "ncclCommInitRankConfig: %s", nccl_err(NULL, r));
		c->comm = NULL;
		goto bad;
	}
	if (settle(c, "joining the NCCL communicator", now_ms() + c->timeout_ms, msg, len)) {
		char why[400];
		snprintf(why, sizeof(why), "%s", msg);
		snprintf(msg, len, "rank %d of %d: %s (within %d s)", rank, world, why, c->timeout_ms / 1000);
		N.CommAbort(c->comm);
		c->comm = NULL;
		goto bad;
	}
	return c;
bad:
	c->aborted = 1;
	nccl_close(c);
	return NULL;
}

/* Forgets the collectives that are done; the caller holds mu. */
static void retire(struct ncomm *c)
{
	while (c->n && cudaEventQuery(c->ev[c->head]) == cudaSuccess) {
		c->head = (c->head + 1) % INFLIGHT;
		c->n--;
	}
	cudaGetLastError(); /* cudaErrorNotReady is an answer, not an error */
}

enum kind { K_ALLREDUCE, K_BROADCAST, K_REDUCE_SCATTER, K_ALLGATHER };

/* Enqueues collective `kind` on the communicator's stream; the caller holds mu. ZeRO's halves
 * use lib/comm's shard layout (comm_shard): equal shards of per = count / world floats, which is
 * what ncclReduceScatter and ncclAllGather move (in place: rank r's shard at buf + r * per), and
 * the count % world floats past them, the last rank's, reduced by an all-reduce and sent by a
 * broadcast from that rank. */
static ncclResult_t enqueue(struct ncomm *c, enum kind kind, void *buf, size_t count, int avg, int root)
{
	ncclRedOp_t op = avg ? ncclAvg : ncclSum;
	float *f = buf;
	size_t per = count / (size_t)c->world, tail = count - per * (size_t)c->world;
	ncclResult_t r = ncclSuccess;

	switch (kind) {
	case K_BROADCAST:
		return N.Broadcast(buf, buf, count, ncclUint8, root, c->comm, c->stream);
	case K_ALLREDUCE:
		return N.AllReduce(buf, buf, count, ncclFloat32, op, c->comm, c->stream);
	case K_REDUCE_SCATTER:
		if (per)
			r = N.ReduceScatter(f, f + (size_t)c->rank * per, per, ncclFloat32, op, c->comm, c->stream);
		if ((r == ncclSuccess || r == ncclInProgress) && tail)
			r = N.AllReduce(f + per * (size_t)c->world, f + per * (size_t)c->world, tail, ncclFloat32, op,
			                c->comm, c->stream);
		return r;
	case K_ALLGATHER:
		if (per)
			r = N.AllGather(f + (size_t)c->rank * per, f, per, ncclFloat32, c->comm, c->stream);
		if ((r == ncclSuccess || r == ncclInProgress) && tail)
			r = N.Broadcast(f + per * (size_t)c->world, f + per * (size_t)c->world, tail * sizeof(float),
			                ncclUint8, c->world - 1, c->comm, c->stream);
		return r;
	}
	return ncclInvalidArgument;
}

/* Starts one collective after the compute stream's current point. */
static int start(struct ncomm *c, const char *what, enum kind kind, void *buf, size_t count, int avg, int root,
                 char *msg, size_t len)
{
	ncclResult_t r;
	cudaError_t e;

	/* a full queue: wait for the oldest (the watchdog still bounds the wait) */
	for (;;) {
		pthread_mutex_lock(&c->mu);
		if (c->aborted) {
			pthread_mutex_unlock(&c->mu);
			return fail(msg, len, "%s: the NCCL communicator was aborted", what);
		}
		retire(c);
		if (c->n < INFLIGHT)
			break;
		pthread_mutex_unlock(&c->mu);
		pause_us(100);
	}
	if ((e = cudaEventRecord(c->before, dlk_cu_stream)) != cudaSuccess ||
	    (e = cudaStreamWaitEvent(c->stream, c->before, 0)) != cudaSuccess) {
		pthread_mutex_unlock(&c->mu);
		return fail(msg, len, "%s: %s", what, cudaGetErrorString(e));
	}
	r = enqueue(c, kind, buf, count, avg, root);
	if (r != ncclSuccess && r != ncclInProgress) {
		snprintf(msg, len, "%s: %s", what, nccl_err(c->comm, r));
		pthread_mutex_unlock(&c->mu);
		return -1;
	}
	int slot = (c->head + c->n) % INFLIGHT;
	cudaEventRecord(c->ev[slot], c->stream);
	c->started[slot] = now_ms();
	c->what[slot] = what;
	c->n++;
	pthread_mutex_unlock(&c->mu);
	return r == ncclInProgress ? settle(c, what, 0, msg, len) : 0;
}

static int nccl_allreduce(void *vc, float *buf, size_t n, int avg, char *msg, size_t len)
{
	return start(vc, "NCCL all-reduce", K_ALLREDUCE, buf, n, avg, 0, msg, len);
}

static int nccl_broadcast(void *vc, void *buf, size_t bytes, int root, char *msg, size_t len)
{
	return start(vc, "NCCL broadcast", K_BROADCAST, buf, bytes, 0, root, msg, len);
}

static int nccl_reduce_scatter(void *vc, float *buf, size_t n, int avg, char *msg, size_t len)
{
	return start(vc, "NCCL reduce-scatter", K_REDUCE_SCATTER, buf, n, avg, 0, msg, len);
}

static int nccl_allgather(void *vc, float *buf, size_t n, char *msg, size_t len)
{
	return start(vc, "NCCL all-gather", K_ALLGATHER, buf, n, 0, 0, msg, len);
}

static int nccl_wait(void *vc, int host, char *msg, size_t len)
{
	struct ncomm *c = vc;
	cudaError_t e;
	long us = 20;

	pthread_mutex_lock(&c->mu);
	if (c->aborted) {
		pthread_mutex_unlock(&c->mu);
		return fail(msg, len, "the NCCL communicator was aborted");
	}
	if ((e = cudaEventRecord(c->done, c->stream)) != cudaSuccess ||
	    (e = cudaStreamWaitEvent(dlk_cu_stream, c->done, 0)) != cudaSuccess) {
		pthread_mutex_unlock(&c->mu);
		return fail(msg, len, "waiting for NCCL: %s", cudaGetErrorString(e));
	}
	pthread_mutex_unlock(&c->mu);
	while (host) {
		/* poll rather than block: an abort (the watchdog's) must be able to release us */
		e = cudaEventQuery(c->done);
		if (e == cudaSuccess)
			break;
		if (e != cudaErrorNotReady)
			return fail(msg, len, "waiting for NCCL: %s", cudaGetErrorString(e));
		pthread_mutex_lock(&c->mu);
		int ab = c->aborted;
		pthread_mutex_unlock(&c->mu);
		if (ab)
			return fail(msg, len, "the NCCL communicator was aborted");
		pause_us(us);
		us = us < 500 ? us * 2 : 500;
	}
	return 0;
}

static int nccl_health(void *vc, int timeout_ms, char *msg, size_t len)
{
	struct ncomm *c = vc;
	ncclResult_t st = ncclSuccess;
	int ret = 0;

	cudaSetDevice(c->device); /* this may be the watchdog's thread */
	pthread_mutex_lock(&c->mu);
	if (c->aborted)
		goto out;
	retire(c);
	if (N.CommGetAsyncError(c->comm, &st) == ncclSuccess && st != ncclSuccess && st != ncclInProgress) {
		snprintf(msg, len, "NCCL: %s", nccl_err(c->comm, st));
		ret = -1;
	} else if (c->n && now_ms() - c->started[c->head] > timeout_ms) {
		snprintf(msg, len, "%s made no progress for %.0f s", c->what[c->head],
		         (now_ms() - c->started[c->head]) / 1000);
		ret = 1;
	}
out:
	pthread_mutex_unlock(&c->mu);
	return ret;
}

static void nccl_abort(void *vc)
{
	struct ncomm *c = vc;
	pthread_mutex_lock(&c->mu);
	if (!c->aborted) {
		c->aborted = 1;
		if (c->comm)
			N.CommAbort(c->comm); /* frees the communicator; its kernels return */
		c->comm = NULL;
	}
	pthread_mutex_unlock(&c->mu);
}

static void nccl_close(void *vc)
{
	struct ncomm *c = vc;
	char msg[256];

	if (!c)
		return;
	if (!c->aborted && c->comm) {
		/* finalize flushes what is in flight; a peer that is gone makes it fail, then abort */
		ncclResult_t r = N.CommFinalize(c->comm);
		if ((r == ncclSuccess || r == ncclInProgress) && settle(c, "NCCL finalize", now_ms() + 10000, msg, sizeof(msg)) == 0)
			N.CommDestroy(c->comm);
		else
			N.CommAbort(c->comm);
		c->comm = NULL;
	}
	for (int i = 0; i < INFLIGHT; i++)
		if (c->ev[i])
			cudaEventDestroy(c->ev[i]);
	if (c->before)
		cudaEventDestroy(c->before);
	if (c->done)
		cudaEventDestroy(c->done);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

const struct dlk_device_comm dlk_cu_nccl = {
	.name = "nccl",
	.id_bytes = sizeof(ncclUniqueId),
	.describe = nccl_describe,
	.load = nccl_load,
	.make_id = nccl_make_id,
	.open = nccl_open,
	.allreduce = nccl_allreduce,
	.broadcast = nccl_broadcast,
	.reduce_scatter = nccl_reduce_scatter,
	.allgather = nccl_allgather,
	.wait = nccl_wait,
	.health = nccl_health,
	.abort = nccl_abort,
	.close = nccl_close,
};
