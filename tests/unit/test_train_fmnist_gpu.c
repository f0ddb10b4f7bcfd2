/* Fashion-MNIST on the GPU against the CPU: the MLP and the CNN, 2 epochs each on all 60,000
 * samples, from the same seed; the test accuracies must agree within 0.5 points. (The two
 * backends round differently, so the runs drift apart a little; a real bug in a kernel costs far
 * more than half a point.) Skips, saying why, where no CUDA device can be used. Arguments pick the
 * models, so the GPU kit can time and report each on its own:
 *   test_train_fmnist_gpu [mlp] [cnn]     (none: both) */
#include <unistd.h>

#include "lib/nn/gpu.h"
#include "tests/unit/test_train_fmnist.h"

int main(int argc, char **argv)
{
	struct dlk_dataset train, test;
	struct dlk_err err = DLK_ERR_INIT;
	int rc;
	int want[2] = { argc < 2, argc < 2 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "mlp") && strcmp(argv[i], "cnn")) {
			fprintf(stderr, "usage: test_train_fmnist_gpu [mlp] [cnn]: unknown model '%s'\n", argv[i]);
			return 2;
		}
		want[!strcmp(argv[i], "cnn")] = 1;
	}
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char lib[512];
	snprintf(lib, sizeof(lib), "%s/" DLK_CUDA_LIB_NAME, build);
	const struct dlk_backend *gpu = dlk_backend_cuda(access(lib, F_OK) == 0 ? lib : NULL, 0, &err);
	if (!gpu) {
		printf("ok 1 # skip %s\n1..1\n", err.msg);
		return 0;
	}
	if (fm_load(&train, &test, 1, &rc))
		return rc;
	printf("# device: %s\n", gpu->device);
	for (int cnn = 0; cnn < 2; cnn++) {
		double sc, sg;
		if (!want[cnn])
			continue;
		fm_backend = NULL;
		double ac = fm_train(cnn, 2, &train, &test, &sc);
		fm_backend = gpu;
		double ag = fm_train(cnn, 2, &train, &test, &sg);
		CHECK_MSG(ac > 0 && ag > 0 && fabs(ag - ac) <= 0.005,
		          "%s, 2 epochs: GPU %.2f%% within 0.5 points of the CPU's %.2f%% (%.1f s vs %.1f s)",
		          cnn ? "CNN" : "MLP", 100 * ag, 100 * ac, sg, sc);
	}
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	return CHECK_DONE();
}
