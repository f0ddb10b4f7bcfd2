/* A worker's log archived beside its run (see logarchive.h). */
#include "lib/jobs/logarchive.h"

#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#define LINE_MAX_BYTES 16384 /* a longer line is archived in pieces of this size */

struct stream {
	int rd;                  /* the pipe's end this side reads */
	int out;                 /* where the bytes went before: the container's log */
	char line[LINE_MAX_BYTES];
	size_t n;
};

struct dlk_log_archive {
	struct stream s[2];      /* stdout, stderr */
	gzFile gz;               /* the pump's */
	unsigned long long written, max;
	int full;
	pid_t pump;              /* the process that reads the pipes */
};

static int name_ok(const char *s)
{
	return *s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-") == strlen(s) &&
	       strlen(s) <= 80;
}

int dlk_log_archive_key(const char *run, int rank, const char *pod, char *buf, size_t len)
{
	if (!run || !pod || !name_ok(run) || !name_ok(pod) || rank < 0)
		return -1;
	return (size_t)snprintf(buf, len, "logs/%s_rank-%d_%s.log.gz", run, rank, pod) < len ? 0 : -1;
}

int dlk_log_archive_parse_name(const char *name, char *run, size_t run_len, int *rank, char *pod, size_t pod_len)
{
	const char *u1 = strchr(name, '_'), *u2, *end;
	char *e;
	long r;
	size_t l = strlen(name);

	if (!u1 || l < 7 || strcmp(name + l - 7, ".log.gz") || strncmp(u1 + 1, "rank-", 5))
		return -1;
	end = name + l - 7;
	/* digits only, no leading zero: one name per rank */
	if (!isdigit((unsigned char)u1[6]) || (u1[6] == '0' && isdigit((unsigned char)u1[7])))
		return -1;
	r = strtol(u1 + 6, &e, 10);
	u2 = e;
	if (e == u1 + 6 || *u2 != '_' || r < 0 || r > 1000000 || u2 + 1 >= end)
		return -1;
	if ((size_t)(u1 - name) >= run_len || (size_t)(end - u2 - 1) >= pod_len || u1 == name)
		return -1;
	memcpy(run, name, (size_t)(u1 - name));
	run[u1 - name] = '\0';
	memcpy(pod, u2 + 1, (size_t)(end - u2 - 1));
	pod[end - u2 - 1] = '\0';
	*rank = (int)r;
	return name_ok(run) && name_ok(pod) ? 0 : -1;
}

struct run_age {
	char run[96];
	struct timespec newest;
};

static int newer_first(const void *a, const void *b)
{
	const struct run_age *x = a, *y = b;

	if (x->newest.tv_sec != y->newest.tv_sec)
		return x->newest.tv_sec > y->newest.tv_sec ? -1 : 1;
	if (x->newest.tv_nsec != y->newest.tv_nsec)
		return x->newest.tv_nsec > y->newest.tv_nsec ? -1 : 1;
	return strcmp(x->run, y->run);
}

int dlk_log_archive_prune(const char *dir, const char *run, unsigned keep, unsigned *removed, struct dlk_err *err)
{
	char *logs = xasprintf("%s/logs", dir);
	DIR *d = opendir(logs);
	struct dirent *de;
	struct run_age *runs = NULL;
	size_t n = 0;
	int rc = 0;

	*removed = 0;
	if (!d) {
		if (errno != ENOENT)
			rc = dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", logs, strerror(errno));
		free(logs);
		return rc;
	}
	while ((de = readdir(d))) {
		char r[96], pod[96], *f;
		struct stat st;
		size_t i;
		int rank;
		if (dlk_log_archive_parse_name(de->d_name, r, sizeof(r), &rank, pod, sizeof(pod)) || (run && !strcmp(r, run)))
			continue;
		f = xasprintf("%s/%s", logs, de->d_name);
		if (stat(f, &st) == 0) {
			for (i = 0; i < n && strcmp(runs[i].run, r); i++)
				;
			if (i == n) {
				runs = xrealloc(runs, (n + 1) * sizeof(*runs));
				memset(&runs[n], 0, sizeof(*runs));
				snprintf(runs[n].run, sizeof(runs[n].run), "%s", r);
				n++;
			}
			if (newer_first(&(struct run_age){ "", st.st_mtim }, &runs[i]) < 0)
				runs[i].newest = st.st_mtim;
		}
		free(f);
	}
	if (n)
		qsort(runs, n, sizeof(*runs), newer_first);
	rewinddir(d);
	while ((de = readdir(d))) {
		char r[96], pod[96];
		int rank, old = 0;
		if (dlk_log_archive_parse_name(de->d_name, r, sizeof(r), &rank, pod, sizeof(pod)) || (run && !strcmp(r, run)))
			continue;
		/* the current run is one of the keep: the others fill the rest, newest first */
		for (size_t i = keep > 0 && run ? keep - 1 : keep; i < n; i++)
			old |= !strcmp(runs[i].run, r);
		if (old) {
			char *f = xasprintf("%s/%s", logs, de->d_name);
			if (unlink(f) == 0)
				++*removed;
			free(f);
		}
	}
	closedir(d);
	free(runs);
	free(logs);
	return 0;
}

