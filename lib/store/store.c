/* Stores by URL, verified downloads, and the dataset operations every kind of store shares. */
#include "lib/store/store.h"
#include "lib/store/cache.h"

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
				dlk_err_hint(err, "push the dataset again to replace it, or remove that object from the store");
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
			if (f.done != size)
				dlk_errf(err, DLK_EXIT_CONNECT, "'%s' ended after %llu of its %llu bytes", w, f.done, size);
			else {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: its bytes hash to %s%s%s", w, got,
				         what ? ", not to the sha256 of " : "", what ? what : "");
				dlk_err_hint(err, "push the dataset again to replace it, or remove that object from the store");
			}
			free(w);
		}
		return -1;
	}
}

int dlk_store_get_object(struct dlk_store *s, const char *hex, unsigned long long size, const char *dest,
                         dlk_store_progress_fn progress, void *progress_ctx, const char *what, struct dlk_err *err)
{
	char *part = xasprintf("%s.part", dest);
	int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644), rc = -1;

	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", part, strerror(errno));
		goto out;
	}
	if (dlk_store_fetch_fd(s, hex, size, fd, progress, progress_ctx, what ? what : dest, err))
		goto out;
	if (fsync(fd) < 0 || rename(part, dest) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", dest, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc && fd >= 0) {
		struct stat st;
		/* keep a partial download to continue later, not an empty or failed one */
		if (stat(part, &st) == 0 && st.st_size == 0)
			unlink(part);
	}
	free(part);
	return rc;
}

/* ---- datasets ---- */

struct push_progress {
	dlk_store_progress_fn fn;
	void *ctx;
	unsigned long long base, total;
};

static int push_progress(void *ctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct push_progress *p = ctx;

	(void)total;
	return p->fn ? p->fn(p->ctx, what, p->base + done, p->total) : 0;
}

static int cmp_hex_entry(const void *a, const void *b)
{
	return strcmp((*(const struct dlk_manifest_entry *const *)a)->sha256,
	              (*(const struct dlk_manifest_entry *const *)b)->sha256);
}

int dlk_dataset_push(struct dlk_store *s, const struct dlk_manifest *m, const char *const *tags, size_t n_tags,
                     dlk_store_progress_fn progress, void *progress_ctx, struct dlk_push_stats *stats,
                     struct dlk_err *err)
{
	struct push_progress pp = { progress, progress_ctx, 0, 0 };
	const struct dlk_manifest_entry **by_hex = NULL;
	struct dlk_push_stats st = { 0 };
	char key[300], why[160];
	char *text = NULL;
	size_t text_len, n = 0;
	int rc = -1;

