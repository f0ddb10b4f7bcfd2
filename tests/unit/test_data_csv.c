/* CSV decoding: headers, quoting, line endings, and the errors users see. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/data/decode.h"
#include "lib/util/mem.h"

static struct dlk_err err = DLK_ERR_INIT;

/* Decodes text; returns 0/-1 and leaves the samples in *s (released by the caller). */
static int dec(const char *text, int header, int label_col, struct dlk_samples *s)
{
	struct dlk_csv_opts o = { header, label_col, 0, 0, NULL, 0, 0 };
	dlk_samples_release(s);
	dlk_err_clear(&err);
	return dlk_csv_decode(text, strlen(text), "t.csv", &o, s, &err);
}

/* Each case is data: the table, the options, and what must come out. */
static const struct {
	const char *text;
	int header, label_col;
	size_t n, features;
	float x0, x_last;        /* first and last feature value */
	int y0, y_last;
	const char *error;       /* NULL when it must decode */
} cases[] = {
	{ "a,b,label\n1,2,0\n3,4,1\n", -1, -1, 2, 2, 1, 4, 0, 1, NULL },
	{ "1,2,0\n3,4,1\n", -1, -1, 2, 2, 1, 4, 0, 1, NULL },
	{ "1,2,0\n3,4,1\n", 1, -1, 1, 2, 3, 4, 1, 1, NULL },
	{ "\xEF\xBB\xBFx,y\n0.5,7\n", -1, -1, 1, 1, 0.5f, 0.5f, 7, 7, NULL },
	{ "1,2,0\r\n\r\n  \r\n3,4,1\r\n", -1, -1, 2, 2, 1, 4, 0, 1, NULL },
	{ "1,2,0\n\n3,4,1", -1, -1, 2, 2, 1, 4, 0, 1, NULL },
	{ "\"a \"\"x\"\"\",\"multi\nline\",c\n\"1.5\", \"-2e3\" ,\"2\"\n", -1, -1, 1, 2, 1.5f, -2000, 2, 2, NULL },
	{ "label,f1,f2\n4,0.25,0.75\n", -1, 0, 1, 2, 0.25f, 0.75f, 4, 4, NULL },
	{ "1, 2 ,\t3\n", 0, 1, 1, 2, 1, 3, 2, 2, NULL },
	/* errors */
	{ "a,b,c\n1,2,0\n", 0, -1, 0, 0, 0, 0, 0, 0, "t.csv:1:1: expected a number, got 'a'" },
	{ "1,2,0\n3,abc,1\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:2:3: expected a number, got 'abc'" },
	{ "1,2,0\r\n3,,1\r\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:2:3: expected a number, got ''" },
	{ "1,nan,0\n", 0, 0, 0, 0, 0, 0, 0, 0, "t.csv:1:3: expected a number, got 'nan'" },
	{ "h1,h2,h3\n1,2,0\n3,4\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:3: the row has 2 fields, expected 3 (as on line 1)" },
	{ "1,2,0\n3,4,1,5\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:2: the row has 4 fields, expected 3 (as on line 1)" },
	{ "1,2,1.5\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:1:5: the label '1.5' is not a non-negative integer below 100000" },
	{ "1,2,-1\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:1:5: the label '-1' is not a non-negative integer below 100000" },
	{ "1,2,cat\n", 0, -1, 0, 0, 0, 0, 0, 0,
	  "t.csv:1:5: the label 'cat' is not a class index (labels are numbers 0, 1, ...)" },
	{ "1,2,0\n", -1, 3, 0, 0, 0, 0, 0, 0, "t.csv:1: the label column 3 does not exist (rows have 3 fields, counted from 0)" },
	{ "1,\"2,0\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:1:3: unterminated quoted field" },
	{ "1,\"2\"x,0\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:1:6: unexpected character after a closing quote" },
	{ "5\n", -1, -1, 0, 0, 0, 0, 0, 0, "t.csv:1: a row needs at least two fields (features and a label), this one has 1" },
	{ "a,b\n", -1, -1, 0, 0, 0, 0, 0, 0, "'t.csv': the table holds no data rows" },
	{ "", -1, -1, 0, 0, 0, 0, 0, 0, "'t.csv': the table holds no data rows" },
	{ "\n\r\n", -1, -1, 0, 0, 0, 0, 0, 0, "'t.csv': the table holds no data rows" },
	{ "1,\x01\xff,0\n", 0, -1, 0, 0, 0, 0, 0, 0, "t.csv:1:3: expected a number, got '\\x01\\xff'" },
};

