/* Checkpoints: round trip, keep N, corrupted or truncated ones skipped with a warning,
 * leftover temporary directories, a full disk leaving the previous checkpoint intact. */
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/train/checkpoint.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

static char *root;

static int exists(const char *fmt, const char *a)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), fmt, root, a);
	return stat(p, &st) == 0;
}

static int count_entries(const char *dir)
{
	char cmd[600];
	FILE *f;
	int n = -1;
	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static int write_step(const char *dir, unsigned long long step, size_t big, int keep, struct dlk_err *err)
{
	char meta[128];
	unsigned char *w = xmalloc(big + 1);
	struct ckpt_write_opts o = CKPT_WRITE_OPTS_INIT;
	int rc;

	for (size_t i = 0; i < big; i++)
		w[i] = (unsigned char)(i * 131 + step);
	snprintf(meta, sizeof(meta), "{\"step\": %llu, \"epoch\": 2}", step);
	struct ckpt_blob b[] = {
		{ "weights", w, big },
		{ "optim", "adam-state", 10 },
		{ "meta.json", meta, strlen(meta) },
		{ "empty", NULL, 0 },
	};
	o.keep = keep;
	rc = ckpt_write_atomic(dir, step, b, 4, &o, err);
	free(w);
	return rc;
}

struct full_ctx {
	size_t left;
};

static ssize_t full_write(int fd, const void *p, size_t n, void *ctx)
{
	struct full_ctx *f = ctx;
	if (!f->left) {
		errno = ENOSPC;
		return -1;
	}
	if (n > f->left)
		n = f->left;
	f->left -= n;
	return write(fd, p, n);
}

static void corrupt(const char *path, long off)
{
	int fd = open(path, O_RDWR);
	unsigned char c;
	if (fd < 0)
		return;
	if (pread(fd, &c, 1, off) == 1) {
		c ^= 0x55;
		if (pwrite(fd, &c, 1, off) != 1)
			perror("pwrite");
	}
	close(fd);
}

static void manifest_cases(void)
{
	struct ckpt_manifest m;
	struct dlk_err err = DLK_ERR_INIT;
	const char *good = "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":12,\"blobs\":[{\"name\":\"w\",\"size\":3,"
			   "\"sha256\":\"BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\"}]}";
	static const struct { const char *json, *want; } bad[] = {
		{ "", "not a JSON object" },
		{ "[1]", "not a JSON object" },
		{ "{\"format\":\"x\"}", "'format' is not 'dlk-checkpoint'" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":2}", "unsupported 'version'" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":-1,\"blobs\":[]}", "'step' is not a whole number" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1.5,\"blobs\":[]}", "'step' is not a whole number" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1}", "'blobs' is not an array" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":[{\"name\":\"../etc\",\"size\":1,\"sha256\":\"\"}]}",
		  "blobs[0]: missing or invalid 'name'" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":[{\"name\":\"manifest.json\",\"size\":1}]}",
		  "invalid 'name'" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":[{\"name\":\"w\",\"size\":1e300}]}",
		  "blob 'w': 'size' is not a whole number" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":[{\"name\":\"w\",\"size\":1,\"sha256\":\"abc\"}]}",
		  "'sha256' is not 64 hex digits" },
		{ "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":[3]}", "blobs[0]" },
	};

	CHECK(ckpt_manifest_parse(good, strlen(good), &m, &err) == 0 && m.step == 12 && m.n == 1 && m.blobs[0].size == 3);
	if (m.n)
		CHECK_STR(m.blobs[0].sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	ckpt_manifest_release(&m);
	/* not NUL-terminated: parse only len bytes */
	{
		char *cut = xmalloc(strlen(good));
		memcpy(cut, good, strlen(good));
		CHECK(ckpt_manifest_parse(cut, strlen(good) - 1, &m, &err) == -1);
		free(cut);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_MSG(ckpt_manifest_parse(bad[i].json, strlen(bad[i].json), &m, &err) == -1 && err.code == DLK_EXIT_CONFIG,
			  "bad manifest %zu rejected", i);
		CHECK_CONTAINS(err.msg, bad[i].want);
	}
	{
		struct dlk_buf b = DLK_BUF_INIT;
		dlk_buf_adds(&b, "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":[");
		for (int i = 0; i < 300; i++)
			dlk_buf_addf(&b, "%s{\"name\":\"b%d\",\"size\":0,\"sha256\":\"%064d\"}", i ? "," : "", i, 0);
		dlk_buf_adds(&b, "]}");
		CHECK(ckpt_manifest_parse(b.data, b.len, &m, &err) == -1);
		CHECK_CONTAINS(err.msg, "more than 256 blobs");
		dlk_buf_release(&b);
	}
	{
		const char *dup = "{\"format\":\"dlk-checkpoint\",\"version\":1,\"step\":1,\"blobs\":["
				  "{\"name\":\"w\",\"size\":0,\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"},"
				  "{\"name\":\"w\",\"size\":0,\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}]}";
		CHECK(ckpt_manifest_parse(dup, strlen(dup), &m, &err) == -1);
		CHECK_CONTAINS(err.msg, "blob 'w' listed twice");
	}
}

/* a blob given piece by piece: byte k is (k * 7 + 3) & 255; fails once `fail_at` bytes are given */
struct gen_ctx {
	size_t given, fail_at, calls, most;
};

static int gen_fill(void *ctx, size_t i, void *buf, size_t len, struct dlk_err *err)
{
	struct gen_ctx *g = ctx;
	unsigned char *b = buf;

	if (i != 1)
		return dlk_errf(err, DLK_EXIT_FAIL, "fill asked for blob %zu", i);
	if (g->given + len > g->fail_at)
		return dlk_errf(err, DLK_EXIT_FAIL, "the ring broke at byte %zu", g->given);
	for (size_t k = 0; k < len; k++)
		b[k] = (unsigned char)((g->given + k) * 7 + 3);
	g->given += len;
	g->calls++;
	g->most = len > g->most ? len : g->most;
	return 0;
}

/* ckpt_write_opts.fill: a blob that is never whole in memory, written and checksummed as its
 * pieces come; a fill that fails fails the write with its error, the previous step intact */
static void fill_case(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct ckpt_write_opts o = CKPT_WRITE_OPTS_INIT;
	struct gen_ctx g = { 0, (size_t)-1, 0, 0 };
	size_t n = 9u << 20 | 5, len;
	struct ckpt_blob b[] = { { "a", "xyz", 3 }, { "streamed", NULL, n } };
	struct ckpt c;
	char dir[300];
	const unsigned char *got;
	int ok = 1;

	snprintf(dir, sizeof(dir), "%s/fill", root);
	o.fill = gen_fill;
	o.fill_ctx = &g;
	CHECK_MSG(ckpt_write_atomic(dir, 1, b, 2, &o, &err) == 0, "streamed blob: %s", err.msg);
	CHECK_MSG(g.given == n && g.calls == 3 && g.most == 4u << 20, "given %zu bytes in %zu calls of at most %zu", g.given,
	          g.calls, g.most);
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 1 && c.nwarnings == 0);
	got = ckpt_get(&c, "streamed", &len);
	CHECK(got && len == n);
	for (size_t k = 0; got && k < len && ok; k++)
		ok = got[k] == (unsigned char)(k * 7 + 3);
	CHECK_MSG(ok, "the streamed bytes read back (and their checksum verified)");
	ckpt_release(&c);
	g = (struct gen_ctx){ 0, 5u << 20, 0, 0 };
	CHECK(ckpt_write_atomic(dir, 2, b, 2, &o, &err) == -1);
	CHECK_CONTAINS(err.msg, "the ring broke at byte 4194304");
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 1 && c.nwarnings == 0);
	ckpt_release(&c);
	o.fill = NULL;
	CHECK(ckpt_write_atomic(dir, 3, b, 2, &o, &err) == -1);
	CHECK_CONTAINS(err.msg, "blob 'streamed' has no data");
}

/* A real full disk: a 256 KiB tmpfs in a private mount namespace (needs privileges). */
static void tmpfs_case(void)
{
	pid_t pid;
	int st = 0;
	char mnt[300];

	snprintf(mnt, sizeof(mnt), "%s/small", root);
	mkdir(mnt, 0755);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct dlk_err err = DLK_ERR_INIT;
		struct ckpt c;
		char dir[400];

		if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("tmpfs", mnt, "tmpfs", 0, "size=256k"))
			_exit(77);
		snprintf(dir, sizeof(dir), "%s/ck", mnt);
		if (write_step(dir, 10, 60000, 3, &err))
			_exit(2);
		if (write_step(dir, 20, 400000, 3, &err) != -1 || !strstr(err.msg, "No space left on device") ||
		    !strstr(err.hint, "previous checkpoint is intact"))
			_exit(3);
		if (ckpt_load_latest(dir, 0, &c, &err) != 1 || c.step != 10)
			_exit(4);
		ckpt_release(&c);
		/* the failed attempt's temporary files were removed: a small one fits again */
		if (write_step(dir, 30, 60000, 1, &err))
			_exit(5);
		umount(mnt);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	/* as root (the CI's and `make test`'s machine) the mount is possible: its failure is one;
	 * an unprivileged user cannot mount and skips */
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77 && geteuid() != 0)
		printf("ok %d - # skip cannot mount a tmpfs here (not root)\n", ++check_n);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		CHECK_MSG(0, "full tmpfs: as root, a private mount namespace with a tmpfs in it could not be made");
	else
		CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "full tmpfs: ENOSPC error, previous checkpoint loads, space freed (child status %d)",
			  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct ckpt c;
	char dir[300], path[600];
	unsigned long long *steps;
	size_t n, len;
	const unsigned char *w;

	alarm(120);
	root = test_tmpdir("ckpt");
	if (!root)
		return 1;
	snprintf(dir, sizeof(dir), "%s/ck", root);

	manifest_cases();
	fill_case();

	/* nothing there yet */
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 0 && c.nwarnings == 0);
	ckpt_release(&c);

	/* round trip */
	CHECK(write_step(dir, 100, 1000003, 3, &err) == 0);
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1);
	CHECK(c.step == 100 && c.nwarnings == 0 && c.n == 4);
	w = ckpt_get(&c, "weights", &len);
	CHECK(w && len == 1000003 && w[0] == (unsigned char)100 && w[999999] == (unsigned char)(999999 * 131 + 100));
	CHECK(ckpt_get(&c, "empty", &len) && len == 0);
	CHECK_STR(ckpt_get(&c, "meta.json", NULL), "{\"step\": 100, \"epoch\": 2}");
	CHECK(ckpt_get(&c, "nope", NULL) == NULL);
	CHECK_CONTAINS(c.path, "/ck/step-00000100");
	ckpt_release(&c);
	CHECK(exists("%s/ck/%s", "step-00000100/manifest.json"));

	/* keep the newest 3 */
	for (unsigned long long s = 200; s <= 600; s += 100)
		CHECK(write_step(dir, s, 1000, 3, &err) == 0);
	CHECK(ckpt_list(dir, &steps, &n, &err) == 0 && n == 3 && steps[0] == 600 && steps[1] == 500 && steps[2] == 400);
	free(steps);
	CHECK_MSG(count_entries(dir) == 3, "only the 3 checkpoint directories remain (%d)", count_entries(dir));

	/* corrupted blob in the newest: skipped with a warning naming it */
	snprintf(path, sizeof(path), "%s/step-00000600/weights", dir);
	corrupt(path, 17);
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 500 && c.nwarnings == 1);
	if (c.nwarnings) {
		CHECK_CONTAINS(c.warnings[0], "checkpoint '");
		CHECK_CONTAINS(c.warnings[0], "step-00000600' skipped: blob 'weights' does not match its sha256");
	}
	ckpt_release(&c);

	/* truncated manifest in the next one too */
	snprintf(path, sizeof(path), "%s/step-00000500/manifest.json", dir);
	CHECK(truncate(path, 40) == 0);
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 400 && c.nwarnings == 2);
	if (c.nwarnings == 2)
		CHECK_CONTAINS(c.warnings[1], "step-00000500' skipped: manifest is not a JSON object");
	ckpt_release(&c);

	/* a truncated blob */
	snprintf(path, sizeof(path), "%s/step-00000400/optim", dir);
	CHECK(truncate(path, 3) == 0);
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 0 && c.nwarnings == 3);
	if (c.nwarnings == 3)
		CHECK_CONTAINS(c.warnings[2], "blob 'optim' has 3 bytes, the manifest says 10");
	ckpt_release(&c);

	/* a blob bigger than the reader's limit */
	CHECK(write_step(dir, 700, 5000, 3, &err) == 0);
	CHECK(ckpt_load_latest(dir, 1000, &c, &err) == 0);
	if (c.nwarnings)
		CHECK_CONTAINS(c.warnings[0], "over the limit of 1000");
	ckpt_release(&c);

	/* a leftover temporary directory from a crash is ignored, then cleaned by the writer */
	snprintf(path, sizeof(path), "%s/.tmp-step-00000900-1234", dir);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/.tmp-step-00000900-1234/weights", dir);
	{
		FILE *f = fopen(path, "w");
		if (f) {
			fputs("partial", f);
			fclose(f);
		}
	}
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 700);
	ckpt_release(&c);
	CHECK(exists("%s/ck/%s", ".tmp-step-00000900-1234"));
	CHECK(write_step(dir, 800, 5000, 3, &err) == 0);
	CHECK_MSG(!exists("%s/ck/%s", ".tmp-step-00000900-1234"), "the writer removed the leftover .tmp directory");

	/* the same step written again replaces it */
	CHECK(write_step(dir, 800, 7000, 3, &err) == 0);
	CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 800 && ckpt_get(&c, "weights", &len) && len == 7000);
	ckpt_release(&c);

	/* disk full while writing (write hook): the previous checkpoint stays, nothing is left over */
	{
		struct full_ctx fc = { 3000 };
		struct ckpt_write_opts o = CKPT_WRITE_OPTS_INIT;
		unsigned char big[10000] = { 1 };
		struct ckpt_blob b[] = { { "weights", big, sizeof(big) } };

		o.write_fn = full_write;
		o.write_ctx = &fc;
		CHECK(ckpt_write_atomic(dir, 900, b, 1, &o, &err) == -1);
		CHECK_CONTAINS(err.msg, "step-00000900': writing '");
		CHECK_CONTAINS(err.msg, "No space left on device");
		CHECK_CONTAINS(err.hint, "the previous checkpoint is intact");
		CHECK(!exists("%s/ck/%s", "step-00000900"));
		CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 800 && c.nwarnings == 0);
		ckpt_release(&c);
		CHECK_MSG(count_entries(dir) == 3, "no temporary directory left after ENOSPC (%d entries)", count_entries(dir));
	}

	/* disk full through RLIMIT_FSIZE (EFBIG) in a child */
	{
		pid_t pid;
		int st = 0;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			struct rlimit rl = { 4096, 4096 };
			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
			_exit(write_step(dir, 1000, 100000, 3, &err) == -1 && strstr(err.msg, "File too large") ? 0 : 1);
		}
		waitpid(pid, &st, 0);
		CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "RLIMIT_FSIZE: the write fails with EFBIG");
		CHECK(ckpt_load_latest(dir, 0, &c, &err) == 1 && c.step == 800);
		ckpt_release(&c);
	}

	/* bad arguments */
	{
		struct ckpt_blob b[] = { { "../x", "a", 1 } }, d[] = { { "a", "a", 1 }, { "a", "b", 1 } };
		struct ckpt_write_opts o = CKPT_WRITE_OPTS_INIT;
		CHECK(ckpt_write_atomic(dir, 1, b, 1, NULL, &err) == -1 && err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "invalid blob name '../x'");
		CHECK(ckpt_write_atomic(dir, 1, d, 2, NULL, &err) == -1);
		CHECK_CONTAINS(err.msg, "blob 'a' given twice");
		o.keep = 0;
		CHECK(ckpt_write_atomic(dir, 1, d, 1, &o, &err) == -1);
		CHECK_CONTAINS(err.msg, "keep must be at least 1");
	}

	tmpfs_case();

	test_tmpdir_remove(root);
	return CHECK_DONE();
}
