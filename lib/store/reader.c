/* A dataset's files for training (see reader.h). */
#include "lib/store/reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

int dlk_dataset_reader_open(struct dlk_dataset_reader *r, struct dlk_store *s, const char *id, struct dlk_cache *cache,
                            struct dlk_err *err)
{
	memset(r, 0, sizeof(*r));
	r->store = s;
	r->cache = cache;
	snprintf(r->id, sizeof(r->id), "%s", id);
	return dlk_dataset_manifest(s, id, &r->m, err);
}

void dlk_dataset_reader_release(struct dlk_dataset_reader *r)
{
	for (size_t i = 0; i < r->n_used; i++)
		free(r->used[i]);
	free(r->used);
	dlk_manifest_release(&r->m);
	memset(r, 0, sizeof(*r));
}

static const struct dlk_manifest_entry *find(const struct dlk_dataset_reader *r, const char *path, struct dlk_err *err)
{
	const struct dlk_manifest_entry *e = dlk_manifest_find(&r->m, path);

	if (!e) {
		struct dlk_buf b = DLK_BUF_INIT;
		for (size_t i = 0; i < r->m.n && i < 5; i++)
			dlk_buf_addf(&b, "%s%s", i ? ", " : "", r->m.e[i].path);
		dlk_errf(err, DLK_EXIT_CONFIG, "dataset sha256:%.12s has no file '%s'", r->id, path);
		dlk_err_hint(err, "it has %s%s ('dlk data show sha256:%.12s' lists them all)", b.data, r->m.n > 5 ? ", ..." : "",
		             r->id);
		dlk_buf_release(&b);
	}
	return e;
}

int dlk_dataset_reader_digest(void *ctx, const char *path, char sha256[65], struct dlk_err *err)
{
	const struct dlk_manifest_entry *e = find(ctx, path, err);

	if (!e)
		return -1;
	memcpy(sha256, e->sha256, 65);
	return 0;
}

int dlk_dataset_reader_list(void *ctx, const char *dir, char ***paths, size_t *n, struct dlk_err *err)
{
	const struct dlk_dataset_reader *r = ctx;
	size_t dl = strcmp(dir, ".") ? strlen(dir) : 0, k = 0;

	(void)err;
	*paths = xcalloc(r->m.n + 1, sizeof(**paths));
	for (size_t i = 0; i < r->m.n; i++) {
		const char *p = r->m.e[i].path;
		if (!dl || (!strncmp(p, dir, dl) && p[dl] == '/'))
			(*paths)[k++] = xstrdup(p);
	}
	*n = k;
	return 0;
}

int dlk_dataset_reader_resolve(void *ctx, const char *path, char **local, char sha256[65], struct dlk_err *err)
{
	struct dlk_dataset_reader *r = ctx;
	const struct dlk_manifest_entry *e = find(r, path, err);
	char key[80], *p = NULL;
	int hit = 0;

	if (!e)
		return -1;
	snprintf(key, sizeof(key), "sha256/%s", e->sha256);
	if (!r->cache && dlk_store_is_local(r->store)) {
		/* a directory store (a claim mounted in the pod, a directory here): read in place; the
		 * caller checks the bytes against the manifest as it reads them */
		int fd;
		p = dlk_store_local_path(r->store, key);
		/* the loader opens it blocking: a FIFO or a directory put there must stop here */
		fd = dlk_open_regular(p, 0);
		if (fd < 0 && (errno == EISDIR || errno == EINVAL)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s' is corrupted: %s", p,
			         errno == EISDIR ? "a directory, not a file" : "not a regular file");
			dlk_err_hint(err, "remove it from the store, then push the dataset again");
			free(p);
			return -1;
		}
		if (fd >= 0)
			close(fd);
		r->in_place++;
		r->in_place_bytes += e->size;
	} else if (r->cache) {
		if (dlk_cache_fetch(r->cache, r->store, e->sha256, e->size, r->progress, r->progress_ctx, e->path, &p, &hit,
		                    err))
			return -1;
		if (hit)
			r->from_cache++, r->cache_bytes += e->size;
		else
			r->fetched++, r->fetched_bytes += e->size;
	} else {
		return dlk_errf(err, DLK_EXIT_FAIL, "'%s': no cache to fetch the dataset's files into", dlk_store_url(r->store));
	}
	r->files++;
	r->bytes += e->size;
	r->used = xrealloc(r->used, (r->n_used + 1) * sizeof(*r->used));
	r->used[r->n_used++] = xstrdup(e->sha256);
	memcpy(sha256, e->sha256, 65);
	*local = p;
	return 0;
}
