/* The JSON reader of request bodies: a tree whose arrays keep their numbers in one flat pool,
 * numbers exactly as strtod reads them, limits on depth and size, and errors naming the byte. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/serve/jsondoc.h"
#include "lib/util/rng.h"

static struct jd_limits lim = { 32, 0 };

static int parse(struct jd_doc *d, const char *s, char *msg)
{
	return jd_parse(d, s, strlen(s), &lim, msg, 256);
}

static void test_tree(void)
{
	struct jd_doc d;
	char msg[256];
	long long dims[8], v;
	int rank;

	CHECK(parse(&d, "{\"a\": [1, 2, [3, 4]], \"b\": \"x\\u00e9\\n\", \"c\": true, \"d\": null, \"e\": -2.5, \"f\": {}}", msg) == 0);
	const struct jd_value *a = jd_get(d.root, "a");
	CHECK(a && a->type == JD_ARRAY && a->n_items == 3 && a->n_numbers == 2 && a->numeric);
	CHECK(a->leaf_end - a->leaf_begin == 4 && d.nums[a->leaf_begin + 3] == 4);
	CHECK(!jd_shape(a, dims, 8, &rank) && rank == 0); /* [1, 2, [3, 4]] is not rectangular */
	const struct jd_value *b = jd_get(d.root, "b");
	CHECK(b && b->type == JD_STRING && b->len == 4 && !strcmp(b->str, "x\xc3\xa9\n"));
	CHECK(jd_get(d.root, "c")->boolean == 1 && jd_get(d.root, "d")->type == JD_NULL);
	CHECK(jd_get(d.root, "e")->num == -2.5 && !jd_int(jd_get(d.root, "e"), -10, 10, &v));
	CHECK(jd_get(d.root, "f")->type == JD_OBJECT && !jd_get(d.root, "nope"));
	jd_release(&d);

	/* a nested tensor is the same flat run of numbers as its flattened form */
	CHECK(parse(&d, "[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]", msg) == 0);
	CHECK(jd_shape(d.root, dims, 8, &rank) && rank == 3 && dims[0] == 2 && dims[1] == 2 && dims[2] == 3);
	CHECK(d.n_nums == 12 && d.nums[11] == 12);
	CHECK(!jd_shape(d.root, dims, 2, &rank)); /* deeper than allowed */
	jd_release(&d);
	CHECK(parse(&d, "[[1, 2], [3]]", msg) == 0 && !jd_shape(d.root, dims, 8, &rank));
	jd_release(&d);
	CHECK(parse(&d, "[[1, 2], [3, \"4\"]]", msg) == 0 && !d.root->numeric);
	jd_release(&d);
	CHECK(parse(&d, "[[], []]", msg) == 0 && jd_shape(d.root, dims, 8, &rank) && rank == 2 && dims[0] == 2 && dims[1] == 0);
	jd_release(&d);
	/* the same key twice: the first one counts (as most readers do) */
	CHECK(parse(&d, "{\"k\": 1, \"k\": 2}", msg) == 0 && jd_get(d.root, "k")->num == 1);
	jd_release(&d);
}

static void test_numbers(void)
{
	struct dlk_rng r;
	char text[64], msg[256];
	struct jd_doc d;
	int exact = 1;

	/* the fast path gives strtod's double, bit for bit, on numbers of every shape */
	dlk_rng_seed(&r, 7);
	for (int i = 0; i < 20000 && exact; i++) {
		double v;
		switch (i % 5) {
		case 0: v = (double)(dlk_rng_below(&r, 256)); break;
		case 1: v = (double)dlk_rng_uniform(&r); break;
		case 2: v = (dlk_rng_uniform(&r) - 0.5) * 1e6; break;
		case 3: v = (double)(float)((dlk_rng_uniform(&r) - 0.5) * 20); break;
		default: v = (dlk_rng_uniform(&r) + 0.01) * 1e-30; break;
		}
		static const char *const fmts[] = { "%.17g", "%.9g", "%.6f", "%g", "%.3e" };
		snprintf(text, sizeof(text), fmts[i % 5], v);
		if (jd_parse(&d, text, strlen(text), &lim, msg, sizeof(msg)) || d.root->type != JD_NUMBER ||
		    d.root->num != strtod(text, NULL)) {
			printf("# '%s' read as %.17g, strtod says %.17g\n", text, d.root ? d.root->num : -1.0, strtod(text, NULL));
			exact = 0;
		}
		jd_release(&d);
	}
	CHECK_MSG(exact, "20000 numbers read exactly as strtod reads them");
	CHECK(parse(&d, "[123456789012345678901234567890, -0.0, 1e-400, 2.5E+3, 0]", msg) == 0);
	CHECK(d.nums[0] == 1.2345678901234568e29 && d.nums[1] == 0 && d.nums[2] == 0 && d.nums[3] == 2500);
	jd_release(&d);
}

