/* The compute backend interface: one struct of function pointers per device.
 *
 * The model code (lib/nn/net.c) only ever calls through this struct, so the CPU backend
 * (lib/nn/cpu.c, OpenBLAS) and the CUDA backend (gpu/, cuBLAS, loaded with dlopen) are
 * interchangeable. Every float / int32 pointer passed to a backend function is a *device*
 * pointer obtained from that backend's alloc(); on the CPU backend that is ordinary memory.
 * Matrices are row-major. Backend functions do not fail individually (as with a GPU stream,
 * errors are sticky): call check() after a step to learn whether anything went wrong. */
#ifndef DLK_NN_BACKEND_H
#define DLK_NN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "lib/nn/kernels.h"

/* Bumped whenever the struct changes, so a stale libdlk-cuda.so is refused, not misused. */
#define DLK_BACKEND_ABI 14

struct dlk_device_comm;

/* Multi-head self-attention's sizes and options (ABI 8). qkv is [batch, T, 3D] with D = heads*hd:
 * each position's row holds q, then k, then v, each [heads, hd]. */
struct dlk_attn_shape {
	int batch, T, heads, hd;
	int causal;               /* key j > query i is masked */
	float scale;              /* the logits' factor, 1/sqrt(hd) */
	const float *ids;         /* NULL, or [batch, T] (device): key j of sample b is masked where ids[b*T + j] == pad */
	float pad;
	float dropout;            /* on the attention weights, 0 = none; kernels_attn.h's mask */
	uint64_t seed, offset;
};

/* A conv2d layer's sizes: x [batch, c, h, w], weights [f, c, k, k], y [batch, f, oh, ow]; pool > 0:
 * a max-pool of pool x pool windows (stride pool_stride) of y follows, [batch, f, ph, pw] */
struct dlk_conv_shape {
	int batch, c, h, w, f, k, stride, pad, oh, ow;
	int pool, pool_stride, ph, pw;
};

/* What a backend's memory pool holds (all zero where the backend has no pool). */
struct dlk_mem_stats {
	size_t held;              /* bytes taken from the device and kept */
	size_t in_use;            /* bytes handed out to the model */
	size_t peak_in_use;
	size_t device_total, device_free;
	unsigned long long device_allocs; /* allocations the device itself served */
	unsigned long long reuses;        /* allocations the pool served from its cache */
};

struct dlk_backend {
	int abi;                  /* DLK_BACKEND_ABI */
	const char *name;         /* "cpu" or "cuda": recorded in bundles as the build */
	char device[128];         /* human-readable device description */

	/* threads for BLAS and any parallel loops; n <= 0 means all cores */
	void (*set_threads)(int n);
	/* zero-filled device memory, or NULL when out of memory */
	void *(*alloc)(size_t bytes);
	void (*free)(void *p);
	void (*to_device)(void *dst, const void *src, size_t bytes);
	void (*to_host)(void *dst, const void *src, size_t bytes);
	void (*copy)(void *dst, const void *src, size_t bytes);
	/* waits for queued work; returns 0, or -1 with a message in msg when a device error
	 * occurred since the last check */
	int (*check)(char *msg, size_t len);

	/* C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C; ta/tb non-zero = transposed */
	void (*sgemm)(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
	              const float *b, int ldb, float beta, float *c, int ldc);

	void (*fill)(float *x, size_t n, float v);
	void (*scale)(float *x, size_t n, float a);
	void (*axpy)(size_t n, float a, const float *x, float *y);   /* y += a * x */
	double (*sum_squares)(const float *x, size_t n);             /* in double */

	/* y[r, c] = act(y[r, c] + bias[c]) for a [rows, cols] matrix */
	void (*bias_act)(float *y, const float *bias, int rows, int cols, int act);
	void (*act_forward)(int act, const float *x, float *y, size_t n);
	/* dx = dy * act'(from the output y); dx may equal dy */
	void (*act_backward)(int act, const float *y, const float *dy, float *dx, size_t n);
	/* db[c] = sum over r of dy[r, c] */
	void (*sum_rows)(const float *dy, int rows, int cols, float *db);
	/* db[r] = sum over c of dy[r, c] */
	void (*sum_cols)(const float *dy, int rows, int cols, float *db);

	/* inverted dropout with the counter-based mask of kernels.h, element i uses index offset+i */
	void (*dropout_forward)(const float *x, float *y, size_t n, float p, uint64_t seed, uint64_t offset);
	void (*dropout_backward)(const float *dy, float *dx, size_t n, float p, uint64_t seed, uint64_t offset);

