/* The full correctness bars (minutes): MLP 784-256-128-10 >= 87.0% after 5 epochs, the CNN
 * >= 88.0% after 2 epochs. Runs only with DLK_TEST_LONG=1 (make test-long). */
#include "tests/unit/test_train_fmnist.h"

int main(void)
{
	const char *l = getenv("DLK_TEST_LONG");
	if (!l || strcmp(l, "1")) {
		printf("ok 1 # skip set DLK_TEST_LONG=1 to run the full Fashion-MNIST training\n1..1\n");
		return 0;
	}
	struct dlk_dataset train, test;
	int rc;
	if (fm_load(&train, &test, 0, &rc))
		return rc;
	double s;
	double acc = fm_train(0, 5, &train, &test, &s);
	CHECK_MSG(acc >= 0.870, "MLP, 5 epochs: test accuracy %.4f >= 0.870", acc);
	acc = fm_train(1, 2, &train, &test, &s);
	CHECK_MSG(acc >= 0.880, "CNN, 2 epochs: test accuracy %.4f >= 0.880", acc);
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	return CHECK_DONE();
}
