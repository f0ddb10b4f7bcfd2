/* Crash-safe checkpoints: a directory per step, written under a temporary name, every blob
 * checksummed in a manifest, everything fsynced, then renamed into place.
 *
 *   <dir>/step-00001200/manifest.json   {"format": "dlk-checkpoint", "version": 1,
 *                                         "step": 1200, "blobs": [{"name", "size", "sha256"}]}
 *   <dir>/step-00001200/<blob name>      the bytes, one file per blob
 *
 * A crash at any moment leaves either the old set of checkpoints or the new one, never a
 * half-written directory under a step-* name; a disk that fills up leaves the previous
 * checkpoint intact. Readers take the newest checkpoint that verifies and say which newer
 * ones they skipped and why. Only one process (rank 0) writes to a directory. */
#ifndef DLK_TRAIN_CHECKPOINT_H
#define DLK_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/util/err.h"

#define CKPT_NAME_MAX 64              /* bytes of a blob name */
#define CKPT_BLOBS_MAX 256            /* blobs per checkpoint */
#define CKPT_MANIFEST_MAX (1u << 20)  /* bytes of manifest.json */
#define CKPT_STEP_MAX 999999999999ULL

/* One named blob to write; borrowed. Names: 1..64 of [A-Za-z0-9._-], not starting with '.',
 * not "manifest.json". data NULL with len > 0: the write options' fill gives its bytes. */
struct ckpt_blob {
	const char *name;
	const void *data;
	size_t len;
};

struct ckpt_write_opts {
	int keep; /* how many of the newest checkpoints to keep (>= 1) */
	/* Replaces write(2) for every file of the checkpoint (tests use it to simulate a full
	 * disk); NULL: write(2). Same contract as write(2): bytes written or -1 with errno. */
	ssize_t (*write_fn)(int fd, const void *buf, size_t len, void *ctx);
	void *write_ctx;
	/* The bytes of blob i whose data is NULL, piece after piece in order as they are written (at
	 * most 4 MiB a call; 0, or -1 with err): a blob that is never whole in memory. A fill that
	 * fails fails the write with its error, the previous checkpoints intact. */
	int (*fill)(void *ctx, size_t i, void *buf, size_t len, struct dlk_err *err);
	void *fill_ctx;
};
#define CKPT_WRITE_OPTS_INIT { 3, NULL, NULL, NULL, NULL }

/* Writes <dir>/step-NNNNNNNN (creating dir when missing), replacing a checkpoint of the same
 * step, then removes all but the newest opts->keep checkpoints and any leftover temporary
 * directories. On failure nothing under a step-* name changed; ENOSPC/EDQUOT/EFBIG say so
 * with a hint. opts may be NULL (defaults). */
int ckpt_write_atomic(const char *dir, unsigned long long step, const struct ckpt_blob *blobs,
		      size_t n, const struct ckpt_write_opts *opts, struct dlk_err *err);

struct ckpt_manifest_entry {
	char name[CKPT_NAME_MAX + 1];
	unsigned long long size;
	char sha256[65];
};

struct ckpt_manifest {
	unsigned long long step;
	size_t n;
	struct ckpt_manifest_entry *blobs; /* owned */
};
#define CKPT_MANIFEST_INIT { 0, 0, NULL }

/* Parses a manifest from memory (len bytes, need not be NUL-terminated). Every field is
 * checked: format, version, step range, blob names, sizes (whole numbers <= 2^53), sha256
 * hex, duplicate names. Returns 0, or -1 with DLK_EXIT_CONFIG and the reason. */
int ckpt_manifest_parse(const char *data, size_t len, struct ckpt_manifest *m, struct dlk_err *err);
void ckpt_manifest_release(struct ckpt_manifest *m);

/* The steps of the step-* directories in dir, newest first (not verified). *steps is owned by
 * the caller (free()); a missing dir gives 0 steps. Returns 0 or -1. */
int ckpt_list(const char *dir, unsigned long long **steps, size_t *n, struct dlk_err *err);

struct ckpt_loaded_blob {
	char *name;
	void *data;   /* len bytes, plus a NUL not counted in len */
	size_t len;
};

struct ckpt {
	unsigned long long step;
	char *path;                     /* <dir>/step-NNNNNNNN */
	size_t n;
	struct ckpt_loaded_blob *blobs;
	char **warnings;                /* one message per skipped newer checkpoint, newest first */
	size_t nwarnings;
};
#define CKPT_INIT { 0, NULL, 0, NULL, NULL, 0 }

/* Loads the newest checkpoint in dir whose manifest parses and whose blobs all match their
 * sizes and sha256; newer ones that do not are skipped with a warning in c->warnings (also
 * filled when none is valid). Never changes the directory. max_bytes bounds the total size
 * of the blobs read (0: 16 GiB). Returns 1 when one was loaded, 0 when there is none
 * (a missing dir included), -1 on error (dir unreadable). */
int ckpt_load_latest(const char *dir, size_t max_bytes, struct ckpt *c, struct dlk_err *err);
/* The blob called name, or NULL; *len is set when not NULL. Borrowed from c. */
const void *ckpt_get(const struct ckpt *c, const char *name, size_t *len);
void ckpt_release(struct ckpt *c);

#endif