	/* x: [batch, c, h, w] -> col: [c*k*k, batch*oh*ow] (zero padding) */
	void (*im2col)(const float *x, int batch, int c, int h, int w, int k, int stride, int pad,
	               int oh, int ow, float *col);
	/* the adjoint: dx = sum of col's contributions (dx is overwritten) */
	void (*col2im)(const float *col, int batch, int c, int h, int w, int k, int stride, int pad,
	               int oh, int ow, float *dx);
	/* t: [f, batch*hw] -> y: [batch, f, hw] with y = act(t + bias[f]) */
	void (*conv_out)(const float *t, const float *bias, int batch, int f, int hw, int act, float *y);
	/* dy: [batch, f, hw] -> dt: [f, batch*hw] */
	void (*conv_grad_in)(const float *dy, int batch, int f, int hw, float *dt);

	/* x: [batch, c, h, w] -> y: [batch, c, oh, ow]; argmax[i] = index into x of y[i]'s max */
	void (*maxpool_forward)(const float *x, int batch, int c, int h, int w, int size, int stride,
	                        int oh, int ow, float *y, int32_t *argmax);
	/* dx (n_in elements, overwritten) = scatter-add of dy (n_out) through argmax */
	void (*maxpool_backward)(const float *dy, const int32_t *argmax, size_t n_out, size_t n_in, float *dx);

	/* mean softmax cross-entropy of logits [batch, k] against labels [batch] (device int32);
	 * dlogits (may be NULL) receives d(mean loss)/d(logits). Labels are in range (the caller
	 * checks datasets before training). */
	float (*softmax_ce)(const float *logits, const int32_t *labels, int batch, int k, float *dlogits);

