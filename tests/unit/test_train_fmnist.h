/* Shared by the Fashion-MNIST accuracy tests: the MLP and CNN of the task's correctness bars,
 * trained with batch 128, Adam 1e-3 and PyTorch's init. Skips (TAP "# skip") when the Debian
 * dataset is not installed. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "bench/train/fmnist.h"
#include "lib/train/train.h"

static struct dlk_layer_spec fm_mlp[] = {
	{ .kind = DLK_LAYER_FLATTEN }, { .kind = DLK_LAYER_DENSE, .units = 256 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_DENSE, .units = 128 }, { .kind = DLK_LAYER_RELU }, { .kind = DLK_LAYER_DENSE, .units = 10 },
};
static struct dlk_layer_spec fm_cnn[] = {
	{ .kind = DLK_LAYER_CONV2D, .filters = 32, .kernel = 3, .stride = 1, .padding = 1 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_MAXPOOL, .size = 2, .stride = 2 },
	{ .kind = DLK_LAYER_CONV2D, .filters = 64, .kernel = 3, .stride = 1, .padding = 1 }, { .kind = DLK_LAYER_RELU },
	{ .kind = DLK_LAYER_MAXPOOL, .size = 2, .stride = 2 }, { .kind = DLK_LAYER_FLATTEN },
	{ .kind = DLK_LAYER_DENSE, .units = 128 }, { .kind = DLK_LAYER_RELU }, { .kind = DLK_LAYER_DENSE, .units = 10 },
};

/* the backend fm_train() trains on; NULL: the CPU */
static const struct dlk_backend *fm_backend;

/* trains and returns the test accuracy (-1 on error) */
static double fm_train(int cnn, int epochs, const struct dlk_dataset *train, const struct dlk_dataset *test,
                       double *seconds)
{
	struct dlk_model model = { .input = { 1, 28, 28 }, .input_rank = 3, .layers = cnn ? fm_cnn : fm_mlp,
	                           .n_layers = cnn ? 10 : 6, .init = "torch" };
	struct dlk_training tr = { .epochs = epochs, .batch_size = 128, .optimizer = DLK_OPT_ADAM, .lr = 1e-3,
	                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step_size = 1, .gamma = 0.1,
	                           .seed = 42, .threads = 2, .eval_every_epoch = 0 };
	struct dlk_train_opts o = DLK_TRAIN_OPTS_INIT;
	o.model = &model;
	o.backend = fm_backend;
	o.training = &tr;
	o.train = train;
	o.test = test;
	struct dlk_train_result r;
	struct dlk_err err = DLK_ERR_INIT;
	double acc = -1;
	if (dlk_train_run(&o, &r, &err) == 0) {
		acc = r.eval.accuracy;
		*seconds = r.seconds;
		printf("# %s, %d epoch(s) on %zu samples, %s: test accuracy %.4f, %.0f samples/s, %.1f s\n",
		       cnn ? "CNN" : "MLP", epochs, train->n, fm_backend ? fm_backend->name : "cpu", acc,
		       r.train_samples_per_sec, r.seconds);
	} else {
		printf("# training failed: %s\n", err.msg);
	}
	dlk_train_result_release(&r);
	return acc;
}