	for (size_t i = 0; i < n_tags; i++)
		if (dlk_dataset_tag_check(tags[i], why, sizeof(why)))
			return dlk_errf(err, DLK_EXIT_USAGE, "'%s' is not a tag: %s", tags[i], why);
	/* one object per distinct content: two files with the same bytes are stored once */
	by_hex = xcalloc(m->n ? m->n : 1, sizeof(*by_hex));
	for (size_t i = 0; i < m->n; i++)
		by_hex[i] = &m->e[i];
	qsort(by_hex, m->n, sizeof(*by_hex), cmp_hex_entry);
	for (size_t i = 0; i < m->n; i++)
		if (!i || strcmp(by_hex[i]->sha256, by_hex[n - 1]->sha256))
			by_hex[n++] = by_hex[i];
	st.files = m->n;
	for (size_t i = 0; i < n; i++)
		pp.total += by_hex[i]->size;
	st.bytes = m->total;
	for (size_t i = 0; i < n; i++) {
		const struct dlk_manifest_entry *e = by_hex[i];
		unsigned long long have = 0;
		int r;

		snprintf(key, sizeof(key), "sha256/%s", e->sha256);
		r = s->ops->stat(s, key, &have, err);
		if (r < 0)
			goto out;
		if (r == 0 || have != e->size) {
			unsigned long long resumed = 0;
			struct dlk_put_src src = { .path = e->local, .size = e->size, .progress = push_progress,
			                           .progress_ctx = &pp, .what = e->path, .resumed = &resumed };
			memcpy(src.sha256, e->sha256, sizeof(src.sha256));
			if (!e->local) {
				dlk_errf(err, DLK_EXIT_FAIL, "'%s': no local file to upload", e->path);
				goto out;
			}
			if (s->ops->put(s, key, &src, err)) {
				dlk_err_prefix(err, "cannot upload '%s'", e->local);
				goto out;
			}
			st.uploaded++;
			st.uploaded_bytes += e->size;
			st.resumed_bytes += resumed;
		}
		pp.base += e->size;
		if (progress && progress(progress_ctx, e->path, pp.base, pp.total)) {
			dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while pushing");
			goto out;
		}
	}
	snprintf(key, sizeof(key), "datasets/%s", m->id);
	{
		unsigned long long have = 0;
		int r = s->ops->stat(s, key, &have, err);
		if (r < 0)
			goto out;
		text = dlk_manifest_format(m, &text_len);
		if (r == 0 || have != text_len) {
			struct dlk_put_src src = { .data = text, .size = text_len, .what = "the manifest" };
			dlk_sha256_hex(text, text_len, src.sha256);
			if (s->ops->put(s, key, &src, err)) {
				dlk_err_prefix(err, "cannot upload the manifest");
				goto out;
			}
			st.manifest_new = 1;
		}
	}
	for (size_t i = 0; i < n_tags; i++) {
		char *line = xasprintf("sha256:%s\n", m->id);
		struct dlk_put_src src = { .data = line, .size = strlen(line), .what = tags[i] };
		int r;
		snprintf(key, sizeof(key), strchr(tags[i], '@') ? "tags/%s" : "tags/%s@latest", tags[i]);
		dlk_sha256_hex(line, strlen(line), src.sha256);
		r = s->ops->put(s, key, &src, err);
		free(line);
		if (r) {
			dlk_err_prefix(err, "cannot write tag '%s'", tags[i]);
			goto out;
		}
	}
	rc = 0;
out:
	if (stats)
		*stats = st;
	free(text);
	free(by_hex);
	return rc;
}

int dlk_dataset_manifest(struct dlk_store *s, const char *id, struct dlk_manifest *m, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char key[80], got[65];
	char *where;
	int rc = -1;

	snprintf(key, sizeof(key), "datasets/%s", id);
	where = dlk_store_where(s, key);
	if (dlk_store_get_mem(s, key, DLK_MANIFEST_MAX_BYTES, &b, err)) {
		if (err && err->code == DLK_EXIT_NOTFOUND) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "dataset sha256:%s is not in '%s'", id, s->url);
			dlk_err_hint(err, "'dlk data ls --from %s' lists the datasets it has", s->url);
		}
		goto out;
	}
	dlk_sha256_hex(b.data, b.len, got);
	if (strcmp(got, id)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: its bytes hash to %s", where, got);
		dlk_err_hint(err, "push the dataset again to replace it");
		goto out;
	}
	rc = dlk_manifest_parse(b.data, b.len, where, m, err);
out:
	free(where);
	dlk_buf_release(&b);
	return rc;
}

struct names {
	char **v;
	size_t n, cap;
};

