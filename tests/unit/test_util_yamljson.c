/* yamljson: core-schema typing, errors with positions, alias bounds, and the round trip
 * cJSON -> YAML -> cJSON over strings chosen to break naive quoting. */
#include "tests/unit/check.h"
#include "lib/util/yamljson.h"
#include "lib/util/mem.h"

#include <math.h>
#include <stdlib.h>

/* Parses "v: <text>" and returns the value printed as compact JSON (caller frees). */
static char *typed(const char *plain)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *src = xasprintf("v: %s\n", plain);
	cJSON *docs = yamljson_parse(src, strlen(src), "t.yaml", NULL, &err);
	char *out;

	free(src);
	if (!docs)
		return xasprintf("ERROR %s", err.msg);
	cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 0), "v");
	if (cJSON_IsNumber(v) && isinf(v->valuedouble))
		out = xstrdup(v->valuedouble > 0 ? "inf" : "-inf");
	else if (cJSON_IsNumber(v) && isnan(v->valuedouble))
		out = xstrdup("nan");
	else if (cJSON_IsRaw(v))
		out = xasprintf("raw:%s", v->valuestring);
	else
		out = cJSON_PrintUnformatted(v);
	cJSON_Delete(docs);
	return out;
}

static void check_typed(const char *plain, const char *want)
{
	char *got = typed(plain);
	CHECK_MSG(!strcmp(got, want), "'%s' reads as %s", plain, want);
	if (strcmp(got, want))
		printf("#   got %s\n", got);
	free(got);
}

static char *parse_err(const char *src)
{
	static struct dlk_err err;
	size_t line = 0;
	cJSON *docs = yamljson_parse(src, strlen(src), "in.yaml", &line, &err);
	if (docs) {
		cJSON_Delete(docs);
		return "(parsed)";
	}
	CHECK_MSG(err.code == DLK_EXIT_CONFIG, "error code is DLK_EXIT_CONFIG for '%.30s'", src);
	CHECK_MSG(line > 0, "error line is known for '%.30s'", src);
	return err.msg;
}

/* Emits {"k": s, "list": [s], "nested": {s: s}} and checks that parsing gives it back. */
static int round_trip(const cJSON *v, char **yaml_out)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *y = yamljson_emit(v, &err);
	int same = 0;

	if (!y) {
		printf("#   emit failed: %s\n", err.msg);
		return 0;
	}
	cJSON *docs = yamljson_parse(y, strlen(y), "rt", NULL, &err);
	if (!docs)
		printf("#   parse failed: %s\n#   yaml:\n%s\n", err.msg, y);
	else if (cJSON_GetArraySize(docs) != 1)
		printf("#   %d documents\n", cJSON_GetArraySize(docs));
	else
		same = cJSON_Compare(v, cJSON_GetArrayItem(docs, 0), 1);
	if (docs && !same) {
		char *a = cJSON_PrintUnformatted(v), *b = cJSON_PrintUnformatted(cJSON_GetArrayItem(docs, 0));
		printf("#   want %s\n#   got  %s\n#   yaml:\n%s", a, b ? b : "-", y);
		free(a);
		free(b);
	}
	cJSON_Delete(docs);
	if (yaml_out)
		*yaml_out = y;
	else
		free(y);
	return same;
}

static const char *const nasty[] = {
	"yes", "no", "on", "off", "y", "N", "Yes", "true", "False", "null", "Null", "~", "", " ",
	"0x10", "0o17", "017", "1e3", "1_000", "1:20", "-.inf", ".inf", ".NaN", "+1", "-1", "1.", ".5",
	"2001-12-14", " lead", "trail ", "a: b", "a:b", "a:", ":a", "#x", "a #x", "*a", "&a", "!t",
	"!!str", "- x", "-", "--", "---", "...", "? x", "?", "{x}", "}", "[", "]", ",", "'", "\"",
	"\\", "\\n", "\n", "\t", "\r", "\r\n", "a\nb", "a\nb\n", "a\n\n", "line1\n  indented\n",
	"\n lead-nl", "x\n", "trailing space \nnext", "%YAML", "@at", "`tick", "|", ">", "|-", "=",
	"<<", "{{name}}", "{{", "}}", "a\tb", "\x01\x02\x1b\x7f", "caf\xc3\xa9", "\xe2\x80\xa8",
	"\xc2\x85", "\xef\xbb\xbf", "\xf0\x9f\x98\x80 emoji", "\xc2\xa0nbsp", "Ω", "NULL",
	"app.kubernetes.io/name", "nvidia.com/gpu", "4Gi", "500m", "0", "-0", "1e+20",
	"9007199254740993", "key: value\nother: x", "  ", "a  b", "- - -", "x # y", "x#y",
};

