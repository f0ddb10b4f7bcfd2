/* Datasets in a directory store: manifests (canonical, strict), push (only what is missing),
 * references (ids, prefixes, tags), verified gets (a corrupted object is named), and the node
 * cache (hits, a bad cached copy replaced, least-recently-used eviction, one fetch for two
 * processes), and hostile stores: a file changed between hashing and upload is refused with
 * nothing stored, a corrupted object of the right size is replaced by the next push, and a FIFO,
 * a directory or a short object in the store, or a link planted at a .part name, are refused
 * without hanging, writing through the link or leaving a .part. */
#include "tests/unit/check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/store/cache.h"
#include "lib/store/manifest.h"
#include "lib/store/dataset.h"
#include "lib/store/reader.h"
#include "lib/store/store_impl.h" /* a counting wrapper around a directory store */
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

static char *tmp;
static struct dlk_err err = DLK_ERR_INIT;

static void put(const char *rel, const char *text)
{
	char *p = xasprintf("%s/%s", tmp, rel), *slash = strrchr(p, '/');
	*slash = '\0';
	dlk_mkdir_p(p, NULL);
	*slash = '/';
	dlk_write_file_atomic(p, text, strlen(text), 0644, NULL);
	free(p);
}

static char *path(const char *rel)
{
	return xasprintf("%s/%s", tmp, rel);
}

static char *slurp(const char *rel)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char msg[256], *p = path(rel);
	if (dlk_buf_read_file(&b, p, 0, msg, sizeof(msg))) {
		free(p);
		dlk_buf_release(&b);
		return NULL;
	}
	free(p);
	return dlk_buf_detach(&b, NULL);
}

static int parse_text(const char *text, struct dlk_manifest *m)
{
	dlk_err_clear(&err);
	dlk_manifest_release(m);
	return dlk_manifest_parse(text, strlen(text), "m", m, &err);
}

/* A store that counts what is fetched from it: a wrapper around a directory store. */
static int gets, get_from_nonzero;
static const struct dlk_store_ops *inner;
static int counting_get(struct dlk_store *s, const char *key, unsigned long long offset, dlk_store_sink_fn sink,
                        void *ctx, struct dlk_err *e)
{
	if (!strncmp(key, "sha256/", 7)) {
		gets++;
		if (offset)
			get_from_nonzero++;
	}
	return inner->get(s, key, offset, sink, ctx, e);
}

static const char *H_A = "ca978112ca1bbdcafac231b39a23dc4da786eff8146d4e94d1e1f1d3c5d4a8b5"; /* fake */

