/* The project's run lock (lib/runs/lock.h): taken once, refused to a second taker with who holds
 * it, shared by a forked child, and free as soon as its holder is dead, even while the holder
 * is a zombie nobody has reaped; what a lock file says of its holder is checked and its control
 * characters made visible; a link or a FIFO at the lock's name is refused. */
#include "tests/unit/check.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/runs/lock.h"
#include "lib/util/err.h"

/* the state letter of /proc/PID/stat ('Z' for a zombie), '?' when unknown */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static void test_take(const char *dir)
{
	struct dlk_run_lock a = DLK_RUN_LOCK_INIT, b = DLK_RUN_LOCK_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;
	char who[512], host[256] = "";

	CHECK_MSG(dlk_run_lock_take(&a, dir, &h, &err) == 0, "a free lock is taken: %s", err.msg);
	CHECK(dlk_run_lock_say(&a, "0123abcd-0000-4000-8000-000000000000", "2026-11-27T16:00:00Z", &err) == 0);
	/* another open of the file, in this same process: an OFD lock is the description's */
	CHECK(dlk_run_lock_take(&b, dir, &h, &err) == 1);
	CHECK(b.fd == -1);
	CHECK(h.pid == (long)getpid());
	CHECK_STR(h.run, "0123abcd-0000-4000-8000-000000000000");
	CHECK_STR(h.since, "2026-11-27T16:00:00Z");
	gethostname(host, sizeof(host) - 1);
	CHECK_STR(h.host, host);
	dlk_run_holder_describe(&h, who, sizeof(who));
	CHECK_CONTAINS(who, "run 0123abcd (pid ");
	CHECK_CONTAINS(who, ", since 2026-11-27T16:00:00Z)");
	dlk_run_lock_release(&a);
	CHECK(a.fd == -1);
	CHECK_MSG(dlk_run_lock_take(&b, dir, &h, &err) == 0, "released: taken again");
	dlk_run_lock_release(&b);
	dlk_run_lock_release(&b); /* twice: nothing */
}

/* a forked child holds the lock with its parent (a gang's workers): free only when both are gone */
static void test_fork(const char *dir)
{
	struct dlk_run_lock a = DLK_RUN_LOCK_INIT, b = DLK_RUN_LOCK_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;
	int go[2], st;
	pid_t pid;
	char c = 0;

	CHECK(dlk_run_lock_take(&a, dir, &h, &err) == 0);
	CHECK(pipe(go) == 0);
	pid = fork();
	if (pid == 0) {
		/* holds its copy until the parent says */
		close(go[1]);
		(void)!read(go[0], &c, 1);
		_exit(0);
	}
	close(go[0]);
	dlk_run_lock_release(&a);
	CHECK_MSG(dlk_run_lock_take(&b, dir, &h, &err) == 1, "the parent let go, its forked child still holds it");
	close(go[1]);
	waitpid(pid, &st, 0);
	CHECK_MSG(dlk_run_lock_take(&b, dir, &h, &err) == 0, "the child gone: free");
	dlk_run_lock_release(&b);
}

/* a holder killed with SIGKILL and never reaped: a zombie with its pid, and no lock */
static void test_zombie(const char *dir)
{
	struct dlk_run_lock a = DLK_RUN_LOCK_INIT, b = DLK_RUN_LOCK_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;
	int ready[2], st;
	pid_t pid;
	char c = 0;

	CHECK(pipe(ready) == 0);
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		if (dlk_run_lock_take(&a, dir, &h, &err) || dlk_run_lock_say(&a, "zombie", "2026-11-27T16:00:00Z", &err))
			_exit(1);
		(void)!write(ready[1], "x", 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	CHECK_MSG(dlk_run_lock_take(&b, dir, &h, &err) == 1 && h.pid == (long)pid, "held by the child, named");
	kill(pid, SIGKILL);
	/* not reaped: the child stays a zombie; wait for the kernel to make it one */
	for (int i = 0; i < 2000 && proc_state(pid) != 'Z'; i++)
		usleep(1000);
	CHECK_MSG(proc_state(pid) == 'Z', "the killed holder is a zombie");
	CHECK_MSG(kill(pid, 0) == 0, "a zombie's pid still answers kill(pid, 0)");
	CHECK_MSG(dlk_run_lock_take(&b, dir, &h, &err) == 0, "a zombie holds no lock");
	dlk_run_lock_release(&b);
	waitpid(pid, &st, 0);
}

static void test_parse(void)
{
	struct dlk_run_holder h;
	char who[512];
	const char *bad_host = "{\"pid\": 77, \"host\": \"a\\u001b]0;x\\u0007b\", \"run\": \"r1\", \"since\": \"t\"}";

	CHECK(dlk_run_holder_parse(bad_host, strlen(bad_host), &h) == 0);
	CHECK_STR(h.host, "a\\e]0;x\\x07b");
	CHECK(h.pid == 77);
	CHECK(dlk_run_holder_parse("[1]", 3, &h) == -1 && h.pid == 0 && !h.host[0]);
	CHECK(dlk_run_holder_parse("", 0, &h) == -1);
	{
		const char *odd = "{\"pid\": 1e30, \"run\": \"a/../b\", \"since\": \"\\n\"}";
		CHECK(dlk_run_holder_parse(odd, strlen(odd), &h) == 0);
	}
	CHECK_MSG(h.pid == 0 && !h.run[0] && !h.since[0], "a pid out of range, a run id with a slash, a time with a newline: unknown");
	CHECK(dlk_run_holder_parse("{\"pid\": 12.5}", 13, &h) == 0 && h.pid == 0);
	dlk_run_holder_describe(&h, who, sizeof(who));
	CHECK_STR(who, "another run");
	CHECK(dlk_run_holder_parse("{\"host\": \"h\"}", 13, &h) == 0);
	dlk_run_holder_describe(&h, who, sizeof(who));
	CHECK_STR(who, "another run (on 'h')");
}

static void test_special(const char *tmp)
{
	struct dlk_run_lock a = DLK_RUN_LOCK_INIT;
	struct dlk_run_holder h;
	struct dlk_err err = DLK_ERR_INIT;
	char dir[600], path[700];

	snprintf(dir, sizeof(dir), "%s/link", tmp);
	CHECK(mkdir(dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/lock", dir);
	CHECK(symlink("../elsewhere", path) == 0);
	CHECK(dlk_run_lock_take(&a, dir, &h, &err) == -1 && a.fd == -1);
	CHECK_CONTAINS(err.msg, "/link/lock'");
	snprintf(path, sizeof(path), "%s/elsewhere", tmp);
	CHECK_MSG(access(path, F_OK) != 0, "the link was not followed");

	snprintf(dir, sizeof(dir), "%s/fifo", tmp);
	CHECK(mkdir(dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/lock", dir);
	CHECK(mkfifo(path, 0644) == 0);
	dlk_err_clear(&err);
	CHECK(dlk_run_lock_take(&a, dir, &h, &err) == -1 && a.fd == -1);
	CHECK_CONTAINS(err.msg, "not a regular file");
}

int main(void)
{
	const char *t = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char tmp[400], dir[500], cmd[500];

	snprintf(tmp, sizeof(tmp), "%s/dlk-run-lock-XXXXXX", t);
	if (!mkdtemp(tmp))
		return 1;
	snprintf(dir, sizeof(dir), "%s/.dlk/runs/p", tmp);
	test_take(dir);
	test_fork(dir);
	test_zombie(dir);
	test_parse();
	test_special(tmp);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd))
		return 1;
	return CHECK_DONE();
}