static int collect_name(void *ctx, const char *name, unsigned long long size)
{
	struct names *l = ctx;

	(void)size;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 32;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = xstrdup(name);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

int dlk_dataset_list(struct dlk_store *s, char ***ids, size_t *n, struct dlk_err *err)
{
	struct names l = { 0 };
	size_t k = 0;

	if (s->ops->list(s, "datasets/", collect_name, &l, err)) {
		names_free(&l);
		return -1;
	}
	/* only names that are ids: a store may hold other things beside ours */
	for (size_t i = 0; i < l.n; i++) {
		if (strlen(l.v[i]) == 64 && strspn(l.v[i], "0123456789abcdef") == 64)
			l.v[k++] = l.v[i];
		else
			free(l.v[i]);
	}
	l.n = k;
	qsort(l.v, l.n, sizeof(*l.v), cmp_str);
	*ids = l.v;
	*n = l.n;
	return 0;
}

static int read_tag(struct dlk_store *s, const char *tag, char id[65], struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	char key[300];
	int rc = -1;

	snprintf(key, sizeof(key), "tags/%s", tag);
	if (dlk_store_get_mem(s, key, 256, &b, err))
		goto out;
	if (b.len != 7 + 64 + 1 || strncmp(b.data, "sha256:", 7) || b.data[71] != '\n' ||
	    strspn(b.data + 7, "0123456789abcdef") != 64) {
		char *w = dlk_store_where(s, key);
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' does not hold a dataset id (sha256:<64 hex digits>)", w);
		free(w);
		goto out;
	}
	memcpy(id, b.data + 7, 64);
	id[64] = '\0';
	rc = 0;
out:
	dlk_buf_release(&b);
	return rc;
}

static int cmp_tag(const void *a, const void *b)
{
	return strcmp(((const struct dlk_tag *)a)->name, ((const struct dlk_tag *)b)->name);
}

int dlk_dataset_tags(struct dlk_store *s, struct dlk_tag **tags, size_t *n, struct dlk_err *err)
{
	struct names l = { 0 };
	struct dlk_tag *t = NULL;
	size_t k = 0;
	char why[160];

	if (s->ops->list(s, "tags/", collect_name, &l, err))
		goto fail;
	t = xcalloc(l.n ? l.n : 1, sizeof(*t));
	for (size_t i = 0; i < l.n; i++) {
		if (!strchr(l.v[i], '@') || dlk_dataset_tag_check(l.v[i], why, sizeof(why)))
			continue;
		if (read_tag(s, l.v[i], t[k].id, err)) {
			if (err && err->code == DLK_EXIT_NOTFOUND)
				continue; /* removed since the list */
			goto fail;
		}
		t[k++].name = l.v[i];
		l.v[i] = NULL;
	}
	qsort(t, k, sizeof(*t), cmp_tag);
	names_free(&l);
	*tags = t;
	*n = k;
	return 0;
fail:
	dlk_tags_free(t, k);
	names_free(&l);
	return -1;
}

void dlk_tags_free(struct dlk_tag *tags, size_t n)
{
	for (size_t i = 0; tags && i < n; i++)
		free(tags[i].name);
	free(tags);
}

int dlk_dataset_resolve(struct dlk_store *s, const char *ref, int allow_prefix, char id[65], struct dlk_err *err)
{
	struct dlk_dataset_ref r;
	char why[160], key[80];
	unsigned long long size;
	int found;

	if (dlk_dataset_ref_parse(ref, allow_prefix, &r, why, sizeof(why)))
		return dlk_errf(err, DLK_EXIT_USAGE, "'%s' names no dataset: %s", ref, why);
	switch (r.kind) {
	case DLK_REF_TAG:
		if (read_tag(s, r.tag, id, err)) {
			if (err && err->code == DLK_EXIT_NOTFOUND) {
				dlk_errf(err, DLK_EXIT_NOTFOUND, "no tag '%s' in '%s'", r.tag, s->url);
				dlk_err_hint(err, "'dlk data ls --from %s' lists its tags", s->url);
			}
			return -1;
		}
		return 0;
	case DLK_REF_ID:
		snprintf(key, sizeof(key), "datasets/%s", r.id);
		found = s->ops->stat(s, key, &size, err);
		if (found < 0)
			return -1;
		if (!found) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "dataset sha256:%s is not in '%s'", r.id, s->url);
			return dlk_err_hint(err, "'dlk data ls --from %s' lists the datasets it has", s->url);
		}
		memcpy(id, r.id, 65);
		return 0;
	case DLK_REF_ID_PREFIX: {
		char **ids = NULL;
		size_t n = 0, hits = 0, at = 0;
		if (dlk_dataset_list(s, &ids, &n, err))
			return -1;
		for (size_t i = 0; i < n; i++)
			if (!strncmp(ids[i], r.id, strlen(r.id)))
				hits++, at = i;
		if (hits == 1)
			memcpy(id, ids[at], 65);
		for (size_t i = 0; i < n; i++)
			free(ids[i]);
		free(ids);
		if (hits == 1)
			return 0;
		if (!hits)
			return dlk_errf(err, DLK_EXIT_NOTFOUND, "no dataset in '%s' has an id starting with %s", s->url, r.id);
		dlk_errf(err, DLK_EXIT_USAGE, "%zu datasets in '%s' have ids starting with %s", hits, s->url, r.id);
		return dlk_err_hint(err, "give more digits of the id");
	}
	}
	return dlk_errf(err, DLK_EXIT_FAIL, "internal: bad dataset reference");
}

