/* The lock of a project's local runs: an OFD lock on .dlk/runs/NAME/lock, and who holds it. */
#include "lib/runs/lock.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOLDER_BYTES 4096 /* a holder's JSON is a few hundred bytes; more is not one */

/* src into dst (n bytes, NUL-terminated), control characters as \xNN: a host name read from
 * a file goes to the terminal */
static void copy_visible(char *dst, size_t n, const char *src)
{
	struct dlk_buf v = DLK_BUF_INIT;
	size_t keep;

	/* the one way outside text is shown, cut at a character's end to fit dst */
	dlk_buf_add_visible(&v, src, strlen(src), 0);
	keep = v.len ? dlk_utf8_cut(v.data, v.len, n - 1) : 0;
	if (keep)
		memcpy(dst, v.data, keep);
	dst[keep] = '\0';
	dlk_buf_release(&v);
}

/* a run id or a time: only the characters either is made of */
static int plain(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n && n <= max && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:+-") == n;
}

int dlk_run_holder_parse(const char *text, size_t len, struct dlk_run_holder *h)
{
	cJSON *o = cJSON_ParseWithLength(text, len);
	const cJSON *v;

	memset(h, 0, sizeof(*h));
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return -1;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "pid");
	if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 4194304 && v->valuedouble == (long)v->valuedouble)
		h->pid = (long)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(o, "host");
	if (cJSON_IsString(v))
		copy_visible(h->host, sizeof(h->host), v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(o, "run");
	if (cJSON_IsString(v) && plain(v->valuestring, DLK_RUNS_ID_MAX))
		snprintf(h->run, sizeof(h->run), "%s", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(o, "since");
	if (cJSON_IsString(v) && plain(v->valuestring, sizeof(h->since) - 1))
		snprintf(h->since, sizeof(h->since), "%s", v->valuestring);
	cJSON_Delete(o);
	return 0;
}

void dlk_run_holder_describe(const struct dlk_run_holder *h, char *buf, size_t n)
{
	char pid[32] = "";
	size_t o;

	o = (size_t)snprintf(buf, n, "%s%.8s", h->run[0] ? "run " : "another run", h->run);
	if (o >= n)
		return;
	if (h->pid)
		snprintf(pid, sizeof(pid), "pid %ld", h->pid);
	if (h->pid || h->host[0] || h->since[0])
		snprintf(buf + o, n - o, " (%s%s%s%s%s%s%s)", pid, h->host[0] ? (h->pid ? " on '" : "on '") : "", h->host,
		         h->host[0] ? "'" : "", h->since[0] && (h->pid || h->host[0]) ? ", " : "",
		         h->since[0] ? "since " : "", h->since);
}

/* the whole file, exclusively, without waiting; 1 when another holds it */
static int try_lock(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };

	/* an OFD lock belongs to the open file description: forked workers share it, and unlike a
	 * process' POSIX lock it is not dropped when any other descriptor of the file closes */
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES)
		return 1;
	if (errno != EINVAL)
		return -1;
	/* a kernel without OFD locks: flock has the same owner */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	return errno == EWOULDBLOCK ? 1 : -1;
}

int dlk_run_lock_take(struct dlk_run_lock *l, const char *dir, struct dlk_run_holder *holder, struct dlk_err *err)
{
	char *path = xasprintf("%s/lock", dir), text[HOLDER_BYTES];
	struct stat st;
	ssize_t n;
	int fd = -1, rc = -1, got;

	memset(holder, 0, sizeof(*holder));
	if (dlk_mkdir_p(dir, err))
		goto out;
	/* a link planted at the lock's name is not followed, a FIFO does not hang the open */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot lock '%s': not a regular file", path);
		dlk_err_hint(err, "remove it; dlk makes it again");
		goto out;
	}
	got = try_lock(fd);
	if (got < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot lock '%s': %s", path, strerror(errno));
		goto out;
	}
	if (got == 1) {
		n = pread(fd, text, sizeof(text), 0);
		/* being written, or not a holder's: who it is stays unknown */
		if (n <= 0 || (size_t)n == sizeof(text) || dlk_run_holder_parse(text, (size_t)n, holder))
			memset(holder, 0, sizeof(*holder));
		rc = 1;
		goto out;
	}
	l->fd = fd;
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

int dlk_run_lock_say(struct dlk_run_lock *l, const char *run, const char *since, struct dlk_err *err)
{
	char host[256] = "";
	cJSON *o = cJSON_CreateObject();
	char *text;
	size_t len;
	int rc = 0;

	gethostname(host, sizeof(host) - 1);
	cJSON_AddNumberToObject(o, "pid", (double)getpid());
	cJSON_AddStringToObject(o, "host", host);
	cJSON_AddStringToObject(o, "run", run);
	cJSON_AddStringToObject(o, "since", since);
	text = cJSON_PrintUnformatted(o);
	len = strlen(text);
	if (l->fd < 0 || ftruncate(l->fd, 0) || pwrite(l->fd, text, len, 0) != (ssize_t)len)
		rc = dlk_errf(err, DLK_EXIT_FAIL, "cannot write who holds the lock of run %.8s: %s", run,
		              l->fd < 0 ? "not held" : strerror(errno));
	free(text);
	cJSON_Delete(o);
	return rc;
}

void dlk_run_lock_release(struct dlk_run_lock *l)
{
	/* the last descriptor of the description closed lets the lock go (a forked worker that
	 * still has its copy holds it until it ends) */
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
