/* Short Fashion-MNIST runs for the normal suite (a few seconds): the real data, the real
 * models, lower bars than the long test (test_train_fmnist_long). */
#include "tests/unit/test_train_fmnist.h"

int main(void)
{
	struct dlk_dataset train, test;
	int rc;
	if (fm_load(&train, &test, 1, &rc))
		return rc;
	CHECK(train.n == 60000 && test.n == 10000);
	double s;
	/* one epoch of the MLP on all 60k samples */
	double acc = fm_train(0, 1, &train, &test, &s);
	CHECK_MSG(acc >= 0.82, "MLP, 1 epoch: test accuracy %.4f >= 0.82", acc);
	/* the CNN on a 6400-sample subset for one epoch */
	train.n = 6400;
	acc = fm_train(1, 1, &train, &test, &s);
	CHECK_MSG(acc >= 0.70, "CNN, 1 epoch on 6400 samples: test accuracy %.4f >= 0.70", acc);
	train.n = 60000;
	dlk_dataset_release(&train);
	dlk_dataset_release(&test);
	return CHECK_DONE();
}
