#include "tests/unit/check.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/err.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/jsonprint.h"
#include "lib/util/suggest.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

int main(void)
{
	struct dlk_buf b = DLK_BUF_INIT;
	/* an empty buffer is an empty string, and gives one away */
	CHECK(b.data && !b.data[0] && b.len == 0 && b.cap == 0);
	dlk_buf_reset(&b);
	char *empty = dlk_buf_detach(&b, NULL);
	CHECK(empty && !empty[0] && empty != b.data && b.data && !b.data[0]);
	free(empty);
	dlk_buf_release(&b);
	CHECK(b.data && !b.data[0]);
	for (int i = 0; i < 1000; i++)
		dlk_buf_addf(&b, "%d,", i);
	CHECK(b.len == 3890);
	CHECK(!strncmp(b.data, "0,1,2,", 6));
	dlk_buf_release(&b);

	char hex[65];
	dlk_sha256_hex("abc", 3, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	CHECK(dlk_sha256_is_hex(hex));
	CHECK(!dlk_sha256_is_hex("abc"));

	const char *keys[] = { "epochs", "batch_size", "optimizer", "seed" };
	CHECK_STR(dlk_suggest("epoch", keys, 4), "epochs");
	CHECK_STR(dlk_suggest("bacth_size", keys, 4), "batch_size");
	CHECK(dlk_suggest("zzzzzz", keys, 4) == NULL);
	CHECK(dlk_edit_distance("kitten", "sitting") == 3);
	/* no near match: the candidates listed, cut short as a list */
	{
		char sug[40];
		CHECK_STR(dlk_suggest_or_list(sug, sizeof(sug), "epoch", keys, 4, "keys are"), " (did you mean 'epochs'?)");
		CHECK_STR(dlk_suggest_or_list(sug, sizeof(sug), "lstm", keys, 2, "keys are"),
		          " (keys are: epochs, batch_size)");
		CHECK_STR(dlk_suggest_or_list(sug, sizeof(sug), "lstm", keys, 4, "keys are"),
		          " (keys are: epochs, batch_size, opt...)");
		CHECK_STR(dlk_suggest_or_list(sug, sizeof(sug), "lstm", keys, 0, "keys are"), "");
	}

	/* -o json: two spaces, one member or item a line, as jq prints it; a tab in a string stays \t */
	{
		cJSON *o = cJSON_Parse("{\"a\":1,\"b\":[],\"c\":{},\"d\":[{\"e\":\"x\\ty\"},[true,null]],\"f\":1.5}");
		char *s = dlk_json_print(o);
		CHECK_STR(s, "{\n  \"a\": 1,\n  \"b\": [],\n  \"c\": {},\n  \"d\": [\n    {\n      \"e\": \"x\\ty\"\n    },\n"
		             "    [\n      true,\n      null\n    ]\n  ],\n  \"f\": 1.5\n}");
		free(s);
		/* a command's document: -o json ends with a newline, -o yaml is yamljson's, and both print */
		struct dlk_err de = DLK_ERR_INIT;
		char *j = dlk_doc_text(o, 1, &de), *y = dlk_doc_text(o, 0, &de);
		CHECK(j && strlen(j) > 2 && j[strlen(j) - 1] == '\n' && j[strlen(j) - 2] == '}');
		s = dlk_json_print(o);
		CHECK(j && s && !strncmp(j, s, strlen(s)) && strlen(j) == strlen(s) + 1);
		CHECK(y && !strncmp(y, "a: 1\n", 5));
		FILE *f = tmpfile();
		CHECK(f && dlk_doc_print(f, o, 0, &de) == 0);
		CHECK(f && ftell(f) == (long)strlen(y));
		if (f)
			fclose(f);
		free(s);
		free(j);
		free(y);
		cJSON_Delete(o);
	}

	struct dlk_err e = DLK_ERR_INIT;
	CHECK(dlk_errf(&e, DLK_EXIT_CONFIG, "bad '%s'", "x") == -1);
	dlk_err_prefix(&e, "dlk.yaml");
	CHECK_STR(e.msg, "dlk.yaml: bad 'x'");
	CHECK(e.code == DLK_EXIT_CONFIG);
	/* UTF-8 */
	CHECK(dlk_utf8_valid("caf\xc3\xa9", 5));
	CHECK(dlk_utf8_valid("\xf0\x9f\x98\x80", 4));
	CHECK(!dlk_utf8_valid("caf\xe9", 4));
	CHECK(!dlk_utf8_valid("\xc0\xaf", 2));        /* overlong */
	CHECK(!dlk_utf8_valid("\xed\xa0\x80", 3));    /* surrogate */
	CHECK(!dlk_utf8_valid("\xe0\x80\xaf", 3));    /* overlong */
	CHECK(!dlk_utf8_valid("a\0b", 3));
	CHECK(!dlk_utf8_valid("\xe2\x82", 2));        /* truncated */

	/* RFC 3339: the one parser, to the fraction, with offsets; nothing but a whole time */
	double t = 0;
	CHECK(dlk_rfc3339_parse("2026-01-02T03:04:05Z", &t) == 0 && t == 1767323045);
	CHECK(dlk_rfc3339_parse("2026-01-02T04:04:05.123+01:00", &t) == 0 && fabs(t - 1767323045.123) < 1e-6);
	CHECK(dlk_rfc3339_parse("2026-01-02T03:04:05.123456789z", &t) == 0 && fabs(t - 1767323045.123457) < 1e-5);
	CHECK(dlk_rfc3339_parse("2026-01-01T20:34:05-06:30", &t) == 0 && t == 1767323045);
	CHECK(dlk_rfc3339_parse("1970-01-01t00:00:00Z", &t) == 0 && t == 0);
	char now[32];
	dlk_rfc3339_now(now);
	CHECK(dlk_rfc3339_parse(now, &t) == 0 && t > 1.7e9);
	t = 7;
	const char *bad_times[] = { NULL, "", "2026", "2026-01-02", "2026-01-02 03:04:05Z", "2026-01-02T03:04:05",
	                            "2026-1-02T03:04:05Z", " 2026-01-02T03:04:05Z", "2026-13-02T03:04:05Z",
	                            "2026-01-02T24:00:00Z", "2026-01-02T03:04:05.Z", "2026-01-02T03:04:05Zx",
	                            "2026-01-02T03:04:05+01", "2026-01-02T03:04:05+0100", "+026-01-02T03:04:05Z" };
	for (size_t i = 0; i < sizeof(bad_times) / sizeof(bad_times[0]); i++)
		CHECK_MSG(dlk_rfc3339_parse(bad_times[i], &t) == -1 && t == 7, "not a time: '%s'",
		          bad_times[i] ? bad_times[i] : "(null)");

	/* a project's directory from its project file's path */
	const char *const dir_cases[][2] = { { "dlk.yaml", "." }, { "p/dlk.yaml", "p" }, { "./p/q/x.yaml", "./p/q" },
		                             { "/dlk.yaml", "/" }, { "/a/b.yaml", "/a" } };
	for (size_t i = 0; i < sizeof(dir_cases) / sizeof(dir_cases[0]); i++) {
		char *d = dlk_dir_of(dir_cases[i][0]);
		CHECK_STR(d, dir_cases[i][1]);
		free(d);
	}

	/* the monotonic clock, in two units */
	long long ms = dlk_now_ms();
	double sec = dlk_now();
	CHECK(dlk_now_ms() >= ms && sec >= (double)ms / 1000 - 1 && sec <= (double)dlk_now_ms() / 1000 + 1);

	char *s = xasprintf("%s-%d", "a", 7);
	CHECK_STR(s, "a-7");
	free(s);
	return CHECK_DONE();
}