static void test_manifest(void)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT, m2 = DLK_MANIFEST_INIT;
	const char *args[2];
	char *text, *p1, *p2;
	size_t len;
	char id1[65];

	put("ds/b.txt", "bee\n");
	put("ds/a/one.bin", "one");
	put("ds/a/two.bin", "two");
	put("extra.csv", "x,y\n1,2\n");
	p1 = path("ds");
	p2 = path("extra.csv");
	args[0] = p1;
	args[1] = p2;
	CHECK(dlk_manifest_build(args, 2, NULL, NULL, &m, &err) == 0);
	CHECK(m.n == 4);
	CHECK_STR(m.n == 4 ? m.e[0].path : NULL, "a/one.bin");
	CHECK_STR(m.n == 4 ? m.e[1].path : NULL, "a/two.bin");
	CHECK_STR(m.n == 4 ? m.e[2].path : NULL, "b.txt");
	CHECK_STR(m.n == 4 ? m.e[3].path : NULL, "extra.csv");
	CHECK(m.total == 3 + 3 + 4 + 8);
	text = dlk_manifest_format(&m, &len);
	CHECK(!strncmp(text, "dlk-dataset 1\n", 14));
	CHECK(dlk_manifest_parse(text, len, "m", &m2, &err) == 0);
	CHECK_STR(m2.id, m.id);
	{
		char hex[65];
		dlk_sha256_hex(text, len, hex);
		CHECK_STR(m.id, hex);
		char *again = dlk_manifest_format(&m2, &len);
		CHECK_STR(again, text);
		free(again);
	}
	memcpy(id1, m.id, 65);
	free(text);
	dlk_manifest_release(&m);
	dlk_manifest_release(&m2);

	/* one changed byte: a new id */
	put("ds/b.txt", "bee!");
	CHECK(dlk_manifest_build(args, 2, NULL, NULL, &m, &err) == 0);
	CHECK(strcmp(m.id, id1) != 0);
	dlk_manifest_release(&m);

	/* two arguments naming the same file */
	put("other/extra.csv", "z");
	{
		char *p3 = path("other/extra.csv");
		const char *dup[2] = { p2, p3 };
		CHECK(dlk_manifest_build(dup, 2, NULL, NULL, &m, &err) == -1);
		CHECK_CONTAINS(err.msg, "would both be 'extra.csv'");
		free(p3);
	}
	free(p1);
	free(p2);

	/* strict parsing: only the canonical form */
	{
		char good[512];
		snprintf(good, sizeof(good), "dlk-dataset 1\n%s 3 a\n%s 0 b/c\n", H_A, H_A);
		CHECK(parse_text(good, &m) == 0 && m.n == 2 && m.total == 3);
	}
	static const struct { const char *fmt, *msg; } bad[] = {
		{ "dlk-dataset 2\n", "not a dataset manifest" },
		{ "dlk-dataset 1\n%s 3 b\n%s 3 a\n", "out of order" },
		{ "dlk-dataset 1\n%s 3 a\n%s 3 a\n", "listed twice" },
		{ "dlk-dataset 1\n%s 3 ../a\n", "'.' or '..'" },
		{ "dlk-dataset 1\n%s 3 /a\n", "absolute" },
		{ "dlk-dataset 1\n%s 03 a\n", "size" },
		{ "dlk-dataset 1\n%s -1 a\n", "size" },
		{ "dlk-dataset 1\n%s 3 a", "newline" },
		{ "dlk-dataset 1\n%s 3 a//b\n", "empty path segment" },
		{ "dlk-dataset 1\n%s 3 a/\n", "empty path segment" },
		{ "dlk-dataset 1\n%s 3 a\tb\n", "control character" },
		{ "dlk-dataset 1\n%s 3 a\\b\n", "backslash" },
		{ "dlk-dataset 1\n%s 3 \xc0\xaf\n", "not UTF-8" },
		{ "dlk-dataset 1\n%s 3 a\n%s 3 a/b\n", "is a file and a directory" },
		{ "dlk-dataset 1\nCA978112ca1bbdcafac231b39a23dc4da786eff8146d4e94d1e1f1d3c5d4a8b5 3 a\n", "lowercase hex" },
		{ "dlk-dataset 1\n%s 99999999999999999999 a\n", "size" },
	};
	for (size_t i = 0; i < DLK_ARRAY_SIZE(bad); i++) {
		char text2[512];
		snprintf(text2, sizeof(text2), bad[i].fmt, H_A, H_A);
		CHECK_MSG(parse_text(text2, &m) == -1 && strstr(err.msg, bad[i].msg) && err.code == DLK_EXIT_CONFIG,
		          "rejects %s", bad[i].msg);
		if (!strstr(err.msg, bad[i].msg))
			printf("#   got \"%s\"\n", err.msg);
	}
	dlk_manifest_release(&m);

	/* references */
	{
		struct dlk_dataset_ref r;
		char why[160], ref[80];
		snprintf(ref, sizeof(ref), "sha256:%s", H_A);
		CHECK(dlk_dataset_ref_parse(ref, 0, &r, why, sizeof(why)) == 0 && r.kind == DLK_REF_ID && !strcmp(r.id, H_A));
		CHECK(dlk_dataset_ref_parse("fashion@v1", 0, &r, why, sizeof(why)) == 0 && r.kind == DLK_REF_TAG &&
		      !strcmp(r.tag, "fashion@v1"));
		CHECK(dlk_dataset_ref_parse("fashion", 0, &r, why, sizeof(why)) == 0 && !strcmp(r.tag, "fashion@latest"));
		CHECK(dlk_dataset_ref_parse("sha256:abcdef", 0, &r, why, sizeof(why)) == -1);
		CHECK(dlk_dataset_ref_parse("sha256:abcdef", 1, &r, why, sizeof(why)) == 0 && r.kind == DLK_REF_ID_PREFIX);
		CHECK(dlk_dataset_ref_parse("a@b@c", 0, &r, why, sizeof(why)) == -1);
		CHECK(dlk_dataset_ref_parse("-x@v1", 0, &r, why, sizeof(why)) == -1);
		CHECK(dlk_dataset_ref_parse("x@", 0, &r, why, sizeof(why)) == -1);
		CHECK(dlk_dataset_ref_parse("x y", 0, &r, why, sizeof(why)) == -1);
	}
}

