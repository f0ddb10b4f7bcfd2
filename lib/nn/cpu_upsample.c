/* Upsampling by an integer factor, nearest or bilinear (align_corners=False), planes spread over
 * the thread pool. Both directions are gathers through kernels.h's per-axis weights: the backward
 * sums, for each input pixel, the output pixels that read it, in a fixed order (the CUDA kernel's
 * order), so no two parts write the same element and no atomics are needed anywhere. */
#include "lib/nn/cpu_layers.h"
#include "lib/nn/kernels.h"
#include "lib/util/parallel.h"

struct up_job {
	const float *src;
	float *dst;
	int planes, h, w, scale, mode, backward;
};

static void up_part(void *ctx, int part, int nparts)
{
	const struct up_job *j = ctx;
	int s = j->scale, h = j->h, w = j->w, oh = h * s, ow = w * s;
	size_t lo, hi;
	dlk_parallel_range((size_t)j->planes, part, nparts, 1, &lo, &hi);
	for (size_t p = lo; p < hi; p++) {
		if (!j->backward) {
			const float *x = j->src + p * (size_t)h * w;
			float *y = j->dst + p * (size_t)oh * ow;
			for (int oy = 0; oy < oh; oy++) {
				int y0, y1;
				float ly;
				dlk_k_upsample_src(j->mode, oy, h, s, &y0, &y1, &ly);
				for (int ox = 0; ox < ow; ox++) {
					int x0, x1;
					float lx;
					dlk_k_upsample_src(j->mode, ox, w, s, &x0, &x1, &lx);
					float top = (1.0f - lx) * x[y0 * w + x0] + lx * x[y0 * w + x1];
					float bot = (1.0f - lx) * x[y1 * w + x0] + lx * x[y1 * w + x1];
					y[oy * ow + ox] = (1.0f - ly) * top + ly * bot;
				}
			}
			continue;
		}
		const float *dy = j->src + p * (size_t)oh * ow;
		float *dx = j->dst + p * (size_t)h * w;
		for (int iy = 0; iy < h; iy++) {
			int ylo, yhi;
			dlk_k_upsample_readers(iy, h, s, &ylo, &yhi);
			for (int ix = 0; ix < w; ix++) {
				int xlo, xhi;
				dlk_k_upsample_readers(ix, w, s, &xlo, &xhi);
				float acc = 0;
				for (int oy = ylo; oy < yhi; oy++) {
					float wy = dlk_k_upsample_weight(j->mode, oy, iy, h, s);
					if (wy == 0.0f)
						continue;
					float row = 0;
					for (int ox = xlo; ox < xhi; ox++)
						row += dlk_k_upsample_weight(j->mode, ox, ix, w, s) * dy[oy * ow + ox];
					acc += wy * row;
				}
				dx[iy * w + ix] = acc;
			}
		}
	}
}

void dlk_cpu_upsample_forward(const float *x, int planes, int h, int w, int scale, int mode, float *y)
{
	struct up_job j = { .src = x, .dst = y, .planes = planes, .h = h, .w = w, .scale = scale, .mode = mode };
	if (planes > 0 && h > 0 && w > 0 && scale > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)planes * h * w * scale * scale, 16384), up_part, &j);
}

void dlk_cpu_upsample_backward(const float *dy, int planes, int h, int w, int scale, int mode, float *dx)
{
	struct up_job j = { .src = dy, .dst = dx, .planes = planes, .h = h, .w = w, .scale = scale, .mode = mode,
	                    .backward = 1 };
	if (planes > 0 && h > 0 && w > 0 && scale > 0)
		dlk_parallel_for(dlk_cpu_parts((size_t)planes * h * w * scale * scale, 16384), up_part, &j);
}
