/* Object stores for datasets: where `dlk data push` puts files and where workers fetch them.
 *
 * Every store has the same layout under its root:
 *
 *	sha256/<hex>         a file's bytes, named by their sha256
 *	datasets/<id>        a manifest (lib/store/manifest.h), named by its sha256: the dataset id
 *	tags/<NAME>@<TAG>    "sha256:<id>\n": the dataset a tag points at
 *
 * Objects are written before the manifest that lists them and a manifest before a tag that
 * names it, so a reader never finds a dataset with missing files. A store is named by a URL:
 *
 *	DIR, file:///DIR         a directory (the laptop, tests, a mounted volume)
 *	s3://BUCKET[/PREFIX]     S3-compatible object storage (lib/store/s3.c)
 *	pvc://CLAIM[/PATH]       a PersistentVolumeClaim, through a short-lived pod (lib/store/pvc.c)
 *
 * Library code: errors come back in struct dlk_err, nothing is printed. */
#ifndef DLK_STORE_STORE_H
#define DLK_STORE_STORE_H

#include <stddef.h>

#include "lib/store/manifest.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

struct dlk_store;
struct kube_client;

/* Progress of a transfer: bytes done of total (0 when unknown). Return nonzero to stop. */
typedef int (*dlk_store_progress_fn)(void *ctx, const char *what, unsigned long long done, unsigned long long total);
/* Receives a downloaded object's bytes in order. Return 0 to go on, -1 (with err set) to stop. */
typedef int (*dlk_store_sink_fn)(void *ctx, const void *data, size_t len, struct dlk_err *err);
/* One name a list found, with its size (0 when the store does not say). Return 0 to go on. */
typedef int (*dlk_store_list_fn)(void *ctx, const char *name, unsigned long long size);
/* Verbose lines ("PUT s3://b/p/sha256/ab.. 200 in 12 ms"), never with credentials. */
typedef void (*dlk_store_log_fn)(void *ctx, const char *line);

struct dlk_store_opts {
	const char *base_dir;          /* a relative directory resolves against it; NULL = as is */
	const char *ca_file;           /* https endpoints: PEM bundle to verify against; NULL = system */
	dlk_store_log_fn log;          /* NULL: quiet */
	void *log_ctx;
	int max_retries;               /* after a connection error, 429 or 5xx: 0 = 4, -1 = none */
	int retry_base_ms;             /* first back-off, doubled each time: 0 = 500 */
	int read_back;                 /* dlk_store_has reads each object back and hashes it, on every
	                                  kind (dlk data push --verify) */
	/* pvc:// only */
	struct kube_client *kube;      /* borrowed; NULL: pvc:// cannot be opened here */
	const char *namespace_;        /* where the store pod runs */
	const char *image;             /* the image of the store pod (it runs `dlk data serve`) */
	const char *templates_dir;     /* overrides of the built-in templates; NULL = built-ins */
	int templates_dir_optional;
	int pod_timeout_s;             /* how long to wait for the pod to run: 0 = 120 */
	const char *pvc_root;          /* a worker reads pvc://CLAIM/PATH as the directory
	                                  <pvc_root>/CLAIM/PATH when set (the claim is mounted) */
};

/* What a put reads: a local file, or bytes in memory. sha256 is of the content (the object's
 * name for sha256/ keys; S3 checks the body against it). */
struct dlk_put_src {
	const char *path;              /* or NULL with data/len */
	const void *data;
	unsigned long long size;
	char sha256[65];
	dlk_store_progress_fn progress;
	void *progress_ctx;
	const char *what;              /* for progress and messages */
	unsigned long long *resumed;   /* when not NULL, set to the bytes an interrupted upload of the
	                                  same object had already left in the store */
};

/* Opens the store a URL names. A directory store is created on the first write, not here;
 * s3:// reads its credentials here (lib/store/s3.h). Returns NULL with err. */
