/* Workers' log archives (lib/jobs/logarchive.c): the key that names a worker's attempt and its
 * parse, what a worker writes to stdout and stderr archived (stamped lines, the bound), and the
 * reader: whole archives, a stream cut short, several members, bytes that are not gzip; a job's
 * folder bounded to its last runs. */
#include "tests/unit/check.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/jobs/logarchive.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

struct lines {
	char got[4096];
	int n, stop_after;
};

static int add(const char *line, size_t len, void *ud)
{
	struct lines *l = ud;
	size_t at = strlen(l->got);

	snprintf(l->got + at, sizeof(l->got) - at, "%.*s|", (int)len, line);
	return ++l->n == l->stop_after;
}

static void test_key(void)
{
	char key[256], run[64], pod[64];
	int rank = -1;

	CHECK(!dlk_log_archive_key("5f0c2a-11", 3, "fashion-3-abcde", key, sizeof(key)));
	CHECK_STR(key, "logs/5f0c2a-11_rank-3_fashion-3-abcde.log.gz");
	CHECK(!dlk_log_archive_parse_name(key + 5, run, sizeof(run), &rank, pod, sizeof(pod)));
	CHECK(rank == 3 && !strcmp(run, "5f0c2a-11") && !strcmp(pod, "fashion-3-abcde"));
	CHECK(!dlk_log_archive_key("r", 0, "p.2", key, sizeof(key)));
	CHECK(!dlk_log_archive_parse_name(key + 5, run, sizeof(run), &rank, pod, sizeof(pod)) && !strcmp(pod, "p.2"));
	CHECK(dlk_log_archive_key("a/b", 0, "p", key, sizeof(key)));
	CHECK(dlk_log_archive_key("r", 0, "", key, sizeof(key)));
	CHECK(dlk_log_archive_key("r_x", 0, "p", key, sizeof(key)));
	CHECK(dlk_log_archive_key("r", -1, "p", key, sizeof(key)));
	CHECK(dlk_log_archive_key("r", 0, "p", key, 10));
	CHECK(dlk_log_archive_parse_name("r_rank-0_p.log", run, sizeof(run), &rank, pod, sizeof(pod)));
	CHECK(dlk_log_archive_parse_name("r_rank-x_p.log.gz", run, sizeof(run), &rank, pod, sizeof(pod)));
	CHECK(dlk_log_archive_parse_name("_rank-0_p.log.gz", run, sizeof(run), &rank, pod, sizeof(pod)));
	CHECK(dlk_log_archive_parse_name("r_rank-0_.log.gz", run, sizeof(run), &rank, pod, sizeof(pod)));
	CHECK(dlk_log_archive_parse_name("r_rank-0_..log.gz", run, sizeof(run), &rank, pod, sizeof(pod)) == 0);
	CHECK(dlk_log_archive_parse_name("r_rank-0_p/q.log.gz", run, sizeof(run), &rank, pod, sizeof(pod)));
}

/* text as one gzip member, added to out */
static void gz(const char *text, struct dlk_buf *out)
{
	z_stream z;
	unsigned char buf[4096];

	memset(&z, 0, sizeof(z));
	deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	z.next_in = (unsigned char *)text;
	z.avail_in = (uInt)strlen(text);
	do {
		z.next_out = buf;
		z.avail_out = sizeof(buf);
		deflate(&z, Z_FINISH);
		dlk_buf_add(out, buf, sizeof(buf) - z.avail_out);
	} while (z.avail_out == 0);
	deflateEnd(&z);
}

static void test_read(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	struct lines l = { 0 };
	int cut = -1;

	gz("one\ntwo\n\nlast without newline", &b);
	CHECK(!dlk_log_archive_read(b.data, b.len, add, &l, &cut, &err) && !cut);
	CHECK_STR(l.got, "one|two||last without newline|");
	/* a second member (another attempt written to the same file) is read too */
	gz("three\n", &b);
	memset(&l, 0, sizeof(l));
	CHECK(!dlk_log_archive_read(b.data, b.len, add, &l, &cut, &err) && !cut);
	CHECK_STR(l.got, "one|two||last without newline|three|");
	memset(&l, 0, sizeof(l));
	l.stop_after = 2;
	CHECK(!dlk_log_archive_read(b.data, b.len, add, &l, &cut, &err) && l.n == 2);
	/* cut short: the lines before the cut, and it says so */
	dlk_buf_release(&b);
	gz("alpha\nbeta\ngamma\n", &b);
	memset(&l, 0, sizeof(l));
	CHECK(!dlk_log_archive_read(b.data, b.len - 8, add, &l, &cut, &err) && cut == 1);
	CHECK_STR(l.got, "alpha|beta|gamma|");
	memset(&l, 0, sizeof(l));
	CHECK(!dlk_log_archive_read(b.data, 0, add, &l, &cut, &err) && cut == 1 && l.n == 0);
	CHECK(dlk_log_archive_read("plain text\n", 11, add, &l, &cut, &err) == -1);
	CHECK_CONTAINS(err.msg, "not a log archive");
	dlk_err_clear(&err);
	dlk_buf_release(&b);
}

