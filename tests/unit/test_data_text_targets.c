/* Float targets of text rows (lib/data/text.h, dlk_text_targets): several labels a row for task
 * multilabel (a CSV cell split by the separator, a JSON Lines array, none at all), numbers a row
 * for task regression, and the errors, each naming its line. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#include "lib/data/text.h"

static struct dlk_err err = DLK_ERR_INIT;

static void free_found(char **found, int n)
{
	for (int i = 0; i < n; i++)
		free(found[i]);
	free(found);
}

static void test_multilabel(void)
{
	const char *csv = "text,label\none,b|a\ntwo,\nthree,a\n";
	const char *jl = "{\"text\": \"one\", \"label\": [\"b\", \"a\"]}\n{\"text\": \"two\", \"label\": []}\n"
	                 "{\"text\": \"three\", \"label\": \"a\"}\n";
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	float *t = NULL;
	size_t k = 0;
	char **found = NULL;
	int nf = 0;
	static const float want[] = { 1, 1, 0, 0, 1, 0 };

	for (int jsonl = 0; jsonl < 2; jsonl++) {
		const char *src = jsonl ? jl : csv;
		CHECK_MSG(dlk_text_rows_parse(src, strlen(src), "t", jsonl, "text", "label", "|", &r, &err) == 0, "%s", err.msg);
		CHECK(r.n == 3);
		CHECK_MSG(dlk_text_targets(&r, "t", 1, "|", NULL, 0, &t, &k, &found, &nf, &err) == 0, "%s", err.msg);
		CHECK(k == 2 && nf == 2 && found && !strcmp(found[0], "a") && !strcmp(found[1], "b"));
		CHECK(t && !memcmp(t, want, sizeof(want)));
		free(t);
		free_found(found, nf);
		/* data.classes: names or indices, in its order */
		static const char *const classes[] = { "b", "a", "c" };
		CHECK(dlk_text_targets(&r, "t", 1, "|", classes, 3, &t, &k, &found, &nf, &err) == 0 && !found && k == 3);
		CHECK(t && t[0] == 1 && t[1] == 1 && t[2] == 0 && t[3] + t[4] + t[5] == 0 && t[6] == 0 && t[7] == 1);
		free(t);
		CHECK(dlk_text_targets(&r, "t", 1, "|", classes, 1, &t, &k, &found, &nf, &err) < 0 && !t);
		CHECK_STR(err.msg, jsonl ? "t:1: label 'a' is not one of the 1 labels" : "t:2: label 'a' is not one of the 1 labels");
		dlk_text_rows_release(&r);
	}
	/* integer labels: 0..max */
	const char *ints = "text,label\nx,2|0\ny,1\n";
	dlk_text_rows_parse(ints, strlen(ints), "t", 0, "text", "label", "|", &r, &err);
	CHECK(dlk_text_targets(&r, "t", 1, "|", NULL, 0, &t, &k, &found, &nf, &err) == 0 && !found && k == 3);
	CHECK(t && t[0] == 1 && t[1] == 0 && t[2] == 1 && t[3] == 0 && t[4] == 1 && t[5] == 0);
	free(t);
	dlk_text_rows_release(&r);
	/* an empty label between separators, no labels anywhere */
	const char *gap = "text,label\nx,a||b\n";
	dlk_text_rows_parse(gap, strlen(gap), "t", 0, "text", "label", "|", &r, &err);
	CHECK(dlk_text_targets(&r, "t", 1, "|", NULL, 0, &t, &k, &found, &nf, &err) < 0);
	CHECK_STR(err.msg, "t:2: an empty label in 'a||b'");
	dlk_text_rows_release(&r);
	const char *none = "text,label\nx,\n";
	dlk_text_rows_parse(none, strlen(none), "t", 0, "text", "label", "|", &r, &err);
	CHECK(dlk_text_targets(&r, "t", 1, "|", NULL, 0, &t, &k, &found, &nf, &err) < 0);
	CHECK_STR(err.msg, "'t': no row has a label");
	dlk_text_rows_release(&r);
	/* without a separator (classification) an empty label is still an error */
	CHECK(dlk_text_rows_parse(none, strlen(none), "t", 0, "text", "label", NULL, &r, &err) < 0);
	CHECK_STR(err.msg, "t:2: the label column 'label' is empty");
	/* a JSON list element holding the separator, an object */
	const char *sepin = "{\"text\": \"x\", \"label\": [\"a|b\"]}\n";
	CHECK(dlk_text_rows_parse(sepin, strlen(sepin), "t", 1, "text", "label", "|", &r, &err) < 0 && r.n == 0);
	CHECK_STR(err.msg, "t:1: 'label' must be a number, a label, or a list of them (without '|' inside one)");
}

static void test_regression(void)
{
	const char *csv = "text,label\none,1.5;-2\ntwo,1e3;0.25\n";
	const char *jl = "{\"text\": \"one\", \"label\": [1.5, -2]}\n{\"text\": \"two\", \"label\": [1000, 0.25]}\n";
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	float *t = NULL;
	size_t k = 0;
	char **found = NULL;
	int nf = 0;
	static const float want[] = { 1.5f, -2, 1000, 0.25f };

	for (int jsonl = 0; jsonl < 2; jsonl++) {
		const char *src = jsonl ? jl : csv;
		CHECK_MSG(dlk_text_rows_parse(src, strlen(src), "t", jsonl, "text", "label", ";", &r, &err) == 0, "%s", err.msg);
		CHECK_MSG(dlk_text_targets(&r, "t", 0, ";", NULL, 0, &t, &k, &found, &nf, &err) == 0, "%s", err.msg);
		CHECK(k == 2 && !found && t && !memcmp(t, want, sizeof(want)));
		free(t);
		dlk_text_rows_release(&r);
	}
	const char *one = "{\"text\": \"one\", \"label\": 0.125}\n";
	dlk_text_rows_parse(one, strlen(one), "t", 1, "text", "label", ";", &r, &err);
	CHECK(dlk_text_targets(&r, "t", 0, ";", NULL, 0, &t, &k, &found, &nf, &err) == 0 && k == 1 && t && t[0] == 0.125f);
	free(t);
	dlk_text_rows_release(&r);
	static const struct { const char *csv, *msg; } bad[] = {
		{ "text,label\na,1;2\nb,3\n", "t:3: 1 target, but the first row has 2" },
		{ "text,label\na,1;2\nb,3;x\n", "t:3: target 2, 'x', is not a number" },
		{ "text,label\na,1;\n", "t:2: target 2, '', is not a number" },
		{ "text,label\na,\n", "t:2: target 1, '', is not a number" },
		{ "text,label\na,1e999\n", "t:2: target 1, '1e999', is not a number" },
		{ "text,label\na,nan\n", "t:2: target 1, 'nan', is not a number" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(dlk_text_rows_parse(bad[i].csv, strlen(bad[i].csv), "t", 0, "text", "label", ";", &r, &err) == 0);
		CHECK(dlk_text_targets(&r, "t", 0, ";", NULL, 0, &t, &k, &found, &nf, &err) < 0 && !t);
		CHECK_STR(err.msg, bad[i].msg);
		dlk_text_rows_release(&r);
	}
}

int main(void)
{
	test_multilabel();
	test_regression();
	return CHECK_DONE();
}
