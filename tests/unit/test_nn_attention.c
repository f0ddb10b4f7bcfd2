/* The layers of a transformer over a sequence [1, T, D]: dense over the last axis (nn.Linear on
 * each position), learned position embeddings, multi-head self-attention. Gradients of every
 * parameter against central differences; outputs against a direct computation. */
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"
#include "tests/unit/nn_check.h"

static const struct dlk_backend *be;

/* dense over the last axis: [1, T, D] -> [1, T, units], each position x_t W^T + b */
static void test_dense_sequence(void)
{
	struct dlk_layer_spec ls[] = {
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_DENSE, .units = 5 },
		{ .kind = DLK_LAYER_RELU }, /* fused into the dense before it, and folded into the next's backward */
		{ .kind = DLK_LAYER_DENSE, .units = 3 },
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_net net = DLK_NET_INIT;
	int batch = 2, T = 3, D = 6;
	if (!nn_build(&net, be, 1, T, D, ls, 6, batch, "layernorm, dense over positions"))
		return;
	const struct dlk_layer *A = &net.layers[1], *B = &net.layers[3];
	CHECK_MSG(A->out[0] == 1 && A->out[1] == T && A->out[2] == 5 && A->n_w == 30 && A->n_b == 5,
	          "dense on [1, 3, 6]: output [1, 3, 5], weight [5, 6] and bias [5] (got [%d, %d, %d])", A->out[0],
	          A->out[1], A->out[2]);
	CHECK_MSG(B->out[1] == T && B->out[2] == 3 && net.layers[5].in[2] == 9, "the second: [1, 3, 3], flattened to 9");
	float x[2 * 3 * 6];
	int32_t y[2] = { 1, 3 };
	fill_uniform(x, sizeof(x) / sizeof(x[0]), 3, -2.0f, 2.0f);
	fill_uniform(net.params, net.n_params, 5, -0.5f, 0.5f);
	/* the output of the first dense (after relu) against a direct per-position computation */
	dlk_net_forward(&net, x, batch, 0);
	const float *ln = net.layers[0].y, *W = net.params + A->w_off, *b = net.params + A->b_off;
	double worst = 0;
	for (int r = 0; r < batch * T; r++)
		for (int u = 0; u < 5; u++) {
			double s = b[u];
			for (int k = 0; k < D; k++)
				s += (double)ln[r * D + k] * W[u * D + k];
			s = s > 0 ? s : 0;
			worst = fmax(worst, fabs(s - A->y[r * 5 + u]));
		}
	CHECK_MSG(worst < 1e-5, "dense over positions = x_t W^T + b at each of batch*T rows (off by %g)", worst);
	grad_check_smooth(&net, x, y, batch, "dense over positions");
	dlk_net_release(&net);

	/* more than one channel is not a sequence: refused with the way out */
	struct dlk_layer_spec bad[] = { { .kind = DLK_LAYER_DENSE, .units = 3 } };
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = { .input = { 2, 3, 4 }, .input_rank = 3, .layers = bad, .n_layers = 1, .init = "torch" };
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "expects a flat input or a sequence [1, T, D] but gets");
}

/* attention's output from x [T, D] and the layer's parameters, directly in double: the full
 * T x T weights per head, the mask, the rotation (pos0 = 0) */
