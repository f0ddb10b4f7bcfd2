/* The dataset operations on any store: push, list, tags, resolve, read a manifest, get. They
 * use only the store front (lib/store/store.h) and the node cache. */
#include "lib/store/dataset.h"
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

int dlk_dataset_tag(struct dlk_store *s, const char *tag, const char *id, struct dlk_err *err)
{
	char key[512];
	char *line = xasprintf("sha256:%s\n", id);
	struct dlk_put_src src = { .data = line, .size = strlen(line), .what = tag };
	int r;

	snprintf(key, sizeof(key), strchr(tag, '@') ? "tags/%s" : "tags/%s@latest", tag);
	dlk_sha256_hex(line, strlen(line), src.sha256);
	r = dlk_store_put(s, key, &src, err);
	free(line);
	if (r)
		dlk_err_prefix(err, "cannot write tag '%s'", tag);
	return r ? -1 : 0;
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
		int r;

		snprintf(key, sizeof(key), "sha256/%s", e->sha256);
		/* verified, not only sized: an object of the right size with the wrong bytes is sent
		 * again, so that "push the dataset again" repairs a corrupted store */
		r = dlk_store_has(s, key, e->sha256, e->size, err);
		if (r < 0)
			goto out;
		if (r == 0) {
			unsigned long long resumed = 0;
			struct dlk_put_src src = { .path = e->local, .size = e->size, .progress = push_progress,
			                           .progress_ctx = &pp, .what = e->path, .resumed = &resumed };
			memcpy(src.sha256, e->sha256, sizeof(src.sha256));
			if (!e->local) {
				dlk_errf(err, DLK_EXIT_FAIL, "'%s': no local file to upload", e->path);
				goto out;
			}
			if (dlk_store_put(s, key, &src, err)) {
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
		int r;
		text = dlk_manifest_format(m, &text_len);
		r = dlk_store_has(s, key, m->id, text_len, err);
		if (r < 0)
			goto out;
		if (r == 0) {
			struct dlk_put_src src = { .data = text, .size = text_len, .what = "the manifest" };
			dlk_sha256_hex(text, text_len, src.sha256);
			if (dlk_store_put(s, key, &src, err)) {
				dlk_err_prefix(err, "cannot upload the manifest");
				goto out;
			}
			st.manifest_new = 1;
		}
	}
	for (size_t i = 0; i < n_tags; i++)
		if (dlk_dataset_tag(s, tags[i], m->id, err))
			goto out;
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
			dlk_errf(err, DLK_EXIT_NOTFOUND, "dataset sha256:%s is not in '%s'", id, dlk_store_url(s));
			dlk_err_hint(err, "'dlk data ls --from %s' lists the datasets it has", dlk_store_url(s));
		}
		goto out;
	}
	dlk_sha256_hex(b.data, b.len, got);
	if (strcmp(got, id)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: its bytes hash to %s", where, got);
		dlk_err_hint(err, "push the dataset again to replace it (dlk data push --verify reads back what the "
		                  "store has)");
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

	if (dlk_store_list(s, "datasets/", collect_name, &l, err)) {
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

	if (dlk_store_list(s, "tags/", collect_name, &l, err))
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
				dlk_errf(err, DLK_EXIT_NOTFOUND, "no tag '%s' in '%s'", r.tag, dlk_store_url(s));
				dlk_err_hint(err, "'dlk data ls --from %s' lists its tags", dlk_store_url(s));
			}
			return -1;
		}
		return 0;
	case DLK_REF_ID:
		snprintf(key, sizeof(key), "datasets/%s", r.id);
		found = dlk_store_stat(s, key, &size, err);
		if (found < 0)
			return -1;
		if (!found) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "dataset sha256:%s is not in '%s'", r.id, dlk_store_url(s));
			return dlk_err_hint(err, "'dlk data ls --from %s' lists the datasets it has", dlk_store_url(s));
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
			return dlk_errf(err, DLK_EXIT_NOTFOUND, "no dataset in '%s' has an id starting with %s", dlk_store_url(s), r.id);
		dlk_errf(err, DLK_EXIT_USAGE, "%zu datasets in '%s' have ids starting with %s", hits, dlk_store_url(s), r.id);
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
	int in = dlk_open_regular(from, 0), out = -1, rc = -1;
	ssize_t n;

	if (in < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", from, dlk_open_strerror(errno));
		goto done;
	}
	/* never through a link planted at the .part name, and from its first byte */
	out = dlk_open_part(part, err);
	if (out < 0)
		goto done;
	if (ftruncate(out, 0) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
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
	if (fsync(out) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", part, strerror(errno));
		goto done;
	}
	if (rename(part, to) < 0) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot rename '%s' to '%s': %s", part, to, strerror(errno));
		goto done;
	}
	rc = 0;
