/* Shared by the Fashion-MNIST accuracy tests: the MLP and CNN of the task's correctness bars,
 * trained with batch 128, Adam 1e-3 and PyTorch's init. Skips (TAP "# skip") when the Debian
 * dataset is not installed. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <unistd.h>

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

/* Loads both splits. Returns -1 after printing the TAP line that ends the program with its exit
 * code in *rc: a failure when the dataset does not load, and when it is not installed a skip, or a
 * failure where the test needs it (missing_fails). */
static int fm_load(struct dlk_dataset *train, struct dlk_dataset *test, int missing_fails, int *rc)
{
	struct dlk_err err = DLK_ERR_INIT;

	char labels[4096];
	*rc = 0;
	if (access(fmnist_path(labels, sizeof(labels), "t10k-labels-idx1-ubyte.gz"), R_OK)) {
		if (missing_fails)
			printf("not ok 1 - Fashion-MNIST is not installed under %s ('.ci/deps test' installs it)\n1..1\n",
			       fmnist_dir());
		else
			printf("ok 1 # skip Fashion-MNIST is not installed under %s\n1..1\n", fmnist_dir());
		*rc = missing_fails;
		return -1;
	}
	if (fmnist_load("train", 0, train, &err) || fmnist_load("test", 0, test, &err)) {
		printf("not ok 1 - Fashion-MNIST loads: %s\n1..1\n", err.msg);
		*rc = 1;
		return -1;
	}
	return 0;
}

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
