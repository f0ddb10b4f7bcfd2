/* The per-element math of every element-wise kernel, written once.
 *
 * Each function is `static inline` and marked DLK_HD, which is `__host__ __device__` under nvcc
 * and empty otherwise: the CPU backend calls these in plain loops, the CUDA backend calls the very
 * same functions from its kernels, so the CPU unit tests check the formulas the GPU runs.
 * Nothing here allocates, loops over arrays or touches global state. */
#ifndef DLK_NN_KERNELS_H
#define DLK_NN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DLK_HD __host__ __device__
#include <math.h>
#else
#define DLK_HD
#include <math.h>
#include <string.h>
#endif

/* The CPU backend's loops (cpu.c, cpu_conv.c) are built three times, for AVX-512, AVX2 and the
 * baseline, and the loader picks the widest the CPU has. Only the vector width differs: C here is
 * ISO C11, so GCC contracts no a * b + c into an FMA, and reductions are not reordered, so every
 * clone gives the same bits. The sanitizer build has one. */
#if !defined(__CUDACC__) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
	!defined(__SANITIZE_ADDRESS__)
#define DLK_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DLK_CPU_CLONES
#endif

/* ---- exp(x) for the CPU's vectorised loops ----
 * libm's expf and tanhf are a call per element, and no loop around a call vectorises (on a GPT's
 * GELU they were half of a training step). dlk_k_exp is exp in plain float arithmetic that GCC
 * vectorises: Cephes' expf (x = n ln 2 + r, |r| <= ln 2 / 2, a degree-7 polynomial, then 2^n
 * put into the exponent bits), within 2 ulp of exp over [-87.3, 88.3]; below -87.33 (and at -inf)
 * it is 0, above 88.37 it stays at exp(88.37) = 2.4e38 (not inf); NaN gives NaN. Only + and *
 * with no FMA (ISO C), so every vector width gives the same bits. Under nvcc it is the device's
 * expf (itself within 2 ulp). */
#ifdef __CUDACC__
DLK_HD static inline float dlk_k_exp(float x) { return expf(x); }
#else
static inline float dlk_k_exp(float x)
{
	float xc = x > 88.37626f ? 88.37626f : (x < -87.33654f ? -87.33654f : x);
	/* n = round(x / ln 2), by the float adder's round-to-nearest */
	float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	int32_t bits = ((int32_t)n + 127) << 23;
	float scale;
	memcpy(&scale, &bits, sizeof(scale));
	return x < -87.33654f ? 0.0f : p * scale;
}
#endif

/* Activation codes shared by the backends (fused bias + activation and stand-alone layers). */
enum dlk_act { DLK_ACT_NONE = 0, DLK_ACT_RELU = 1, DLK_ACT_TANH = 2, DLK_ACT_SIGMOID = 3 };

/* ---- activations: forward from the pre-activation, backward from the *output* y ---- */

DLK_HD static inline float dlk_k_relu(float x) { return x > 0.0f ? x : 0.0f; }
DLK_HD static inline float dlk_k_relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

DLK_HD static inline float dlk_k_tanh(float x) { return tanhf(x); }
DLK_HD static inline float dlk_k_tanh_grad(float y, float dy) { return dy * (1.0f - y * y); }

/* Written so that neither branch overflows: exp of a non-positive number only. */
DLK_HD static inline float dlk_k_sigmoid(float x)
{
	if (x >= 0.0f)
		return 1.0f / (1.0f + expf(-x));
	float e = expf(x);
	return e / (1.0f + e);
}
DLK_HD static inline float dlk_k_sigmoid_grad(float y, float dy) { return dy * y * (1.0f - y); }

DLK_HD static inline float dlk_k_act(int act, float x)
{
	switch (act) {
	case DLK_ACT_RELU: return dlk_k_relu(x);
	case DLK_ACT_TANH: return dlk_k_tanh(x);
	case DLK_ACT_SIGMOID: return dlk_k_sigmoid(x);
	default: return x;
	}
}

