/* The full correctness bars (minutes): MLP 784-256-128-10 >= 87.0% after 5 epochs, the CNN
 * >= 88.0% after 2 epochs. Runs only with DLK_TEST_LONG=1 (make test-long). */
#include <unistd.h>

#include "tests/unit/test_train_fmnist.h"

int main(void)
{
	const char *l = getenv("DLK_TEST_LONG");
	if (!l || strcmp(l, "1")) {
		printf("ok 1 # skip set DLK_TEST_LONG=1 to run the full Fashion-MNIST training\n1..1\n");
		return 0;
	}
	struct dlk_dataset train, test;
	struct dlk_err err = DLK_ERR_INIT;
	if (access(FMNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK)) {
		printf("ok 1 # skip Fashion-MNIST is not installed under " FMNIST_DIR "\n1..1\n");
		return 0;
	}
	if (fmnist_load("train", 0, &train, &err) || fmnist_load("test", 0, &test, &err)) {
		printf("not ok 1 - Fashion-MNIST loads: %s\n1..1\n", err.msg);
		return 1;
	}
	double s;
	double acc = fm_train(0, 5, &train, &test, &s);
	CHECK_MSG(acc >= 0.870, "MLP, 5 epochs: test accuracy %.4f >= 0.870", acc);
	acc = fm_train(1, 2, &train, &test, &s);
	CHECK_MSG(acc >= 0.880, "CNN, 2 epochs: test accuracy %.4f >= 0.880", acc);
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	return CHECK_DONE();
}
