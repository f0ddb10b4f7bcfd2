/* GELU, element by element through lib/nn/kernels.h's formulas (the CUDA kernels call the same),
 * element ranges spread over the thread pool. The tanh form's loops vectorise (kernels.h's
 * dlk_k_exp; see cpu.c for the pragma), built for each vector width (DLK_CPU_CLONES). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/parallel.h"

struct gelu_job {
	int approx, backward;
	const float *x, *dy;
	float *out;
	size_t n;
};

DLK_CPU_CLONES static void gelu_tanh_seq(const float *restrict x, float *restrict y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = dlk_k_gelu(DLK_GELU_TANH, x[i]);
}

/* dx may be dy (in place): each element reads its dy before it writes its dx */
DLK_CPU_CLONES static void gelu_tanh_grad_seq(const float *restrict x, const float *dy, float *dx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dx[i] = dlk_k_gelu_grad(DLK_GELU_TANH, x[i], dy[i]);
}

static void gelu_part(void *ctx, int part, int nparts)
{
	const struct gelu_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range(j->n, part, nparts, 64, &lo, &hi);
	if (hi <= lo)
		return;
	if (j->approx == DLK_GELU_TANH) {
		if (j->backward)
			gelu_tanh_grad_seq(j->x + lo, j->dy + lo, j->out + lo, hi - lo);
		else
			gelu_tanh_seq(j->x + lo, j->out + lo, hi - lo);
	} else if (j->backward) {
		for (size_t i = lo; i < hi; i++)
			j->out[i] = dlk_k_gelu_grad(j->approx, j->x[i], j->dy[i]);
	} else {
		for (size_t i = lo; i < hi; i++)
			j->out[i] = dlk_k_gelu(j->approx, j->x[i]);
	}
}

void dlk_cpu_gelu_forward(int approx, const float *x, float *y, size_t n)
{
	struct gelu_job j = { .approx = approx, .x = x, .out = y, .n = n };
	dlk_parallel_for(dlk_cpu_parts(n, 8192), gelu_part, &j);
}

void dlk_cpu_gelu_backward(int approx, const float *x, const float *dy, float *dx, size_t n)
{
	struct gelu_job j = { .approx = approx, .backward = 1, .x = x, .dy = dy, .out = dx, .n = n };
	dlk_parallel_for(dlk_cpu_parts(n, 8192), gelu_part, &j);
}
