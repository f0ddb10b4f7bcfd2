/* A small GPT's loss curve in fp32 and in bf16 (training.precision), on the CPU and, where a CUDA
 * device can be used, on the GPU: 48 AdamW steps on a text of 40 symbols drawn from a fixed
 * grammar, from the same seed. Tolerances, per step of the curve (relative to the fp32 CPU run's
 * loss at that step):
 *   bf16 against fp32, on each backend       2% (bf16 rounds the products' operands to 8 bits)
 *   the GPU against the CPU, in each precision 1% (the backends sum in other orders, and the
 *                                              differences grow over the steps)
 * and the loss must fall by more than 1 nat over the run; the same run twice gives the same bits
 * on the CPU. make test runs the CPU's part; make test-gpu and the GPU kit run both.
 *   test_gpt_gpu */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/data/corpus.h"
#include "lib/nn/cpu_bgemm.h"
#include "lib/nn/gpu.h"
#include "lib/train/train.h"

#define GPT_YAML                                                               \
	"name: demo\n"                                                        \
	"data: {format: text, train: {source: c.txt}, validation: 0.1}\n"     \
	"model:\n"                                                            \
	"  task: lm\n"                                                        \
	"  input: [16]\n"                                                     \
	"  blocks:\n"                                                         \
	"    b:\n"                                                            \
	"      - layernorm\n"                                                 \
	"      - attention: {heads: 2, name: att}\n"                          \
	"      - add: {inputs: [input, att], name: h}\n"                      \
	"      - layernorm\n"                                                 \
	"      - dense: {units: 128}\n"                                       \
	"      - gelu: {approximate: tanh}\n"                                 \
	"      - dense: {units: 32, name: mlp}\n"                             \
	"      - add: {inputs: [h, mlp]}\n"                                   \
	"  layers:\n"                                                         \
	"    - embedding: {vocab: 40, dim: 32, positions: 16, name: wte}\n"  \
	"    - {block: b, repeat: 2}\n"                                       \
	"    - layernorm\n"                                                   \
	"    - dense: {units: 40, tie: wte}\n"

enum { T = 16, SEQS = 256, BATCH = 16, EPOCHS = 3, STEPS = EPOCHS * SEQS / BATCH };

/* SEQS sequences of T + 1 tokens from a small grammar: words of 3-6 symbols from a vocabulary of
 * 12 words, separated by symbol 1; what follows a word's first symbol is (mostly) determined */
static void corpus(struct dlk_dataset *ds)
{
	size_t n = (size_t)SEQS * T + 1;
	int32_t *ids = malloc(sizeof(int32_t) * n);
	uint64_t r = 12345;
	size_t i = 0;
	while (i < n) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		int w = (int)((r >> 33) % 12), len = 3 + w % 4;
		for (int k = 0; k < len && i < n; k++)
			ids[i++] = 2 + (w * 3 + k * 5) % 38;
		if (i < n)
			ids[i++] = 1;
	}
	*ds = (struct dlk_dataset)DLK_DATASET_INIT;
	ds->n = dlk_corpus_pack(ids, n, T, &ds->x, &ds->t);
	ds->target_size = T;
	ds->y = calloc(ds->n, sizeof(*ds->y));
	ds->shape[0] = ds->shape[1] = 1;
	ds->shape[2] = T;
	ds->sample_size = T;
	free(ids);
}

/* the run's loss curve (STEPS values) on backend be in the given precision; 0, or -1 */
static int train(struct dlk_project *p, const struct dlk_dataset *ds, const struct dlk_backend *be,
                 enum dlk_precision prec, float *curve)
{
	struct dlk_training tr = p->training;
	tr.epochs = EPOCHS;
	tr.batch_size = BATCH;
	tr.threads = 2;
	tr.precision = prec;
	tr.checkpoint_every = 0;
	tr.eval_every_epoch = 0;
	tr.optimizer = DLK_OPT_ADAMW;
	tr.lr = 3e-3;
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	o.model = &p->model;
	o.training = &tr;
	o.spec_file = "dlk.yaml";
	o.train = ds;
	o.backend = be;
	struct dlk_train_result res;
	struct dlk_err err = DLK_ERR_INIT;
	int rc = dlk_train_run(&o, &res, &err);
	int ok = rc == 0 && res.n_loss == STEPS;
	CHECK_MSG(ok, "%s, %s: %d steps (%s)", be->name, prec ? "bf16" : "fp32", STEPS, err.msg);
	if (ok)
		memcpy(curve, res.loss_curve, sizeof(float) * STEPS);
	dlk_train_result_release(&res);
	return ok ? 0 : -1;
}

