/* A dataset's manifest: the list of its files, content-addressed.
 *
 * The text form is canonical, so one set of files has exactly one manifest and one id:
 *
 *	dlk-dataset 1
 *	<sha256 of the file, 64 lowercase hex> <size in bytes> <path>
 *	...
 *
 * one line per file, each ended by '\n', sorted by path (byte order), no path twice. A path is
 * relative, '/'-separated, valid UTF-8 without control characters or backslashes, with no empty,
 * "." or ".." segment, and no file's path is a directory of another's. The dataset's id is the
 * sha256 of these bytes; it is written "sha256:<id>". The parser accepts only the canonical form,
 * so whatever it accepts formats back to the same bytes. */
#ifndef DLK_STORE_MANIFEST_H
#define DLK_STORE_MANIFEST_H

#include <stddef.h>

#include "lib/util/err.h"

#define DLK_MANIFEST_MAGIC "dlk-dataset 1\n"
#define DLK_MANIFEST_MAX_FILES 1000000
#define DLK_MANIFEST_MAX_PATH 1024
#define DLK_MANIFEST_MAX_BYTES (256u << 20)

struct dlk_manifest_entry {
	char *path;                /* inside the dataset, owned */
	unsigned long long size;
	char sha256[65];
	char *local;               /* dlk_manifest_build: the file it was read from, owned; else NULL */
};

struct dlk_manifest {
	struct dlk_manifest_entry *e; /* sorted by path */
	size_t n;
	unsigned long long total;  /* sum of the sizes */
	char id[65];               /* sha256 of the canonical text */
};
#define DLK_MANIFEST_INIT { NULL, 0, 0, "" }
void dlk_manifest_release(struct dlk_manifest *m);

/* Parses canonical manifest text. `what` names it in messages ("sha256:abc... in s3://b/p").
 * Every departure from the canonical form is DLK_EXIT_CONFIG with the line number. Fills m->id
 * with the sha256 of buf. */
int dlk_manifest_parse(const char *buf, size_t len, const char *what, struct dlk_manifest *m, struct dlk_err *err);

/* The canonical text of m (entries must be sorted and valid, as parse and build leave them);
 * caller frees. Sets *len. */
char *dlk_manifest_format(const struct dlk_manifest *m, size_t *len);

/* Progress while hashing: bytes done of total (of every file). Return nonzero to stop. */
typedef int (*dlk_manifest_progress_fn)(void *ctx, const char *path, unsigned long long done,
                                        unsigned long long total);

/* Builds the manifest of local files: a directory contributes every regular file under it,
 * named by its path below the directory; a file contributes itself, named by its base name.
 * Symbolic links to regular files are followed; anything else that is not a regular file or a
 * directory (a socket, a device, a link to a directory) is an error naming it, as are two
 * arguments giving the same name. Hashes every file; computes the id. */
int dlk_manifest_build(const char *const *paths, size_t n, dlk_manifest_progress_fn progress, void *progress_ctx,
                       struct dlk_manifest *m, struct dlk_err *err);

/* The entry for path, or NULL. */
const struct dlk_manifest_entry *dlk_manifest_find(const struct dlk_manifest *m, const char *path);

/* 0 when s is a valid path inside a dataset; else -1 and a reason in why. */
int dlk_manifest_check_path(const char *s, size_t len, char *why, size_t why_len);

/* Dataset references, as dlk.yaml and the commands write them:
 *	sha256:<64 hex>     an id (uppercase hex is accepted and lowered)
 *	NAME@TAG            a tag; NAME and TAG are 1 to 128 of [A-Za-z0-9._-], starting with a
 *	                    letter or digit
 *	NAME                NAME@latest
 * A unique prefix of an id ("sha256:1f2e3d", at least 6 hex digits) is accepted by the commands
 * that read a store, not in dlk.yaml. */
enum dlk_dataset_ref_kind { DLK_REF_ID, DLK_REF_TAG, DLK_REF_ID_PREFIX };
struct dlk_dataset_ref {
	enum dlk_dataset_ref_kind kind;
	char id[65];               /* DLK_REF_ID: the id; DLK_REF_ID_PREFIX: the hex given */
	char tag[260];             /* DLK_REF_TAG: "NAME@TAG" */
};
/* Parses ref; allow_prefix accepts an id prefix. -1 with a DLK_EXIT_USAGE-free reason in why. */
int dlk_dataset_ref_parse(const char *ref, int allow_prefix, struct dlk_dataset_ref *out, char *why, size_t why_len);
/* 0 when s is a valid tag name (NAME@TAG or NAME). */
int dlk_dataset_tag_check(const char *s, char *why, size_t why_len);

#endif
