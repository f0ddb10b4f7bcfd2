/* Weight tying (dense: {units: V, tie: NAME}): the head's weight is the embedding's table, one
 * copy in the flat parameters; the table's gradient is the sum of both uses (finite differences
 * through the loss), and the gradient-ready hook hears of the table once, after both uses wrote
 * it; the loader resolves the name and refuses what cannot be tied; a bundle keeps one table and
 * gives back the same logits. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/data/bpe.h"
#include "lib/nn/loss.h"
#include "lib/nn/net.h"
#include "lib/train/bundle.h"
#include "lib/util/mem.h"

#define TIED_YAML(head)                                                                   \
	"name: demo\n"                                                                    \
	"data: {format: text, train: {source: c.txt}}\n"                                  \
	"model:\n"                                                                        \
	"  task: lm\n"                                                                    \
	"  input: [3]\n"                                                                  \
	"  layers:\n"                                                                     \
	"    - embedding: {vocab: 7, dim: 4, name: wte}\n"                                \
	"    - gelu\n"                                                                    \
	"    - " head "\n"

/* what the hook heard: each call's range, and the gradients at the time of the table's call */
static struct {
	int calls;
	size_t off[8], n[8];
	float *table_then;
} heard;

static void hook(void *ctx, float *grads, size_t n_params, size_t off, size_t n)
{
	(void)ctx, (void)n_params;
	if (heard.calls < 8) {
		heard.off[heard.calls] = off;
		heard.n[heard.calls] = n;
	}
	heard.calls++;
	if (n && !heard.table_then) {
		heard.table_then = xmalloc(sizeof(float) * n);
		memcpy(heard.table_then, grads + off, sizeof(float) * n);
	}
}

static void test_tied_gradients(void)
{
	enum { B = 2, T = 3, V = 7, D = 4 };
	struct dlk_project *p = load(TIED_YAML("dense: {units: 7, tie: wte}"));
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_loss_spec ls = { DLK_LOSS_TOKEN_CE, 0 };
	CHECK_MSG(p != NULL, "a tied head loads (%s)", spec_test_err.msg);
	if (!p)
		return;
	CHECK(p->model.layers[2].tie == 1);
	int ok = dlk_net_build(&net, &p->model, "dlk.yaml", 0, dlk_backend_cpu(), &err) == 0 &&
	         dlk_net_init_params(&net, "torch", 9, &err) == 0 && dlk_net_reserve(&net, B, &err) == 0;
	CHECK_MSG(ok, "the engine builds it (%s)", err.msg);
	if (!ok)
		goto out;
	CHECK_MSG(net.n_params == V * D && net.layers[2].n_w == 0 && net.layers[2].n_b == 0,
	          "one copy: the table's %d floats are every parameter (%zu)", V * D, net.n_params);
	float x[B * T] = { 1, 3, 5, 6, 0, 3 }, tg[B * T] = { 3, 5, 2, 0, 3, -1 };
	/* the logits are gelu(table[x]) . table^T */
	const float *y = dlk_net_forward(&net, x, B, 0);
	double want = 0;
	for (int d = 0; d < D; d++) {
		double e = net.params[5 * D + d];
		want += 0.5 * e * (1 + erf(e / sqrt(2.0))) * net.params[2 * D + d];
	}
	CHECK_MSG(fabs(y[2 * V + 2] - want) < 1e-5, "a logit is gelu(E[x]) . E[v]: %.7g vs %.7g", y[2 * V + 2], want);

	net.grad_ready = hook;
	dlk_net_forward(&net, x, B, 1);
	dlk_loss_backward(&net, &ls, NULL, tg, B);
	float *g = xmalloc(sizeof(float) * net.n_params);
	memcpy(g, net.grads, sizeof(float) * net.n_params);
	double worst = 0;
	for (size_t i = 0; i < net.n_params; i++) {
		const float h = 1e-2f;
		float keep = net.params[i];
		net.params[i] = keep + h;
		double lp = dlk_loss_ref(DLK_LOSS_TOKEN_CE, dlk_net_forward(&net, x, B, 0), NULL, tg, B * T, V, 0, NULL);
		net.params[i] = keep - h;
		double lm = dlk_loss_ref(DLK_LOSS_TOKEN_CE, dlk_net_forward(&net, x, B, 0), NULL, tg, B * T, V, 0, NULL);
		net.params[i] = keep;
		worst = fmax(worst, fabs((lp - lm) / (2 * h) - g[i]));
	}
	CHECK_MSG(worst < 2e-3, "the tied table's gradient (both uses summed) within 2e-3 of finite differences (%.2g)",
	          worst);
	int table_calls = 0;
	for (int c = 0; c < heard.calls && c < 8; c++)
		table_calls += heard.n[c] > 0 && heard.off[c] == 0 && heard.n[c] == (size_t)(V * D);
	CHECK_MSG(table_calls == 1 && heard.table_then && !memcmp(heard.table_then, g, sizeof(float) * V * D),
	          "the hook hears of the table once, when both uses have written it");
	free(g);
	free(heard.table_then);
	heard.table_then = NULL;

	/* a bundle keeps one table, and the head tied to it */
	{
		char dir[512], path[600];
		struct dlk_bundle b = DLK_BUNDLE_INIT;
		struct dlk_net back = DLK_NET_INIT;
		snprintf(dir, sizeof(dir), "%s/dlk-tie-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (mkdtemp(dir)) {
			snprintf(path, sizeof(path), "%s/m.dlk", dir);
			struct dlk_bundle_info info = { .name = "demo", .model = &p->model, .net = &net };
			ok = dlk_bundle_write(path, &info, &err) == 0 && dlk_bundle_read(path, &b, &err) == 0 &&
			     dlk_bundle_net(&b, dlk_backend_cpu(), &back, &err) == 0 && dlk_net_reserve(&back, B, &err) == 0;
			CHECK_MSG(ok, "the bundle writes and reads back (%s)", err.msg);
			if (ok) {
				float y0[B * T * V];
				memcpy(y0, dlk_net_forward(&net, x, B, 0), sizeof(y0));
				CHECK(b.model.layers[2].tie == 1 && back.n_params == V * D);
				struct dlk_lm_info lm;
				/* no tokenizer was given to the bundle: generation is refused one */
				CHECK(dlk_bundle_lm(&b, path, &lm, &err) < 0);
				CHECK_CONTAINS(err.msg, "has no tokenizer");
				b.tokenizer = dlk_tokenizer_byte();
				CHECK(dlk_bundle_lm(&b, path, &lm, &err) == 0 && lm.context == T && lm.vocab == V && lm.tokenizer);
				CHECK_MSG(!memcmp(y0, dlk_net_forward(&back, x, B, 0), sizeof(y0)), "the same logits, bit for bit");
			}
			dlk_bundle_release(&b);
			dlk_net_release(&back);
			unlink(path);
			rmdir(dir);
		}
	}
out:
	dlk_net_release(&net);
	project_free(p);
}