static void attention_ref(const float *x, const float *W, const float *bias, int T, int D, int heads, int causal,
                          int rotary, const float *ids, int pad_id, double *y)
{
	int hd = D / heads;
	double *qkv = calloc((size_t)T * 3 * D, sizeof(double)), *a = calloc((size_t)T * D, sizeof(double));
	double *w = calloc((size_t)T, sizeof(double));
	for (int t = 0; t < T; t++)
		for (int o = 0; o < 3 * D; o++) {
			double v = bias[o];
			for (int k = 0; k < D; k++)
				v += (double)x[t * D + k] * W[(size_t)o * D + k];
			qkv[(size_t)t * 3 * D + o] = v;
		}
	if (rotary)
		for (int t = 0; t < T; t++)
			for (int p = 0; p < 2 * heads; p++)
				for (int k = 0; k < hd / 2; k++) {
					double *v = qkv + (size_t)t * 3 * D + (size_t)p * hd, th = t * pow(10000.0, -2.0 * k / hd);
					double x1 = v[k], x2 = v[k + hd / 2];
					v[k] = x1 * cos(th) - x2 * sin(th);
					v[k + hd / 2] = x2 * cos(th) + x1 * sin(th);
				}
	for (int h = 0; h < heads; h++)
		for (int i = 0; i < T; i++) {
			double mx = -INFINITY, sum = 0;
			for (int j = 0; j < T; j++) {
				int masked = (causal && j > i) || (ids && pad_id >= 0 && ids[j] == pad_id);
				double l = -INFINITY;
				if (!masked) {
					l = 0;
					for (int d = 0; d < hd; d++)
						l += qkv[(size_t)i * 3 * D + h * hd + d] * qkv[(size_t)j * 3 * D + D + h * hd + d];
					l /= sqrt((double)hd);
				}
				w[j] = l;
				mx = l > mx ? l : mx;
			}
			for (int j = 0; j < T; j++)
				sum += (w[j] = mx == -INFINITY ? 0 : exp(w[j] - mx));
			for (int d = 0; d < hd; d++) {
				double v = 0;
				for (int j = 0; j < T; j++)
					v += w[j] * qkv[(size_t)j * 3 * D + 2 * D + h * hd + d];
				a[(size_t)i * D + h * hd + d] = sum > 0 ? v / sum : 0;
			}
		}
	for (int t = 0; t < T; t++)
		for (int o = 0; o < D; o++) {
			double v = bias[3 * D + o];
			for (int k = 0; k < D; k++)
				v += a[(size_t)t * D + k] * W[(size_t)(3 * D + o) * D + k];
			y[(size_t)t * D + o] = v;
		}
	free(qkv);
	free(a);
	free(w);
}

#define ATT(h, c, r, pad, drop) { .kind = DLK_LAYER_ATTENTION, .heads = h, .causal = c, .rotary = r, .pad_id = pad, .rate = drop }

/* ids -> embedding (with positions) -> attention -> flatten -> dense: the attention's output
 * against attention_ref, then every gradient (the embedding's take the attention's input
 * gradient) against finite differences */
static void check_attention(int T, int D, int heads, int causal, int rotary, int pad_id, float drop, const char *what)
{
	struct dlk_layer_spec ls[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 7, .dim = D, .positions = T + 2 },
		ATT(heads, causal, rotary, pad_id, drop),
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 3 },
	};
	struct dlk_net net = DLK_NET_INIT;
	int batch = 2;
	if (!nn_build(&net, be, 1, 1, T, ls, 4, batch, what))
		return;
	float *x = malloc(sizeof(float) * (size_t)batch * T);
	int32_t y[2] = { 0, 2 };
	for (int i = 0; i < batch * T; i++)
		x[i] = (float)((i * 5 + 1) % 7);
	if (pad_id >= 0) /* the last two positions of the first sample and the first of the second are padding */
		x[T - 1] = x[T - 2 >= 0 ? T - 2 : 0] = x[T] = (float)pad_id;
	fill_uniform(net.params, net.n_params, 11, -0.6f, 0.6f);
	const struct dlk_layer *A = &net.layers[1];
	if (!drop) {
		dlk_net_forward(&net, x, batch, 0);
		double *ref = malloc(sizeof(double) * (size_t)T * D), worst = 0;
		for (int b = 0; b < batch; b++) {
			attention_ref(net.layers[0].y + (size_t)b * T * D, net.params + A->w_off, net.params + A->b_off, T, D, heads,
			              causal, rotary, x + (size_t)b * T, pad_id, ref);
			for (int k = 0; k < T * D; k++)
				worst = fmax(worst, fabs(ref[k] - A->y[(size_t)b * T * D + k]) / (1 + fabs(ref[k])));
		}
		CHECK_MSG(worst < 2e-5, "%s: the blocked forward = the direct T x T computation within 2e-5 (off by %g)", what,
		          worst);
		free(ref);
	}
	grad_check_smooth(&net, x, y, batch, what);
	free(x);
	dlk_net_release(&net);
}

