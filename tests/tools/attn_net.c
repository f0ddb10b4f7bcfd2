/* Small networks with attention on the CPU reference, for the PyTorch parity test
 * (tests/shell/t2000-attention-torch.sh):
 *   attn_net OUTDIR
 * For each case NAME it writes OUTDIR/NAME_x.f32 (the input), NAME_params.f32 (every parameter,
 * the net's flat layout: layer order, weight then bias), NAME_y.f32 (the output [batch, T, D]),
 * NAME_dy.f32 (the output's gradient it was given) and NAME_grads.f32 (every parameter's
 * gradient), raw float32 in this machine's byte order; the shapes are the ones below, which the
 * test repeats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nn/net.h"
#include "lib/util/rng.h"

static int failed;

static void put(const char *dir, const char *name, const char *what, const float *p, size_t n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s_%s.f32", dir, name, what);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, sizeof(float), n, f) != n || fclose(f)) {
		fprintf(stderr, "attn_net: cannot write '%s'\n", path);
		failed = 1;
	}
}

static void fill(float *p, size_t n, uint64_t seed, float scale)
{
	struct dlk_rng r;
	dlk_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		p[i] = scale * (2 * dlk_rng_uniform(&r) - 1);
}

/* builds the model, fills parameters and input (ids: integers below vocab, with pad where
 * asked), runs a forward and a backward of dy, writes everything */
static void run(const char *dir, const char *name, struct dlk_layer_spec *ls, int n, int in_w, int batch, int vocab,
                int pad_at)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_model m = { .input = { 1, 1, in_w }, .input_rank = 1, .layers = ls, .n_layers = n, .init = "torch",
		               .task = DLK_TASK_IMAGE, .loss = DLK_LOSS_MSE };
	if (vocab == 0) { /* a float sequence [1, T, D]: T = in_w / 8 positions of 8 */
		m.input[1] = in_w / 8;
		m.input[2] = 8;
		m.input_rank = 3;
	}
	if (dlk_net_build(&net, &m, "dlk.yaml", 0, be, &err) || dlk_net_init_params(&net, "torch", 3, &err) ||
	    dlk_net_reserve(&net, batch, &err)) {
		fprintf(stderr, "attn_net: %s: %s\n", name, err.msg);
		failed = 1;
		return;
	}
	size_t nx = (size_t)batch * net.input_size, ny = (size_t)batch * (size_t)net.n_classes;
	float *x = malloc(sizeof(float) * nx), *dy = malloc(sizeof(float) * ny);
	fill(net.params, net.n_params, 17, 0.5f);
	fill(x, nx, 19, 1.0f);
	if (vocab)
		for (size_t i = 0; i < nx; i++)
			x[i] = (float)((i * 7 + 2) % (size_t)vocab);
	if (pad_at >= 0) { /* padding: the first sample's last positions from pad_at on, and the second's first */
		for (size_t i = 0; i < nx; i++) {
			if ((i < net.input_size && (int)i >= pad_at) || i == net.input_size)
				x[i] = 0.0f;
			else if (x[i] == 0.0f)
				x[i] = 1.0f;
		}
	}
	fill(dy, ny, 23, 1.0f);
	const float *y = dlk_net_forward(&net, x, batch, 1);
	memcpy(dlk_net_out_grad(&net), dy, sizeof(float) * ny);
	put(dir, name, "y", y, ny);
	dlk_net_backward_grad(&net, batch);
	put(dir, name, "x", x, nx);
	put(dir, name, "params", net.params, net.n_params);
	put(dir, name, "dy", dy, ny);
	put(dir, name, "grads", net.grads, net.n_params);
	free(x);
	free(dy);
	dlk_net_release(&net);
}

#define ATT(h, c, r, pad) { .kind = DLK_LAYER_ATTENTION, .heads = h, .causal = c, .rotary = r, .pad_id = pad }

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: attn_net OUTDIR\n");
		return 2;
	}
	const char *dir = argv[1];
	/* x [2, 70, 8] -> dense 8 (the input gradient of attention reaches its weights) -> attention */
	struct dlk_layer_spec causal[] = { { .kind = DLK_LAYER_DENSE, .units = 8 }, ATT(2, 1, 0, -1) };
	run(dir, "causal", causal, 2, 70 * 8, 2, 0, -1);
	struct dlk_layer_spec rotary[] = { { .kind = DLK_LAYER_DENSE, .units = 8 }, ATT(2, 1, 1, -1) };
	run(dir, "rotary", rotary, 2, 20 * 8, 2, 0, -1);
	/* ids [2, 12] -> embedding 16 with positions 16 -> bidirectional attention, 4 heads, pad id 0 */
	struct dlk_layer_spec pad[] = { { .kind = DLK_LAYER_EMBEDDING, .vocab = 11, .dim = 16, .positions = 16 },
		                        ATT(4, 0, 0, 0) };
	run(dir, "padding", pad, 2, 12, 2, 11, 9);
	/* a pre-norm GPT-2 block: h = emb + attn(ln1(emb)); out = h + fc2(gelu(fc1(ln2(h)))) */
	struct dlk_layer_spec gpt[] = {
		{ .kind = DLK_LAYER_EMBEDDING, .vocab = 11, .dim = 16, .positions = 10 },
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		ATT(4, 1, 0, -1),
		{ .kind = DLK_LAYER_ADD, .n_inputs = 2, .inputs = { 0, 2 } },
		{ .kind = DLK_LAYER_LAYERNORM, .eps = 1e-5f },
		{ .kind = DLK_LAYER_DENSE, .units = 64 },
		{ .kind = DLK_LAYER_GELU, .approximate = DLK_GELU_TANH },
		{ .kind = DLK_LAYER_DENSE, .units = 16 },
		{ .kind = DLK_LAYER_ADD, .n_inputs = 2, .inputs = { 3, 7 } },
	};
	run(dir, "gpt", gpt, 9, 10, 3, 11, -1);
	return failed;
}