	void (*sgd_update)(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
	                   int nesterov, float wd);
	void (*adam_update)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
	                    float beta2, float eps, float wd, int decoupled, float bc1, float bc2_sqrt);

	/* ---- optional: NULL where the backend has nothing better than the composition ---- */

	/* A dense layer's forward in one call: y[batch, out] = act(x[batch, in] w[out, in]^T + bias)
	 * (a GEMM with a bias/activation epilogue on the GPU). NULL: sgemm then bias_act. */
	void (*dense_forward)(const float *x, const float *w, const float *bias, int batch, int in, int out,
	                      int act, float *y);
	/* A dense layer's parameter gradients in one call: dw[out, in] = g[batch, out]^T x[batch, in],
	 * db[out] = the column sums of g. NULL: sgemm then sum_rows. */
	void (*dense_backward_w)(const float *g, const float *x, int batch, int in, int out, float *dw, float *db);
	/* Its input gradient with the backward of the activation below it folded in:
	 * dx[batch, in] = act'(from y[batch, in], the activation's output) * (g w[out, in]); act may be
	 * DLK_ACT_NONE (y unused). NULL: sgemm then act_backward. */
	void (*dense_backward_x)(const float *g, const float *w, int batch, int in, int out, int act, const float *y,
	                         float *dx);
	/* A conv2d layer's forward in one call: y = act(conv(x, w) + bias), no im2col buffer of the
	 * whole batch; with s->pool also the max-pool of y into py and pargmax (as maxpool_forward),
	 * and then y is the backend's to use: it may leave it unwritten when its backward needs only
	 * py (the CPU backend does, for a 2x2 pool of stride 2 after ReLU or no activation).
	 * NULL: im2col, sgemm and conv_out (and maxpool_forward). */
	void (*conv_forward)(const float *x, const float *w, const float *bias, const struct dlk_conv_shape *s,
	                     int act, float *y, float *py, int32_t *pargmax);
	/* Its backward: dw and db are overwritten, and dx too unless NULL (not wanted). Without
	 * s->pool, dy is the gradient of the pre-activation (act, y, py and argmax unused); with it,
	 * dy is the gradient of the pooled output and is taken back through the max-pool (argmax) and
	 * the activation (from its output: y and py as conv_forward left them). NULL: conv_grad_in,
	 * sgemm, sum_cols, col2im. Either both conv_forward and conv_backward are set or neither. */
	void (*conv_backward)(const float *x, const float *w, const float *y, const float *py, const float *dy,
	                      const int32_t *argmax, const struct dlk_conv_shape *s, int act, float *dw, float *db,
	                      float *dx);
	/* the memory pool's figures; NULL: no pool */
	void (*mem_stats)(struct dlk_mem_stats *s);
	/* collectives over this backend's device memory (NCCL on the CUDA backend); NULL: none, and
	 * a multi-rank run stages device buffers through host memory for the TCP ring */
	const struct dlk_device_comm *comm;
	/* The losses of lib/nn/loss.h on this device (kind: enum dlk_loss): the mean loss of out
	 * [batch, k] against labels [batch] (softmax_cross_entropy, param = label smoothing) or
	 * targets [batch, k] (the others, param = huber's delta), d(mean loss)/d(out) into dout when
	 * not NULL. NULL: lib/nn/loss.c computes it on the host (copies both ways). */
	float (*loss)(int kind, const float *out, const int32_t *labels, const float *targets, int batch, int k,
	              float param, float *dout);

	/* ---- ABI 7: the layer kinds of transformers and encoder-decoders. Required of every
	 * backend; the CPU's are the reference (lib/nn/cpu_layers.h). Rows are the last axis. ---- */

	/* layer normalisation of each row of x [rows, n]: y = (x - mean) * rstd * w + b, with the
	 * biased variance and rstd = 1 / sqrt(var + eps) (torch.nn.LayerNorm); w and b [n] may be NULL
	 * (no affine). mean and rstd [rows] receive what the backward needs. */
	void (*layernorm_forward)(const float *x, const float *w, const float *b, int rows, int n, float eps, float *y,
	                          float *mean, float *rstd);
	/* dx [rows, n] is overwritten; dw and db [n] (NULL: not wanted) are overwritten with the
	 * sums over rows. w NULL: no affine. */
	void (*layernorm_backward)(const float *x, const float *w, const float *mean, const float *rstd, const float *dy,
	                           int rows, int n, float *dx, float *dw, float *db);
	/* GELU of enum dlk_gelu; the backward takes the forward's *input* x; dx may equal dy */
	void (*gelu_forward)(int approx, const float *x, float *y, size_t n);
	void (*gelu_backward)(int approx, const float *x, const float *dy, float *dx, size_t n);
	/* softmax of each row of x [rows, n] (max-shifted); the backward takes its output y:
	 * dx = y * (dy - sum(dy * y)); dx may equal dy */
	void (*softmax_forward)(const float *x, float *y, int rows, int n);
	void (*softmax_backward)(const float *y, const float *dy, float *dx, int rows, int n);
	/* y[i, :] = table[ids[i], :] for count token ids into table [vocab, dim]; the ids are floats
	 * holding integers, as every activation (kernels.h's dlk_k_token): one that is not an integer
	 * in [0, vocab) gives a row of zeros */
	void (*embedding_forward)(const float *ids, const float *table, int count, int vocab, int dim, float *y);
	/* dtable[ids[i], :] += dy[i, :]: only the rows of the ids are touched (the caller zeroes the
	 * gradient once), repeated ids add in the order of i on every backend; ids out of range are
	 * skipped */
	void (*embedding_backward)(const float *ids, const float *dy, int count, int vocab, int dim, float *dtable);
	/* x [planes, h, w] -> y [planes, h*scale, w*scale] (enum dlk_upsample_mode, kernels.h's rule) */
	void (*upsample_forward)(const float *x, int planes, int h, int w, int scale, int mode, float *y);
	/* its adjoint: dx [planes, h, w] (overwritten) gathers dy [planes, h*scale, w*scale] */
	void (*upsample_backward)(const float *dy, int planes, int h, int w, int scale, int mode, float *dx);

	/* ---- ABI 8: attention (lib/nn/cpu_attention.c, gpu/attention.cu). Neither forms a T x T
	 * matrix per head: keys are taken in blocks with an online softmax (flash attention). ---- */

	/* out [batch, T, D] = softmax(q k^T * scale + mask) v per (sample, head), dropout on the
	 * weights; lse [batch, heads, T] = each row's log-sum-exp of the masked, scaled logits
	 * (-inf where every key is masked; that row's output is 0) */
	void (*attention_forward)(const struct dlk_attn_shape *s, const float *qkv, float *out, float *lse);
	/* dqkv [batch, T, 3D] (overwritten) from dout [batch, T, D], recomputing the weights from qkv
	 * and lse; out is the forward's output */
	void (*attention_backward)(const struct dlk_attn_shape *s, const float *qkv, const float *out, const float *lse,
	                           const float *dout, float *dqkv);
	/* rotary position embeddings (rotate-half, GPT-NeoX/LLaMA, base 10000) applied in place to the
	 * q and k parts of qkv [batch, T, 3D], position t = pos0 + row within the sample; inverse:
	 * the transposed rotation (the backward) */
	void (*rotary)(float *qkv, int batch, int T, int heads, int hd, int pos0, int inverse);
	/* ---- ABI 9: batch normalisation (torch.nn.BatchNorm1d/2d). NULL on a backend without it
	 * (the layer refuses to run there); the CPU's is the reference (cpu_batchnorm.c). ---- */

	/* x [batch, c, hw], each channel over batch and hw; w, b [c] (NULL: no affine). training:
	 * the batch's mean and biased variance normalise, the running ones [c] become
	 * (1 - momentum) * running + momentum * batch's (the variance unbiased), *num_batches + 1;
	 * else the running ones normalise. mean and rstd [c] (NULL: not wanted) receive what
	 * normalised, rstd = 1 / sqrt(var + eps), for the backward. */
	void (*batchnorm_forward)(const float *x, const float *w, const float *b, int batch, int c, int hw, float eps,
	                          float momentum, int training, float *running_mean, float *running_var,
	                          float *num_batches, float *y, float *mean, float *rstd);
	/* the training forward's gradients: dx [batch, c, hw] overwritten, dw and db [c] (NULL: not
	 * wanted) overwritten with the sums over batch and hw */
	void (*batchnorm_backward)(const float *x, const float *w, const float *mean, const float *rstd,
	                           const float *dy, int batch, int c, int hw, float *dx, float *dw, float *db);
	/* ---- ABI 10: masked mean pooling over a sequence (the meanpool layer). Required of every
	 * backend; the CPU's is the reference (cpu_seqpool.c). ---- */

	/* y [batch, D] = the mean of x [batch, T, D] over the positions t of each sample that are kept
	 * (kernels.h's dlk_k_seq_kept: ids [batch, T] not pad; ids NULL: every position), summed in
	 * the order of t, then divided by their count; a sample with none kept gives 0 */
	void (*seqpool_forward)(const float *x, const float *ids, float pad, int batch, int T, int D, float *y);
	/* dx [batch, T, D] (overwritten) = dy [batch, D] / the sample's count at kept positions, 0 at
	 * the others */
	void (*seqpool_backward)(const float *dy, const float *ids, float pad, int batch, int T, int D, float *dx);
	/* ---- ABI 11 ----
	 * y = a + b, element by element, in one pass (the same bits as copy then axpy with 1); y may
	 * be a or b. NULL: the graph's add copies, then adds. */
	void (*add)(const float *a, const float *b, float *y, size_t n);
	/* ---- ABI 12 ----
	 * batch normalisation with a ReLU after it, one pass each way (NULL: the two layers run
	 * apart). Forward: batchnorm_forward's, y = relu(its y), the same bits. Backward:
	 * batchnorm_backward's with dy the gradient of the ReLU's output and y the forward's: the
	 * gradient of the normalised values is relu'(y) dy (dy where y > 0, else 0), the same bits as
	 * the ReLU's backward and then batchnorm_backward. */
	void (*batchnorm_relu_forward)(const float *x, const float *w, const float *b, int batch, int c, int hw,
	                               float eps, float momentum, int training, float *running_mean,
	                               float *running_var, float *num_batches, float *y, float *mean, float *rstd);
	void (*batchnorm_relu_backward)(const float *x, const float *w, const float *mean, const float *rstd,
	                                const float *y, const float *dy, int batch, int c, int hw, float *dx, float *dw,
	                                float *db);
	/* ---- ABI 13 ----
	 * rows of row_bytes from src (a row every lds bytes) to dst (every ldd bytes), in one call:
	 * a concat's per-sample slices (NULL: one copy a row) */
	void (*copy_rows)(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t row_bytes);
	/* ---- ABI 14 ----
	 * training.precision: with bf16 non-zero, sgemm and the dense layers' products round their
	 * operands to bfloat16 and sum in fp32 (lib/nn/cpu_bgemm.h); 0 restores fp32. Everything
	 * else stays fp32. NULL: the backend multiplies in fp32 only. */
	void (*set_precision)(int bf16);
};