static void test_core_schema(void)
{
	check_typed("null", "null");
	check_typed("Null", "null");
	check_typed("NULL", "null");
	check_typed("~", "null");
	check_typed("", "null");
	check_typed("nULL", "\"nULL\"");
	check_typed("true", "true");
	check_typed("True", "true");
	check_typed("TRUE", "true");
	check_typed("false", "false");
	check_typed("FALSE", "false");
	check_typed("tRUE", "\"tRUE\"");
	check_typed("yes", "\"yes\"");
	check_typed("on", "\"on\"");
	check_typed("off", "\"off\"");
	check_typed("y", "\"y\"");
	check_typed("42", "42");
	check_typed("-17", "-17");
	check_typed("+5", "5");
	check_typed("007", "7");
	check_typed("0o17", "15");
	check_typed("0x1F", "31");
	check_typed("0x", "\"0x\"");
	check_typed("0x1g", "\"0x1g\"");
	check_typed("0o8", "\"0o8\"");
	check_typed("1_000", "\"1_000\"");
	check_typed("1:20", "\"1:20\"");
	check_typed("1.5", "1.5");
	check_typed("1e3", "1000");
	check_typed("-2.5E-1", "-0.25");
	check_typed(".5", "0.5");
	check_typed("5.", "5");
	check_typed("1e", "\"1e\"");
	check_typed(".", "\".\"");
	check_typed(".inf", "inf");
	check_typed("-.Inf", "-inf");
	check_typed("+.INF", "inf");
	check_typed(".nan", "nan");
	check_typed(".NaN", "nan");
	check_typed(".nAn", "\".nAn\"");
	check_typed("2001-12-14", "\"2001-12-14\"");
	check_typed("4Gi", "\"4Gi\"");
	check_typed("'42'", "\"42\"");
	check_typed("\"true\"", "\"true\"");
	check_typed("!!str 42", "\"42\"");
	check_typed("! 42", "\"42\"");
	check_typed("!!int \"42\"", "42");
	check_typed("!!float 3", "3");
	check_typed("!!bool yes", "ERROR t.yaml:1:4: the value does not match its tag '!!bool'");
	check_typed("!foo x", "ERROR t.yaml:1:4: unsupported tag '!foo'");
	/* integers: exact up to 2^53 as numbers, up to int64 as raw digits, beyond that an error */
	check_typed("999999999999999", "999999999999999");
	check_typed("1000000000000000", "raw:1000000000000000");
	check_typed("9007199254740992", "raw:9007199254740992");
	check_typed("9007199254740993", "raw:9007199254740993");
	check_typed("-9223372036854775808", "raw:-9223372036854775808");
	check_typed("9223372036854775807", "raw:9223372036854775807");
	check_typed("0x7fffffffffffffff", "raw:9223372036854775807");
	check_typed("9223372036854775808", "ERROR t.yaml:1:4: integer '9223372036854775808' is out of the int64 range");
	check_typed("|\n  block\n", "\"block\\n\"");
	check_typed(">-\n  folded\n  text\n", "\"folded text\"");
}

static void test_documents(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *src = "# only a comment\n---\n# another\n---\na: 1\n---\n---\n- x\n...\n";
	cJSON *docs = yamljson_parse(src, strlen(src), "s.yaml", NULL, &err);
	CHECK(docs && cJSON_GetArraySize(docs) == 2);
	char *j = docs ? cJSON_PrintUnformatted(docs) : NULL;
	CHECK_STR(j, "[{\"a\":1},[\"x\"]]");
	free(j);
	cJSON_Delete(docs);

	docs = yamljson_parse(NULL, 0, "e.yaml", NULL, &err);
	CHECK(docs && cJSON_GetArraySize(docs) == 0);
	cJSON_Delete(docs);
	docs = yamljson_parse("", 0, "e.yaml", NULL, &err);
	CHECK(docs && cJSON_GetArraySize(docs) == 0);
	cJSON_Delete(docs);

	/* an explicit null document is a value, not an empty document */
	docs = yamljson_parse("null\n", 5, "n.yaml", NULL, &err);
	CHECK(docs && cJSON_GetArraySize(docs) == 1 && cJSON_IsNull(cJSON_GetArrayItem(docs, 0)));
	cJSON_Delete(docs);

	/* not NUL-terminated input: only len bytes are read */
	const char part[] = "a: 1\nb: 2";
	docs = yamljson_parse(part, 4, "p.yaml", NULL, &err);
	j = docs ? cJSON_PrintUnformatted(docs) : NULL;
	CHECK_STR(j, "[{\"a\":1}]");
	free(j);
	cJSON_Delete(docs);
}

