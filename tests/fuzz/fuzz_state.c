/* libFuzzer target: restoring the training state from a checkpoint (state.json and the blobs
 * beside it) into a small net and optimizer. The first byte chooses which blobs the checkpoint
 * holds and their sizes; the rest is state.json. Corpus: tests/fuzz/state/ (written by
 * dlk_state_save for this net: seed 7, one worker, batch 32, step 57; elastic.bin is the same
 * global batch at two workers). */
#include "lib/nn/backend.h"
#include "lib/nn/net.h"
#include "lib/nn/optim.h"
#include "lib/train/state.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
	NO_PARAMS = 1,      /* params.f32 missing */
	SHORT_PARAMS = 2,   /* params.f32 a float short */
	NO_M = 4,           /* optim_m.f32 missing */
	NO_V = 8,           /* optim_v.f32 missing */
	PLAIN_SGD = 16,     /* restore into SGD without momentum: no optimizer blobs expected */
	OTHER_STEP = 32,    /* the directory says step 58 */
};

static struct dlk_net net = DLK_NET_INIT;
static struct dlk_optimizer adam = DLK_OPTIMIZER_INIT, sgd = DLK_OPTIMIZER_INIT;
static struct dlk_state_meta meta = { "", 7, 1, 32 };
static float *blob;
static char path[] = "ckpt/step-00000057";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct dlk_layer_spec layers[] = {
		{ .kind = DLK_LAYER_DENSE, .units = 16 }, { .kind = DLK_LAYER_RELU },
		{ .kind = DLK_LAYER_DROPOUT, .rate = 0.2f }, { .kind = DLK_LAYER_DENSE, .units = 4 },
	};
	struct dlk_model model = { .input = { 1, 1, 8 }, .input_rank = 1, .layers = layers, .n_layers = 4,
	                           .init = "torch" };
	struct dlk_training tr = { .epochs = 3, .batch_size = 32, .optimizer = DLK_OPT_ADAM, .lr = 1e-2, .beta1 = 0.9,
	                           .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1, .seed = 7, .threads = 1 };
	struct dlk_err err = DLK_ERR_INIT;

	(void)argc;
	(void)argv;
	if (dlk_net_build(&net, &model, "dlk.yaml", 4, dlk_backend_cpu(), &err) ||
	    dlk_net_init_params(&net, "torch", tr.seed, &err) ||
	    dlk_optimizer_init(&adam, &tr, net.n_params, 19, 57, dlk_backend_cpu(), &err))
		abort();
	tr.optimizer = DLK_OPT_SGD;
	tr.momentum = 0;
	if (dlk_optimizer_init(&sgd, &tr, net.n_params, 19, 57, dlk_backend_cpu(), &err) || sgd.m || sgd.v)
		abort();
	dlk_net_arch_digest(&net, meta.arch);
	blob = calloc(net.n_params + 1, sizeof(float));
	return blob ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct ckpt_loaded_blob blobs[4];
	struct ckpt c = CKPT_INIT;
	struct dlk_train_state st = { &net, &adam, 0, 0, 0, NULL, 0, 0 };
	size_t bytes = sizeof(float) * net.n_params;
	unsigned flags;

	if (size < 1)
		return 0;
	flags = data[0];
	/* state.json is read with its length, as ckpt_load_latest gives it (a NUL after it too) */
	blobs[c.n++] = (struct ckpt_loaded_blob){ "state.json", malloc(size), size - 1 };
	if (!blobs[0].data)
		return 0;
	memcpy(blobs[0].data, data + 1, size - 1);
	((char *)blobs[0].data)[size - 1] = 0;
	if (!(flags & NO_PARAMS))
		blobs[c.n++] = (struct ckpt_loaded_blob){ "params.f32", blob, (flags & SHORT_PARAMS) ? bytes - 4 : bytes };
	if (!(flags & NO_M))
		blobs[c.n++] = (struct ckpt_loaded_blob){ "optim_m.f32", blob, bytes };
	if (!(flags & NO_V))
		blobs[c.n++] = (struct ckpt_loaded_blob){ "optim_v.f32", blob, bytes };
	if (flags & PLAIN_SGD)
		st.opt = &sgd;
	c.blobs = blobs;
	c.step = (flags & OTHER_STEP) ? 58 : 57;
	c.path = path;
	dlk_state_restore(&c, &st, &meta, &err);
	/* what a resume at another world size reads first */
	{
		int cw = 0, cb = 0, b = 0;
		struct dlk_err e2 = DLK_ERR_INIT;
		if (!dlk_state_peek(&c, &cw, &cb, &e2))
			dlk_state_elastic_batch(cw, cb, 3, &b, &e2);
	}
	free(blobs[0].data);
	return 0;
}
