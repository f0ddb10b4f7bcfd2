/* Hostile project files: every one gets a clear error and none crashes, hangs or eats memory.
 * The last part mutates the seed corpus (tests/fuzz/spec/) at random, with a fixed seed. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"
#include "lib/util/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
	struct dlk_buf b = DLK_BUF_INIT;
	dlk_buf_adds(&b, head);
	for (size_t i = 0; i < n; i++)
		dlk_buf_adds(&b, unit);
	dlk_buf_adds(&b, tail);
	return dlk_buf_detach(&b, NULL);
}

static const char *load_len(const char *text, size_t len)
{
	struct dlk_project *s;
	memset(&spec_test_err, 0, sizeof(spec_test_err));
	s = project_load_mem(text, len, "dlk.yaml", NULL, 0, &spec_test_err);
	if (s) {
		project_free(s);
		return "";
	}
	return spec_test_err.msg;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Loads a mutated copy; a spec that loads must dump and reload to the same bytes. */
static int fuzz_one(const char *seed, size_t len)
{
	static const char *const tokens[] = { ":", "- ", "[", "]", "{", "}", "&a ", "*a", "\"", "'", "\n",
	                                      "  ", "#", "!!str ", "~", "0x", "1e9", "\t", "\xff", "\0", "? ",
	                                      "relu", "dense", "Gi", "-1" };
	char buf[8192];
	size_t n = len < sizeof(buf) - 64 ? len : sizeof(buf) - 64;
	int edits = 1 + (int)(next() % 4), ok = 1;

	memcpy(buf, seed, n);
	for (int e = 0; e < edits; e++) {
		size_t at = n ? (size_t)(next() % n) : 0;
		switch (next() % 3) {
		case 0: /* overwrite a byte */
			if (n)
				buf[at] = (char)(next() & 0xff);
			break;
		case 1: /* delete a run */
		{
			size_t k = 1 + next() % 8;
			if (at + k > n)
				k = n - at;
			memmove(buf + at, buf + at + k, n - at - k);
			n -= k;
			break;
		}
		default: /* insert a YAML-ish token */
		{
			const char *t = tokens[next() % (sizeof(tokens) / sizeof(tokens[0]))];
			size_t k = *t ? strlen(t) : 1;
			if (n + k >= sizeof(buf))
				break;
			memmove(buf + at + k, buf + at, n - at);
			memcpy(buf + at, t, k);
			n += k;
		}
		}
	}
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_project *s = project_load_mem(buf, n, "fuzz.yaml", NULL, 0, &e);
	if (s) {
		char *d1 = project_dump_yaml(s);
		struct dlk_project *s2 = project_load_mem(d1, strlen(d1), "dump.yaml", NULL, 0, &e);
		char *d2 = s2 ? project_dump_yaml(s2) : NULL;
		ok = d2 && !strcmp(d1, d2);
		if (!ok)
			printf("# round trip failed for:\n%.*s\n# %s\n", (int)n, buf, e.msg);
		free(d1);
		free(d2);
		project_free(s2);
		project_free(s);
	} else {
		ok = e.code == DLK_EXIT_CONFIG && e.msg[0] && strlen(e.msg) < DLK_ERR_MSG_MAX;
		if (!ok)
			printf("# bad error (code %d) for:\n%.*s\n", e.code, (int)n, buf);
	}
	return ok;
}