static void test_errors(void)
{
	CHECK_STR(parse_err("a: 1\nb: 2\na: 3\n"), "in.yaml:3:1: duplicate key 'a'");
	/* every YAML file the reader takes (templates, manifests) says so of a tab */
	CHECK_CONTAINS(parse_err("a:\n\tb: 1\n"), "in.yaml:2:1: tab characters are not allowed for indentation");
	CHECK_CONTAINS(parse_err("\xc3\xa9t\xc3\xa9: \"\xc3\xa9\"\nx:\n  y: 1\n\tz: 2\n"),
	               "in.yaml:4:1: tab characters are not allowed for indentation");
	CHECK_CONTAINS(parse_err("k: \"\xc3\xa9\xc3\xa9\"\n\tz: 2\n"), "in.yaml:2:1: tab characters are not allowed");
	CHECK_STR(parse_err("x:\n  k: 1\n  j: 2\n  k: 3\n  j: 4\n"), "in.yaml:4:3: duplicate key 'k'");
	CHECK_STR(parse_err("? [a]\n: 1\n"), "in.yaml:1:3: a mapping key must be a scalar");
	CHECK_STR(parse_err("{a: 1}: 2\n"), "in.yaml:1:1: a mapping key must be a scalar");
	CHECK_STR(parse_err("a: *nope\n"), "in.yaml:1:4: unknown alias '*nope'");
	CHECK_STR(parse_err("a: &x [*x]\n"), "in.yaml:1:8: unknown alias '*x'");
	CHECK_STR(parse_err("a: \"x\\0y\"\n"), "in.yaml:1:4: a string holds a NUL character");
	CHECK_CONTAINS(parse_err("a: [1, 2\n"), "in.yaml:2:1: ");
	CHECK_CONTAINS(parse_err("a: b: c\n"), "in.yaml:1:5: mapping values are not allowed");
	CHECK_CONTAINS(parse_err("a:\n\t- x\n"), "in.yaml:2:1: ");

	/* deep nesting is refused, not recursed into */
	struct dlk_buf deep = DLK_BUF_INIT;
	for (int i = 0; i < 300; i++)
		dlk_buf_addc(&deep, '[');
	CHECK_STR(parse_err(deep.data), "in.yaml:1:257: nesting deeper than 256 levels");
	dlk_buf_release(&deep);
}