DLK_HD static inline float dlk_k_act_grad(int act, float y, float dy)
{
	switch (act) {
	case DLK_ACT_RELU: return dlk_k_relu_grad(y, dy);
	case DLK_ACT_TANH: return dlk_k_tanh_grad(y, dy);
	case DLK_ACT_SIGMOID: return dlk_k_sigmoid_grad(y, dy);
	default: return dy;
	}
}

/* ---- dropout: a counter-based mask, so CPU and GPU draw the same mask for the same
 * (seed, index) without sharing generator state; index = step's offset + element ---- */

DLK_HD static inline uint64_t dlk_k_mix64(uint64_t z)
{
	/* splitmix64's finaliser: a bijection with good avalanche */
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A uniform float in [0, 1) from (seed, index). */
DLK_HD static inline float dlk_k_uniform(uint64_t seed, uint64_t index)
{
	uint64_t h = dlk_k_mix64(seed ^ dlk_k_mix64(index));
	return (float)(h >> 40) * (1.0f / 16777216.0f);
}

/* Inverted dropout: the kept elements are scaled by 1/(1-p) so evaluation needs no scaling.
 * Returns the multiplier (0 or 1/(1-p)) for element `index`. */
DLK_HD static inline float dlk_k_dropout_scale(uint64_t seed, uint64_t index, float p)
{
	return dlk_k_uniform(seed, index) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

/* ---- max pooling ---- */

/* Does x replace m, the window's maximum so far? A NaN wins, as in PyTorch, and the first
 * maximum is kept on ties. */
DLK_HD static inline int dlk_k_max_takes(float x, float m) { return x > m || isnan(x); }

/* ---- softmax cross-entropy, one row at a time (max-shifted, numerically stable) ---- */

/* Given the row's max m and sum s = sum(exp(z_j - m)), the loss of label y is log(s) - (z_y - m). */
DLK_HD static inline float dlk_k_ce_loss(float zy, float m, float s) { return logf(s) - (zy - m); }
/* d(mean loss)/dz_j = (softmax_j - [j == y]) / batch */
DLK_HD static inline float dlk_k_ce_grad(float zj, float m, float s, int is_label, float inv_batch)
{
	float p = expf(zj - m) / s;
	return (p - (is_label ? 1.0f : 0.0f)) * inv_batch;
}
/* With label smoothing eps (PyTorch's CrossEntropyLoss(label_smoothing=eps)): the target is
 * (1 - eps) on the label plus eps / k on every class, so the loss is
 * (1 - eps)(log s - (z_y - m)) + eps/k * sum_j (log s - (z_j - m)); zsum = sum_j (z_j - m). */
DLK_HD static inline float dlk_k_ce_smooth_loss(float zy, float m, float s, float zsum, int k, float eps)
{
	float ls = logf(s);
	return (1.0f - eps) * (ls - (zy - m)) + eps * (ls - zsum / (float)k);
}
DLK_HD static inline float dlk_k_ce_smooth_grad(float zj, float m, float s, int is_label, int k, float eps,
                                                float inv_batch)
{
	float p = expf(zj - m) / s;
	return (p - (is_label ? 1.0f - eps : 0.0f) - eps / (float)k) * inv_batch;
}

/* enum dlk_loss's values (lib/project/project.h, checked in lib/nn/loss.c), for the kernels */
#define DLK_K_LOSS_CE 0
#define DLK_K_LOSS_BCE 1
#define DLK_K_LOSS_MSE 2
#define DLK_K_LOSS_L1 3
#define DLK_K_LOSS_HUBER 4
#define DLK_K_LOSS_TOKEN_CE 5
/* a token target below 0 is ignored (PyTorch's ignore_index, padding) */
DLK_HD static inline int dlk_k_token_id(float t) { return t >= 0 ? (int)t : -1; }

/* ---- element-wise losses against float targets; d/dz of the per-element loss (the caller
 * divides by the number of elements for the mean, as PyTorch's reduction='mean') ---- */

/* binary cross-entropy of a logit z against a target t in [0, 1], stable for any z:
 * max(z, 0) - z t + log(1 + exp(-|z|)) (BCEWithLogitsLoss) */
DLK_HD static inline float dlk_k_bce_loss(float z, float t)
{
	return fmaxf(z, 0.0f) - z * t + log1pf(expf(-fabsf(z)));
}
DLK_HD static inline float dlk_k_bce_grad(float z, float t)
{
	float e = expf(-fabsf(z)); /* sigmoid without overflow on either side */
	float sig = z >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
	return sig - t;
}
DLK_HD static inline float dlk_k_mse_loss(float z, float t) { return (z - t) * (z - t); }
DLK_HD static inline float dlk_k_mse_grad(float z, float t) { return 2.0f * (z - t); }
/* L1: the gradient at z == t is 0, as PyTorch's sign() */
DLK_HD static inline float dlk_k_l1_loss(float z, float t) { return fabsf(z - t); }
DLK_HD static inline float dlk_k_l1_grad(float z, float t) { return z > t ? 1.0f : (z < t ? -1.0f : 0.0f); }
/* Huber with threshold delta (PyTorch's HuberLoss): quadratic within delta, linear outside */
DLK_HD static inline float dlk_k_huber_loss(float z, float t, float delta)
{
	float d = fabsf(z - t);
	return d <= delta ? 0.5f * d * d : delta * (d - 0.5f * delta);
}
DLK_HD static inline float dlk_k_huber_grad(float z, float t, float delta)
{
	float d = z - t;
	return d > delta ? delta : (d < -delta ? -delta : d);
}

/* ---- GELU, from the pre-activation x (it is not invertible, so the backward keeps x) ----
 * DLK_GELU_ERF is the exact x * Phi(x) (torch.nn.GELU(), the default); DLK_GELU_TANH is the tanh
 * approximation GPT-2 was trained with (torch.nn.GELU(approximate="tanh")). */
enum dlk_gelu { DLK_GELU_ERF = 0, DLK_GELU_TANH = 1 };

#define DLK_K_SQRT_2_OVER_PI 0.7978845608028654f
#define DLK_K_INV_SQRT_2 0.7071067811865476f
#define DLK_K_INV_SQRT_2PI 0.3989422804014327f

/* The tanh form as a sigmoid: 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)), with
 * u = sqrt(2/pi) (x + 0.044715 x^3), one dlk_k_exp and no tanhf, so a loop of it vectorises; the
 * argument is kept below 80 so that the sigmoid never goes subnormal (x / (1 + e^80) is 0 to
 * within 1e-34 |x|). Its derivative: s + x * 2 s (1 - s) du/dx, with 1 - s = e s. */
DLK_HD static inline float dlk_k_gelu_tanh_e(float x)
{
	float u = DLK_K_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
	float a = -2.0f * u;
	return dlk_k_exp(a < 80.0f ? a : 80.0f);
}

DLK_HD static inline float dlk_k_gelu(int approx, float x)
{
	if (approx == DLK_GELU_TANH)
		return x / (1.0f + dlk_k_gelu_tanh_e(x));
	return 0.5f * x * (1.0f + erff(x * DLK_K_INV_SQRT_2));
}

DLK_HD static inline float dlk_k_gelu_grad(int approx, float x, float dy)
{
	if (approx == DLK_GELU_TANH) {
		float e = dlk_k_gelu_tanh_e(x), s = 1.0f / (1.0f + e);
		float du = DLK_K_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
		return dy * (s + x * 2.0f * e * s * s * du);
	}
	float cdf = 0.5f * (1.0f + erff(x * DLK_K_INV_SQRT_2));
	float pdf = DLK_K_INV_SQRT_2PI * expf(-0.5f * x * x);
	return dy * (cdf + x * pdf);
}

/* ---- embedding: token ids travel in the activations' float arrays (exact up to 2^24) ---- */

/* The row of token value v in a table of vocab rows, or -1 when v is not an integer in
 * [0, vocab) (a NaN included). */
/* meanpool: whether position `at` (= b * T + t) of a sample takes part in its mean: its
 * model-input id is not pad (ids NULL: every position does) */
DLK_HD static inline int dlk_k_seq_kept(const float *ids, float pad, size_t at)
{
	return !ids || ids[at] != pad;
}

DLK_HD static inline int dlk_k_token(float v, int vocab)
{
	return v >= 0.0f && v < (float)vocab && v == floorf(v) ? (int)v : -1;
}

/* ---- upsampling by an integer factor along one axis (PyTorch's F.interpolate with
 * scale_factor, align_corners=False): output index o reads input x0 with weight 1 - l and x1 with
 * weight l. Nearest: x0 = x1 = floor(o / scale), l = 0. Bilinear (per axis): the source coordinate
 * (o + 0.5) / scale - 0.5, clamped at 0, as PyTorch computes it from 1/scale. ---- */
enum dlk_upsample_mode { DLK_UPSAMPLE_NEAREST = 0, DLK_UPSAMPLE_BILINEAR = 1 };

DLK_HD static inline void dlk_k_upsample_src(int mode, int o, int in, int scale, int *x0, int *x1, float *l)
{
	if (mode == DLK_UPSAMPLE_NEAREST) {
		int i = o / scale;
		*x0 = *x1 = i < in ? i : in - 1;
		*l = 0.0f;
		return;
	}
	float src = ((float)o + 0.5f) * (1.0f / (float)scale) - 0.5f;
	if (src < 0.0f)
		src = 0.0f;
	int i0 = (int)src;
	if (i0 > in - 1)
		i0 = in - 1;
	*x0 = i0;
	*x1 = i0 + 1 < in ? i0 + 1 : in - 1;
	*l = src - (float)i0;
}

/* The weight with which output index o reads input index i (0 for the indices it does not read). */
DLK_HD static inline float dlk_k_upsample_weight(int mode, int o, int i, int in, int scale)
{
	int x0, x1;
	float l, wgt = 0.0f;
	dlk_k_upsample_src(mode, o, in, scale, &x0, &x1, &l);
	if (x0 == i)
		wgt += 1.0f - l;
	if (x1 == i)
		wgt += l;
	return wgt;
}

/* The output indices [*lo, *hi) that can read input index i (a superset: their weights may be 0). */
DLK_HD static inline void dlk_k_upsample_readers(int i, int in, int scale, int *lo, int *hi)
{
	int out = in * scale;
	int a = (i - 1) * scale - 1, b = (i + 2) * scale + 1;
	if (i == in - 1)
		b = out; /* the clamped edge: every later output reads the last input */
	*lo = a < 0 ? 0 : a;
	*hi = b > out ? out : b;
}

/* ---- optimizers (PyTorch semantics); one parameter element per call ---- */

/* SGD with momentum, dampening 0, optional Nesterov, L2 weight decay added to the gradient
 * (torch.optim.SGD). A zero-initialised buffer gives PyTorch's first step (buf = g). */
DLK_HD static inline void dlk_k_sgd(float *p, float g, float *buf, float lr, float momentum,
                                     int nesterov, float wd)
{
	g += wd * *p;
	if (momentum != 0.0f) {
		float b = momentum * *buf + g;
		*buf = b;
		g = nesterov ? g + momentum * b : b;
	}
	*p -= lr * g;
}

/* Adam (torch.optim.Adam, weight decay as L2 in the gradient) and AdamW (torch.optim.AdamW,
 * decoupled: p *= 1 - lr * wd before the update). bc1 = 1 - beta1^t, bc2_sqrt = sqrt(1 - beta2^t). */
DLK_HD static inline void dlk_k_adam(float *p, float g, float *m, float *v, float lr, float beta1,
                                      float beta2, float eps, float wd, int decoupled, float bc1,
                                      float bc2_sqrt)
{
	if (decoupled)
		*p *= 1.0f - lr * wd;
	else
		g += wd * *p;
	float mm = beta1 * *m + (1.0f - beta1) * g;
	float vv = beta2 * *v + (1.0f - beta2) * g * g;
	*m = mm;
	*v = vv;
	float denom = sqrtf(vv) / bc2_sqrt + eps;
	*p -= (lr / bc1) * mm / denom;
}

#endif
