/* Text rows from CSV and JSON Lines, their labels, padding to a length, and the errors users see. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/data/dataset.h"
#include "lib/data/text.h"
#include "lib/util/mem.h"

static struct dlk_err err = DLK_ERR_INIT;

static void test_csv(void)
{
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	const char *csv = "id,text,genre\r\n1,\"Hello, \"\"world\"\"\nsecond line\",news\r\n\r\n2,plain,fiction\n3,,news";

	CHECK_MSG(dlk_text_rows_parse(csv, strlen(csv), "t.csv", 0, "text", "genre", NULL, &r, &err) == 0, "%s", err.msg);
	CHECK(r.n == 3);
	if (r.n == 3) {
		CHECK_STR(r.text[0], "Hello, \"world\"\nsecond line");
		CHECK_STR(r.label[0], "news");
		CHECK(r.line[0] == 2 && r.line[1] == 5 && r.line[2] == 6);
		CHECK_STR(r.text[1], "plain");
		CHECK(r.len[2] == 0);
	}
	dlk_text_rows_release(&r);

	static const struct {
		const char *csv, *error;
	} bad[] = {
		{ "text,label\na,b\nc,d,e\n", "t.csv:3: 3 fields, but the header row has 2" },
		{ "body,label\na,b\n", "t.csv:1: the header row has no column 'text'" },
		{ "text,class\na,b\n", "t.csv:1: the header row has no column 'label'" },
		{ "text,label\n\"open,b\n", "t.csv:2: a quoted field is never closed" },
		{ "text,label\nx,\n", "t.csv:2: the label column 'label' is empty" },
		{ "", "'t.csv': empty: no header row" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dlk_err_clear(&err);
		CHECK(dlk_text_rows_parse(bad[i].csv, strlen(bad[i].csv), "t.csv", 0, "text", "label", NULL, &r, &err) < 0);
		CHECK_STR(err.msg, bad[i].error);
		CHECK(err.code == DLK_EXIT_CONFIG && r.n == 0);
	}
}

static void test_jsonl(void)
{
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	const char *j = "{\"text\": \"caf\\u00e9\", \"label\": 2}\n\n  \n{\"label\": \"x\", \"text\": \"t\\n2\"}\r\n";

	CHECK(dlk_text_is_jsonl_name("a.JSONL") && dlk_text_is_jsonl_name("b.ndjson") && !dlk_text_is_jsonl_name("c.csv"));
	CHECK_MSG(dlk_text_rows_parse(j, strlen(j), "t.jsonl", 1, "text", "label", NULL, &r, &err) == 0, "%s", err.msg);
	CHECK(r.n == 2);
	if (r.n == 2) {
		CHECK_STR(r.text[0], "caf\xc3\xa9");
		CHECK_STR(r.label[0], "2");
		CHECK_STR(r.text[1], "t\n2");
		CHECK(r.line[1] == 4);
	}
	dlk_text_rows_release(&r);
	static const struct {
		const char *j, *error;
	} bad[] = {
		{ "{\"text\": \"a\", \"label\": 1}\n[1]\n", "t.jsonl:2: not a JSON object" },
		{ "{\"body\": \"a\", \"label\": 1}\n", "t.jsonl:1: no string 'text' in the object" },
		{ "{\"text\": \"a\", \"label\": 1.5}\n", "t.jsonl:1: 'label' must be a class name or an index from 0 to 99999" },
		{ "{\"text\": \"a\", \"label\": -1}\n", "t.jsonl:1: 'label' must be a class name or an index from 0 to 99999" },
		{ "{\"text\": \"a\"}\n", "t.jsonl:1: 'label' must be a class name or an index from 0 to 99999" },
		{ "{\"text\": \"a\", \"label\": 1", "t.jsonl:1: not a JSON object" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dlk_err_clear(&err);
		CHECK(dlk_text_rows_parse(bad[i].j, strlen(bad[i].j), "t.jsonl", 1, "text", "label", NULL, &r, &err) < 0);
		CHECK_STR(err.msg, bad[i].error);
	}
}

static void test_labels(void)
{
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	const char *csv = "text,label\na,news\nb,fiction\nc,news\nd,humor\n";
	int32_t y[4];
	char **found;
	int nf;

	dlk_text_rows_parse(csv, strlen(csv), "t.csv", 0, "text", "label", NULL, &r, &err);
	CHECK(dlk_text_labels(&r, "t.csv", NULL, 0, y, &found, &nf, &err) == 0);
	CHECK(nf == 3 && !strcmp(found[0], "fiction") && !strcmp(found[1], "humor") && !strcmp(found[2], "news"));
	CHECK(y[0] == 2 && y[1] == 0 && y[2] == 2 && y[3] == 1);
	for (int i = 0; i < nf; i++)
		free(found[i]);
	free(found);
	static const char *const classes[] = { "news", "fiction", "humor" };
	CHECK(dlk_text_labels(&r, "t.csv", classes, 3, y, &found, &nf, &err) == 0 && !found);
	CHECK(y[0] == 0 && y[1] == 1 && y[3] == 2);
	CHECK(dlk_text_labels(&r, "t.csv", classes, 2, y, &found, &nf, &err) < 0);
	CHECK_STR(err.msg, "t.csv:5: label 'humor' is not one of the 2 classes");
	dlk_text_rows_release(&r);
	const char *ints = "text,label\na,3\nb,0\n";
	dlk_text_rows_parse(ints, strlen(ints), "t.csv", 0, "text", "label", NULL, &r, &err);
	CHECK(dlk_text_labels(&r, "t.csv", NULL, 0, y, &found, &nf, &err) == 0 && !found && y[0] == 3 && y[1] == 0);
	dlk_text_rows_release(&r);
}

static void test_encode(void)
{
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	struct dlk_tokenizer *t = dlk_tokenizer_byte();
	const char *csv = "text,label\nab,0\nabcdefgh,1\n,0\n";
	float x[3 * 4];
	uint8_t mask[12];

	dlk_text_rows_parse(csv, strlen(csv), "t.csv", 0, "text", "label", NULL, &r, &err);
	dlk_text_encode_rows(t, &r, 4, x);
	/* padded with 0 after "ab"; "abcdefgh" cut to its first 4; the empty text all padding */
	CHECK(x[0] == 'a' + 1 && x[1] == 'b' + 1 && x[2] == 0 && x[3] == 0);
	CHECK(x[4] == 'a' + 1 && x[7] == 'd' + 1);
	CHECK(x[8] == 0 && x[11] == 0);
	dlk_text_mask(t, x, 12, mask);
	CHECK(mask[0] == 1 && mask[1] == 1 && mask[2] == 0 && mask[7] == 1 && mask[8] == 0);
	dlk_text_rows_release(&r);
	dlk_tokenizer_free(t);
}