/* be->copy_rows where the backend has it, else one copy a row */
static inline void dlk_be_copy_rows(const struct dlk_backend *be, void *dst, size_t ldd, const void *src, size_t lds,
                                    size_t rows, size_t row_bytes)
{
	if (be->copy_rows) {
		be->copy_rows(dst, ldd, src, lds, rows, row_bytes);
		return;
	}
	for (size_t r = 0; r < rows; r++)
		be->copy((char *)dst + r * ldd, (const char *)src + r * lds, row_bytes);
}

/* Collectives over device memory, as a backend offers them (NCCL in the CUDA backend). lib/comm
 * wraps them into a struct dlk_comm (comm_device_new), adds the watchdog and the gradient
 * buckets; nothing else calls these directly. Functions that can fail return 0, or -1 with a
 * message in msg. `c` is what open() returned. Collectives run on the communicator's own
 * stream, after all the work the backend has queued so far; wait() orders the backend's later
 * work after them. */
struct dlk_device_comm {
	const char *name;         /* "nccl" */
	size_t id_bytes;          /* the id rank 0 makes and every rank needs (at most 4096) */
	/* the library's version or why it cannot be loaded, for `dlk version`; never fails */
	void (*describe)(char *out, size_t len);
	/* loads the library (once): every rank calls it before the rendezvous */
	int (*load)(char *msg, size_t len);
	/* rank 0 only: makes the id of a new communicator */
	int (*make_id)(void *id, char *msg, size_t len);
	/* every rank: joins the communicator of `world` ranks that id names, on the backend's
	 * device; gives up after timeout_ms. NULL on failure. */
	void *(*open)(const void *id, int rank, int world, int timeout_ms, char *msg, size_t len);
	/* in place, n floats: the sum, or the mean when avg */
	int (*allreduce)(void *c, float *buf, size_t n, int avg, char *msg, size_t len);
	int (*broadcast)(void *c, void *buf, size_t bytes, int root, char *msg, size_t len);
	/* ZeRO's halves of an all-reduce over n floats in place, in lib/comm's shard layout
	 * (comm_shard): afterwards this rank's shard holds the sum (or mean) of every rank's; and
	 * buf holds every rank's shard of its own buf. NULL: lib/comm uses allreduce / broadcast. */
	int (*reduce_scatter)(void *c, float *buf, size_t n, int avg, char *msg, size_t len);
	int (*allgather)(void *c, float *buf, size_t n, char *msg, size_t len);
	/* the backend's later work waits for every collective started so far; with host non-zero
	 * this thread waits too (polling, so that abort() releases it) */
	int (*wait)(void *c, int host, char *msg, size_t len);
	/* for the watchdog, from any thread: 0 healthy, 1 the oldest collective in flight is older
	 * than timeout_ms, -1 the library reported an error (msg says which) */
	int (*health)(void *c, int timeout_ms, char *msg, size_t len);
	/* from any thread: abandons the collectives in flight; every later call fails */
	void (*abort)(void *c);
	void (*close)(void *c);
};

