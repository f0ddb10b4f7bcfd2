/* GPT-2's initialisation (model.init: gpt2, the default of a model with attention) and
 * nanoGPT's weight-decay groups, on a GPT written in dlk.yaml: the spread of each tensor, the
 * residual branches' scaled projections, and the ranges weight decay leaves alone. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#include <math.h>
#include <stdlib.h>

#include "lib/nn/net.h"

/* two pre-norm blocks (four residual branches) of width 32, a tied head */
#define GPT_YAML(extra)                                                        \
	"name: demo\n"                                                        \
	"data: {format: text, train: {source: c.txt}, validation: 0.1}\n"     \
	"model:\n"                                                            \
	"  task: lm\n"                                                        \
	"  input: [16]\n" extra                                               \
	"  blocks:\n"                                                         \
	"    b:\n"                                                            \
	"      - layernorm\n"                                                 \
	"      - attention: {heads: 4, name: att}\n"                          \
	"      - add: {inputs: [input, att], name: h}\n"                      \
	"      - layernorm\n"                                                 \
	"      - dense: {units: 128}\n"                                       \
	"      - gelu: {approximate: tanh}\n"                                 \
	"      - dense: {units: 32, name: mlp}\n"                             \
	"      - dropout: {rate: 0.1, name: d}\n"                             \
	"      - add: {inputs: [h, d]}\n"                                     \
	"  layers:\n"                                                         \
	"    - embedding: {vocab: 64, dim: 32, positions: 16, name: wte}\n"  \
	"    - {block: b, repeat: 2}\n"                                       \
	"    - layernorm\n"                                                   \
	"    - dense: {units: 64, tie: wte}\n"

static double sd(const float *v, size_t n)
{
	double s = 0, s2 = 0;
	for (size_t i = 0; i < n; i++)
		s += v[i], s2 += (double)v[i] * v[i];
	return sqrt(s2 / (double)n - (s / (double)n) * (s / (double)n));
}

static int all(const float *v, size_t n, float x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != x)
			return 0;
	return 1;
}

static int near(double got, double want) { return fabs(got - want) < 0.1 * want; }

static void test_default(void)
{
	struct dlk_project *p = load(GPT_YAML(""));
	CHECK_MSG(p && !strcmp(p->model.init, "gpt2"), "a model with attention starts as GPT-2 (%s)",
	          p ? p->model.init : spec_test_err.msg);
	project_free(p);
	p = load(GPT_YAML("  init: torch\n"));
	CHECK_MSG(p && !strcmp(p->model.init, "torch"), "model.init: torch is kept");
	project_free(p);
	p = load(MINIMAL);
	CHECK_MSG(p && !strcmp(p->model.init, "torch"), "a model without attention starts as PyTorch's modules");
	project_free(p);
	CHECK_CONTAINS(load_msg(GPT_YAML("  init: gpt3\n")), "model.init");
}

static void test_init_and_decay(void)
{
	struct dlk_project *p = load(GPT_YAML(""));
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK_MSG(p != NULL, "the GPT loads (%s)", spec_test_err.msg);
	if (!p)
		return;
	int built = !dlk_net_build(&net, &p->model, "dlk.yaml", 0, dlk_backend_cpu(), &err) &&
	            !dlk_net_init_params(&net, p->model.init, 7, &err);
	CHECK_MSG(built, "it builds and initialises (%s)", err.msg);
	if (!built)
		goto out;
	const float *P = net.params;
	double resid = 0.02 / sqrt(4.0); /* 2 blocks: 4 residual branches */
	int att = 0, dense = 0, ln = 0;
	for (int i = 0; i < net.n_layers; i++) {
		const struct dlk_layer *L = &net.layers[i];
		const float *w = P + L->w_off, *b = P + L->b_off;
		switch (L->spec.kind) {
		case DLK_LAYER_EMBEDDING:
			CHECK_MSG(near(sd(w, L->n_w), 0.02) && near(sd(b, L->n_b), 0.02),
			          "wte and wpe are N(0, 0.02^2): sd %.4f and %.4f", sd(w, L->n_w), sd(b, L->n_b));
			break;
		case DLK_LAYER_ATTENTION:
			att++;
			CHECK_MSG(near(sd(w, 3 * 32 * 32), 0.02), "c_attn is N(0, 0.02^2): sd %.4f", sd(w, 3 * 32 * 32));
			CHECK_MSG(near(sd(w + 3 * 32 * 32, 32 * 32), resid), "c_proj, a residual branch's end, is N(0, %.4f^2): "
			          "sd %.4f", resid, sd(w + 3 * 32 * 32, 32 * 32));
			CHECK_MSG(all(b, L->n_b, 0.0f), "attention's biases are 0");
			break;
		case DLK_LAYER_DENSE:
			if (!L->n_w)
				break; /* the tied head */
			dense++;
			CHECK_MSG(near(sd(w, L->n_w), L->spec.units == 32 ? resid : 0.02),
			          "dense %d (%d units): sd %.4f (the MLP's c_proj, read by the add through dropout, scaled)",
			          i, L->spec.units, sd(w, L->n_w));
			CHECK_MSG(all(b, L->n_b, 0.0f), "dense biases are 0");
			break;
		case DLK_LAYER_LAYERNORM:
			ln++;
			CHECK_MSG(all(w, L->n_w, 1.0f) && all(b, L->n_b, 0.0f), "layer norm starts at 1 and 0");
			break;
		default:
			break;
		}
	}
	CHECK_MSG(att == 2 && dense == 4 && ln == 5, "every layer seen (%d attention, %d dense, %d layer norms)", att,
	          dense, ln);

	/* decay: every matrix and table (wte and wpe included); not biases nor layer norms */
	char *decayed = calloc(net.n_params, 1);
	size_t *ranges = calloc(6 * (size_t)net.n_layers + 2, sizeof(size_t));
	int n = dlk_net_no_decay_ranges(&net, 0, ranges);
	memset(decayed, 1, net.n_params);
	for (int k = 0; k < n; k++) {
		CHECK_MSG(k == 0 || ranges[2 * k] > ranges[2 * k - 2] + ranges[2 * k - 1], "ranges sorted and merged");
		memset(decayed + ranges[2 * k], 0, ranges[2 * k + 1]);
	}
	int ok = 1;
	for (int i = 0; i < net.n_layers; i++) {
		const struct dlk_layer *L = &net.layers[i];
		int w_decays = L->spec.kind != DLK_LAYER_LAYERNORM, b_decays = L->spec.kind == DLK_LAYER_EMBEDDING;
		for (size_t j = 0; j < L->n_w; j++)
			ok &= decayed[L->w_off + j] == w_decays;
		for (size_t j = 0; j < L->n_b; j++)
			ok &= decayed[L->b_off + j] == b_decays;
	}
	CHECK_MSG(ok, "weight decay on wte, wpe, the attention and MLP matrices; not on biases nor layer norms");
	CHECK_MSG(dlk_net_no_decay_ranges(&net, 1, ranges) == 0, "decay_norms_and_biases: nothing left alone");
	free(ranges);
	free(decayed);
out:
	dlk_net_release(&net);
	project_free(p);
}

int main(void)
{
	test_default();
	test_init_and_decay();
	return CHECK_DONE();
}
