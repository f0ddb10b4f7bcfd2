/* The store front: a store by its URL, the calls every kind answers, and verified downloads.
 * The kinds themselves are behind lib/store/store_impl.h. */
#include "lib/store/store.h"
#include "lib/store/store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/mem.h"

struct dlk_store *dlk_store_open(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err)
{
	static const struct dlk_store_opts none;

	if (!opts)
		opts = &none;
	if (!url || !*url) {
		dlk_errf(err, DLK_EXIT_CONFIG, "no data store given");
		dlk_err_hint(err, "name one with --to/--from, or set data.store in the project file");
		return NULL;
	}
	if (!strncmp(url, "s3://", 5))
		return dlk_store_open_s3(url, opts, err);
	if (!strncmp(url, "pvc://", 6))
		return dlk_store_open_pvc(url, opts, err);
	if (strstr(url, "://") && strncmp(url, "file://", 7)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a data store (use a directory, file://, s3:// or pvc://)", url);
		return NULL;
	}
	return dlk_store_open_dir(url, NULL, opts, err);
}

void dlk_store_close(struct dlk_store *s)
{
	if (!s)
		return;
	s->ops->close(s);
	free(s->url);
	free(s);
}

char *dlk_store_where(const struct dlk_store *s, const char *key)
{
	size_t n = strlen(s->url);

	return xasprintf("%s%s%s", s->url, n && s->url[n - 1] == '/' ? "" : "/", key);
}

struct mem_sink {
	struct dlk_buf *out;
	size_t max;
	const char *what;
};

static int mem_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	struct mem_sink *m = ctx;

	if (m->out->len + len > m->max)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is larger than %zu bytes", m->what, m->max);
	dlk_buf_add(m->out, data, len);
	return 0;
}

int dlk_store_get_mem(struct dlk_store *s, const char *key, size_t max, struct dlk_buf *out, struct dlk_err *err)
{
	char *where = dlk_store_where(s, key);
	struct mem_sink m = { out, max, where };
	int rc = s->ops->get(s, key, 0, mem_sink, &m, err);

	free(where);
	return rc;
}

/* ---- verified downloads ---- */

struct fd_sink {
	int fd;
	struct dlk_sha256 h;
	unsigned long long done, size, base;
	dlk_store_progress_fn progress;
	void *progress_ctx;
	const char *what;
	int too_long;
};

static int fd_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	struct fd_sink *f = ctx;
	const char *p = data;
	size_t left = len;

	if (f->done + len > f->size) {
		f->too_long = 1;
		return dlk_errf(err, DLK_EXIT_CONFIG, "more bytes than the %llu the manifest lists", f->size);
	}
	while (left) {
		ssize_t n = write(f->fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", f->what, strerror(errno));
		}
		p += n;
		left -= (size_t)n;
	}
	dlk_sha256_update(&f->h, data, len);
	f->done += len;
	if (f->progress && f->progress(f->progress_ctx, f->what, f->base + f->done, 0))
		return dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while fetching '%s'", f->what);
	return 0;
}

/* Hashes fd's first `have` bytes into h. */
static int hash_prefix(int fd, unsigned long long have, struct dlk_sha256 *h)
{
	unsigned char buf[1 << 16];
	unsigned long long left = have;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	while (left) {
		ssize_t n = read(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		dlk_sha256_update(h, buf, (size_t)n);
		left -= (unsigned long long)n;
	}
	return lseek(fd, 0, SEEK_END) < 0 ? -1 : 0;
}

int dlk_store_fetch_fd(struct dlk_store *s, const char *hex, unsigned long long size, int fd,
                       dlk_store_progress_fn progress, void *progress_ctx, const char *what, struct dlk_err *err)
{
	char key[80], got[65];
	struct stat st;

	snprintf(key, sizeof(key), "sha256/%s", hex);
	for (int attempt = 0;; attempt++) {
		struct fd_sink f = { .fd = fd, .size = size, .progress = progress, .progress_ctx = progress_ctx,
		                     .what = what ? what : key };
		unsigned long long have;

		if (fstat(fd, &st) < 0)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", f.what, strerror(errno));
		have = (unsigned long long)st.st_size;
		if (have > size) {
			if (ftruncate(fd, 0) < 0)
				return dlk_errf(err, DLK_EXIT_FAIL, "cannot truncate '%s': %s", f.what, strerror(errno));
			have = 0;
		}
		dlk_sha256_begin(&f.h);
		if (hash_prefix(fd, have, &f.h) < 0) {
			dlk_sha256_end(&f.h, got);
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", f.what, strerror(errno ? errno : EIO));
		}
		f.done = have;
		if (have < size && s->ops->get(s, key, have, fd_sink, &f, err)) {
			dlk_sha256_end(&f.h, got);
			if (f.too_long) {
				char *w = dlk_store_where(s, key);
				if (ftruncate(fd, 0) < 0) { /* nothing more to do: the error says it all */ }
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: it has more than the %llu bytes of %s", w, size,
				         what ? what : key);
				dlk_err_hint(err, "push the dataset again to replace it (dlk data push --verify reads back what "
				                  "the store has), or remove that object from the store");
				free(w);
			}
			return -1;
		}
		dlk_sha256_end(&f.h, got);
		if (f.done == size && !strcmp(got, hex))
			return 0;
		if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
			return dlk_errf(err, DLK_EXIT_FAIL, "cannot truncate '%s': %s", f.what, strerror(errno));
		if (have && !attempt)
			continue; /* the bytes kept from before may be what was wrong: once more from scratch */
		{
			char *w = dlk_store_where(s, key);
			/* the store answered the whole object and it was short: a transfer cut off is an
			 * error of the transfer (exit 4) before it gets here, so this is the object itself,
			 * corrupted like one whose bytes hash wrong (exit 3, as dlk-data(1) says) */
			if (f.done != size)
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: it has %llu of the %llu bytes of %s", w,
				         f.done, size, what ? what : key);
			else
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: its bytes hash to %s%s%s", w, got,
				         what ? ", not to the sha256 of " : "", what ? what : "");
			dlk_err_hint(err, "push the dataset again to replace it (dlk data push --verify reads back what the "
			                  "store has), or remove that object from the store");
			free(w);
		}
		return -1;
	}
}