/* One line (without its newline) into the archive, stamped with the time now. */
static void archive_line(struct dlk_log_archive *a, const char *p, size_t n)
{
	struct timespec ts;
	struct tm tm;
	char stamp[48];
	int sl;

	if (a->full || !a->gz)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	sl = (int)strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	sl += snprintf(stamp + sl, sizeof(stamp) - (size_t)sl, ".%09ldZ ", ts.tv_nsec);
	if (a->written + (unsigned long long)sl + n + 1 > a->max) {
		char last[160];
		int ll = snprintf(last, sizeof(last), "%.*sdlk: the archive of this log stops here, at %llu bytes\n", sl, stamp,
		                  a->max);
		gzwrite(a->gz, last, (unsigned)ll);
		a->full = 1;
		return;
	}
	gzwrite(a->gz, stamp, (unsigned)sl);
	if (n)
		gzwrite(a->gz, p, (unsigned)n);
	gzwrite(a->gz, "\n", 1);
	a->written += (unsigned long long)sl + n + 1;
}

static void take(struct dlk_log_archive *a, struct stream *s, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			archive_line(a, s->line, s->n);
			s->n = 0;
			continue;
		}
		if (s->n == sizeof(s->line)) {
			archive_line(a, s->line, s->n);
			s->n = 0;
		}
		s->line[s->n++] = buf[i];
	}
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* the container's log is gone: the archive still gets the line */
		p += w;
		n -= (size_t)w;
	}
}

static void pump(struct dlk_log_archive *a)
{
	struct pollfd pf[2];
	char buf[65536];
	int open_n = 2;

	for (int i = 0; i < 2; i++) {
		pf[i].fd = a->s[i].rd;
		pf[i].events = POLLIN;
	}
	while (open_n) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n;
			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(pf[i].fd, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				pf[i].fd = -1;
				open_n--;
				continue;
			}
			write_all(a->s[i].out, buf, (size_t)n);
			take(a, &a->s[i], buf, (size_t)n);
		}
		if (!a->full && a->gz)
			gzflush(a->gz, Z_SYNC_FLUSH); /* a worker killed now leaves these lines readable */
	}
	for (int i = 0; i < 2; i++)
		if (a->s[i].n)
			archive_line(a, a->s[i].line, a->s[i].n);
}

/* The pump is a process of its own, not a thread: what the worker writes just before it dies
 * (a crash report, an abort message) is still in the pipes, and the pump reads it to the end
 * and into both places once the last writer is gone. It ignores the signals that stop the
 * worker, so that it sees the worker's last lines. */
int dlk_log_archive_start(const char *path, unsigned long long max_bytes, struct dlk_log_archive **out,
                          struct dlk_err *err)
{
	struct dlk_log_archive *a = xcalloc(1, sizeof(*a));
	int p[2][2] = { { -1, -1 }, { -1, -1 } }, fd = -1;
	char *dir = xstrdup(path), *slash = strrchr(dir, '/');