struct dlk_store *dlk_store_open(const char *url, const struct dlk_store_opts *opts, struct dlk_err *err);
void dlk_store_close(struct dlk_store *s);

/* "datasets/<id>" and friends, for messages: "s3://b/p/datasets/<id>". Caller frees. */
char *dlk_store_where(const struct dlk_store *s, const char *key);

/* Reads a small object (a manifest, a tag) into out, at most max bytes. */
int dlk_store_get_mem(struct dlk_store *s, const char *key, size_t max, struct dlk_buf *out, struct dlk_err *err);

/* Downloads sha256/<hex> to dest, verified: the bytes go to "<dest>.part" (an existing .part is
 * kept and continued), are hashed on the way and renamed to dest only when they hash to <hex>
 * and have `size` bytes. A mismatch removes the .part and fails with DLK_EXIT_CONFIG naming the
 * object in the store as corrupted. */
int dlk_store_get_object(struct dlk_store *s, const char *hex, unsigned long long size, const char *dest,
                         dlk_store_progress_fn progress, void *progress_ctx, const char *what, struct dlk_err *err);

/* The verified download under dlk_store_get_object, into a file the caller has open (and may
 * hold a lock on): fd's bytes so far are taken as the start of the object (hashed, not fetched
 * again), the rest is appended. A mismatch truncates fd and is retried once from the start
 * when it began with bytes already there; after that it is the store's object that is bad. */
int dlk_store_fetch_fd(struct dlk_store *s, const char *hex, unsigned long long size, int fd,
                       dlk_store_progress_fn progress, void *progress_ctx, const char *what, struct dlk_err *err);

/* The calls every kind of store answers (lib/store/store_impl.h has what each kind does). */

/* The URL the store was opened with, for messages. */
const char *dlk_store_url(const struct dlk_store *s);

/* 1 when key is there (its size in *size), 0 when absent, -1 with err. */
int dlk_store_stat(struct dlk_store *s, const char *key, unsigned long long *size, struct dlk_err *err);

/* Writes key from src atomically: readers see the old object or the whole new one. Resumes an
 * interrupted upload of the same key and content where the store can. The bytes are hashed as
 * they are sent: when they are not src->size bytes hashing to src->sha256 (the file changed
 * after it was hashed) the put fails with DLK_EXIT_FAIL and nothing is stored under key, so a
 * store never holds an object whose bytes do not match its name. */
int dlk_store_put(struct dlk_store *s, const char *key, const struct dlk_put_src *src, struct dlk_err *err);

/* The names under prefix ("sha256/", "datasets/", "tags/", "logs/"), without it, in no set order. */
int dlk_store_list(struct dlk_store *s, const char *prefix, dlk_store_list_fn fn, void *ctx, struct dlk_err *err);

/* 1 when key is in the store with `size` bytes that hash to hex; 0 when it is absent, has
 * another size or does not verify (a push then sends it again: that is how "push the dataset
 * again" repairs a corrupted object); -1 with err. Each kind answers as cheaply as it can: a
 * directory hashes its file, S3 compares the sha256 dlk stored with the object when it sent it
 * (an object without one does not verify), the store pod hashes its file. */
/* With on, dlk_store_has reads each object back and hashes it, whatever the kind: a corruption
 * its cheap check cannot see (an S3 object changed on the server's disk behind the sha256 stored
 * with it) is found too, at the cost of downloading what is there. */
void dlk_store_read_back(struct dlk_store *s, int on);
int dlk_store_has(struct dlk_store *s, const char *key, const char *hex, unsigned long long size, struct dlk_err *err);

/* 1 when the store is a directory here (or mounted here): its objects can be read in place. */
int dlk_store_is_local(const struct dlk_store *s);

/* A local file holding key when the store is a directory here (or mounted here); NULL otherwise.
 * Caller frees. */
char *dlk_store_local_path(struct dlk_store *s, const char *key);

#endif