done:
	if (in >= 0)
		close(in);
	if (rc && out >= 0)
		dlk_unlink_if_same(part, out); /* only the file opened here, never what was planted */
	if (out >= 0 && close(out) < 0 && !rc) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot write '%s': %s", to, strerror(errno));
		rc = -1;
	}
	free(part);
	return rc;
}

/* The manifest's paths have no ".." (dlk_manifest_check_path), so only a symlinked directory
 * planted in the output directory could lead a file outside it: the folder a file goes to must
 * resolve beneath the output directory. */
static int beneath(const char *top_real, const char *folder, struct dlk_err *err)
{
	char *real = realpath(folder, NULL);
	size_t n = strlen(top_real);
	int ok = real && !strncmp(real, top_real, n) && (real[n] == '/' || real[n] == '\0' || !strcmp(top_real, "/"));

	if (!ok) {
		dlk_errf(err, DLK_EXIT_FAIL, "'%s' leads outside '%s' (a symbolic link?): dlk writes the dataset only beneath it",
		         folder, top_real);
		dlk_err_hint(err, "remove that link, or get into an empty directory");
	}
	free(real);
	return ok ? 0 : -1;
}

int dlk_dataset_get(struct dlk_store *s, const struct dlk_manifest *m, const char *dir, struct dlk_cache *cache,
                    dlk_store_progress_fn progress, void *progress_ctx, struct dlk_get_stats *stats,
                    struct dlk_err *err)
{
	struct push_progress pp = { progress, progress_ctx, 0, m->total };
	struct dlk_get_stats st = { 0 };
	char *top = NULL;
	int rc = -1;

	st.files = m->n;
	st.bytes = m->total;
	if (dlk_mkdir_p(dir, err))
		goto out;
	top = realpath(dir, NULL);
	if (!top) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s': %s", dir, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct dlk_manifest_entry *e = &m->e[i];
		char *dest = xasprintf("%s/%s", dir, e->path), *slash = strrchr(dest, '/');
		int r = 0;

		*slash = '\0';
		r = dlk_mkdir_p(dest, err);
		if (!r)
			r = beneath(top, dest, err);
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
	free(top);
	return rc;
}

int dlk_dataset_push_mem(struct dlk_store *s, const char *const *names, const char *const *data, const size_t *lens,
                         int n, const char *tag, int push, dlk_store_progress_fn progress, void *progress_ctx,
                         char id[65], struct dlk_err *err)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_push_stats st = { 0 };
	char *dir = dlk_mkdtemp("dlk-push", err), **paths = xcalloc(n > 0 ? (size_t)n : 1, sizeof(char *));
	int rc = -1;

	if (!dir)
		goto out;
	for (int i = 0; i < n; i++) {
		paths[i] = xasprintf("%s/%s", dir, names[i]);
		if (dlk_write_file_atomic(paths[i], data[i], lens[i], 0644, err))
			goto out;
	}
	{
		const char *roots[] = { dir };
		if (dlk_manifest_build(roots, 1, NULL, NULL, &m, err))
			goto out;
	}
	if (push && dlk_dataset_push(s, &m, &tag, tag ? 1 : 0, progress, progress_ctx, &st, err))
		goto out;
	memcpy(id, m.id, 65);
	rc = 0;
out:
	for (int i = 0; i < n; i++) {
		if (paths[i])
			unlink(paths[i]);
		free(paths[i]);
	}
	free(paths);
	if (dir)
		rmdir(dir);
	free(dir);
	dlk_manifest_release(&m);
	return rc;
}