/* forward and backward at 1 and at 3 threads: the same bits */
static void check_threads(void)
{
	int T = 70, D = 8, batch = 3; /* two query and key blocks, the second partial */
	struct dlk_layer_spec ls[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 9, .dim = D, .positions = T },
		ATT(2, 1, 1, 0, 0.1f),
		{ .kind = DLK_LAYER_FLATTEN },
		{ .kind = DLK_LAYER_DENSE, .units = 3 },
	};
	float *out[2], *grads[2];
	float *x = malloc(sizeof(float) * (size_t)batch * T);
	int32_t y[3] = { 0, 1, 2 };
	for (int i = 0; i < batch * T; i++)
		x[i] = (float)((i * 7 + 3) % 9);
	for (int run = 0; run < 2; run++) {
		struct dlk_net net = DLK_NET_INIT;
		be->set_threads(run ? 3 : 1);
		out[run] = grads[run] = NULL;
		if (!nn_build(&net, be, 1, 1, T, ls, 4, batch, "threads"))
			continue;
		net.dropout_counter = 0;
		dlk_net_forward(&net, x, batch, 1);
		dlk_net_backward(&net, y, batch);
		out[run] = malloc(sizeof(float) * (size_t)batch * T * D);
		memcpy(out[run], net.layers[1].y, sizeof(float) * (size_t)batch * T * D);
		grads[run] = malloc(sizeof(float) * net.n_params);
		memcpy(grads[run], net.grads, sizeof(float) * net.n_params);
		if (run)
			CHECK_MSG(!memcmp(out[0], out[1], sizeof(float) * (size_t)batch * T * D) &&
			                  !memcmp(grads[0], grads[1], sizeof(float) * net.n_params),
			          "attention (T 70, causal, rotary, padding, dropout): the same bits at 1 and 3 threads");
		dlk_net_release(&net);
	}
	be->set_threads(1);
	for (int run = 0; run < 2; run++)
		free(out[run]), free(grads[run]);
	free(x);
}

static void test_attention(void)
{
	check_attention(5, 8, 2, 1, 0, -1, 0, "causal, 2 heads");
	check_attention(5, 8, 2, 0, 0, -1, 0, "bidirectional");
	check_attention(6, 8, 2, 0, 0, 0, 0, "bidirectional with padding (pad_id 0)");
	check_attention(6, 8, 2, 1, 1, -1, 0, "causal, rotary");
	check_attention(6, 12, 3, 0, 1, 0, 0, "rotary, padding, 3 heads");
	check_attention(1, 4, 1, 1, 0, -1, 0, "T = 1");
	check_attention(5, 8, 2, 1, 0, -1, 0.3f, "causal, dropout 0.3 on the weights");
	check_attention(67, 4, 1, 1, 1, -1, 0, "T = 67: a full block and a partial one");
	check_threads();
}

static void test_attention_errors(void)
{
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_layer_spec a[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 5, .dim = 6 }, ATT(4, 1, 0, -1, 0) };
	struct dlk_model m = { .input = { 1, 1, 3 }, .input_rank = 1, .layers = a, .n_layers = 2, .init = "torch" };
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) == -1);
	CHECK_CONTAINS(err.msg, "model.layers[1] (attention): heads (4) must divide the width D = 6");
	struct dlk_layer_spec r[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 5, .dim = 6 }, ATT(2, 1, 1, -1, 0) };
	struct dlk_err e2 = DLK_ERR_INIT;
	m.layers = r;
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &e2) == -1);
	CHECK_CONTAINS(e2.msg, "rotary needs an even head width, not 3");
	struct dlk_layer_spec p[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 5, .dim = 6, .positions = 2 } };
	struct dlk_err e3 = DLK_ERR_INIT;
	m.layers = p;
	m.n_layers = 1;
	CHECK(dlk_net_build(&net, &m, "dlk.yaml", 0, be, &e3) == -1);
	CHECK_CONTAINS(e3.msg, "positions (2) must cover the 3 ids of a sample");
}

int main(void)
{
	be = dlk_backend_cpu();
	test_dense_sequence();
	test_attention();
	test_attention_errors();
	return CHECK_DONE();
}
