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
#include "lib/util/hash.h"
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
	struct dlk_sha256 h;
	char got[65];

	dlk_sha256_begin(&h);
	slash = strrchr(p, '/');
	*slash = '\0';
	if (dlk_mkdir_p(p, err))
		goto out;
	*slash = '/';
	/* a name of our own: two pushes of the same object at once must not write into one file */
	tmp = xasprintf("%s.tmp-%ld-%lx", p, (long)getpid(), (unsigned long)random());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (src->path) {
		char buf[1 << 16];
		ssize_t n;
		in = dlk_open_regular(src->path, 0);
		if (in < 0) {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", src->path, dlk_open_strerror(errno));
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
			/* what is written is what is hashed: the file may change after push hashed it */
			dlk_sha256_update(&h, buf, (size_t)n);
			done += (unsigned long long)n;
			if (src->progress && src->progress(src->progress_ctx, src->what, done, src->size)) {
				dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while writing '%s'", p);
				goto out;
			}
		}
	} else if (write_all(fd, src->data, (size_t)src->size)) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	} else {
		dlk_sha256_update(&h, src->data, (size_t)src->size);
		done = src->size;
	}
	dlk_sha256_end(&h, got);
	if (done != src->size || strcmp(got, src->sha256)) {
		char *w = dlk_store_where(s, key);
		dlk_store_put_changed(w, src, got, done, err);
		free(w);
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
	if (h.ctx)
		dlk_sha256_end(&h, got); /* an error before the end: free the context */
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
	int fd = dlk_open_regular(p, 0), rc = -1;
	ssize_t n;

	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "'%s' does not exist", p);
		} else if (errno == EISDIR || errno == EINVAL) {
			/* a directory or a FIFO where an object should be: the store is damaged, and a
			 * FIFO would hang the reader */
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: %s", p,
			         errno == EISDIR ? "a directory, not a file" : "not a regular file");
			dlk_err_hint(err, "remove it from the store, then push the dataset again");
		} else {
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", p, strerror(errno));
		}
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

static int dir_verify(struct dlk_store *s, const char *key, const char *hex, unsigned long long size,
                      struct dlk_err *err)
{
	char *p = key_path(s, key);
	struct dlk_sha256 h;
	struct stat st;
	char buf[1 << 16], got[65];
	int fd = dlk_open_regular(p, 0), rc = 0;
	ssize_t n;

	(void)err;
	/* anything that is not a regular file of the right size is replaced by the push */
	if (fd < 0 || fstat(fd, &st) < 0 || (unsigned long long)st.st_size != size)
		goto out;
	dlk_sha256_begin(&h);
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		dlk_sha256_update(&h, buf, (size_t)n);
	}
	dlk_sha256_end(&h, got);
	rc = n == 0 && !strcmp(got, hex);
out:
	if (fd >= 0)
		close(fd);
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
	dir_stat, dir_put, dir_get, dir_list, dir_local_path, dir_verify, dir_close,
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
