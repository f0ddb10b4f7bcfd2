#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
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

int dlk_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, struct dlk_err *err)
{
	char *tmp = xasprintf("%s.tmp-%ld", path, (long)getpid());
	const char *p = data;
	size_t left = len;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

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

int dlk_open_regular(const char *path, char *msg, size_t msg_len)
{
	struct stat st;
	int fd, e, flags;

	/* O_NONBLOCK: opening a FIFO without a writer returns at once, so the check below can
	 * refuse it (a plain open would wait for a writer forever) */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		e = errno;
		if (msg)
			snprintf(msg, msg_len, "cannot open '%s': %s", path, strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, &st)) {
		e = errno;
		close(fd);
		if (msg)
			snprintf(msg, msg_len, "cannot read '%s': %s", path, strerror(e));
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (msg)
			snprintf(msg, msg_len, "'%s' is %s, not a regular file", path, kind_of(st.st_mode));
		errno = EINVAL;
		return -1;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags >= 0)
		fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	return fd;
}

FILE *dlk_fopen_regular(const char *path, char *msg, size_t msg_len)
{
	int fd = dlk_open_regular(path, msg, msg_len);
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