static void test_aliases(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *ok = "base: &b {x: 1, l: [1, 2]}\ncopy: *b\ns: &s hi\nt: *s\n";
	cJSON *docs = yamljson_parse(ok, strlen(ok), "a.yaml", NULL, &err);
	char *j = docs ? cJSON_PrintUnformatted(docs) : NULL;
	CHECK_STR(j, "[{\"base\":{\"x\":1,\"l\":[1,2]},\"copy\":{\"x\":1,\"l\":[1,2]},\"s\":\"hi\",\"t\":\"hi\"}]");
	free(j);
	cJSON_Delete(docs);

	/* billion laughs: nine levels of ten aliases would be 10^9 nodes */
	struct dlk_buf b = DLK_BUF_INIT;
	dlk_buf_adds(&b, "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
	for (int i = 1; i < 10; i++) {
		dlk_buf_addf(&b, "a%d: &a%d [", i, i);
		for (int k = 0; k < 10; k++)
			dlk_buf_addf(&b, "%s*a%d", k ? ", " : "", i - 1);
		dlk_buf_adds(&b, "]\n");
	}
	size_t line = 0;
	docs = yamljson_parse(b.data, b.len, "lol.yaml", &line, &err);
	CHECK(docs == NULL);
	CHECK_CONTAINS(err.msg, "expands to more than 1000000 nodes");
	CHECK(line >= 6 && line <= 10);
	cJSON_Delete(docs);
	dlk_buf_release(&b);

	/* anchors are per document */
	const char *two = "a: &x 1\n---\nb: *x\n";
	docs = yamljson_parse(two, strlen(two), "d.yaml", NULL, &err);
	CHECK(docs == NULL);
	CHECK_STR(err.msg, "d.yaml:3:4: unknown alias '*x'");
}

static void test_round_trip(void)
{
	int all = 1;
	for (size_t i = 0; i < DLK_ARRAY_SIZE(nasty); i++) {
		const char *s = nasty[i];
		cJSON *v = cJSON_CreateObject();
		cJSON_AddStringToObject(v, "k", s);
		cJSON_AddItemToObject(v, s, cJSON_CreateString(s));
		cJSON *l = cJSON_AddArrayToObject(v, "list");
		cJSON_AddItemToArray(l, cJSON_CreateString(s));
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "in", s);
		cJSON_AddItemToArray(l, o);
		cJSON *ll = cJSON_CreateArray();
		cJSON_AddItemToArray(ll, cJSON_CreateString(s));
		cJSON_AddItemToArray(l, ll);
		cJSON *n = cJSON_AddObjectToObject(v, "nested");
		cJSON_AddItemToObject(n, s, cJSON_CreateString(s));
		int ok = round_trip(v, NULL);
		if (!ok) {
			char *j = cJSON_PrintUnformatted(v);
			printf("#   round trip failed for %s\n", j);
			free(j);
		}
		all &= ok;
		/* as a whole document too */
		cJSON *root = cJSON_CreateString(s);
		ok = round_trip(root, NULL);
		if (!ok)
			printf("#   root round trip failed for string %zu\n", i);
		all &= ok;
		cJSON_Delete(root);
		cJSON_Delete(v);
	}
	CHECK_MSG(all, "%zu nasty strings survive YAML -> JSON -> YAML as keys, values, items", DLK_ARRAY_SIZE(nasty));

	/* random strings over an alphabet of YAML indicators */
	static const char *const atoms[] = { " ", ":", "-", "#", "'", "\"", "\\", "\n", "\t", "{", "}",
		"[", "]", ",", "&", "*", "!", "|", ">", "?", "%", "@", "`", "a", "1", "0x", ".", "e",
		"yes", "null", "~", "\xc3\xa9", "\xe2\x80\xa8", "\r" };
	unsigned seed = 12345;
	int rand_ok = 1;
	for (int t = 0; t < 3000; t++) {
		char s[128] = "";
		int parts = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 8;
		for (int p = 0; p < parts; p++) {
			seed = seed * 1103515245u + 12345u;
			strcat(s, atoms[(seed >> 16) % DLK_ARRAY_SIZE(atoms)]);
		}
		cJSON *v = cJSON_CreateObject();
		cJSON_AddStringToObject(v, "v", s);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(v, "l"), cJSON_CreateString(s));
		cJSON_AddStringToObject(v, s, "key");
		if (!round_trip(v, NULL)) {
			rand_ok = 0;
			cJSON_Delete(v);
			break;
		}
		cJSON_Delete(v);
	}
	CHECK_MSG(rand_ok, "3000 random strings of YAML indicators round-trip");

	/* numbers, booleans, null, raw int64, empty containers, nesting */
	const char *j = "{\"i\":42,\"neg\":-7,\"f\":0.1,\"big\":1e+300,\"tiny\":5e-324,\"x\":9007199254740994,"
	                "\"t\":true,\"fa\":false,\"n\":null,\"eo\":{},\"ea\":[],"
	                "\"ll\":[[1,[2,[]]],{\"a\":[{\"b\":{}}]}],\"m\":{\"k\":{\"k\":{\"k\":\"v\"}}}}";
	cJSON *v = cJSON_Parse(j);
	cJSON_AddItemToObject(v, "raw", cJSON_CreateRaw("-9223372036854775808"));
	CHECK_MSG(round_trip(v, NULL), "numbers, raw int64, booleans, null, empty and nested containers round-trip");
	cJSON_Delete(v);

	/* inf and nan: cJSON_Compare cannot compare them, so compare by hand */
	struct dlk_err err = DLK_ERR_INIT;
	v = cJSON_CreateArray();
	cJSON_AddItemToArray(v, cJSON_CreateNumber(INFINITY));
	cJSON_AddItemToArray(v, cJSON_CreateNumber(-INFINITY));
	cJSON_AddItemToArray(v, cJSON_CreateNumber(NAN));
	char *y = yamljson_emit(v, &err);
	CHECK_STR(y, "- .inf\n- -.inf\n- .nan\n");
	cJSON *back = y ? yamljson_parse(y, strlen(y), "inf", NULL, &err) : NULL;
	cJSON *a = cJSON_GetArrayItem(back, 0);
	CHECK(a && isinf(cJSON_GetArrayItem(a, 0)->valuedouble) && cJSON_GetArrayItem(a, 1)->valuedouble < 0 &&
	      isnan(cJSON_GetArrayItem(a, 2)->valuedouble));
	cJSON_Delete(back);
	free(y);
	cJSON_Delete(v);
}

