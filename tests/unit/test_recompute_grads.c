/* Activation recomputation (training.recompute, dlk_net_set_recompute): a GPT's gradients, with
 * dropout in its blocks, are bit for bit those of the same net keeping every activation, step
 * after step; the activations of a batch take less memory; what cannot be recomputed is not. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#include <stdlib.h>

#include "lib/nn/net.h"

/* three pre-norm blocks with dropout on the attention weights and on the MLP's output */
#define GPT_YAML(extra)                                                        \
	"name: demo\n"                                                        \
	"data: {format: text, train: {source: c.txt}, validation: 0.1}\n"     \
	"model:\n"                                                            \
	"  task: lm\n"                                                        \
	"  input: [12]\n"                                                     \
	"  blocks:\n"                                                         \
	"    b:\n"                                                            \
	"      - layernorm\n"                                                 \
	"      - attention: {heads: 2, dropout: 0.1, name: att}\n"            \
	"      - add: {inputs: [input, att], name: h}\n"                      \
	"      - layernorm\n"                                                 \
	"      - dense: {units: 64}\n"                                        \
	"      - gelu: {approximate: tanh}\n"                                 \
	"      - dense: {units: 16, name: mlp}\n"                             \
	"      - dropout: {rate: 0.2, name: d}\n"                             \
	"      - add: {inputs: [h, d]}\n"                                     \
	"  layers:\n"                                                         \
	"    - embedding: {vocab: 40, dim: 16, positions: 12, name: wte}\n"  \
	"    - {block: b, repeat: 3}\n" extra                                 \
	"    - layernorm\n"                                                   \
	"    - dense: {units: 40, tie: wte}\n"

enum { B = 3, STEPS = 3 };

/* STEPS training forwards and backwards of a fixed batch and output gradient; the gradients of
 * every step one after the other into g (STEPS x n_params); returns the recomputed blocks, -1
 * when the net does not build */
static int run(struct dlk_project *p, int recompute, float *g, double *bytes)
{
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	int n = -1;
	if (dlk_net_build(&net, &p->model, "dlk.yaml", 0, dlk_backend_cpu(), &err) ||
	    dlk_net_init_params(&net, p->model.init, 3, &err))
		goto out;
	n = dlk_net_set_recompute(&net, recompute);
	*bytes = dlk_net_batch_bytes(&net, B);
	if (dlk_net_reserve(&net, B, &err)) {
		n = -1;
		goto out;
	}
	float x[B * 12];
	for (int i = 0; i < B * 12; i++)
		x[i] = (float)((i * 7 + 3) % 40);
	for (int s = 0; s < STEPS; s++) {
		dlk_net_forward(&net, x, B, 1);
		float *og = dlk_net_out_grad(&net);
		for (int i = 0; i < B * 12 * 40; i++)
			og[i] = (float)((i * 13 + s) % 17) / 17.0f - 0.5f;
		dlk_net_backward_grad(&net, B);
		memcpy(g + (size_t)s * net.n_params, net.grads, sizeof(float) * net.n_params);
	}
out:
	CHECK_MSG(n >= 0, "the GPT builds (%s)", err.msg);
	dlk_net_release(&net);
	return n;
}

static void test_same_gradients(void)
{
	struct dlk_project *p = load(GPT_YAML(""));
	CHECK_MSG(p != NULL, "the GPT loads (%s)", spec_test_err.msg);
	if (!p)
		return;
	struct dlk_net probe = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	if (dlk_net_build(&probe, &p->model, "dlk.yaml", 0, dlk_backend_cpu(), &err)) {
		CHECK_MSG(0, "builds: %s", err.msg);
		project_free(p);
		return;
	}
	size_t np = probe.n_params;
	dlk_net_release(&probe);
	float *g0 = calloc(STEPS * np, sizeof(float)), *g1 = calloc(STEPS * np, sizeof(float));
	double kept = 0, shared = 0;
	int n0 = run(p, 0, g0, &kept), n1 = run(p, 1, g1, &shared);
	CHECK_MSG(n0 == 0 && n1 == 3, "the three repetitions of the block are recomputed (%d, %d)", n0, n1);
	CHECK_MSG(!memcmp(g0, g1, sizeof(float) * STEPS * np),
	          "every gradient of %d steps (dropout on) is bit for bit the one without recomputation", STEPS);
	size_t nz = 0;
	for (size_t i = 0; i < STEPS * np; i++)
		nz += g0[i] != 0.0f;
	CHECK_MSG(nz > np, "the gradients are not zero (%zu of %zu values)", nz, STEPS * np);
	CHECK_MSG(shared < 0.7 * kept, "the activations of a batch: %.0f bytes recomputing, %.0f kept", shared, kept);
	free(g0);
	free(g1);
	project_free(p);
}

/* batch norm's forward updates its running statistics: a block holding one is kept whole; a
 * model without blocks has nothing to recompute */
static void test_not_recomputed(void)
{
	static const char bn[] = "name: demo\n"
	                         "data: {train: {images: /d/a.gz, labels: /d/b.gz}}\n"
	                         "model:\n"
	                         "  input: [8]\n"
	                         "  blocks:\n"
	                         "    r:\n"
	                         "      - dense: {units: 8}\n"
	                         "      - batchnorm: {name: bn}\n"
	                         "      - add: {inputs: [input, bn]}\n"
	                         "  layers:\n"
	                         "    - {block: r, repeat: 2}\n"
	                         "    - dense: {units: 4}\n";
	const char *const yamls[] = { bn, MINIMAL };
	for (int k = 0; k < 2; k++) {
		struct dlk_project *p = load(yamls[k]);
		struct dlk_net net = DLK_NET_INIT;
		struct dlk_err err = DLK_ERR_INIT;
		CHECK_MSG(p && !dlk_net_build(&net, &p->model, "dlk.yaml", 0, dlk_backend_cpu(), &err),
		          "model %d builds (%s%s)", k, spec_test_err.msg, err.msg);
		if (p && net.layers)
			CHECK_MSG(dlk_net_set_recompute(&net, 1) == 0, "model %d: nothing recomputed", k);
		dlk_net_release(&net);
		project_free(p);
	}
}

int main(void)
{
	test_same_gradients();
	test_not_recomputed();
	return CHECK_DONE();
}
