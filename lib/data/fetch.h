/* Getting a data source onto the local disk: file://, bare paths, pvc://claim/path, http(s)://. */
#ifndef DLK_DATA_FETCH_H
#define DLK_DATA_FETCH_H

#include "lib/data/dataset.h"
#include "lib/project/project.h"
#include "lib/util/err.h"

struct dlk_fetched {
	char *path;        /* the local file to read, owned */
	char sha256[65];   /* of the bytes as fetched */
};
#define DLK_FETCHED_INIT { NULL, "" }

/* Where Debian's dataset-fashion-mnist package puts Fashion-MNIST, which the examples train on. */
#define DLK_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
void dlk_fetched_release(struct dlk_fetched *f);

/* Makes src available as a local file and hashes it; when src->sha256 is set, a different digest
 * fails (DLK_EXIT_CONFIG, naming the file, expected and actual digest) before anything reads the
 * data. Remote files land in the cache directory (see dlk_cache_path) and are reused when
 * present. Files larger than max_bytes fail. An unreachable source is DLK_EXIT_CONNECT. */
int dlk_fetch(const struct dlk_source *src, const struct dlk_data *spec,
              const struct dlk_data_opts *opts, struct dlk_fetched *out, struct dlk_err *err);

/* Where a pod mounts the claims its pvc:// data sources name (the job template mounts each one
 * at DLK_PVC_ROOT/<claim>, read-only). */
#define DLK_PVC_ROOT "/mnt/pvc"

/* "pvc://claim/some/path" -> "<root>/claim/some/path" (caller frees). Rejects an empty or
 * malformed claim, an empty path, and any "." or ".." segment, so nothing outside the claim is
 * reachable. root NULL means DLK_PVC_ROOT. */
char *dlk_pvc_resolve(const char *url, const char *root, struct dlk_err *err);

/* "file:///a/b" -> "/a/b" (percent-escapes decoded; host must be empty or localhost). A bare path
 * is joined to base_dir when relative (base_dir NULL = as is). Caller frees. */
char *dlk_local_path(const char *url, const char *base_dir, struct dlk_err *err);

/* The cache file for a URL: <cache_dir>/<first 16 hex digits of sha256(url)>-<basename>. */
char *dlk_cache_path(const char *cache_dir, const char *url);

/* Downloads url to dest with libcurl (see http.c for retries, resume and limits): the bytes go to
 * "<dest>.part" and are renamed to dest once complete, so dest never holds a partial file. */
int dlk_http_download(const char *url, const char *dest, unsigned long long max_bytes,
                      const struct dlk_data_opts *opts, struct dlk_err *err);

/* The whole size that a "Content-Range: bytes A-B/SIZE" header line (n bytes, not terminated)
 * names; -1 when the line is another header or malformed (B before A, or not below SIZE). */
int dlk_http_content_range(const char *line, size_t n, unsigned long long *total);

/* Where the bytes of a range go, chunk by chunk; -1 (with err) stops it. */
typedef int (*dlk_http_sink_fn)(void *ctx, const void *data, size_t len, struct dlk_err *err);

/* Bytes [first, first + len) of url (len > 0) by HTTP Range requests, handed to sink as they arrive,
 * fewer when the file ends before; *size gets the whole file's size (Content-Range). Retries as
 * dlk_http_download() does, asking for what is left. A server that answers with the whole file
 * (200: it ignores Range) returns -2, more than the range -1, with err (DLK_EXIT_CONNECT) saying so. */
int dlk_http_range(const char *url, unsigned long long first, unsigned long long len, dlk_http_sink_fn sink,
                   void *sink_ctx, unsigned long long *size, const struct dlk_data_opts *opts, struct dlk_err *err);

#endif