static void test_store(void)
{
	struct dlk_store_opts o = { 0 };
	struct dlk_manifest m = DLK_MANIFEST_INIT, got = DLK_MANIFEST_INIT;
	struct dlk_push_stats ps;
	struct dlk_get_stats gs;
	struct dlk_store *s;
	char *store = path("store"), *ds = path("ds"), id1[65], id[65];
	const char *args[1] = { ds };
	const char *tags[2] = { "fashion@v1", "fashion" };

	s = dlk_store_open(store, &o, &err);
	CHECK(s != NULL);
	CHECK(dlk_manifest_build(args, 1, NULL, NULL, &m, &err) == 0);
	CHECK(dlk_dataset_push(s, &m, tags, 2, NULL, NULL, &ps, &err) == 0);
	CHECK(ps.files == 3 && ps.uploaded == 3 && ps.manifest_new);
	memcpy(id1, m.id, 65);
	/* the same files again: nothing sent */
	CHECK(dlk_dataset_push(s, &m, NULL, 0, NULL, NULL, &ps, &err) == 0);
	CHECK(ps.uploaded == 0 && ps.uploaded_bytes == 0 && !ps.manifest_new);
	dlk_manifest_release(&m);
	/* one file changed: one object sent, a new id */
	put("ds/a/two.bin", "TWO");
	CHECK(dlk_manifest_build(args, 1, NULL, NULL, &m, &err) == 0);
	CHECK(dlk_dataset_push(s, &m, (const char *[]){ "fashion@v2" }, 1, NULL, NULL, &ps, &err) == 0);
	CHECK(ps.uploaded == 1 && ps.manifest_new && strcmp(m.id, id1));

	/* references */
	CHECK(dlk_dataset_resolve(s, "fashion@v1", 0, id, &err) == 0 && !strcmp(id, id1));
	CHECK(dlk_dataset_resolve(s, "fashion", 0, id, &err) == 0 && !strcmp(id, id1));
	CHECK(dlk_dataset_resolve(s, "fashion@v2", 0, id, &err) == 0 && !strcmp(id, m.id));
	CHECK(dlk_dataset_resolve(s, "fashion@v3", 0, id, &err) == -1 && err.code == DLK_EXIT_NOTFOUND);
	CHECK_CONTAINS(err.msg, "no tag 'fashion@v3'");
	{
		char ref[80];
		snprintf(ref, sizeof(ref), "sha256:%.8s", id1);
		CHECK(dlk_dataset_resolve(s, ref, 1, id, &err) == 0 && !strcmp(id, id1));
		CHECK(dlk_dataset_resolve(s, ref, 0, id, &err) == -1 && err.code == DLK_EXIT_USAGE);
		snprintf(ref, sizeof(ref), "sha256:%s", id1);
		CHECK(dlk_dataset_resolve(s, ref, 0, id, &err) == 0);
		snprintf(ref, sizeof(ref), "sha256:%s", H_A);
		CHECK(dlk_dataset_resolve(s, ref, 0, id, &err) == -1 && err.code == DLK_EXIT_NOTFOUND);
	}
	{
		char **ids;
		size_t n;
		struct dlk_tag *t;
		CHECK(dlk_dataset_list(s, &ids, &n, &err) == 0 && n == 2);
		for (size_t i = 0; i < n; i++)
			free(ids[i]);
		free(ids);
		CHECK(dlk_dataset_tags(s, &t, &n, &err) == 0 && n == 3);
		CHECK(n == 3 && !strcmp(t[0].name, "fashion@latest") && !strcmp(t[0].id, id1) &&
		      !strcmp(t[2].name, "fashion@v2"));
		dlk_tags_free(t, n);
	}

	/* a verified get, and one that finds a corrupted object */
	CHECK(dlk_dataset_manifest(s, m.id, &got, &err) == 0 && got.n == 3);
	{
		char *dest = path("out"), *t;
		CHECK(dlk_dataset_get(s, &got, dest, NULL, NULL, NULL, &gs, &err) == 0 && gs.fetched == 3);
		t = slurp("out/a/two.bin");
		CHECK_STR(t, "TWO");
		free(t);
		CHECK(dlk_dataset_get(s, &got, dest, NULL, NULL, NULL, &gs, &err) == 0 && gs.kept == 3 && gs.fetched == 0);
		/* corrupt the object of a/one.bin in the store */
		const struct dlk_manifest_entry *e = dlk_manifest_find(&got, "a/one.bin");
		char *obj = xasprintf("%s/sha256/%s", store, e->sha256), *o2 = path("out2");
		dlk_write_file_atomic(obj, "onE", 3, 0644, NULL);
		dlk_err_clear(&err);
		CHECK(dlk_dataset_get(s, &got, o2, NULL, NULL, NULL, &gs, &err) == -1);
		CHECK(err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "is corrupted");
		CHECK_CONTAINS(err.msg, e->sha256);
		CHECK_CONTAINS(err.msg, "a/one.bin");
		{
			char *part = xasprintf("%s/a/one.bin.part", o2), *fin = xasprintf("%s/a/one.bin", o2);
			CHECK(access(fin, F_OK) != 0 && access(part, F_OK) != 0);
			free(part);
			free(fin);
		}
		dlk_write_file_atomic(obj, "one", 3, 0644, NULL);
		/* a corrupted manifest is named too */
		char *man = xasprintf("%s/datasets/%s", store, m.id), *mt = NULL;
		struct dlk_buf b = DLK_BUF_INIT;
		char msg[128];
		dlk_buf_read_file(&b, man, 0, msg, sizeof(msg));
		mt = dlk_buf_detach(&b, NULL);
		dlk_write_file_atomic(man, "dlk-dataset 1\n", 14, 0644, NULL);
		dlk_manifest_release(&got);
		CHECK(dlk_dataset_manifest(s, m.id, &got, &err) == -1 && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "is corrupted");
		dlk_write_file_atomic(man, mt, strlen(mt), 0644, NULL);
		free(mt);
		free(man);
		free(obj);
		free(o2);
		free(dest);
	}
	dlk_manifest_release(&got);
	dlk_manifest_release(&m);
	dlk_store_close(s);
	free(store);
	free(ds);
}