int dlk_store_get_object(struct dlk_store *s, const char *hex, unsigned long long size, const char *dest,
                         dlk_store_progress_fn progress, void *progress_ctx, const char *what, struct dlk_err *err)
{
	char *part = xasprintf("%s.part", dest);
	int fd = dlk_open_part(part, err), rc = -1;

	if (fd < 0)
		goto out;
	if (dlk_store_fetch_fd(s, hex, size, fd, progress, progress_ctx, what ? what : dest, err))
		goto out;
	if (fsync(fd) < 0 || rename(part, dest) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", dest, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (rc && fd >= 0) {
		struct stat st;
		int code = err ? err->code : 0;
		/* keep a download cut off (interrupted, the store unreachable) to continue later;
		 * after any other failure nothing of it is left. fd is the file opened here: only a
		 * name that is still that file is removed */
		if (!((code == DLK_EXIT_INTERRUPTED || code == DLK_EXIT_CONNECT) && fstat(fd, &st) == 0 && st.st_size > 0))
			dlk_unlink_if_same(part, fd);
	}
	if (fd >= 0)
		close(fd);
	free(part);
	return rc;
}

/* ---- the calls every kind answers ---- */

const char *dlk_store_url(const struct dlk_store *s)
{
	return s->url;
}

int dlk_store_stat(struct dlk_store *s, const char *key, unsigned long long *size, struct dlk_err *err)
{
	return s->ops->stat(s, key, size, err);
}

int dlk_store_put(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err)
{
	return s->ops->put(s, key, src, err);
}

int dlk_store_put_changed(const char *where, const struct dlk_put_src *src, const char *got, unsigned long long n,
                          struct dlk_err *err)
{
	dlk_errf(err, DLK_EXIT_FAIL,
	         "'%s' changed while it was uploaded: the %llu bytes sent hash to %s, not to the %s of its %llu bytes "
	         "hashed before; nothing was stored as '%s'",
	         src->path ? src->path : src->what ? src->what : where, n, got, src->sha256, src->size, where);
	return dlk_err_hint(err, "push the dataset again once nothing writes to its files");
}

struct hash_sink {
	struct dlk_sha256 h;
	unsigned long long n, max;
};

static int hash_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	struct hash_sink *k = ctx;

	(void)err;
	k->n += len;
	if (k->n > k->max)
		return -1; /* longer than it should be: it does not verify, no need to read on */
	dlk_sha256_update(&k->h, data, len);
	return 0;
}

void dlk_store_read_back(struct dlk_store *s, int on)
{
	s->opts.read_back = on;
}

int dlk_store_has(struct dlk_store *s, const char *key, const char *hex, unsigned long long size, struct dlk_err *err)
{
	struct hash_sink k = { .max = size };
	unsigned long long have = 0;
	char got[65];
	int r;

	if (s->ops->verify && !s->opts.read_back)
		return s->ops->verify(s, key, hex, size, err);
	r = s->ops->stat(s, key, &have, err);
	if (r <= 0 || have != size)
		return r < 0 ? -1 : 0;
	/* no cheaper way for this kind: read it back */
	dlk_sha256_begin(&k.h);
	r = s->ops->get(s, key, 0, hash_sink, &k, err);
	dlk_sha256_end(&k.h, got);
	if (r && k.n <= k.max)
		return err && err->code == DLK_EXIT_NOTFOUND ? 0 : -1;
	return !r && k.n == size && !strcmp(got, hex);
}

int dlk_store_list(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err)
{
	return s->ops->list(s, prefix, fn, ctx, err);
}

int dlk_store_is_local(const struct dlk_store *s)
{
	return s->ops->local_path != NULL;
}

char *dlk_store_local_path(struct dlk_store *s, const char *key)
{
	return s->ops->local_path ? s->ops->local_path(s, key) : NULL;
}
