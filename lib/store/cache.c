/* The node cache (see cache.h). Locking: the process fetching an object holds an exclusive
 * flock on its .part file; one that wants the same object waits on that lock and then finds
 * the object in place (the .part was renamed to it). Eviction holds a lock on "<dir>/.trim". */
#include "lib/store/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

int dlk_cache_open(const char *dir, unsigned long long max_bytes, struct dlk_cache *c, struct dlk_err *err)
{
	char *objs = xasprintf("%s/sha256", dir);
	int rc = dlk_mkdir_p(objs, err);

	free(objs);
	if (rc)
		return dlk_err_prefix(err, "cannot use the data cache '%s'", dir);
	c->dir = xstrdup(dir);
	c->max_bytes = max_bytes;
	return 0;
}

void dlk_cache_release(struct dlk_cache *c)
{
	free(c->dir);
	c->dir = NULL;
}

char *dlk_cache_object(const struct dlk_cache *c, const char *hex)
{
	return xasprintf("%s/sha256/%s", c->dir, hex);
}

static void lock_fd(int fd)
{
	while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
		;
}

/* A cached copy that has the right size and hashes right. */
static int verified(const char *path, const char *hex, unsigned long long size)
{
	struct stat st;
	char got[65];

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || (unsigned long long)st.st_size != size)
		return 0;
	return dlk_sha256_file(path, got) == 0 && !strcmp(got, hex);
}

int dlk_cache_fetch(struct dlk_cache *c, struct dlk_store *s, const char *hex, unsigned long long size,
                    dlk_store_progress_fn progress, void *progress_ctx, const char *what, char **path, int *hit,
                    struct dlk_err *err)
{
	char *obj = dlk_cache_object(c, hex), *part = NULL;
	int fd = -1, rc = -1;

	*hit = 0;
	*path = NULL;
	if (verified(obj, hex, size))
		goto hit;
	part = xasprintf("%s.part", obj);
	fd = dlk_open_part(part, err); /* never through a link planted in the cache */
	if (fd < 0)
		goto out;
	lock_fd(fd);
	/* whoever held the lock may have finished it meanwhile */
	if (verified(obj, hex, size)) {
		struct stat a, b;
		/* this .part may be the inode that became the object: never remove that name then */
		if (fstat(fd, &a) == 0 && stat(part, &b) == 0 && a.st_ino == b.st_ino)
			unlink(part);
		goto hit;
	}
	unlink(obj); /* a bad copy: the one fetched now replaces it */
	if (dlk_store_fetch_fd(s, hex, size, fd, progress, progress_ctx, what, err))
		goto out;
	if (fsync(fd) < 0 || rename(part, obj) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", obj, strerror(errno));
		goto out;
	}
	*path = obj;
	obj = NULL;
	rc = 0;
	goto out;
hit:
	/* the mtime says when it was last used: what eviction goes by */
	utimensat(AT_FDCWD, obj, NULL, 0);
	*hit = 1;
	*path = obj;
	obj = NULL;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(part);
	free(obj);
	return rc;
}

struct cached {
	char hex[65];
	unsigned long long size;
	struct timespec used;
};

static int cmp_used(const void *a, const void *b)
{
	const struct cached *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->hex, y->hex);
}

static int scan(const struct dlk_cache *c, struct cached **out, size_t *n, unsigned long long *total,
                struct dlk_err *err)
{
	char *dir = xasprintf("%s/sha256", c->dir);
	struct cached *v = NULL;
	size_t k = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	*total = 0;
	if (!d) {
		int e = errno;
		free(dir);
		if (e == ENOENT) {
			*out = NULL;
			*n = 0;
			return 0;
		}
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot read the data cache '%s': %s", c->dir, strerror(e));
	}
	while ((de = readdir(d))) {
		struct stat st;
		char *f;
		if (strlen(de->d_name) != 64 || strspn(de->d_name, "0123456789abcdef") != 64)
			continue;
		f = xasprintf("%s/%s", dir, de->d_name);
		if (stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
			if (k == cap) {
				cap = cap ? cap * 2 : 64;
				v = xrealloc(v, cap * sizeof(*v));
			}
			memcpy(v[k].hex, de->d_name, 65);
			v[k].size = (unsigned long long)st.st_size;
			v[k].used = st.st_mtim;
			*total += v[k].size;
			k++;
		}
		free(f);
	}
	closedir(d);
	free(dir);
	*out = v;
	*n = k;
	return 0;
}

int dlk_cache_usage(const struct dlk_cache *c, unsigned long long *bytes, size_t *objects, struct dlk_err *err)
{
	struct cached *v = NULL;
	size_t n = 0;

	if (scan(c, &v, &n, bytes, err))
		return -1;
	free(v);
	*objects = n;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int dlk_cache_trim(struct dlk_cache *c, const char *const *keep, size_t n_keep, unsigned long long *freed,
                   int *kept_over, struct dlk_err *err)
{
	struct cached *v = NULL;
	const char **keep_sorted = NULL;
	unsigned long long total = 0, kept = 0;
	char *lock = xasprintf("%s/.trim", c->dir);
	size_t n = 0;
	int fd = -1, rc = -1;

	*freed = 0;
	if (kept_over)
		*kept_over = 0;
	if (!c->max_bytes) {
		rc = 0;
		goto out;
	}
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", lock, strerror(errno));
		goto out;
	}
	lock_fd(fd);
	if (scan(c, &v, &n, &total, err))
		goto out;
	keep_sorted = xcalloc(n_keep ? n_keep : 1, sizeof(*keep_sorted));
	memcpy(keep_sorted, keep, n_keep * sizeof(*keep));
	qsort(keep_sorted, n_keep, sizeof(*keep_sorted), cmp_str);
	qsort(v, n, sizeof(*v), cmp_used);
	for (size_t i = 0; i < n && total > c->max_bytes; i++) {
		const char *h = v[i].hex;
		char *f;
		if (n_keep && bsearch(&h, keep_sorted, n_keep, sizeof(*keep_sorted), cmp_str)) {
			kept += v[i].size;
			continue;
		}
		f = dlk_cache_object(c, v[i].hex);
		if (unlink(f) == 0 || errno == ENOENT) {
			total -= v[i].size;
			*freed += v[i].size;
		}
		free(f);
	}
	if (kept_over && total > c->max_bytes)
		*kept_over = 1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(keep_sorted);
	free(v);
	free(lock);
	return rc;
}
