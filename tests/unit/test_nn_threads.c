/* The CPU backend on several threads: GEMMs cut into blocks of C (by rows and by columns, every
 * transpose, beta != 0, leading dimensions wider than the matrix) give the right values and the
 * same bits on every run with a given thread count; the fused dense forward equals GEMM + bias +
 * activation; element-wise kernels and the convolutions' layout passes give the same bits on any
 * number of threads; a few training
 * steps of an MLP are bit-identical run to run on 2 threads. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/nn/backend.h"
#include "lib/nn/net.h"
#include "lib/nn/optim.h"
#include "lib/util/parallel.h"
#include "lib/util/rng.h"

static float *randv(size_t n, uint64_t seed)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	float *x = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		x[i] = 2.0f * dlk_rng_uniform(&r) - 1.0f;
	return x;
}

/* C = alpha op(A) op(B) + beta C in double, row-major */
static void ref_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                     int ldb, float beta, float *c, int ldc)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int p = 0; p < k; p++)
				s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
			c[i * ldc + j] = (float)(alpha * s + beta * c[i * ldc + j]);
		}
}

/* one GEMM on `threads` threads, twice, against the reference: 1 when both runs agree bit for bit
 * and with the reference to float rounding */
static int gemm_case(const struct dlk_backend *be, int threads, int ta, int tb, int m, int n, int k, float beta)
{
	be->set_threads(threads);
	int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
	size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
	float *a = randv(na, 1), *b = randv(nb, 2), *c0 = randv(nc, 3);
	float *c1 = malloc(sizeof(float) * nc), *c2 = malloc(sizeof(float) * nc), *cr = malloc(sizeof(float) * nc);
	memcpy(c1, c0, sizeof(float) * nc);
	memcpy(c2, c0, sizeof(float) * nc);
	memcpy(cr, c0, sizeof(float) * nc);
	be->sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c1, ldc);
	be->sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c2, ldc);
	ref_gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, cr, ldc);
	int ok = !memcmp(c1, c2, sizeof(float) * nc);
	for (size_t i = 0; i < nc && ok; i++) {
		/* outside the matrix (the padding of ldc) nothing may be written */
		int in = (int)(i % (size_t)ldc) < n;
		ok = in ? fabsf(c1[i] - cr[i]) <= 1e-4f * (1.0f + (float)k) : c1[i] == c0[i];
	}
	free(a), free(b), free(c0), free(c1), free(c2), free(cr);
	return ok;
}

/* A little MLP's training steps on random data; returns the parameters after `steps`. */
static float *train_mlp(const struct dlk_backend *be, int threads, int steps)
{
	static struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DENSE, .units = 96 }, { .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.25f }, { .kind = DLK_LAYER_DENSE, .units = 64 },
		{ .kind = DLK_LAYER_TANH }, { .kind = DLK_LAYER_DENSE, .units = 10 },
	};
	struct dlk_model model = { .input = { 1, 12, 16 }, .input_rank = 3, .layers = layers, .n_layers = 7 };
	struct dlk_training tr = { .epochs = 1, .batch_size = 64, .optimizer = DLK_OPT_ADAM, .lr = 1e-3,
	                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1 };
	struct dlk_net net;
	struct dlk_optimizer opt;
	struct dlk_err err = DLK_ERR_INIT;
	int batch = 64;
	be->set_threads(threads);
	if (dlk_net_build(&net, &model, NULL, 10, be, &err) || dlk_net_init_params(&net, "torch", 7, &err) ||
	    dlk_net_reserve(&net, batch, &err) || dlk_optimizer_init(&opt, &tr, net.n_params, 1, steps, be, &err))
		return NULL;
	float *x = randv((size_t)batch * 192, 11);
	int32_t y[64];
	for (int i = 0; i < batch; i++)
		y[i] = (i * 7) % 10;
	for (int s = 0; s < steps; s++) {
		dlk_net_forward(&net, x, batch, 1);
		dlk_net_backward(&net, y, batch);
		dlk_optimizer_step(&opt, net.params, net.grads, tr.lr);
	}
	float *out = malloc(sizeof(float) * net.n_params);
	memcpy(out, net.params, sizeof(float) * net.n_params);
	dlk_optimizer_release(&opt);
	dlk_net_release(&net);
	free(x);
	return out;
}

