/* Dynamic batching on one compute pool.
 *
 * A front end (HTTP here, a stream consumer later) never runs a model: it submits a job (its
 * rows, already decoded into network inputs) to the model's batcher and gets its slice of the
 * output back. The pool's workers, shared by every model and sized so that workers x BLAS threads
 * never exceed the cores, take the oldest queued work, gather jobs of the same model up to
 * max_batch rows (waiting at most max_delay after the oldest one arrived), run them as one forward
 * pass and hand each job its rows. A job larger than max_batch runs alone, in max_batch pieces.
 *
 * A forward pass runs on one of the pool's `workers` slots (a replica of every model), so at most
 * that many run at once, whichever thread runs them: a slot's own thread for queued work, or the
 * submitting thread itself when a slot is free and nothing asks to wait (dlk_batcher_try_inline),
 * which saves two thread hand-offs per request.
 *
 * The batcher knows nothing of networks or devices: it runs a struct dlk_engine, which the model
 * code implements for a backend (the CPU one, the CUDA one), so the same queue serves both. */
#ifndef DLK_SERVE_BATCHER_H
#define DLK_SERVE_BATCHER_H

#include <stddef.h>

#include "lib/serve/metrics.h"
#include "lib/util/clock.h" /* dlk_now(): the jobs' timings */
#include "lib/util/err.h"

/* One model on one device, as the compute workers see it. */
struct dlk_engine {
	size_t in_size, out_size;   /* floats per input row, per output row */
	void *ctx;
	/* A replica private to one worker, able to run up to max_rows rows at once. Called in the
	 * worker's own thread (a device context may be per thread). NULL with err on failure. */
	void *(*replica_new)(void *ctx, int max_rows, struct dlk_err *err);
	/* out[rows, out_size] = the model on in[rows, in_size] (host memory both). */
	int (*run)(void *replica, const float *in, int rows, float *out, struct dlk_err *err);
	void (*replica_free)(void *replica);
	int any_thread;             /* a replica may run on any thread (else only on the one that
	                               built it, as a device context may require) */
};

/* One request's rows. The submitter owns it and keeps it (and in, out) alive until done. */
struct dlk_job {
	const float *in;            /* rows * in_size */
	int rows;
	float *out;                 /* rows * out_size */
	/* Called once, from a compute worker (or from dlk_pool_stop), when the job is finished.
	 * It must be quick: wake a thread, resume a connection. */
	void (*done)(struct dlk_job *job);
	void *arg;                  /* the submitter's */
	/* filled by the batcher */
	int status;                 /* 0, or -1 with msg */
	char msg[256];
	double t_submit, t_start, t_end; /* monotonic seconds */
	int batch_rows;             /* rows of the (last) forward pass it ran in */
	/* private */
	struct dlk_job *next;
};

struct dlk_pool;
struct dlk_batcher;

/* A pool of `workers` compute threads (not started yet). */
struct dlk_pool *dlk_pool_new(int workers);
/* Adds a model's queue. engine is copied; stats (optional, the caller's) receives the queue and
 * compute times, batch sizes and counts. Only before dlk_pool_start. */
struct dlk_batcher *dlk_pool_add(struct dlk_pool *pool, const struct dlk_engine *engine, int max_batch,
                                 int max_delay_us, struct dlk_model_stats *stats);
/* Starts the workers; each builds its replicas first. Returns -1 with the first replica's error
 * (and no thread left running) when one cannot be built. */
int dlk_pool_start(struct dlk_pool *pool, struct dlk_err *err);
/* Stops the workers after the batches they are running; jobs still queued finish with status -1
 * ("the server is shutting down"). The batchers stay valid and refuse every later job, so a front
 * end still running may call them until it has stopped too. NULL is allowed. */
void dlk_pool_stop(struct dlk_pool *pool);
/* Stops the pool if needed and frees it with its batchers. NULL is allowed. */
void dlk_pool_free(struct dlk_pool *pool);

/* Runs the job on the calling thread when a slot is free, with jobs that queued meanwhile up to
 * max_batch rows, and then, still holding the slot, up to a few more batches of what queued while
 * it ran (their done callbacks run here). Returns 1 when the job is finished (its done callback
 * is not called), 0 when every slot is busy or the model batches with a delay (then submit it),
 * -1 once the batcher is closed. */
int dlk_batcher_try_inline(struct dlk_batcher *b, struct dlk_job *job);
/* Queues a job. Returns -1 (the job untouched, done never called) once the batcher is closed. */
int dlk_batcher_submit(struct dlk_batcher *b, struct dlk_job *job);
/* Runs rows through the batcher and waits: the interface for a front end with threads of its
 * own. Returns 0, or -1 with err (DLK_EXIT_FAIL). */
int dlk_batcher_run(struct dlk_batcher *b, const float *in, int rows, float *out, struct dlk_err *err);
/* Refuses every later submission (draining); queued jobs still run. */
void dlk_batcher_close(struct dlk_batcher *b);
/* Jobs submitted and not yet done. */
int dlk_batcher_pending(struct dlk_batcher *b);

#endif