/* the largest difference between two curves, relative to ref's loss at each step */
static double apart(const float *a, const float *b, const float *ref)
{
	double w = 0;
	for (int s = 0; s < STEPS; s++)
		w = fmax(w, fabs((double)a[s] - b[s]) / fabs((double)ref[s]));
	return w;
}

int main(void)
{
	struct dlk_project *p = load(GPT_YAML);
	CHECK_MSG(p != NULL, "the GPT loads (%s)", spec_test_err.msg);
	if (!p)
		return CHECK_DONE();
	struct dlk_dataset ds;
	corpus(&ds);
	printf("# %zu sequences of %d tokens, %d steps of %d; products on %s\n", ds.n, T, STEPS, BATCH,
	       dlk_bgemm_native() ? "AVX512_BF16" : "the emulation");
	const struct dlk_backend *cpu = dlk_backend_cpu();
	float c32[STEPS], c16[STEPS], again[STEPS], g32[STEPS], g16[STEPS];
	if (!train(p, &ds, cpu, DLK_PRECISION_FP32, c32) && !train(p, &ds, cpu, DLK_PRECISION_BF16, c16) &&
	    !train(p, &ds, cpu, DLK_PRECISION_BF16, again)) {
		printf("# CPU fp32: %.4f -> %.4f; bf16: %.4f -> %.4f\n", c32[0], c32[STEPS - 1], c16[0], c16[STEPS - 1]);
		CHECK_MSG(c32[0] - c32[STEPS - 1] > 1.0, "the loss falls by more than 1 nat (%.4f -> %.4f)", c32[0],
		          c32[STEPS - 1]);
		CHECK_MSG(apart(c16, c32, c32) <= 0.02, "CPU: bf16's curve within 2%% of fp32's at every step (%.3f%%)",
		          100 * apart(c16, c32, c32));
		CHECK_MSG(memcmp(c16, c32, sizeof(c16)), "CPU: bf16 changed the curve (its products did change)");
		CHECK_MSG(!memcmp(c16, again, sizeof(c16)), "CPU: bf16 twice, the same curve bit for bit");
	}
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char lib[512];
	struct dlk_err err = DLK_ERR_INIT;
	snprintf(lib, sizeof(lib), "%s/" DLK_CUDA_LIB_NAME, build);
	const struct dlk_backend *gpu = dlk_backend_cuda(access(lib, F_OK) == 0 ? lib : NULL, 0, &err);
	if (!gpu) {
		printf("ok %d # skip the GPU's curves: %s\n", ++check_n, err.msg);
	} else {
		printf("# device: %s\n", gpu->device);
		if (!train(p, &ds, gpu, DLK_PRECISION_FP32, g32) && !train(p, &ds, gpu, DLK_PRECISION_BF16, g16)) {
			printf("# GPU fp32: %.4f -> %.4f; bf16: %.4f -> %.4f\n", g32[0], g32[STEPS - 1], g16[0],
			       g16[STEPS - 1]);
			CHECK_MSG(apart(g32, c32, c32) <= 0.01, "GPU fp32's curve within 1%% of the CPU's (%.3f%%)",
			          100 * apart(g32, c32, c32));
			CHECK_MSG(apart(g16, c16, c32) <= 0.01, "GPU bf16's curve within 1%% of the CPU's bf16 (%.3f%%)",
			          100 * apart(g16, c16, c32));
			CHECK_MSG(apart(g16, g32, c32) <= 0.02, "GPU: bf16's curve within 2%% of fp32's (%.3f%%)",
			          100 * apart(g16, g32, c32));
		}
	}
	dlk_dataset_release(&ds);
	project_free(p);
	return CHECK_DONE();
}
