/* A transformer described in dlk.yaml: the loader's fields for attention and learned positions
 * (defaults, ranges, errors naming the line), the engine building it, and a bundle that keeps
 * every option and gives the same outputs when read back. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/nn/net.h"
#include "lib/train/bundle.h"

#define GPT_YAML(att)                                                                      \
	"name: demo\n"                                                                    \
	"data: {train: {images: /d/a.gz, labels: /d/b.gz}}\n"                            \
	"model:\n"                                                                        \
	"  input: [8]\n"                                                                  \
	"  layers:\n"                                                                     \
	"    - embedding: {vocab: 20, dim: 16, positions: 8, name: emb}\n"               \
	"    - layernorm\n"                                                               \
	"    - attention: " att "\n"                                                      \
	"    - add: {inputs: [emb, att]}\n"                                               \
	"    - flatten\n"                                                                 \
	"    - dense: {units: 10}\n"

static void test_load(void)
{
	struct dlk_project *p = load(GPT_YAML("{heads: 4, name: att}"));
	CHECK_MSG(p != NULL, "a GPT block loads (%s)", spec_test_err.msg);
	if (!p)
		return;
	const struct dlk_layer_spec *e = &p->model.layers[0], *a = &p->model.layers[2];
	CHECK(e->kind == DLK_LAYER_EMBEDDING && e->positions == 8 && e->dim == 16);
	CHECK_MSG(a->kind == DLK_LAYER_ATTENTION && a->heads == 4 && a->causal == 1 && a->rotary == 0 && a->pad_id == -1 &&
	                  a->rate == 0.0f,
	          "attention's defaults: causal, no rotary, no padding, no dropout");
	project_free(p);
	p = load(GPT_YAML("{heads: 2, causal: false, rotary: true, pad_id: 0, dropout: 0.1, name: att}"));
	CHECK_MSG(p != NULL, "every option loads (%s)", spec_test_err.msg);
	if (p) {
		a = &p->model.layers[2];
		CHECK(a->heads == 2 && a->causal == 0 && a->rotary == 1 && a->pad_id == 0 && fabsf(a->rate - 0.1f) < 1e-7f);
		project_free(p);
	}
	CHECK_CONTAINS(load_msg(GPT_YAML("{name: att}")), "dlk.yaml:8");
	CHECK_CONTAINS(load_msg(GPT_YAML("{name: att}")), "heads");
	CHECK_CONTAINS(load_msg(GPT_YAML("{heads: 2, dropout: 1, name: att}")), "dropout");
	CHECK_CONTAINS(load_msg(GPT_YAML("{heads: 2, pad_id: -2, name: att}")), "pad_id");
	/* shapes the file alone decides fail the load, as the engine would */
	CHECK_STR(load_msg(GPT_YAML("{heads: 5, name: att}")),
	          "dlk.yaml:8:7: model.layers[2]: heads (5) must divide the width D = 16");
	CHECK_STR(load_msg(GPT_YAML("{heads: 16, rotary: true, name: att}")),
	          "dlk.yaml:8:7: model.layers[2]: heads (16) must divide the width D = 16 into an even head width (rotary)");
}

/* the engine builds the loaded model; a bundle keeps causal, rotary, pad_id, dropout and
 * positions, and the net it gives computes the same bits */
static void test_bundle(void)
{
	const struct dlk_backend *be = dlk_backend_cpu();
	struct dlk_project *p = load(GPT_YAML("{heads: 2, causal: false, rotary: true, pad_id: 3, dropout: 0.25, name: att}"));
	struct dlk_net net = DLK_NET_INIT, back = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	char dir[512], path[600];
	snprintf(dir, sizeof(dir), "%s/dlk-attn-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!p || !mkdtemp(dir)) {
		CHECK_MSG(0, "loads and makes a scratch directory");
		return;
	}
	snprintf(path, sizeof(path), "%s/m.dlk", dir);
	int ok = dlk_net_build(&net, &p->model, "dlk.yaml", 10, be, &err) == 0 &&
	         dlk_net_init_params(&net, "torch", 5, &err) == 0 && dlk_net_reserve(&net, 2, &err) == 0;
	CHECK_MSG(ok, "the engine builds it (%s)", err.msg);
	CHECK_MSG(net.layers[0].n_b == 8 * 16 && net.layers[2].n_w == 4 * 16 * 16 && net.layers[2].n_b == 4 * 16,
	          "positions [8, 16] as the embedding's bias; attention weight [64, 16], bias [64]");
	struct dlk_bundle_info info = { .name = "demo", .model = &p->model, .net = &net };
	ok = ok && dlk_bundle_write(path, &info, &err) == 0;
	CHECK_MSG(ok, "writes the bundle (%s)", err.msg);
	ok = ok && dlk_bundle_read(path, &b, &err) == 0;
	CHECK_MSG(ok, "reads it back (%s)", err.msg);
	if (ok) {
		const struct dlk_layer_spec *a = &b.model.layers[2];
		CHECK_MSG(a->kind == DLK_LAYER_ATTENTION && a->heads == 2 && !a->causal && a->rotary && a->pad_id == 3 &&
		                  a->rate == 0.25f && b.model.layers[0].positions == 8,
		          "model.json keeps heads, causal, rotary, pad_id, dropout and positions");
		ok = dlk_bundle_net(&b, be, &back, &err) == 0 && dlk_net_reserve(&back, 2, &err) == 0;
		CHECK_MSG(ok, "builds the bundle's net (%s)", err.msg);
	}
	if (ok) {
		float x[16];
		for (int i = 0; i < 16; i++)
			x[i] = (float)((i * 3) % 20);
		x[5] = 3.0f; /* a padding key */
		float y0[20];
		memcpy(y0, dlk_net_forward(&net, x, 2, 0), sizeof(y0));
		CHECK_MSG(!memcmp(y0, dlk_net_forward(&back, x, 2, 0), sizeof(y0)), "the same logits, bit for bit");
	}
	dlk_bundle_release(&b);
	dlk_net_release(&net);
	dlk_net_release(&back);
	project_free(p);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_load();
	test_bundle();
	return CHECK_DONE();
}