/* ---- getting a dataset ---- */

static int same_file(const char *path, const struct dlk_manifest_entry *e)
{
	struct stat st;
	char hex[65];

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || (unsigned long long)st.st_size != e->size)
		return 0;
	return dlk_sha256_file(path, hex) == 0 && !strcmp(hex, e->sha256);
}

static int copy_file(const char *from, const char *to, struct dlk_err *err)
{
	char *part = xasprintf("%s.part", to);
	char buf[1 << 16];
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
	ssize_t n;

	if (in < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", from, strerror(errno));
		goto done;
	}
	out = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot create '%s': %s", part, strerror(errno));
		goto done;
	}
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", from, strerror(errno));
			goto done;
		}
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0) {
				if (errno == EINTR)
					continue;
				dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
				goto done;
			}
			off += w;
		}
	}
	if (fsync(out) < 0 || close(out) < 0) {
		out = -1;
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
		goto done;
	}
	out = -1;
	if (rename(part, to) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot rename '%s' to '%s': %s", part, to, strerror(errno));
		goto done;
	}
	rc = 0;
done:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (rc)
		unlink(part);
	free(part);
	return rc;
}

int dlk_dataset_get(struct dlk_store *s, const struct dlk_manifest *m, const char *dir, struct dlk_cache *cache,
                    dlk_store_progress_fn progress, void *progress_ctx, struct dlk_get_stats *stats,
                    struct dlk_err *err)
{
	struct push_progress pp = { progress, progress_ctx, 0, m->total };
	struct dlk_get_stats st = { 0 };
	int rc = -1;

	st.files = m->n;
	st.bytes = m->total;
	if (dlk_mkdir_p(dir, err))
		goto out;
	for (size_t i = 0; i < m->n; i++) {
		const struct dlk_manifest_entry *e = &m->e[i];
		char *dest = xasprintf("%s/%s", dir, e->path), *slash = strrchr(dest, '/');
		int r = 0;

		*slash = '\0';
		r = dlk_mkdir_p(dest, err);
		*slash = '/';
		if (!r && same_file(dest, e)) {
			st.kept++;
		} else if (!r && cache) {
			char *cpath = NULL;
			int hit = 0;
			r = dlk_cache_fetch(cache, s, e->sha256, e->size, push_progress, &pp, e->path, &cpath, &hit, err);
			if (!r)
				r = copy_file(cpath, dest, err);
			if (!r && hit)
				st.from_cache++, st.cache_bytes += e->size;
			else if (!r)
				st.fetched++, st.fetched_bytes += e->size;
			free(cpath);
		} else if (!r) {
			r = dlk_store_get_object(s, e->sha256, e->size, dest, push_progress, &pp, e->path, err);
			if (!r)
				st.fetched++, st.fetched_bytes += e->size;
		}
		free(dest);
		if (r)
			goto out;
		pp.base += e->size;
		if (progress && progress(progress_ctx, e->path, pp.base, pp.total)) {
			dlk_errf(err, DLK_EXIT_INTERRUPTED, "stopped while getting the dataset");
			goto out;
		}
	}
	rc = 0;
out:
	if (stats)
		*stats = st;
	return rc;
}