/* In a child: archive its stdout and stderr, write, stop; the parent reads the file. */
static void test_archive(const char *dir)
{
	char *path = xasprintf("%s/logs/r_rank-0_p.log.gz", dir);
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	struct lines l = { 0 };
	pid_t pid;
	int st = -1, cut = -1;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct dlk_log_archive *a = NULL;
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1); /* the "container log" of the child: nowhere */
		dup2(devnull, 2);
		if (dlk_log_archive_start(path, 200, &a, &err))
			_exit(2);
		printf("to stdout\n");
		fprintf(stderr, "to stderr, no newline");
		fflush(stderr);
		dlk_log_archive_stop(a);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(!dlk_buf_read_file(&b, path, 1 << 20, NULL, 0));
	CHECK(!dlk_log_archive_read(b.data, b.len, add, &l, &cut, &err) && !cut && l.n == 2);
	CHECK_CONTAINS(l.got, "Z to stdout|");
	CHECK_CONTAINS(l.got, "Z to stderr, no newline|");
	CHECK(l.got[4] == '-' && l.got[10] == 'T' && l.got[29] == 'Z');
	/* a second start on the same file is refused: an attempt never writes over another's */
	{
		struct dlk_log_archive *a = NULL;
		CHECK(dlk_log_archive_start(path, 0, &a, &err) == -1 && !a);
		dlk_err_clear(&err);
	}
	dlk_buf_release(&b);
	free(path);
	/* the bound: past it, one last line says the archive stops */
	path = xasprintf("%s/logs/r_rank-1_p.log.gz", dir);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct dlk_log_archive *a = NULL;
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		if (dlk_log_archive_start(path, 200, &a, &err))
			_exit(2);
		for (int i = 0; i < 50; i++)
			printf("line %d of a chatty worker\n", i);
		dlk_log_archive_stop(a);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	memset(&l, 0, sizeof(l));
	CHECK(!dlk_buf_read_file(&b, path, 1 << 20, NULL, 0));
	CHECK(!dlk_log_archive_read(b.data, b.len, add, &l, &cut, &err) && l.n < 10);
	CHECK_CONTAINS(l.got, "line 0 of a chatty worker|");
	CHECK_CONTAINS(l.got, "dlk: the archive of this log stops here, at 200 bytes|");
	dlk_buf_release(&b);
	free(path);
}

static void touch_at(const char *dir, const char *name, long age_s)
{
	char *f = xasprintf("%s/logs/%s", dir, name);
	struct timespec t[2];
	int fd = open(f, O_WRONLY | O_CREAT, 0644);

	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age_s;
	t[1] = t[0];
	futimens(fd, t);
	close(fd);
	free(f);
}

static int exists(const char *dir, const char *name)
{
	char *f = xasprintf("%s/logs/%s", dir, name);
	int ok = access(f, F_OK) == 0;

	free(f);
	return ok;
}

static void test_prune(const char *tmp)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = xasprintf("%s/prune", tmp), *logs = xasprintf("%s/logs", dir);
	unsigned removed = 99;

	CHECK(!dlk_log_archive_prune(dir, "cur", 3, &removed, &err) && removed == 0); /* no folder yet */
	dlk_mkdir_p(logs, NULL);
	touch_at(dir, "a_rank-0_p.log.gz", 500); /* oldest run, two files */
	touch_at(dir, "a_rank-1_p.log.gz", 400);
	touch_at(dir, "b_rank-0_p.log.gz", 300);
	touch_at(dir, "c_rank-0_p.log.gz", 50);  /* the run a rank 1 archived long ago counts by its newest file */
	touch_at(dir, "c_rank-1_p.log.gz", 900);
	touch_at(dir, "d_rank-0_p.log.gz", 100);
	touch_at(dir, "cur_rank-0_p.log.gz", 1000); /* the current run: kept however old */
	touch_at(dir, "notes.txt", 2000);           /* not an archive: left alone */
	CHECK(!dlk_log_archive_prune(dir, "cur", 3, &removed, &err));
	CHECK(removed == 3);
	CHECK(exists(dir, "cur_rank-0_p.log.gz") && exists(dir, "c_rank-0_p.log.gz") && exists(dir, "c_rank-1_p.log.gz"));
	CHECK(exists(dir, "d_rank-0_p.log.gz") && exists(dir, "notes.txt"));
	CHECK(!exists(dir, "a_rank-0_p.log.gz") && !exists(dir, "a_rank-1_p.log.gz") && !exists(dir, "b_rank-0_p.log.gz"));
	CHECK(!dlk_log_archive_prune(dir, "cur", 3, &removed, &err) && removed == 0);
	free(logs);
	free(dir);
}

int main(void)
{
	char cmd[600], *tmp = xasprintf("%s/dlk-test-logarchive-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");

	if (!mkdtemp(tmp))
		return 1;
	test_key();
	test_read();
	test_archive(tmp);
	test_prune(tmp);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd)) { /* best effort */ }
	free(tmp);
	return CHECK_DONE();
}