	*out = NULL;
	a->s[0].out = a->s[1].out = -1;
	if (slash && slash != dir) {
		*slash = '\0';
		if (dlk_mkdir_p(dir, err))
			goto fail;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot archive the log in '%s': %s", path, strerror(errno));
		goto fail;
	}
	a->max = max_bytes ? max_bytes : DLK_LOG_ARCHIVE_MAX_BYTES;
	for (int i = 0; i < 2; i++) {
		if (pipe2(p[i], O_CLOEXEC) < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot archive the log: pipe: %s", strerror(errno));
			goto fail;
		}
		a->s[i].rd = p[i][0];
		a->s[i].out = fcntl(i + 1, F_DUPFD_CLOEXEC, 3);
		if (a->s[i].out < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot archive the log: %s", strerror(errno));
			goto fail;
		}
	}
	fflush(stdout);
	fflush(stderr);
	a->pump = fork();
	if (a->pump < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot archive the log: fork: %s", strerror(errno));
		goto fail;
	}
	if (a->pump == 0) {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		close(p[0][1]);
		close(p[1][1]);
		a->gz = gzdopen(fd, "wb"); /* without it the lines still reach the container's log */
		pump(a);
		if (a->gz)
			gzclose(a->gz);
		_exit(0);
	}
	close(fd);
	close(p[0][0]);
	close(p[1][0]);
	/* a pump that died (killed for memory) must not take the worker with it: its writes fail */
	signal(SIGPIPE, SIG_IGN);
	/* from here on, fds 1 and 2 are the pipes (children inherit them: their lines are archived too) */
	dup2(p[0][1], 1);
	dup2(p[1][1], 2);
	close(p[0][1]);
	close(p[1][1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	free(dir);
	*out = a;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (p[i][0] >= 0)
			close(p[i][0]);
		if (p[i][1] >= 0)
			close(p[i][1]);
		if (a->s[i].out >= 0)
			close(a->s[i].out);
	}
	if (fd >= 0)
		close(fd);
	free(a);
	free(dir);
	return -1;
}

void dlk_log_archive_stop(struct dlk_log_archive *a)
{
	int st;

	if (!a)
		return;
	fflush(stdout);
	fflush(stderr);
	/* the pipes' write ends close here: the pump reads to their end, then exits */
	dup2(a->s[0].out, 1);
	dup2(a->s[1].out, 2);
	close(a->s[0].out);
	close(a->s[1].out);
	while (waitpid(a->pump, &st, 0) < 0 && errno == EINTR)
		;
	free(a);
}

struct splitter {
	char *line;
	size_t n, cap;
	int (*fn)(const char *, size_t, void *);
	void *ud;
	int stop;
};

static void split(struct splitter *sp, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n && !sp->stop; i++) {
		if (p[i] == '\n') {
			sp->stop = sp->fn(sp->line ? sp->line : "", sp->n, sp->ud);
			sp->n = 0;
			continue;
		}
		if (sp->n + 1 >= sp->cap) {
			sp->cap = sp->cap ? sp->cap * 2 : 256;
			sp->line = xrealloc(sp->line, sp->cap);
		}
		sp->line[sp->n++] = (char)p[i];
		sp->line[sp->n] = '\0';
	}
}

int dlk_log_archive_read(const void *data, size_t len, int (*fn)(const char *line, size_t len, void *ud), void *ud,
                         int *truncated, struct dlk_err *err)
{
	struct splitter sp = { NULL, 0, 0, fn, ud, 0 };
	unsigned char buf[65536];
	unsigned long long total = 0;
	z_stream z;
	int rc = -1, zr = Z_OK;

	*truncated = 0;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return dlk_errf(err, DLK_EXIT_FAIL, "out of memory");
	z.next_in = (unsigned char *)data;
	z.avail_in = (uInt)len;
	if (len > UINT32_MAX) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the archive is too large to read");
		goto out;
	}
	if (!len) {
		*truncated = 1;
		rc = 0;
		goto out;
	}
	while (!sp.stop) {
		z.next_out = buf;
		z.avail_out = sizeof(buf);
		zr = inflate(&z, Z_NO_FLUSH);
		total += sizeof(buf) - z.avail_out;
		if (total > DLK_LOG_ARCHIVE_READ_MAX) {
			dlk_errf(err, DLK_EXIT_CONFIG, "the archive expands beyond %u MiB", DLK_LOG_ARCHIVE_READ_MAX >> 20);
			goto out;
		}
		split(&sp, buf, sizeof(buf) - z.avail_out);
		if (zr == Z_STREAM_END) {
			if (!sp.stop && sp.n) /* a member ends its last line */
				sp.stop = fn(sp.line, sp.n, ud);
			sp.n = 0;
			if (!z.avail_in)
				break;
			inflateReset(&z); /* the next member: a restarted worker's */
			continue;
		}
		if (zr == Z_BUF_ERROR || (zr == Z_OK && !z.avail_in && z.avail_out)) {
			/* the input ended inside a member: a worker stopped while writing */
			*truncated = 1;
			break;
		}
		if (zr != Z_OK) {
			dlk_errf(err, DLK_EXIT_CONFIG, "not a log archive (gzip): %s", z.msg ? z.msg : "bad data");
			goto out;
		}
	}
	if (!sp.stop && sp.n) /* a last line without its newline */
		sp.stop = fn(sp.line, sp.n, ud);
	rc = 0;
out:
	inflateEnd(&z);
	free(sp.line);
	return rc;
}