int main(void)
{
	const char *m;
	char *t;

	/* size bound */
	t = repeat("name: demo\n#", "x", 1 << 20, "\n");
	m = load_len(t, strlen(t));
	CHECK_CONTAINS(m, "'dlk.yaml' is 1048589 bytes, more than the limit of 1048576");
	{
		const char *dir = getenv("BUILD") ? getenv("BUILD") : "build";
		char path[512];
		FILE *f;
		snprintf(path, sizeof(path), "%s/test-spec-huge.yaml", dir);
		f = fopen(path, "w");
		CHECK(f != NULL);
		if (f) {
			fputs(t, f);
			fclose(f);
			struct dlk_err e = DLK_ERR_INIT;
			CHECK(!project_load(path, NULL, 0, &e));
			CHECK_CONTAINS(e.msg, "is larger than the limit of 1048576 bytes");
			CHECK(e.code == DLK_EXIT_CONFIG);
			remove(path);
		}
	}
	free(t);

	/* deep nesting, flow and block */
	t = repeat("name: ", "[", 100000, "");
	m = load_len(t, strlen(t));
	CHECK_STR(m, "dlk.yaml:1:38: nesting is deeper than 32 levels");
	free(t);
	t = repeat("name: ", "{a: ", 5000, "");
	m = load_len(t, strlen(t));
	CHECK_CONTAINS(m, "nesting is deeper than 32 levels");
	free(t);
	{
		struct dlk_buf b = DLK_BUF_INIT;
		for (int i = 0; i < 200; i++)
			dlk_buf_addf(&b, "%*sk%d:\n", i, "", i);
		m = load_len(b.data, b.len);
		CHECK_CONTAINS(m, "nesting is deeper than 32 levels");
		dlk_buf_release(&b);
	}

	/* billion laughs: aliases are refused before anything is expanded */
	m = load_msg("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	             "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
	             "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
	             "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
	             "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
	             "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	             "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
	             "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
	             "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n");
	CHECK_STR(m, "dlk.yaml:2:8: alias '*a' is not supported: dlk.yaml does not allow anchors and aliases; write the value out");
	m = load_msg(MINIMAL "training: &t {epochs: 3}\nserving: *t\n");
	CHECK_CONTAINS(m, "dlk.yaml:11:10: alias '*t' is not supported");
	m = load_msg(MINIMAL "<<: *x\n");
	CHECK_CONTAINS(m, "dlk.yaml:10:5: alias '*x' is not supported");
	/* an anchor alone is harmless */
	CHECK_STR(load_msg(MINIMAL "training: &t {epochs: 3}\n"), "");

	/* NUL bytes and invalid UTF-8 */
	m = load_len("name: de\0mo\n", 12);
	CHECK_STR(m, "dlk.yaml:1:9: invalid YAML: control characters are not allowed (byte 0x00)");
	m = load_len("\0", 1);
	CHECK_CONTAINS(m, "dlk.yaml:1:1: invalid YAML: control characters are not allowed");
	m = load_msg("name: \"nul\\0here\"\n");
	CHECK_STR(m, "dlk.yaml:1:7: a string contains a NUL character");
	m = load_msg("name: caf\xe9\n");
	CHECK_CONTAINS(m, "dlk.yaml:1:10: invalid YAML: incomplete UTF-8 octet sequence");
	m = load_msg("name: caf\xe9x\n");
	CHECK_CONTAINS(m, "dlk.yaml:1:11: invalid YAML: invalid trailing UTF-8 octet (byte 0x78)");
	m = load_msg("name: \xff\xfe\n");
	CHECK_CONTAINS(m, "invalid YAML: invalid leading UTF-8 octet");
	m = load_msg("\xef\xbb\xbfname: bom\n");  /* a BOM is fine */
	CHECK_CONTAINS(m, "data: missing required key 'data'");
	m = load_msg("name: \x01\n");
	CHECK_CONTAINS(m, "control characters are not allowed");

	/* collections too long */
	t = repeat("name: demo\nx: [", "0,", 150000, "0]\n");
	m = load_len(t, strlen(t));
	CHECK_CONTAINS(m, "sequence has too many items");
	free(t);
	t = repeat("name: demo\nmodel: {input: [4], layers: [relu]}\ndata:\n  train: {images: /a, labels: /b}\n  classes: [",
	           "a,", 70000, "a]\n");
	m = load_len(t, strlen(t));
	CHECK_CONTAINS(m, "data.classes: has 70001 classes, more than the limit of 65536");
	free(t);
	t = repeat("name: demo\ndata: {train: {images: /a, labels: /b}}\nmodel:\n  input: [4]\n  layers: [", "relu,", 300, "relu]\n");
	m = load_len(t, strlen(t));
	CHECK_CONTAINS(m, "model.layers: has 301 layers, more than the limit of 256");
	free(t);
	{
		struct dlk_buf b = DLK_BUF_INIT;
		dlk_buf_adds(&b, MINIMAL "labels: {");
		for (int i = 0; i < 100; i++)
			dlk_buf_addf(&b, "k%d: v, ", i);
		dlk_buf_adds(&b, "}\n");
		m = load_len(b.data, b.len);
		CHECK_CONTAINS(m, "labels: has 100 entries, more than the limit of 64");
		dlk_buf_release(&b);
	}

	/* a mapping with 95000 keys is handled in linear time (duplicates included) */
	{
		struct dlk_buf b = DLK_BUF_INIT;
		clock_t start = clock();
		dlk_buf_adds(&b, MINIMAL);
		for (int i = 0; i < 95000; i++)
			dlk_buf_addf(&b, "k%d: 1\n", i % 50000);
		m = load_len(b.data, b.len);
		CHECK_CONTAINS(m, "dlk.yaml:10:1: k0: unknown key 'k0'");
		CHECK_CONTAINS(m, "more problems");
		double secs = (double)(clock() - start) / CLOCKS_PER_SEC;
		CHECK_MSG(secs < 20, "95000 keys take %.2fs of CPU (quadratic duplicate checks would take minutes)", secs);
		dlk_buf_release(&b);
		m = load_msg(MINIMAL "training:\n  seed: 1\n  seed: 2\n  seed: 3\n");
		CHECK_STR(m, "dlk.yaml:12:3: training.seed: duplicate key 'seed' (first at line 11)\n"
		             "dlk.yaml:13:3: training.seed: duplicate key 'seed' (first at line 11)");
	}

	/* a very long value is shortened in messages */
	t = repeat("name: ", "A", 300000, "\ndata: {train: {images: /a, labels: /b}}\nmodel: {input: [4], layers: [relu]}\n");
	m = load_len(t, strlen(t));
	CHECK_CONTAINS(m, "dlk.yaml:1:7: name: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...' must be at most 50 characters (it has 300000)");
	free(t);

	/* thousands of problems: the message stays bounded and says how many were left out */
	{
		struct dlk_buf b = DLK_BUF_INIT;
		dlk_buf_adds(&b, MINIMAL "training:\n");
		for (int i = 0; i < 3000; i++)
			dlk_buf_addf(&b, "  unknown_%d: 1\n", i);
		m = load_len(b.data, b.len);
		CHECK(strlen(m) < DLK_ERR_MSG_MAX);
		CHECK_CONTAINS(m, "dlk.yaml:11:3: training.unknown_0: unknown key 'unknown_0' (keys here are: ");
		CHECK_CONTAINS(m, "dlk.yaml:12:3: training.unknown_1: unknown key 'unknown_1'\n");
		CHECK_CONTAINS(m, " more problems");
		const char *tail = strrchr(m, '\n');
		int more = 0, shown = 0;
		CHECK(tail && sscanf(tail, "\n... and %d more problems", &more) == 1);
		for (const char *p = m; *p; p++)
			shown += *p == '\n';
		CHECK_MSG(shown + more == 3000, "shown %d + more %d == 3000", shown, more);
		dlk_buf_release(&b);
	}

	/* --set cannot smuggle in what the file may not hold */
	{
		const char *deep[] = { "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.aa.bb.cc.dd.ee.ff.gg=1" };
		m = load_msg_sets(MINIMAL, deep, 1);
		CHECK_CONTAINS(m, "has a key path deeper than 32 levels");
		CHECK(spec_test_err.code == DLK_EXIT_USAGE);
		const char *ctl[] = { "name=a\x01" "b" };
		m = load_msg_sets(MINIMAL, ctl, 1);
		CHECK_CONTAINS(m, "--set name=a\x01" "b: 'a\x01" "b' must consist of lowercase letters");
		const char *idx[] = { "model.layers.99999999999=relu" };
		m = load_msg_sets(MINIMAL, idx, 1);
		CHECK_STR(m, "--set model.layers.99999999999=relu: '99999999999' is not an index into the list (it has 1 items)");
	}

	/* the seed corpus itself: good files load and round-trip, bad-* files fail cleanly */
	{
		static const struct { const char *file; int ok; } corpus[] = {
			{ "fashion-mlp.yaml", 1 }, { "fashion-cnn.yaml", 1 }, { "csv-minimal.yaml", 1 },
			{ "tar-shards.yaml", 1 }, { "shard-list.yaml", 1 }, { "quoting.yaml", 1 }, { "dump-cnn.yaml", 1 },
			{ "bad-many.yaml", 0 }, { "bad-types.yaml", 0 }, { "bad-syntax.yaml", 0 },
			{ "bad-alias.yaml", 0 }, { "bad-nul.yaml", 0 }, { "bad-utf8.yaml", 0 }, { "deep.yaml", 0 },
		};
		for (size_t i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
			char path[256];
			struct dlk_err e = DLK_ERR_INIT;
			snprintf(path, sizeof(path), "tests/fuzz/spec/%s", corpus[i].file);
			struct dlk_project *sp = project_load(path, NULL, 0, &e);
			if (corpus[i].ok) {
				CHECK_MSG(sp != NULL, "%s loads (%s)", path, e.msg);
			} else {
				CHECK_MSG(!sp && e.code == DLK_EXIT_CONFIG && !strncmp(e.msg, path, strlen(path)),
				          "%s fails with a located error", path);
			}
			project_free(sp);
		}
	}

	/* random mutations of the seed corpus */
	{
		static const char *const seeds[] = { "tests/fuzz/spec/fashion-mlp.yaml", "tests/fuzz/spec/fashion-cnn.yaml",
		                                     "tests/fuzz/spec/csv-minimal.yaml", "tests/fuzz/spec/bad-many.yaml",
		                                     "tests/fuzz/spec/tar-shards.yaml", "tests/fuzz/spec/quoting.yaml",
		                                     "tests/fuzz/spec/bad-types.yaml" };
		int bad = 0, runs = 0, iters = getenv("DLK_TEST_LONG") ? 100000 : 1000;
		clock_t start = clock();
		for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
			struct dlk_buf b = DLK_BUF_INIT;
			char msg[256];
			if (dlk_buf_read_file(&b, seeds[i], 1 << 20, msg, sizeof(msg))) {
				CHECK_MSG(0, "read %s: %s", seeds[i], msg);
				continue;
			}
			for (int k = 0; k < iters; k++, runs++)
				bad += !fuzz_one(b.data, b.len);
			dlk_buf_release(&b);
		}
		CHECK_MSG(bad == 0, "%d mutated files: all load with a clear error or round-trip (%d bad, %.2fs)", runs,
		          bad, (double)(clock() - start) / CLOCKS_PER_SEC);
	}
	return CHECK_DONE();
}
