/* A store in a directory of this machine (or a volume mounted here): objects are files. */
#include "lib/store/store_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/data/fetch.h" /* dlk_local_path */
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

struct dir_store {
	char *root;
};

static char *key_path(struct dlk_store *s, const char *key)
{
	struct dir_store *d = s->impl;

	return xasprintf("%s/%s", d->root, key);
}

static int dir_stat(struct dlk_store *s, const char *key, unsigned long long *size, struct dlk_err *err)
{
	char *p = key_path(s, key);
	struct stat st;
	int rc = 0;

	if (stat(p, &st) == 0) {
		if (S_ISREG(st.st_mode)) {
			*size = (unsigned long long)st.st_size;
			rc = 1;
		}
	} else if (errno != ENOENT && errno != ENOTDIR) {
		rc = dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
	}
	free(p);
	return rc;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int dir_put(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err)
{
	char *p = key_path(s, key), *tmp = NULL, *slash;
	int fd = -1, in = -1, rc = -1;
	unsigned long long done = 0;

	slash = strrchr(p, '/');
	*slash = '\0';
	if (dlk_mkdir_p(p, err))
		goto out;
	*slash = '/';
	/* a name of our own: two pushes of the same object at once must not write into one file */
	tmp = xasprintf("%s.tmp-%ld-%lx", p, (long)getpid(), (unsigned long)random());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (src->path) {
		char buf[1 << 16];
		ssize_t n;
		in = open(src->path, O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, strerror(errno));
			goto out;
		}
		while ((n = read(in, buf, sizeof(buf))) != 0) {
			if (n < 0) {
				if (errno == EINTR)
					continue;
				dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, strerror(errno));
				goto out;
			}
			if (write_all(fd, buf, (size_t)n)) {
				dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", tmp, strerror(errno));
				goto out;
			}
			done += (unsigned long long)n;
			if (src->progress && src->progress(src->progress_ctx, src->what, done, src->size)) {
				dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while writing '%s'", p);
				goto out;
			}
		}
		if (done != src->size) {
			dlk_errf(err, DLK_EXIT_FAIL, "'%s' changed while it was read (%llu bytes, then %llu)", src->path,
			         src->size, done);
			goto out;
		}
	} else if (write_all(fd, src->data, (size_t)src->size)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fd = -1;
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, p) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot rename '%s' to '%s': %s", tmp, p, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (in >= 0)
		close(in);
	if (rc && tmp)
		unlink(tmp);
	free(tmp);
	free(p);
	return rc;
}

static int dir_get(struct dlk_store *s, const char *key, unsigned long long offset, dlk_store_sink_fn sink,
                   void *sink_ctx, struct dlk_err *err)
{
	char *p = key_path(s, key);
	char buf[1 << 16];
	int fd = open(p, O_RDONLY | O_CLOEXEC), rc = -1;
	ssize_t n;

	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			dlk_errf(err, DLK_EXIT_NOTFOUND, "'%s' does not exist", p);
		else
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
		goto out;
	}
	if (offset && lseek(fd, (off_t)offset, SEEK_SET) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
		goto out;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
			goto out;
		}
		if (sink(sink_ctx, buf, (size_t)n, err))
			goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(p);
	return rc;
}

static int dir_list(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err)
{
	char *p = key_path(s, prefix);
	size_t n = strlen(p);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (n && p[n - 1] == '/')
		p[n - 1] = '\0';
	d = opendir(p);
	if (!d) {
		if (errno != ENOENT)
			rc = dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
		free(p);
		return rc;
	}
	while ((errno = 0, de = readdir(d))) {
		struct stat st;
		char *f;
		if (de->d_name[0] == '.' || strstr(de->d_name, ".tmp-"))
			continue;
		f = xasprintf("%s/%s", p, de->d_name);
		if (stat(f, &st) == 0 && S_ISREG(st.st_mode) && fn(ctx, de->d_name, (unsigned long long)st.st_size)) {
			free(f);
			break;
		}
		free(f);
	}
	if (errno)
		rc = dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
	closedir(d);
	free(p);
	return rc;
}

static char *dir_local_path(struct dlk_store *s, const char *key)
{
	return key_path(s, key);
}

static void dir_close(struct dlk_store *s)
{
	struct dir_store *d = s->impl;

	free(d->root);
	free(d);
}

static const struct dlk_store_ops dir_ops = {
	dir_stat, dir_put, dir_get, dir_list, dir_local_path, dir_close,
};

struct dlk_store *dlk_store_open_dir(const char *url, const char *dir, const struct dlk_store_opts *opts,
                                     struct dlk_err *err)
{
	struct dlk_store *s;
	struct dir_store *d;
	char *root = dir ? xstrdup(dir) : dlk_local_path(url, opts->base_dir, err);
	size_t n;
	struct stat st;

	if (!root)
		return NULL;
	n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		root[--n] = '\0';
	if (stat(root, &st) == 0 && !S_ISDIR(st.st_mode)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is not a directory: a directory store needs one", url);
		free(root);
		return NULL;
	}
	d = xcalloc(1, sizeof(*d));
	d->root = root;
	s = xcalloc(1, sizeof(*s));
	s->ops = &dir_ops;
	s->url = xstrdup(url);
	s->opts = *opts;
	s->impl = d;
	return s;
}
