/* dlk predict's library part: which IDX files of a dataset are scored, the text of
 * predictions.csv, and the refusal of data whose samples do not fit the model. */
#include "check.h"
#include "lib/serve/predict.h"
#include "lib/store/manifest.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

#define H "0000000000000000000000000000000000000000000000000000000000000000"

static int parse(const char *text, struct dlk_manifest *m)
{
	struct dlk_err err = DLK_ERR_INIT;
	int rc = dlk_manifest_parse(text, strlen(text), "test", m, &err);
	if (rc)
		printf("# %s\n", err.msg);
	return rc;
}

static void test_pick(void)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	const char *img, *lab;

	/* Fashion-MNIST as distributed: the test split is chosen of the two */
	CHECK(!parse("dlk-dataset 1\n" H " 1 t10k-images-idx3-ubyte.gz\n" H " 1 t10k-labels-idx1-ubyte.gz\n" H
	             " 1 train-images-idx3-ubyte.gz\n" H " 1 train-labels-idx1-ubyte.gz\n",
	             &m));
	CHECK(!dlk_predict_pick_idx(&m, &img, &lab, &err));
	CHECK_STR(img, "t10k-images-idx3-ubyte.gz");
	CHECK_STR(lab, "t10k-labels-idx1-ubyte.gz");
	dlk_manifest_release(&m);

	/* one images file in a sub-directory, its labels beside it */
	CHECK(!parse("dlk-dataset 1\n" H " 1 raw/x-images-idx3-ubyte\n" H " 1 raw/x-labels-idx1-ubyte\n", &m));
	CHECK(!dlk_predict_pick_idx(&m, &img, &lab, &err));
	CHECK_STR(img, "raw/x-images-idx3-ubyte");
	CHECK_STR(lab, "raw/x-labels-idx1-ubyte");
	dlk_manifest_release(&m);

	/* no labels: named, with the way out */
	CHECK(!parse("dlk-dataset 1\n" H " 1 x-images-idx3-ubyte\n", &m));
	dlk_err_clear(&err);
	CHECK(dlk_predict_pick_idx(&m, &img, &lab, &err) && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "x-labels-idx1-ubyte");
	CHECK_CONTAINS(err.hint, "--labels");
	dlk_manifest_release(&m);

	/* two candidates, neither the test split: ambiguous */
	CHECK(!parse("dlk-dataset 1\n" H " 1 a-images-idx3-ubyte\n" H " 1 b-images-idx3-ubyte\n", &m));
	dlk_err_clear(&err);
	CHECK(dlk_predict_pick_idx(&m, &img, &lab, &err) && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "more than one");
	CHECK_CONTAINS(err.hint, "--images");
	dlk_manifest_release(&m);

	/* none at all */
	CHECK(!parse("dlk-dataset 1\n" H " 1 table.csv\n", &m));
	dlk_err_clear(&err);
	CHECK(dlk_predict_pick_idx(&m, &img, &lab, &err) && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "has no IDX images file");
	dlk_manifest_release(&m);
}

static void test_csv(void)
{
	struct dlk_dataset ds = DLK_DATASET_INIT;
	int32_t y[2] = { 1, 0 }, cls[2] = { 1, 1 };
	float probs[4] = { 0.25f, 0.75f, 0.1f, 0.9f };
	struct dlk_predictions p = { 2, 2, cls, probs, 1, 0 };
	char *names[2] = { "plain", "with, \"comma\"" };
	size_t len;
	char *s;

	ds.n = 2;
	ds.y = y;
	s = dlk_predict_csv(&p, &ds, NULL, &len);
	CHECK_STR(s, "index,label,class,p_0,p_1\n0,1,1,0.25,0.75\n1,0,1,0.100000001,0.899999976\n");
	CHECK(len == strlen(s));
	free(s);
	s = dlk_predict_csv(&p, &ds, names, &len);
	CHECK_STR(s, "index,label,class,p_plain,p_1\n0,\"with, \"\"comma\"\"\",\"with, \"\"comma\"\"\",0.25,0.75\n"
	             "1,plain,\"with, \"\"comma\"\"\",0.100000001,0.899999976\n");
	free(s);
	ds.y = NULL; /* no labels: the column is empty */
	s = dlk_predict_csv(&p, &ds, NULL, &len);
	CHECK_CONTAINS(s, "\n0,,1,0.25,0.75\n");
	free(s);
}

static void test_shape(void)
{
	struct dlk_serve_model m;
	struct dlk_dataset ds = DLK_DATASET_INIT;
	struct dlk_predictions p = DLK_PREDICTIONS_INIT;
	struct dlk_err err = DLK_ERR_INIT;

	memset(&m, 0, sizeof(m));
	m.name = "fashion";
	m.sig.dims[0] = 1;
	m.sig.dims[1] = 28;
	m.sig.dims[2] = 28;
	m.sig.rank = 3;
	m.sig.in_size = 784;
	m.sig.n_classes = 10;
	ds.n = 3;
	ds.shape[0] = ds.shape[1] = 1;
	ds.shape[2] = 8;
	ds.sample_size = 8;
	CHECK(dlk_predict_run(&m, &ds, 16, NULL, NULL, &p, &err) && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "[1,1,8] (8 values)");
	CHECK_CONTAINS(err.msg, "[-1,1,28,28]");
	CHECK(p.cls == NULL && p.probs == NULL);
}

int main(void)
{
	test_pick();
	test_csv();
	test_shape();
	printf("1..%d\n", check_n);
	return check_failed ? 1 : 0;
}