static void test_refused(void)
{
	struct dlk_project *p = load(TIED_YAML("dense: {units: 7, tie: wte}"));
	char *y = p ? project_dump_yaml(p) : NULL;
	CHECK_MSG(y && strstr(y, "- dense: {units: 7, tie: wte}"), "the dump keeps the tie");
	if (y) {
		/* and reads back to the same dump */
		struct dlk_project *q = load(y);
		char *y2 = q ? project_dump_yaml(q) : NULL;
		CHECK_MSG(y2 && !strcmp(y, y2), "the dump reads back to the same dump");
		free(y2);
		project_free(q);
	}
	free(y);
	project_free(p);
	CHECK_CONTAINS(load_msg(TIED_YAML("dense: {units: 7, tie: emb}")),
	               "model.layers[2].dense.tie: no layer before this one is named 'emb'");
	CHECK_CONTAINS(load_msg("name: demo\ndata: {format: text, train: {source: c.txt}}\nmodel:\n  task: lm\n"
	                        "  input: [3]\n  layers:\n    - embedding: {vocab: 7, dim: 4}\n"
	                        "    - dense: {units: 4, name: d}\n    - dense: {units: 7, tie: d}\n"),
	               "'d' is a dense layer; a dense layer ties its weight to an embedding's table");
	/* sizes the table decides: the engine says what it needs */
	p = load(TIED_YAML("dense: {units: 5, tie: wte}\n    - dense: {units: 7}"));
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	CHECK(p && dlk_net_build(&net, &p->model, "dlk.yaml", 0, dlk_backend_cpu(), &err) != 0);
	CHECK_CONTAINS(err.msg, "a head tied to model.layers[0]'s 7x4 table needs 7 units over inputs of width 4, not 5 over 4");
	project_free(p);
}

int main(void)
{
	test_tied_gradients();
	test_refused();
	return CHECK_DONE();
}