int main(void)
{
	struct dlk_samples s = DLK_SAMPLES_INIT;

	for (size_t i = 0; i < DLK_ARRAY_SIZE(cases); i++) {
		int r = dec(cases[i].text, cases[i].header, cases[i].label_col, &s);
		if (cases[i].error) {
			CHECK_MSG(r == -1 && err.code == DLK_EXIT_CONFIG, "case %zu fails", i);
			CHECK_STR(err.msg, cases[i].error);
			continue;
		}
		CHECK_MSG(r == 0, "case %zu decodes: %s", i, err.msg);
		if (r)
			continue;
		CHECK_MSG(s.n == cases[i].n && s.sample_size == cases[i].features && s.shape[0] == 1 &&
		          s.shape[1] == 1 && s.shape[2] == (int)cases[i].features,
		          "case %zu: %zu rows of %zu features", i, s.n, s.sample_size);
		CHECK_MSG(s.x[0] == cases[i].x0 && s.x[s.n * s.sample_size - 1] == cases[i].x_last,
		          "case %zu: values %g .. %g", i, s.x[0], s.x[s.n * s.sample_size - 1]);
		CHECK_MSG(s.y[0] == cases[i].y0 && s.y[s.n - 1] == cases[i].y_last, "case %zu: labels", i);
	}

	/* a long garbage field is shown bounded */
	{
		char *big = xmalloc(2000);
		memset(big, 'z', 1999);
		big[1999] = '\0';
		char *text = xasprintf("1,%s,0\n", big);
		CHECK(dec(text, 0, -1, &s) == -1);
		CHECK(strlen(err.msg) < 120);
		CHECK_CONTAINS(err.msg, "t.csv:1:3: expected a number, got 'zzzz");
		free(text), free(big);
	}

	/* string labels: an index without data.classes says how to name them; with it, a name is its
	 * index, also in the first row (not taken for a header), and an unknown name lists them */
	{
		static const char *const names[] = { "cat", "dog" };
		struct dlk_csv_opts o = { -1, -1, 0, 0, NULL, 0, 0 };
		const char *t = "1,2,cat\n3,4,dog\n";
		dlk_samples_release(&s);
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == -1);
		CHECK_STR(err.msg, "t.csv:2:5: the label 'dog' is not a class index (labels are numbers 0, 1, ...)");
		CHECK_CONTAINS(err.hint, "data: {classes: [name0, name1, ...]}");
		o.classes = names, o.n_classes = 2;
		CHECK_MSG(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == 0, "names decode: %s", err.msg);
		CHECK(s.n == 2 && s.y[0] == 0 && s.y[1] == 1 && s.max_label == 1 && s.x[0] == 1);
		dlk_samples_release(&s);
		t = "a,b,label\n1,2,1\n3,4,dog\n";
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == 0 && s.n == 2 && s.y[0] == 1 && s.y[1] == 1);
		dlk_samples_release(&s);
		t = "1,2,cat\n3,4,cow\n";
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == -1);
		CHECK_STR(err.msg, "t.csv:2:5: the label 'cow' is not one of data.classes (cat, dog)");
		dlk_samples_release(&s);
	}

	/* through dlk_data_load: csv scale defaults to 1, n_classes from the labels */
	{
		const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		char *path = xasprintf("%s/dlk-test-csv-XXXXXX", tmp);
		int fd = mkstemp(path);
		const char *t = "f1,f2,y\n1,2,0\n3,4,2\n";
		struct dlk_data d;
		struct dlk_dataset ds = DLK_DATASET_INIT;
		CHECK(fd >= 0 && write(fd, t, strlen(t)) == (ssize_t)strlen(t));
		close(fd);
		memset(&d, 0, sizeof(d));
		d.format = DLK_DATA_CSV;
		d.train.source.url = path;
		d.csv_header = -1, d.csv_label_column = -1;
		d.scale = 1, d.mean = 1, d.std = 2;
		d.max_bytes = 1 << 20;
		CHECK_MSG(dlk_data_load(&d, "train", NULL, &ds, &err) == 0, "csv loads: %s", err.msg);
		CHECK(ds.n == 2 && ds.sample_size == 2 && ds.n_classes == 3 && ds.n_sources == 1);
		CHECK(ds.x[3] == 1.5f && ds.y[1] == 2);
		dlk_dataset_release(&ds);
		CHECK(dlk_data_load(&d, "test", NULL, &ds, &err) == -1);
		CHECK_STR(err.msg, "data: no csv source for this split");
		unlink(path);
		free(path);
	}
	/* a shard of the rows (data.shard): the header still detected, every row checked, the part's
	 * rows kept with their place in the table and the whole table's largest label */
	{
		const char *t = "a,b,y\n1,2,0\n3,4,1\n5,6,7\n7,8,2\n9,10,1\n";
		struct dlk_csv_opts o = { -1, -1, 1, 2, NULL, 0, 0 };
		dlk_samples_release(&s);
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == 0);
		CHECK(s.n == 3 && s.base == 2 && s.total == 5 && s.max_label == 7 && s.x[0] == 5 && s.y[2] == 1);
		dlk_samples_release(&s);
		o.shard_rank = 0;
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == 0);
		CHECK(s.n == 2 && s.base == 0 && s.total == 5 && s.x[0] == 1 && s.y[1] == 1);
		dlk_samples_release(&s);
		/* a bad row outside the shard still fails it */
		t = "1,2,0\n3,4,1\n5,x,1\n";
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == -1);
		CHECK_STR(err.msg, "t.csv:3:3: expected a number, got 'x'");
		/* more ranks than rows: a part may be empty, the table may not */
		o.shard_rank = 0;
		o.shard_world = 4;
		t = "1,2,0\n3,4,1\n";
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == 0 && s.n == 0 && s.total == 2);
		dlk_samples_release(&s);
		t = "a,b,y\n";
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == -1);
		CHECK_STR(err.msg, "'t.csv': the table holds no data rows");
	}
	dlk_samples_release(&s);
	{
		/* data.csv.targets: the last columns are float targets, the rest features, no label */
		const char *t = "x1,x2,y1,y2\n1,2,0.5,-3\n3,4,1.5e2,7\n";
		struct dlk_csv_opts o = { -1, -1, 0, 0, NULL, 0, 2 };
		dlk_samples_release(&s);
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) == 0);
		CHECK(s.n == 2 && s.sample_size == 2 && s.target_size == 2 && s.t && s.x);
		CHECK(s.t && s.t[0] == 0.5f && s.t[1] == -3.0f && s.t[2] == 150.0f && s.t[3] == 7.0f);
		CHECK(s.x && s.x[0] == 1.0f && s.x[1] == 2.0f && s.x[2] == 3.0f && s.x[3] == 4.0f);
		CHECK(s.y && s.y[0] == 0 && s.y[1] == 0);
		o.targets = 4;
		dlk_samples_release(&s);
		CHECK(dlk_csv_decode(t, strlen(t), "t.csv", &o, &s, &err) != 0);
		CHECK_STR(err.msg, "t.csv:1: data.csv.targets is 4 but rows have 4 fields: no feature is left");
		o.targets = 1;
		dlk_samples_release(&s);
		CHECK(dlk_csv_decode("1,2,3\n1,2,x\n", 12, "t.csv", &o, &s, &err) != 0);
		CHECK_STR(err.msg, "t.csv:2:5: expected a number, got 'x'");
		dlk_samples_release(&s);
	}
	return CHECK_DONE();
}