/* The always-present CPU backend (OpenBLAS). */
const struct dlk_backend *dlk_backend_cpu(void);

/* OpenBLAS picks its kernels from a table of the CPU models it knows, once, when it is loaded;
 * an OpenBLAS older than the CPU (Debian 12's 0.3.21 on a 2023 Xeon) falls back to its SSE3
 * ("Prescott") kernels, which run dlk's GEMMs 4x slower than its AVX-512 ones on the same CPU.
 * Only $OPENBLAS_CORETYPE, set before the library loads, changes that choice. Returns the core
 * type the running CPU should have ("SkylakeX" for AVX-512, "Haswell" for AVX2 + FMA) when
 * OpenBLAS runs an older one, else NULL. This is the one place that knows which kernels are too
 * old; the program decides what to do (dlk re-executes itself once with the variable set when it
 * is unset, `dlk serve` warns when the kernels are still the old ones). */
const char *dlk_cpu_blas_coretype(void);

/* The symbol libdlk-cuda.so exports: returns its backend on CUDA device `device`, or NULL with a
 * message in msg saying why that device cannot be used. A process uses one device: a second call
 * with another device fails. */
typedef const struct dlk_backend *(*dlk_backend_entry_fn)(int device, char *msg, size_t len);
#define DLK_BACKEND_ENTRY "dlk_backend_cuda_entry"

/* What the CUDA backend finds on this machine, without taking a device (for `dlk version`). */
struct dlk_device_probe {
	int usable;               /* a device can be used */
	int devices;              /* CUDA devices visible */
	int driver;               /* the driver's CUDA version (13000 = 13.0), 0 without a driver */
	int runtime;              /* the CUDA version the backend was built with */
	char why[1024];           /* when not usable: why, in a sentence */
	char device0[160];        /* the first device: name, compute capability, memory */
	char blas[64];            /* "cuBLAS 13.1.0" */
	char comm[1024];          /* "NCCL 2.28.9", or why NCCL cannot be loaded */
	char archs[64];           /* the GPU architectures the code was built for, "sm_80 sm_90" */
	char path[512];           /* the library's file (filled by dlk's loader, not the library) */
};
typedef void (*dlk_backend_probe_fn)(struct dlk_device_probe *p);
#define DLK_BACKEND_PROBE "dlk_backend_cuda_probe"
/* an exported `const int` holding the library's DLK_BACKEND_ABI, read before anything is called */
#define DLK_BACKEND_ABI_SYM "dlk_backend_cuda_abi"

#endif