int main(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();

	/* shapes that split by rows (m > n), by columns, that are too small to split, and ragged */
	int shapes[][3] = { { 128, 256, 784 }, { 256, 784, 128 }, { 130, 50, 70 }, { 37, 300, 41 }, { 9, 9, 9 } };
	for (int t = 1; t <= 3; t++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int tr = 0; tr < 4; tr++) {
				int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = tr & 1, tb = tr >> 1;
				CHECK_MSG(gemm_case(be, t, ta, tb, m, n, k, s % 2 ? 0.25f : 0.0f),
				          "sgemm %dx%dx%d ta %d tb %d on %d threads: right and the same bits twice", m, n, k, ta,
				          tb, t);
			}

	/* the fused dense forward is GEMM then bias + activation, to the bit */
	for (int t = 1; t <= 3; t += 2) {
		be->set_threads(t);
		int B = 128, in = 200, out = 144;
		float *x = randv((size_t)B * in, 4), *w = randv((size_t)out * in, 5), *bias = randv((size_t)out, 6);
		float *y1 = calloc((size_t)B * out, sizeof(float)), *y2 = calloc((size_t)B * out, sizeof(float));
		for (int act = DLK_ACT_NONE; act <= DLK_ACT_SIGMOID; act++) {
			be->dense_forward(x, w, bias, B, in, out, act, y1);
			be->sgemm(0, 1, B, out, in, 1.0f, x, in, w, in, 0.0f, y2, out);
			be->bias_act(y2, bias, B, out, act);
			CHECK_MSG(!memcmp(y1, y2, sizeof(float) * (size_t)B * out),
			          "dense_forward == sgemm + bias_act, activation %d, %d threads", act, t);
		}
		free(x), free(w), free(bias), free(y1), free(y2);
	}

	/* the fused dense backward is GEMM then sum_rows / act_backward, to the bit (shapes that cut
	 * dw by columns and by rows, dx by columns, and a small one that stays whole) */
	int dshapes[][3] = { { 128, 784, 256 }, { 128, 100, 300 }, { 64, 20, 10 } };
	for (int t = 1; t <= 3; t += 2)
		for (int s = 0; s < 3; s++) {
			be->set_threads(t);
			int B = dshapes[s][0], in = dshapes[s][1], out = dshapes[s][2];
			float *g = randv((size_t)B * out, 12), *x = randv((size_t)B * in, 13), *w = randv((size_t)out * in, 14);
			float *y = randv((size_t)B * in, 15);
			float *dw1 = malloc(sizeof(float) * out * in), *dw2 = malloc(sizeof(float) * out * in);
			float *db1 = malloc(sizeof(float) * out), *db2 = malloc(sizeof(float) * out);
			float *dx1 = malloc(sizeof(float) * B * in), *dx2 = malloc(sizeof(float) * B * in);
			be->dense_backward_w(g, x, B, in, out, dw1, db1);
			be->sgemm(1, 0, out, in, B, 1.0f, g, out, x, in, 0.0f, dw2, in);
			be->sum_rows(g, B, out, db2);
			CHECK_MSG(!memcmp(dw1, dw2, sizeof(float) * out * in) && !memcmp(db1, db2, sizeof(float) * out),
			          "dense_backward_w == sgemm + sum_rows, %dx%dx%d, %d threads", B, in, out, t);
			for (int act = DLK_ACT_NONE; act <= DLK_ACT_SIGMOID; act++) {
				be->dense_backward_x(g, w, B, in, out, act, y, dx1);
				be->sgemm(0, 0, B, in, out, 1.0f, g, out, w, in, 0.0f, dx2, in);
				be->act_backward(act, y, dx2, dx2, (size_t)B * in);
				CHECK_MSG(!memcmp(dx1, dx2, sizeof(float) * B * in),
				          "dense_backward_x == sgemm + act_backward %d, %dx%dx%d, %d threads", act, B, in, out, t);
			}
			free(g), free(x), free(w), free(y), free(dw1), free(dw2), free(db1), free(db2), free(dx1), free(dx2);
		}

	/* element-wise kernels: the same bits on 1 and 4 threads */
	size_t n = 100003;
	float *g = randv(n, 8), *p1 = randv(n, 9), *p4 = randv(n, 9), *m1 = calloc(n, 4), *m4 = calloc(n, 4),
	      *v1 = calloc(n, 4), *v4 = calloc(n, 4), *d1 = malloc(4 * n), *d4 = malloc(4 * n);
	float db1[1000], db4[1000];
	for (int t = 1; t <= 4; t += 3) {
		be->set_threads(t);
		float *p = t == 1 ? p1 : p4, *m = t == 1 ? m1 : m4, *v = t == 1 ? v1 : v4, *d = t == 1 ? d1 : d4;
		float *db = t == 1 ? db1 : db4;
		for (int s = 1; s <= 3; s++)
			be->adam_update(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, s & 1, 0.1f * s, 0.03f * s);
		be->sgd_update(p, g, m, n, 0.1f, 0.9f, 1, 0.001f);
		be->act_backward(DLK_ACT_TANH, p, g, d, n);
		be->act_forward(DLK_ACT_SIGMOID, d, d, n);
		be->dropout_forward(d, d, n, 0.3f, 99, 12345);
		be->axpy(n, 0.5f, g, d);
		be->scale(d, n, 1.5f);
		be->sum_rows(d, 100, 1000, db);
	}
	CHECK_MSG(!memcmp(p1, p4, 4 * n) && !memcmp(m1, m4, 4 * n) && !memcmp(v1, v4, 4 * n),
	          "Adam and SGD: the same bits on 1 and 4 threads");
	CHECK_MSG(!memcmp(d1, d4, 4 * n), "activations, dropout, axpy, scale: the same bits on 1 and 4 threads");
	CHECK_MSG(!memcmp(db1, db4, sizeof(db1)), "sum_rows: the same bits on 1 and 4 threads");
	float col0 = 0;
	for (int r = 0; r < 100; r++)
		col0 += d1[(size_t)r * 1000];
	CHECK_MSG(db1[0] == col0, "sum_rows sums a column top to bottom");
	free(g), free(p1), free(p4), free(m1), free(m4), free(v1), free(v4), free(d1), free(d4);

	/* the layout passes of the composed convolutions (im2col, col2im, conv_out, conv_grad_in),
	 * sum_cols and copy_rows, shared out by images (rows): right, and the same bits on 1 and 4
	 * threads (a ragged batch of 37, a strided padded window) */
	{
		int B = 37, C = 5, H = 9, W = 11, K = 3, S = 2, P = 1, OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
		size_t nx = (size_t)B * C * H * W, ncol = (size_t)C * K * K * B * OH * OW, hw = (size_t)OH * OW;
		float *x = randv(nx, 21), *col = randv(ncol, 22), *bias = randv((size_t)C, 23);
		float *out[2][6];
		size_t sizes[6] = { ncol, nx, (size_t)B * C * hw, (size_t)B * C * hw, (size_t)C * K * K, (size_t)B * 40 };
		for (int r = 0; r < 2; r++) {
			be->set_threads(r ? 4 : 1);
			for (int i = 0; i < 6; i++)
				out[r][i] = calloc(sizes[i], sizeof(float));
			be->im2col(x, B, C, H, W, K, S, P, OH, OW, out[r][0]);
			be->col2im(col, B, C, H, W, K, S, P, OH, OW, out[r][1]);
			be->conv_out(col, bias, B, C, (int)hw, DLK_ACT_TANH, out[r][2]);
			be->conv_grad_in(out[r][2], B, C, (int)hw, out[r][3]);
			be->sum_cols(col, C * K * K, B * (int)hw, out[r][4]);
			/* 25 floats of every 30 of x into rows of 40: the 15 between stay zero */
			be->copy_rows(out[r][5], 40 * sizeof(float), x, 30 * sizeof(float), (size_t)B, 25 * sizeof(float));
		}
		for (int i = 0; i < 6; i++)
			CHECK_MSG(!memcmp(out[0][i], out[1][i], sizeof(float) * sizes[i]),
			          "layout pass %d: the same bits on 1 and 4 threads", i);
		int ok_im2col = 1, ok_col2im = 1, ok_out = 1, ok_in = 1, ok_sum = 1, ok_rows = 1;
		double *dx = calloc(nx, sizeof(double));
		for (int ch = 0; ch < C; ch++)
			for (int ki = 0; ki < K; ki++)
				for (int kj = 0; kj < K; kj++)
					for (int b = 0; b < B; b++)
						for (int oy = 0; oy < OH; oy++)
							for (int ox = 0; ox < OW; ox++) {
								int iy = oy * S + ki - P, ix = ox * S + kj - P;
								size_t c = ((size_t)(ch * K + ki) * K + kj) * B * hw + b * hw + (size_t)oy * OW + ox;
								int in = iy >= 0 && iy < H && ix >= 0 && ix < W;
								size_t xi = (((size_t)b * C + ch) * H + (in ? iy : 0)) * W + (in ? ix : 0);
								ok_im2col &= out[0][0][c] == (in ? x[xi] : 0.0f);
								if (in)
									dx[xi] += col[c];
							}
		for (size_t i = 0; i < nx; i++)
			ok_col2im &= fabs(out[0][1][i] - dx[i]) <= 1e-5;
		for (int b = 0; b < B; b++)
			for (int f = 0; f < C; f++)
				for (size_t i = 0; i < hw; i++) {
					float t = col[(size_t)f * B * hw + b * hw + i];
					size_t yi = ((size_t)b * C + f) * hw + i;
					ok_out &= out[0][2][yi] == dlk_k_act(DLK_ACT_TANH, t + bias[f]);
					ok_in &= out[0][3][(size_t)f * B * hw + b * hw + i] == out[0][2][yi];
				}
		for (int r = 0; r < C * K * K; r++) {
			float sum = 0;
			for (size_t c = 0; c < (size_t)B * hw; c++)
				sum += col[(size_t)r * B * hw + c];
			ok_sum &= out[0][4][r] == sum;
		}
		for (int r = 0; r < B; r++)
			for (int i = 0; i < 40; i++)
				ok_rows &= out[0][5][r * 40 + i] == (i < 25 ? x[r * 30 + i] : 0.0f);
		CHECK_MSG(ok_im2col, "im2col: each column holds its window, zero outside the image");
		CHECK_MSG(ok_col2im, "col2im: the sum of the columns' contributions (the adjoint of im2col)");
		CHECK_MSG(ok_out && ok_in, "conv_out: act(t + bias) in [B, F, hw]; conv_grad_in: back to [F, B*hw]");
		CHECK_MSG(ok_sum, "sum_cols: each row summed left to right");
		CHECK_MSG(ok_rows, "copy_rows: each row's bytes, nothing between the rows written");
		/* a copy large enough to be cut into parts, and one within a buffer (they overlap:
		 * memmove's result) */
		be->set_threads(4);
		size_t nc = 3 * 65536 + 5;
		float *a = randv(nc + 7, 24), *c = calloc(nc + 7, sizeof(float)), *m = malloc(sizeof(float) * (nc + 7));
		be->copy(c, a, sizeof(float) * nc);
		CHECK_MSG(!memcmp(c, a, sizeof(float) * nc) && c[nc] == 0.0f, "copy of %zu floats on 4 threads", nc);
		memcpy(m, a, sizeof(float) * (nc + 7));
		memmove(m + 7, m, sizeof(float) * nc);
		be->copy(a + 7, a, sizeof(float) * nc);
		CHECK_MSG(!memcmp(m, a, sizeof(float) * (nc + 7)), "an overlapping copy moves as memmove does");
		free(a), free(c), free(m);
		for (int r = 0; r < 2; r++)
			for (int i = 0; i < 6; i++)
				free(out[r][i]);
		free(x), free(col), free(bias), free(dx);
	}

	/* subnormals are computed as zero on every thread: Adam's first moment of a weight whose
	 * gradient is zero decays by beta1 a step, and once below FLT_MIN (1.18e-38) it is 0, not a
	 * subnormal (the ranges of the 4 threads each hold some); a subnormal input counts as zero */
	{
		be->set_threads(4);
		size_t nz = 65536;
		float *pz = calloc(nz, 4), *gz = calloc(nz, 4), *mz = malloc(4 * nz), *vz = calloc(nz, 4);
		for (size_t i = 0; i < nz; i++)
			mz[i] = 1.5e-38f;
		for (int s = 0; s < 3; s++) /* 1.5e-38 * 0.9^3 = 1.09e-38, a subnormal in IEEE arithmetic */
			be->adam_update(pz, gz, mz, vz, nz, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1.0f, 1.0f);
		size_t left = 0;
		for (size_t i = 0; i < nz; i++)
			left += mz[i] != 0.0f || pz[i] != 0.0f;
		CHECK_MSG(left == 0, "Adam's decaying moments flush to zero below FLT_MIN on 4 threads (%zu left)", left);
		for (size_t i = 0; i < nz; i++)
			mz[i] = 1e-39f; /* a subnormal: 0 once read (DAZ) */
		be->scale(mz, nz, 1.0f);
		left = 0;
		for (size_t i = 0; i < nz; i++)
			left += mz[i] != 0.0f;
		CHECK_MSG(left == 0, "a subnormal input reads as zero on 4 threads (%zu left)", left);
		free(pz), free(gz), free(mz), free(vz);
	}

	/* training steps: the same bits run to run on 2 threads (and with 1, and on 3) */
	for (int t = 1; t <= 3; t++) {
		float *a = train_mlp(be, t, 5), *b = train_mlp(be, t, 5);
		CHECK_MSG(a && b, "the MLP trains on %d threads", t);
		/* 96*192+96 + 64*96+64 + 10*64+10 parameters */
		size_t np = 96 * 192 + 96 + 64 * 96 + 64 + 10 * 64 + 10;
		CHECK_MSG(a && b && !memcmp(a, b, sizeof(float) * np), "5 training steps on %d threads: the same bits twice",
		          t);
		free(a);
		free(b);
	}
	struct dlk_parallel_stats st;
	dlk_parallel_stats(&st);
	CHECK_MSG(st.jobs > 0, "the pool ran jobs (%llu, %llu parts in workers)", st.jobs, st.worker_parts);
	dlk_parallel_shutdown();
	return CHECK_DONE();
}