static void test_errors(void)
{
	struct jd_doc d;
	char msg[256];
	struct jd_limits shallow = { 4, 0 }, few = { 32, 5 };

	CHECK(parse(&d, "{\"a\": [1, 2,", msg) == -1);
	CHECK_CONTAINS(msg, "invalid JSON at byte");
	CHECK(parse(&d, "{\"a\": NaN}", msg) == -1);
	CHECK(parse(&d, "[1] [2]", msg) == -1);
	CHECK_CONTAINS(msg, "trailing characters after the JSON value");
	CHECK(parse(&d, "", msg) == -1);
	/* the grammar, rule by rule */
	static const char *const refused[] = {
		"\"\\ud800\"", "\"\\udc00x\"", "\"\\u12\"", "\"\\x\"", "\"a\tb\"", "\"abc", "01", "-", "1.", "1e", "+1",
		".5", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{1:2}", "[1 2]", "tru", "nul", "[", "{", "\"\xc0\xaf\"",
		"\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "[1]]", "'a'", "Infinity", "[-]", "{\"a\":}",
	};
	int all = 1;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (parse(&d, refused[i], msg) == 0) {
			printf("# accepted: %s\n", refused[i]);
			jd_release(&d);
			all = 0;
		}
	CHECK_MSG(all, "each of %zu texts that break RFC 8259 is refused", sizeof(refused) / sizeof(refused[0]));
	static const char *const accepted[] = {
		" {} ", "[]", "0", "-0.0e-0", "1E+2", "\"\\ud83d\\ude00\\/\\b\\f\"", "\"\xe2\x82\xac \xf0\x9f\x98\x80\"",
		"{\"a\":[true,false,null,{\"b\":[]}]}", "\"\\u0000\"", "\r\n\t[1]\n",
	};
	all = 1;
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		if (parse(&d, accepted[i], msg)) {
			printf("# refused: %s: %s\n", accepted[i], msg);
			all = 0;
		} else {
			jd_release(&d);
		}
	}
	CHECK_MSG(all, "each of %zu valid texts is read", sizeof(accepted) / sizeof(accepted[0]));
	CHECK(parse(&d, "\"\\ud83d\\ude00\"", msg) == 0 && d.root->len == 4 && !memcmp(d.root->str, "\xf0\x9f\x98\x80", 4));
	jd_release(&d);
	CHECK(parse(&d, "\"a\\u0000b\"", msg) == 0 && d.root->len == 3 && d.root->str[1] == 0);
	jd_release(&d);
	CHECK(jd_parse(&d, "[[[[[1]]]]]", 11, &shallow, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "JSON nesting deeper than 4");
	CHECK(jd_parse(&d, "[[[[1]]]]", 9, &shallow, msg, sizeof(msg)) == 0);
	jd_release(&d);
	CHECK(jd_parse(&d, "[1,2,3,4,5,6]", 13, &few, msg, sizeof(msg)) == -1);
	CHECK_CONTAINS(msg, "more than 5 values");
	CHECK(jd_parse(&d, "\"\xff\"", 3, &lim, msg, sizeof(msg)) == -1); /* not UTF-8 */
}

static void test_writers(void)
{
	struct dlk_buf b = DLK_BUF_INIT;
	jd_write_string(&b, "a\"b\\c\n\x01", 7);
	CHECK_STR(b.data, "\"a\\\"b\\\\c\\n\\u0001\"");
	dlk_buf_reset(&b);
	jd_write_float(&b, 0.1f);
	CHECK(strtof(b.data, NULL) == 0.1f);
	dlk_buf_reset(&b);
	jd_write_float(&b, 1.0f / 0.0f);
	CHECK_STR(b.data, "null");
	dlk_buf_release(&b);
}

int main(void)
{
	test_tree();
	test_numbers();
	test_errors();
	test_writers();
	return CHECK_DONE();
}
