/* Softmax over the last axis, max-shifted so that no exp overflows; rows spread over the thread
 * pool. The max follows the max-pooling rule (a NaN wins), so a NaN row stays NaN. */
#include <math.h>

#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/parallel.h"

struct sm_job {
	const float *x, *y, *dy;
	float *out;
	int rows, n, backward;
};

static void sm_part(void *ctx, int part, int nparts)
{
	const struct sm_job *j = ctx;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->rows, part, nparts, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++) {
		size_t o = r * (size_t)j->n;
		float *out = j->out + o;
		if (j->backward) {
			const float *y = j->y + o, *dy = j->dy + o;
			float s = 0;
			for (int i = 0; i < j->n; i++)
				s += dy[i] * y[i];
			for (int i = 0; i < j->n; i++)
				out[i] = y[i] * (dy[i] - s);
			continue;
		}
		const float *x = j->x + o;
		float m = -INFINITY, s = 0;
		for (int i = 0; i < j->n; i++)
			if (dlk_k_max_takes(x[i], m))
				m = x[i];
		for (int i = 0; i < j->n; i++) {
			out[i] = expf(x[i] - m);
			s += out[i];
		}
		float inv = 1.0f / s;
		for (int i = 0; i < j->n; i++)
			out[i] *= inv;
	}
}

void dlk_cpu_softmax_forward(const float *x, float *y, int rows, int n)
{
	struct sm_job j = { .x = x, .out = y, .rows = rows, .n = n };
	if (rows > 0 && n > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)rows * (size_t)n, 16384), sm_part, &j);
}

void dlk_cpu_softmax_backward(const float *y, const float *dy, float *dx, int rows, int n)
{
	struct sm_job j = { .y = y, .dy = dy, .out = dx, .rows = rows, .n = n, .backward = 1 };
	if (rows > 0 && n > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)rows * (size_t)n, 16384), sm_part, &j);
}