static void test_cache(void)
{
	struct dlk_store_opts o = { 0 };
	struct dlk_cache c = DLK_CACHE_INIT;
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_store_ops ops;
	struct dlk_store *s;
	char *store = path("store"), *cdir = path("cache"), *ds = path("big");
	const char *args[1] = { ds };
	char *p = NULL;
	int hit;

	/* four objects of 1000 bytes */
	for (int i = 0; i < 4; i++) {
		char name[32], body[1001];
		memset(body, 'a' + i, 1000);
		body[1000] = '\0';
		snprintf(name, sizeof(name), "big/f%d", i);
		put(name, body);
	}
	s = dlk_store_open(store, &o, &err);
	inner = s->ops;
	ops = *s->ops;
	ops.get = counting_get;
	s->ops = &ops;
	CHECK(dlk_manifest_build(args, 1, NULL, NULL, &m, &err) == 0);
	CHECK(dlk_dataset_push(s, &m, NULL, 0, NULL, NULL, NULL, &err) == 0);
	CHECK(dlk_cache_open(cdir, 2500, &c, &err) == 0);

	gets = 0;
	CHECK(dlk_cache_fetch(&c, s, m.e[0].sha256, 1000, NULL, NULL, "f0", &p, &hit, &err) == 0 && !hit && gets == 1);
	free(p);
	CHECK(dlk_cache_fetch(&c, s, m.e[0].sha256, 1000, NULL, NULL, "f0", &p, &hit, &err) == 0 && hit && gets == 1);
	/* a cached copy gone bad is fetched again */
	dlk_write_file_atomic(p, "bad", 3, 0644, NULL);
	free(p);
	CHECK(dlk_cache_fetch(&c, s, m.e[0].sha256, 1000, NULL, NULL, "f0", &p, &hit, &err) == 0 && !hit && gets == 2);
	free(p);
	/* a .part left by a process that died is continued, not started over */
	{
		char *part = xasprintf("%s/sha256/%s.part", cdir, m.e[1].sha256);
		char half[501];
		memset(half, 'b', 500);
		half[500] = '\0';
		dlk_write_file_atomic(part, half, 500, 0644, NULL);
		get_from_nonzero = 0;
		CHECK(dlk_cache_fetch(&c, s, m.e[1].sha256, 1000, NULL, NULL, "f1", &p, &hit, &err) == 0 &&
		      get_from_nonzero == 1);
		CHECK(access(part, F_OK) != 0);
		free(p);
		free(part);
	}
	/* eviction: the least recently used go first, never the ones in use */
	{
		struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } }, older[2] = { { 500, 0 }, { 500, 0 } };
		char *f0 = dlk_cache_object(&c, m.e[0].sha256), *f1 = dlk_cache_object(&c, m.e[1].sha256);
		char *f2 = NULL;
		unsigned long long freed;
		int over;
		const char *keep[1];
		size_t objs;
		unsigned long long bytes;
		utimensat(AT_FDCWD, f0, old, 0);
		utimensat(AT_FDCWD, f1, older, 0);
		CHECK(dlk_cache_fetch(&c, s, m.e[2].sha256, 1000, NULL, NULL, "f2", &f2, &hit, &err) == 0);
		CHECK(dlk_cache_usage(&c, &bytes, &objs, &err) == 0 && bytes == 3000 && objs == 3);
		keep[0] = m.e[2].sha256;
		CHECK(dlk_cache_trim(&c, keep, 1, &freed, &over, &err) == 0 && freed == 1000 && !over);
		CHECK(access(f1, F_OK) != 0 && access(f0, F_OK) == 0 && access(f2, F_OK) == 0);
		c.max_bytes = 500;
		CHECK(dlk_cache_trim(&c, keep, 1, &freed, &over, &err) == 0 && freed == 1000 && over);
		CHECK(access(f0, F_OK) != 0 && access(f2, F_OK) == 0);
		free(f0);
		free(f1);
		free(f2);
		c.max_bytes = 2500;
	}
	/* two processes want the same object: one fetches it, the other waits and hits */
	{
		pid_t kids[2];
		int status, hits = 0;
		for (int k = 0; k < 2; k++) {
			kids[k] = fork();
			if (kids[k] == 0) {
				char *pp = NULL;
				int h = 0;
				struct dlk_err e = DLK_ERR_INIT;
				if (dlk_cache_fetch(&c, s, m.e[3].sha256, 1000, NULL, NULL, "f3", &pp, &h, &e))
					_exit(2);
				_exit(h ? 10 : 11);
			}
		}
		for (int k = 0; k < 2; k++) {
			waitpid(kids[k], &status, 0);
			hits += WIFEXITED(status) && WEXITSTATUS(status) == 10;
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) >= 10);
		}
		CHECK_MSG(hits == 1, "one of two processes fetched, the other found it cached (%d hits)", hits);
	}
	dlk_cache_release(&c);
	dlk_manifest_release(&m);
	dlk_store_close(s);
	free(store);
	free(cdir);
	free(ds);
}

