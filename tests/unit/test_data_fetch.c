/* Local sources: file:// URLs, bare paths, pvc:// resolution, sha256 pins and size limits. */
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <ctype.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/data/fetch.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

static char *tmpdir;
static struct dlk_err err = DLK_ERR_INIT;

static struct dlk_data spec_with_limit(long long max_bytes)
{
	struct dlk_data d;
	memset(&d, 0, sizeof(d));
	d.max_bytes = max_bytes;
	return d;
}

static int fetch(const char *url, const char *pin, const struct dlk_data_opts *o, struct dlk_fetched *f,
                 long long max_bytes)
{
	struct dlk_source src = { (char *)url, (char *)pin };
	struct dlk_data d = spec_with_limit(max_bytes);
	dlk_fetched_release(f);
	dlk_err_clear(&err);
	return dlk_fetch(&src, &d, o, f, &err);
}

int main(void)
{
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_data_opts o;
	char hex[65], *p, *path, *url, *upper;
	FILE *fp;

	memset(&o, 0, sizeof(o));
	tmpdir = test_tmpdir("test-fetch");
	if (!tmpdir)
		return 1;

	/* pvc:// resolution */
	p = dlk_pvc_resolve("pvc://datasets/fmnist/train.gz", "/mnt/pvc", &err);
	CHECK_STR(p, "/mnt/pvc/datasets/fmnist/train.gz");
	free(p);
	p = dlk_pvc_resolve("pvc://my-claim.v2/a", NULL, &err);
	CHECK_STR(p, "/mnt/pvc/my-claim.v2/a");
	free(p);
	{
		static const struct { const char *url, *msg; } bad[] = {
			{ "pvc://data/../etc/passwd", "'.' and '..' are not allowed" },
			{ "pvc://data/a/..", "'.' and '..' are not allowed" },
			{ "pvc://data/./a", "'.' and '..' are not allowed" },
			{ "pvc://../x", "the claim name must be a Kubernetes name" },
			{ "pvc://Data/x", "the claim name must be a Kubernetes name" },
			{ "pvc:///x", "the claim name must be a Kubernetes name" },
			{ "pvc://data", "no path inside the claim" },
			{ "pvc://data/", "no path inside the claim" },
		};
		for (size_t i = 0; i < DLK_ARRAY_SIZE(bad); i++) {
			p = dlk_pvc_resolve(bad[i].url, "/mnt/pvc", &err);
			CHECK_MSG(p == NULL && strstr(err.msg, bad[i].msg) && strstr(err.msg, bad[i].url),
			          "%s is rejected: %s", bad[i].url, err.msg);
			free(p);
		}
	}

	/* file URLs and bare paths */
	p = dlk_local_path("file:///data/a%20b.csv", NULL, &err);
	CHECK_STR(p, "/data/a b.csv");
	free(p);
	p = dlk_local_path("file://localhost/x", NULL, &err);
	CHECK_STR(p, "/x");
	free(p);
	CHECK(dlk_local_path("file://host/x", NULL, &err) == NULL);
	CHECK(dlk_local_path("file:///a%2", NULL, &err) == NULL);
	CHECK(dlk_local_path("file:///a%00b", NULL, &err) == NULL);
	p = dlk_local_path("data/t.csv", "/proj", &err);
	CHECK_STR(p, "/proj/data/t.csv");
	free(p);
	/* "./" is said once, in the project's directory or in "." */
	p = dlk_local_path("./data/t.csv", "/proj", &err);
	CHECK_STR(p, "/proj/data/t.csv");
	free(p);
	p = dlk_local_path("./t.csv", ".", &err);
	CHECK_STR(p, "t.csv");
	free(p);
	p = dlk_local_path("/abs/t.csv", "/proj", &err);
	CHECK_STR(p, "/abs/t.csv");
	free(p);
	p = dlk_cache_path("/c", "https://example.org/d/train.gz?x=1");
	CHECK(p && !strncmp(p, "/c/", 3) && strlen(p) == 3 + 16 + 1 + 8 && !strcmp(p + 20, "train.gz"));
	free(p);
	p = dlk_cache_path("/c", "https://example.org/");
	CHECK(p && !strcmp(p + 20, "data"));
	free(p);

	/* fetching local files: provenance digest, pins, limits */
	path = xasprintf("%s/sub/data.bin", tmpdir);
	p = xasprintf("%s/sub", tmpdir);
	mkdir(p, 0755);
	free(p);
	fp = fopen(path, "wb");
	fputs("hello dlk\n", fp);
	fclose(fp);
	dlk_sha256_hex("hello dlk\n", 10, hex);

	CHECK_MSG(fetch(path, NULL, &o, &f, 0) == 0, "bare absolute path: %s", err.msg);
	CHECK_STR(f.path, path);
	CHECK_STR(f.sha256, hex);
	o.base_dir = tmpdir;
	CHECK_MSG(fetch("sub/data.bin", hex, &o, &f, 0) == 0, "relative path with pin: %s", err.msg);
	CHECK_STR(f.path, path);
	url = xasprintf("file://%s", path);
	upper = xstrdup(hex);
	for (char *c = upper; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	CHECK_MSG(fetch(url, upper, &o, &f, 0) == 0, "file:// with an upper-case pin: %s", err.msg);
	CHECK(fetch(url, "0123456789012345678901234567890123456789012345678901234567890123", &o, &f, 0) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	{
		char *want = xasprintf("'%s': sha256 mismatch: expected 0123456789012345678901234567890123456789012345678901234567890123, got %s", url, hex);
		CHECK_STR(err.msg, want);
		free(want);
	}
	CHECK(f.path == NULL);
	CHECK(fetch(url, "xyz", &o, &f, 0) == -1);
	CHECK_CONTAINS(err.msg, "is not 64 hex digits");
	CHECK(fetch(url, NULL, &o, &f, 9) == -1);
	CHECK_CONTAINS(err.msg, "is 10 bytes, more than the limit of 9 bytes");
	CHECK(fetch(url, NULL, &o, &f, 10) == 0);

	o.pvc_root = tmpdir;
	CHECK_MSG(fetch("pvc://sub/data.bin", hex, &o, &f, 0) == 0, "pvc: %s", err.msg);
	CHECK_STR(f.path, path);
	CHECK(fetch("pvc://sub/../sub/data.bin", NULL, &o, &f, 0) == -1);

	CHECK(fetch("sub/missing.bin", NULL, &o, &f, 0) == -1);
	CHECK(err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "cannot read 'sub/missing.bin': No such file or directory");
	CHECK_CONTAINS(err.hint, "missing.bin");
	CHECK(err.hint[0] && !strstr(err.hint, "./"));
	/* the examples' data names the package that installs it */
	CHECK(fetch("file:///usr/share/datasets/fashion-mnist/no-such-file.gz", NULL, &o, &f, 0) == -1);
	CHECK_CONTAINS(err.hint, "Debian's dataset-fashion-mnist package");
	CHECK(fetch(tmpdir, NULL, &o, &f, 0) == -1);
	CHECK_CONTAINS(err.msg, "is not a regular file");
	CHECK(fetch("s3://bucket/x", NULL, &o, &f, 0) == -1);
	CHECK_CONTAINS(err.msg, "unsupported URL scheme");
	CHECK(fetch("", NULL, &o, &f, 0) == -1);

	dlk_fetched_release(&f);
	free(url), free(upper), free(path);
	test_tmpdir_remove(tmpdir);
	return CHECK_DONE();
}
