#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int fsync_dir_of(const char *path)
{
	char *copy = xstrdup(path);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
	int rc = 0;

	free(copy);
	if (fd < 0)
		return -1;
	if (fsync(fd) && errno != EINVAL)
		rc = -1;
	close(fd);
	return rc;
}

int dlk_open_regular(const char *path, int extra_flags)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | extra_flags);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		close(fd);
		errno = e;
		return -1;
	}
	/* back to blocking reads: on a regular file O_NONBLOCK only mattered for the open */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

const char *dlk_open_strerror(int e)
{
	return e == EINVAL ? "not a regular file" : strerror(e);
}

int dlk_open_part(const char *path, struct dlk_err *err)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);

	if (fd < 0) {
		if (errno == ELOOP)
			dlk_errf(err, DLK_EXIT_FAIL, "'%s' is a symbolic link: dlk does not write through one", path);
		else
			dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", path, strerror(errno));
		goto fail;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		dlk_errf(err, DLK_EXIT_FAIL, "'%s' is %s: dlk writes only to a file of its own there", path,
		         S_ISDIR(st.st_mode) ? "a directory" : S_ISREG(st.st_mode) ? "a file with other names (a hard link)"
		                                                                 : "not a regular file");
		close(fd);
		goto fail;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
fail:
	dlk_err_hint(err, "remove it, then run the command again");
	return -1;
}

void dlk_unlink_if_same(const char *path, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(path);
}

/* A new file beside path, named path.tmp-PID-RANDOM: O_EXCL makes the kernel refuse a name that
 * exists, a symlink included, so nothing planted there is followed; another name is tried. */
static int create_tmp_beside(const char *path, mode_t mode, char **tmp)
{
	for (int i = 0; i < 100; i++) {
		unsigned long r = 0;
		int fd;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
			r = (unsigned long)random();
		*tmp = xasprintf("%s.tmp-%ld-%08lx", path, (long)getpid(), r & 0xffffffffUL);
		fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			return fd;
		free(*tmp);
		*tmp = NULL;
	}
	errno = EEXIST;
	return -1;
}

int dlk_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, struct dlk_err *err)
{
	char *tmp = NULL;
	const char *p = data;
	size_t left = len;
	int fd = create_tmp_beside(path, mode, &tmp);

	if (fd < 0) {
		/* the file asked for, not the temporary name beside it: that is the one the user knows */
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", path, strerror(errno));
		free(tmp);
		return -1;
	}
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		p += n;
		left -= (size_t)n;
	}
	if (fsync(fd))
		goto fail;
	if (close(fd)) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path))
		goto fail;
	fsync_dir_of(path);
	free(tmp);
	return 0;
fail:
	dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return -1;
}

int dlk_mkdir_p(const char *path, struct dlk_err *err)
{
	char *copy = xstrdup(path);
	size_t n = strlen(copy);

	for (size_t i = 1; i <= n; i++) {
		if (copy[i] != '/' && copy[i] != '\0')
			continue;
		char c = copy[i];
		copy[i] = '\0';
		if (mkdir(copy, 0777) && errno != EEXIST) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot create directory '%s': %s", copy, strerror(errno));
			free(copy);
			return -1;
		}
		copy[i] = c;
	}
	free(copy);
	return 0;
}

char *dlk_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return xstrdup(".");
	/* "/dlk.yaml" is in "/", not in "" */
	return slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
}

static const char *kind_of(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device"
	       : S_ISBLK(m) ? "a block device" : "not a plain file";
}

int dlk_open_regular_msg(const char *path, char *msg, size_t msg_len)
{
	int fd = dlk_open_regular(path, 0), e = errno;
	struct stat st;

	if (fd >= 0 || !msg)
		return fd;
	if ((e == EINVAL || e == EISDIR) && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		snprintf(msg, msg_len, "'%s' is %s, not a regular file", path, kind_of(st.st_mode));
	else
		snprintf(msg, msg_len, "cannot open '%s': %s", path, dlk_open_strerror(e));
	errno = e;
	return -1;
}

FILE *dlk_fopen_regular(const char *path, char *msg, size_t msg_len)
{
	int fd = dlk_open_regular_msg(path, msg, msg_len);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = fdopen(fd, "rb");
	if (!f) {
		int e = errno;
		close(fd);
		if (msg)
			snprintf(msg, msg_len, "cannot read '%s': %s", path, strerror(e));
		errno = e;
	}
	return f;
}

char *dlk_mkdtemp(const char *prefix, struct dlk_err *err)
{
	const char *t = getenv("TMPDIR");
	char *d = xasprintf("%s/%s-XXXXXX", t && *t ? t : P_tmpdir, prefix);

	if (!mkdtemp(d)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create a temporary directory in %s: %s", t && *t ? t : P_tmpdir,
		         strerror(errno));
		free(d);
		return NULL;
	}
	return d;
}