static char *write_tmp(const char *text)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *path = xasprintf("%s/dlk-test-text-XXXXXX.jsonl", tmp);
	int fd = mkstemps(path, 6);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		printf("# cannot write %s\n", path);
	close(fd);
	return path;
}

/* dlk_data_load: the training split trains the tokenizer and names the classes; the test split
 * (given the training split) encodes with that tokenizer and numbers its labels the same, though
 * its own text and labels alone would give others */
static void test_load(void)
{
	char *train = write_tmp("{\"text\": \"the cat sat on the mat\", \"label\": \"b\"}\n"
	                        "{\"text\": \"the dog sat on the log\", \"label\": \"c\"}\n"
	                        "{\"text\": \"a cat and a dog\", \"label\": \"a\"}\n");
	char *test = write_tmp("{\"text\": \"zzzz zzzz zzzz\", \"label\": \"c\"}\n");
	struct dlk_data d;
	struct dlk_data_opts o;
	struct dlk_dataset tr = DLK_DATASET_INIT, te = DLK_DATASET_INIT, alone = DLK_DATASET_INIT;

	memset(&d, 0, sizeof(d));
	memset(&o, 0, sizeof(o));
	d.format = DLK_DATA_TEXT;
	d.train.source.url = train;
	d.test.source.url = test;
	d.scale = 1, d.std = 1;
	d.max_bytes = 1 << 20;
	d.text.column = "text", d.text.label = "label";
	d.text.tokenizer = DLK_TOKENIZER_BPE;
	d.text.vocab_size = 270;
	o.shape[0] = o.shape[1] = 1, o.shape[2] = 8;
	CHECK_MSG(dlk_data_load(&d, "train", &o, &tr, &err) == 0, "train loads: %s", err.msg);
	CHECK(tr.n == 3 && tr.sample_size == 8 && tr.tokenizer && tr.tokenizer->n_merges > 0);
	CHECK(tr.n_class_names == 3 && tr.n_classes == 3 && !strcmp(tr.class_names[2], "c") && tr.y[0] == 1);
	/* " the" is one token: "the cat ..." starts the, cat, sat ... */
	CHECK(tr.x[0] != 't' + 1 && tr.x[7] != 0);
	o.train = &tr;
	CHECK_MSG(dlk_data_load(&d, "test", &o, &te, &err) == 0, "test loads: %s", err.msg);
	CHECK(te.n == 1 && te.y[0] == 2 && te.n_classes == 3);
	CHECK(te.tokenizer && te.tokenizer->n_merges == tr.tokenizer->n_merges &&
	      !memcmp(te.tokenizer->merges, tr.tokenizer->merges, (size_t)tr.tokenizer->n_merges * sizeof(*tr.tokenizer->merges)));
	o.train = NULL;
	CHECK(dlk_data_load(&d, "test", &o, &alone, &err) == 0);
	CHECK(alone.y[0] == 0 && alone.n_classes == 1 && alone.tokenizer->n_merges != tr.tokenizer->n_merges);
	dlk_dataset_release(&tr);
	dlk_dataset_release(&te);
	dlk_dataset_release(&alone);
	o.shape[0] = 2;
	CHECK(dlk_data_load(&d, "train", &o, &tr, &err) < 0);
	CHECK_STR(err.msg, "format text needs a flat model.input: [LENGTH], the tokens per sequence");
	unlink(train);
	unlink(test);
	free(train);
	free(test);
}

int main(void)
{
	test_load();
	test_csv();
	test_jsonl();
	test_labels();
	test_encode();
	return CHECK_DONE();
}