static void test_emit_shape(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *v = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x-spec\","
	                       "\"labels\":{\"app.kubernetes.io/name\":\"dlk\"}},\"data\":{\"dlk.yaml\":\"name: x\\nworkers: 2\\n\"},"
	                       "\"list\":[{\"a\":1,\"b\":[\"yes\",\"4Gi\"]},[1,2]],\"e\":[]}");
	char *y = yamljson_emit(v, &err);
	CHECK_STR(y, "apiVersion: v1\n"
	             "kind: ConfigMap\n"
	             "metadata:\n"
	             "  name: x-spec\n"
	             "  labels:\n"
	             "    app.kubernetes.io/name: dlk\n"
	             "data:\n"
	             "  dlk.yaml: |\n"
	             "    name: x\n"
	             "    workers: 2\n"
	             "list:\n"
	             "- a: 1\n"
	             "  b:\n"
	             "  - \"yes\"\n"
	             "  - \"4Gi\"\n"
	             "- - 1\n"
	             "  - 2\n"
	             "e: []\n");
	free(y);
	cJSON_Delete(v);

	/* a stream of documents */
	cJSON *docs = cJSON_Parse("[{\"a\":1},{\"b\":2}]");
	y = yamljson_emit_stream(docs, &err);
	CHECK_STR(y, "a: 1\n---\nb: 2\n");
	free(y);
	cJSON_Delete(docs);

	docs = cJSON_CreateArray();
	y = yamljson_emit_stream(docs, &err);
	CHECK_STR(y, "");
	free(y);
	cJSON_Delete(docs);

	/* invalid UTF-8 cannot be carried: an error, not a broken document */
	v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "k", "bad \xff byte");
	y = yamljson_emit(v, &err);
	CHECK(y == NULL);
	CHECK_CONTAINS(err.msg, "not valid UTF-8");
	cJSON_Delete(v);

	/* libyaml reads implicit keys of at most 1024 characters: longer ones are refused */
	struct dlk_buf b = DLK_BUF_INIT;
	for (int i = 0; i < 1200; i++)
		dlk_buf_addc(&b, 'k');
	v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, b.data, "x");
	y = yamljson_emit(v, &err);
	CHECK(y == NULL);
	CHECK_CONTAINS(err.msg, "is longer than 1000 bytes");
	cJSON_Delete(v);
	dlk_buf_reset(&b);
	for (int i = 0; i < 900; i++)
		dlk_buf_addc(&b, 'k');
	v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, b.data, "x");
	CHECK_MSG(round_trip(v, NULL), "a 900-byte key round-trips");
	cJSON_Delete(v);
	dlk_buf_reset(&b);

	/* input size is bounded before anything is read */
	cJSON *none = yamljson_parse("", (size_t)YAMLJSON_MAX_INPUT + 1, "huge.yaml", NULL, &err);
	CHECK(none == NULL);
	CHECK_STR(err.msg, "huge.yaml: larger than the limit of 16777216 bytes");

	CHECK(yamljson_quote(&b, "a\"b\\c\nd\xe2\x80\xa8", 10) == 0);
	CHECK_STR(b.data, "\"a\\\"b\\\\c\\nd\\L\"");
	CHECK(yamljson_quote(&b, "x\0y", 3) == -1);
	CHECK_STR(b.data, "\"a\\\"b\\\\c\\nd\\L\"");
	CHECK(yamljson_quote(&b, "\xc0\x80", 2) == -1);
	dlk_buf_reset(&b);
	yamljson_number(&b, 0.1);
	dlk_buf_addc(&b, ' ');
	yamljson_number(&b, 3);
	dlk_buf_addc(&b, ' ');
	yamljson_number(&b, -INFINITY);
	dlk_buf_addc(&b, ' ');
	yamljson_number(&b, 9007199254740994.0);
	CHECK_STR(b.data, "0.1 3 -.inf 9007199254740994.0");
	dlk_buf_release(&b);
}

int main(void)
{
	test_core_schema();
	test_documents();
	test_errors();
	test_aliases();
	test_round_trip();
	test_emit_shape();
	return CHECK_DONE();
}