/* Overwrites the n bytes of file rel at offset off (same size). */
static void poke(const char *rel, long off, const char *bytes)
{
	char *p = path(rel);
	int fd = open(p, O_WRONLY);
	if (fd >= 0) {
		if (pwrite(fd, bytes, strlen(bytes), off) < 0) { /* the check below sees it */ }
		close(fd);
	}
	free(p);
}

static int exists(const char *rel)
{
	struct stat st;
	char *p = path(rel);
	int r = lstat(p, &st) == 0;
	free(p);
	return r;
}

static void test_hostile(void)
{
	struct dlk_store_opts o = { 0 };
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_push_stats ps;
	struct dlk_store *s;
	char *store = path("hs"), *ds = path("hds"), *obj = NULL, *dest = path("hout/f.bin"), *part = NULL;
	const char *args[1] = { ds };
	char key[80], *text;
	int r;

	put("hds/f.bin", "0123456789abcdef");
	put("hout/keep", "");
	s = dlk_store_open(store, &o, &err);
	CHECK(dlk_manifest_build(args, 1, NULL, NULL, &m, &err) == 0);

	/* the file changes after push hashed it (same size): refused, nothing stored, no tag */
	poke("hds/f.bin", 3, "X");
	dlk_err_clear(&err);
	CHECK(dlk_dataset_push(s, &m, (const char *[]){ "h@v1" }, 1, NULL, NULL, &ps, &err) == -1);
	CHECK(err.code == DLK_EXIT_FAIL);
	CHECK_CONTAINS(err.msg, "changed while it was uploaded");
	CHECK_CONTAINS(err.msg, "nothing was stored");
	snprintf(key, sizeof(key), "hs/sha256/%s", m.e[0].sha256);
	CHECK(!exists(key));
	CHECK(!exists("hs/tags/h@v1"));
	/* and a put of bytes that are not what src says, on the front */
	{
		struct dlk_put_src src = { .data = "abc", .size = 3, .what = "x" };
		memcpy(src.sha256, H_A, 65);
		snprintf(key, sizeof(key), "sha256/%s", H_A);
		dlk_err_clear(&err);
		CHECK(dlk_store_put(s, key, &src, &err) == -1 && err.code == DLK_EXIT_FAIL);
		CHECK(dlk_store_has(s, key, H_A, 3, &err) == 0);
	}
	poke("hds/f.bin", 3, "3");
	CHECK(dlk_dataset_push(s, &m, (const char *[]){ "h@v1" }, 1, NULL, NULL, &ps, &err) == 0 && ps.uploaded == 1);

	/* a corrupted object of the right size: the next push replaces it, and a get works again */
	snprintf(key, sizeof(key), "hs/sha256/%s", m.e[0].sha256);
	obj = path(key);
	chmod(obj, 0644);
	poke(key, 0, "Z");
	snprintf(key, sizeof(key), "sha256/%s", m.e[0].sha256);
	CHECK(dlk_store_has(s, key, m.e[0].sha256, m.e[0].size, &err) == 0);
	dlk_err_clear(&err);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK(!exists("hout/f.bin.part"));
	CHECK(dlk_dataset_push(s, &m, NULL, 0, NULL, NULL, &ps, &err) == 0 && ps.uploaded == 1);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == 0);
	text = slurp("hout/f.bin");
	CHECK(text && !strcmp(text, "0123456789abcdef"));
	free(text);
	/* a corrupted manifest of the right size is replaced too */
	snprintf(key, sizeof(key), "hs/datasets/%s", m.id);
	poke(key, 0, "#");
	CHECK(dlk_dataset_push(s, &m, NULL, 0, NULL, NULL, &ps, &err) == 0 && ps.manifest_new);
	{
		struct dlk_manifest back = DLK_MANIFEST_INIT;
		CHECK(dlk_dataset_manifest(s, m.id, &back, &err) == 0);
		dlk_manifest_release(&back);
	}

	/* a short object: corrupted (3), not "cannot be reached" (4); no .part left */
	unlink(dest);
	if (truncate(obj, 5)) { /* the check below fails */ }
	dlk_err_clear(&err);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == -1);
	CHECK_MSG(err.code == DLK_EXIT_CONFIG, "a short object exits 3 (got %d: %s)", err.code, err.msg);
	CHECK(!exists("hout/f.bin.part") && !exists("hout/f.bin"));

	/* a directory where the object should be: corrupted (3) */
	unlink(obj);
	mkdir(obj, 0755);
	dlk_err_clear(&err);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == -1);
	CHECK_MSG(err.code == DLK_EXIT_CONFIG, "a directory object exits 3 (got %d: %s)", err.code, err.msg);
	CHECK(!exists("hout/f.bin.part"));
	rmdir(obj);

	/* a FIFO where the object should be: refused at once (a blocking open would hang here) */
	CHECK(mkfifo(obj, 0644) == 0);
	dlk_err_clear(&err);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == -1);
	CHECK_MSG(err.code == DLK_EXIT_CONFIG, "a FIFO object exits 3 (got %d: %s)", err.code, err.msg);
	CHECK_CONTAINS(err.msg, "not a regular file");
	CHECK(!exists("hout/f.bin.part"));
	/* training reading the store in place stops there too, instead of opening the FIFO */
	{
		struct dlk_dataset_reader rd = { 0 };
		char *local = NULL, sha[65];
		CHECK(dlk_dataset_reader_open(&rd, s, m.id, NULL, &err) == 0);
		dlk_err_clear(&err);
		CHECK(dlk_dataset_reader_resolve(&rd, "f.bin", &local, sha, &err) == -1 && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "not a regular file");
		free(local);
		dlk_dataset_reader_release(&rd);
	}
	/* the push replaces it */
	CHECK(dlk_dataset_push(s, &m, NULL, 0, NULL, NULL, &ps, &err) == 0 && ps.uploaded == 1);

	/* a symlink planted at the .part name is not written through */
	part = xasprintf("%s.part", dest);
	put("victim", "untouched");
	{
		char *victim = path("victim");
		CHECK(symlink(victim, part) == 0);
		free(victim);
	}
	dlk_err_clear(&err);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == -1);
	CHECK(err.code == DLK_EXIT_FAIL);
	CHECK_CONTAINS(err.msg, "is a symbolic link");
	text = slurp("victim");
	CHECK(text && !strcmp(text, "untouched"));
	free(text);
	unlink(part);
	/* nor a FIFO there */
	CHECK(mkfifo(part, 0644) == 0);
	dlk_err_clear(&err);
	CHECK(dlk_store_get_object(s, m.e[0].sha256, m.e[0].size, dest, NULL, NULL, "f.bin", &err) == -1);
	CHECK_CONTAINS(err.msg, "not a regular file");
	unlink(part);

	/* dlk_write_file_atomic never follows a link at a temporary name it might use */
	{
		char *target = path("hout/atomic"), *planted = xasprintf("%s.tmp-%ld", target, (long)getpid());
		char *victim = path("victim");
		CHECK(symlink(victim, planted) == 0);
		r = dlk_write_file_atomic(target, "new", 3, 0644, &err);
		CHECK(r == 0);
		text = slurp("victim");
		CHECK_MSG(text && !strcmp(text, "untouched"), "the file behind a planted link is untouched (%s)", text);
		free(text);
		text = slurp("hout/atomic");
		CHECK(text && !strcmp(text, "new"));
		free(text);
		unlink(planted);
		free(planted);
		free(victim);
		free(target);
	}
	/* dlk_sha256_file refuses a FIFO instead of waiting on it */
	{
		char hex[65], *fifo = path("hout/fifo");
		CHECK(mkfifo(fifo, 0644) == 0);
		CHECK(dlk_sha256_file(fifo, hex) == -1 && errno == EINVAL);
		free(fifo);
	}

	dlk_manifest_release(&m);
	dlk_store_close(s);
	free(part);
	free(obj);
	free(dest);
	free(store);
	free(ds);
}

int main(void)
{
	char cmd[600];

	tmp = xasprintf("%s/dlk-test-store-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp))
		return 1;
	test_manifest();
	test_store();
	test_cache();
	test_hostile();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd)) { /* best effort */ }
	free(tmp);
	return CHECK_DONE();
}
