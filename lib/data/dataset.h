/* An in-memory labelled dataset: what lib/data produces and lib/train consumes.
 *
 * Samples are row-major, one sample after another (value j of sample i at i * sample_size + j).
 * Data whose raw values are 8-bit (IDX ubyte, tar .u8 and .pgm) is kept as those bytes, 1 byte
 * a value, and scaled ((raw * scale - mean) / std, see struct dlk_data) only when a batch is
 * gathered; other data is kept as float32, already scaled. Either way, read samples through
 * dlk_dataset_gather*(), never through x or x8. Labels are class indices. */
#ifndef DLK_DATA_DATASET_H
#define DLK_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/project/project.h"
#include "lib/util/err.h"

enum dlk_dataset_storage {
	DLK_STORE_F32 = 0,    /* x: scaled float32 (a zeroed dataset is this kind) */
	DLK_STORE_U8,         /* x8: raw bytes, scaled through lut[] when gathered */
	DLK_STORE_FILES,      /* files: image files read and decoded to raw bytes each time a sample
	                         is gathered (data.images.decode), then as DLK_STORE_U8 */
};

/* Where a split's data came from: a fetched file, its URL and the sha256 of its bytes as fetched. */
struct dlk_data_source {
	char *url;            /* owned */
	char sha256[65];
};

/* Random crop after zero padding and horizontal flips, drawn per (seed, epoch, sample): the same
 * sample in the same epoch gets the same transform on any machine, with any number of threads.
 * Noise (data.images.noise, the inputs of a denoiser): every raw pixel v becomes
 * round(v + noise * N(0, 1)) clipped to 0..255, drawn per (seed, epoch, sample) in training (new
 * noise every epoch) and per sample from DLK_NOISE_EVAL_SEED everywhere else (the test split's
 * inputs are the same in every evaluation and every run). */
struct dlk_augment {
	int flip;                 /* a horizontal flip with p = 0.5 */
	int pad;                  /* pad each side by pad raw-0 pixels, crop H x W at a random offset */
	float noise;              /* Gaussian noise's standard deviation in raw pixel units; 0: none */
};
#define DLK_NOISE_EVAL_SEED 0x6E6F697365ull /* "noise" */

struct dlk_tokenizer;

struct dlk_dataset {
	size_t n;             /* number of samples (of this shard, when sharded) */
	int shape[3];         /* C, H, W of one sample; flat features are [1, 1, F] */
	size_t sample_size;   /* shape[0] * shape[1] * shape[2] */
	float *x;             /* DLK_STORE_F32: n * sample_size scaled values, owned; else NULL */
	int32_t *y;           /* n labels in [0, n_classes), owned */
	int n_classes;        /* 1 + the largest label seen (or from the spec's classes) */
	/* provenance: every source file this process fetched (owned, n_sources of them) */
	struct dlk_data_source *sources;
	int n_sources;
	enum dlk_dataset_storage storage;
	uint8_t *x8;          /* DLK_STORE_U8: n * sample_size raw values, owned; else NULL */
	float lut[256];       /* DLK_STORE_U8: lut[v] = ((float)v * scale - mean) / std, in float32
	                         arithmetic, exactly as float storage computes it */
	/* A shard (loaded with dlk_data_opts.shard_world > 1): its samples are [base, base + n) of
	 * the split's `total`, in the split's order. Not sharded: base 0, total n, sharded 0.
	 * by_file: the shard is whole files (tar shards), whose counts only the ranks together
	 * know: base and total are then set by the caller once the ranks told each other theirs. */
	size_t base, total;
	int sharded, by_file;
	int files_first, files_count; /* by_file: this rank's files of the split's list */
	/* Float targets (tasks multilabel, regression, image): target_size values per sample,
	 * sample i's at t[i * target_size], owned; NULL (and 0) for class labels only. y is then
	 * all 0s, n_classes 0. An image target is [C, H, W] flattened, the model's output shape. */
	float *t;
	size_t target_size;
	/* Instead of t, image targets as bytes, the target byte / 255: t8 (paired folders', owned),
	 * or with t_from_x8 the inputs' own bytes x8 (data.images.noise: the clean image is the
	 * target). Read them through dlk_dataset_targets(). */
	uint8_t *t8;
	int t_from_x8;
	/* DLK_STORE_U8 with per_channel set (format images with per-channel mean/std): channel c's
	 * bytes are looked up in lut_c[c] instead of lut */
	int per_channel;
	float lut_c[DLK_MAX_CHANNELS][256];
	/* training augmentation (format images), applied by dlk_dataset_gather_train() only */
	struct dlk_augment aug;
	/* class names found in the data (an image folder's sub-folders, text labels that are names),
	 * n_class_names of them, owned; NULL when the data has none */
	char **class_names;
	int n_class_names;
	/* format text: the tokenizer the samples were encoded with (lib/data/bpe.h), owned; NULL
	 * otherwise. Samples are then token ids (as floats), pad id 0 after the text's end */
	struct dlk_tokenizer *tokenizer;
	/* DLK_STORE_FILES: the files, sample i's at i (paired folders' targets too), owned. A file
	 * that cannot be read or decoded when gathered gives zeros and fails the dataset: see
	 * dlk_dataset_failed() */
	struct dlk_image_files *files;
};
#define DLK_DATASET_INIT { .n = 0, .storage = DLK_STORE_F32 }

/* Progress of a long fetch or decode; `what` names the file. done/total in bytes (total 0 when
 * unknown). Return non-zero to abort the operation. May be NULL. */
typedef int (*dlk_data_progress_fn)(void *ctx, const char *what, unsigned long long done,
                                    unsigned long long total);

struct dlk_data_opts {
	const char *cache_dir;        /* overrides spec->data.cache_dir when non-NULL */
	dlk_data_progress_fn progress;
	void *progress_ctx;
	const char *pvc_root;         /* where pvc://claim/path resolves: <pvc_root>/<claim>/<path>;
	                                 default "/mnt/pvc" (the worker mounts claims there) */
	/* Fields added later; a zeroed struct means "defaults" for every one of them. */
	int shape[3];                 /* the model's input C, H, W (model.input); 0s = unknown. When
	                                 set, a sample must hold exactly C*H*W values and the dataset
	                                 takes this shape (an N x 28 x 28 file feeds a [1,1,784] input) */
	const char *base_dir;         /* bare relative paths resolve against it (the project file's
	                                 directory); NULL = the current directory */
	const char *ca_file;          /* PEM bundle curl verifies https servers against; NULL = the
	                                 system store. Verification is never turned off */
	int max_retries;              /* retries after a connection error, 429 or 5xx; 0 = 5, -1 = none */
	int retry_base_ms;            /* first back-off delay, doubled each retry; 0 = 1000 */
	int retry_max_wait_ms;        /* cap on one wait, Retry-After included; 0 = 60000 */
	int connect_timeout_s;        /* 0 = 30 */
	int low_speed_time_s;         /* abort when under 1 byte/s for this long; 0 = 60 */
	/* data.shard: load only rank shard_rank's part of shard_world (0 or 1: everything). IDX and
	 * CSV: samples dlk_part_range(n, rank, world) of the split's n (a plain IDX file read by
	 * range, over http(s) by Range requests on ranks other than 0, which then cannot check its
	 * pin: rank 0 fetches it whole and does; a compressed IDX file streamed and cut; a CSV table
	 * parsed whole, its part's rows kept). tar shards (a list of files): files
	 * dlk_part_range(f, rank, world) of the f files when there are at least as many files as
	 * ranks (rank 0 also records every other file's digest), else every file and the sample
	 * range. The test split is never sharded. */
	int shard_rank, shard_world;
	/* data.dataset: the sources are paths inside a dataset. resolve makes one a local file
	 * (*local, the caller frees) and gives the sha256 its manifest lists, which is then checked
	 * like a pin. NULL: sources are URLs. */
	int (*resolve)(void *ctx, const char *path, char **local, char sha256[65], struct dlk_err *err);
	/* with resolve, optional: the sha256 the manifest lists for path, nothing fetched (what rank 0
	 * of a sharded load records for the tar shards other ranks load) */
	int (*digest)(void *ctx, const char *path, char sha256[65], struct dlk_err *err);
	/* with resolve, optional: the paths of the files below folder dir of the dataset ("." the
	 * whole dataset), in byte order (*paths and each path the caller frees; *n 0 when dir is no
	 * folder of it). Format images reads a folder inside a dataset through it. */
	int (*list)(void *ctx, const char *dir, char ***paths, size_t *n, struct dlk_err *err);
	void *resolve_ctx;
	/* format text and images, loading the test split: the training split as loaded, whose
	 * tokenizer and class names the test split takes (else the test split would train its own
	 * tokenizer and could number its classes differently). NULL for the training split. */
	const struct dlk_dataset *train;
	/* format images with data.<split>.targets (paired folders, task image): the C, H, W the
	 * target images are decoded to, the model's output; 0s = the input's shape */
	int target_shape[3];
	/* model.task: format text reads float targets for tasks multilabel and regression (its
	 * labels split by data.text.separator); zero is classification */
	enum dlk_task task;
	/* the bytes of memory data.images.decode: auto weighs a decoded split against (a quarter of
	 * it); 0 = what the process may use (lib/util/machine.h) */
	unsigned long long memory;
};

/* Fetches (with the sha256 pin checked before use), unpacks and decodes one split ("train" or
 * "test") of the project's data. Errors name the file and, for bad contents, the byte offset;
 * a pin mismatch or malformed file is DLK_EXIT_CONFIG, an unreachable source DLK_EXIT_CONNECT. */
int dlk_data_load(const struct dlk_data *spec, const char *split, const struct dlk_data_opts *opts,
                  struct dlk_dataset *out, struct dlk_err *err);
void dlk_dataset_release(struct dlk_dataset *ds);

/* Writes samples idx[0], ..., idx[n - 1] of ds, scaled, one after another into out (n *
 * ds->sample_size floats, caller's). Every idx[i] must be below ds->n. The floats are the same,
 * bit for bit, whichever storage ds uses. With ds->aug.noise the inputs carry the noise drawn
 * from DLK_NOISE_EVAL_SEED (the same for a sample every time); flips and crops are training's. */
void dlk_dataset_gather(const struct dlk_dataset *ds, const size_t *idx, size_t n, float *out);
/* dlk_dataset_gather() with ds->aug applied (none set: the same floats): the sample at idx[i]
 * (global index ds->base + idx[i]) is transformed by the draw of (seed, epoch, global index).
 * For U8 data of shape [C, H, W]; other data is gathered unchanged. */
void dlk_dataset_gather_train(const struct dlk_dataset *ds, const size_t *idx, size_t n, unsigned long long seed,
                              int epoch, float *out);
/* The draw itself: the crop's offsets in [-pad, pad] and whether to flip. */
void dlk_augment_draw(const struct dlk_augment *a, unsigned long long seed, int epoch, size_t global, int *dy,
                      int *dx, int *flip);
/* The same for the contiguous samples [start, start + n); start + n must not pass ds->n. */
void dlk_dataset_gather_range(const struct dlk_dataset *ds, size_t start, size_t n, float *out);
/* Whether the samples have float targets (t, t8 or t_from_x8), and samples idx[0..n) (idx NULL:
 * start, start + 1, ...) 's targets, target_size floats each, into out. */
int dlk_dataset_has_targets(const struct dlk_dataset *ds);
void dlk_dataset_targets(const struct dlk_dataset *ds, const size_t *idx, size_t start, size_t n, float *out);
/* With ds->aug.noise (U8 data): the noisy inputs of samples [start, start + n) as pixel / 255 in
 * [0, 1], the targets' scale, unnormalised: what a denoiser is given, to compare with what it
 * gives back (the same noise as dlk_dataset_gather's). */
void dlk_dataset_noisy_pixels(const struct dlk_dataset *ds, size_t start, size_t n, float *out);

/* dlk_dataset_gather_train() of part's share of the n samples (dlk_parallel_range(n, part, nparts,
 * 1)) into out's rows, and their targets into tout's (when the samples have them), in the calling
 * thread: for loader threads of the caller's own (lib/train/loader.h), which call it for every
 * part. The same floats as dlk_dataset_gather_train() and dlk_dataset_targets(). */
void dlk_dataset_gather_train_part(const struct dlk_dataset *ds, const size_t *idx, size_t n, unsigned long long seed,
                                   int epoch, float *out, float *tout, int part, int nparts);
/* Whether the samples are read from files as they are gathered (DLK_STORE_FILES). */
int dlk_dataset_streams(const struct dlk_dataset *ds);
/* 0, or -1 with the first failure in *err once a file could not be read or decoded while
 * gathering (DLK_STORE_FILES: the file changed or went away after the data loaded); what was
 * gathered since is not to be used. */
int dlk_dataset_failed(const struct dlk_dataset *ds, struct dlk_err *err);

/* A deterministic per-epoch permutation of [0, n) from (seed, epoch), identical on every rank and
 * every machine: the order in which the whole split is trained, whichever ranks hold which
 * samples (see lib/train/train.c). Caller frees.
 * The generator is fixed (lib/util/rng.h): xoshiro256** whose four state words are successive
 * splitmix64 outputs starting from seed ^ (0xD1B54A32D192ED03 * (epoch + 1)), then Fisher-Yates
 * from the last position down, drawing j in [0, i] by rejection (no modulo bias). Returns NULL
 * only when n is 0. */
size_t *dlk_epoch_permutation(size_t n, unsigned long long seed, int epoch);
/* [begin, end) of rank's share of an epoch when every rank holds the whole split of n samples:
 * every rank gets floor(n / world) positions of the permutation (the remainder is dropped, as
 * DistributedSampler(drop_last)); lib/train/train.c takes rank r's slice of each global batch. */
void dlk_shard_range(size_t n, int rank, int world, size_t *begin, size_t *end);
/* [begin, end) of the samples rank loads when n samples are partitioned across world ranks
 * (data.shard): [n * rank / world, n * (rank + 1) / world), so that the parts cover every sample
 * and differ in size by one at most. */
void dlk_part_range(size_t n, int rank, int world, size_t *begin, size_t *end);
/* A sharded rank's walk of an epoch: keeps, in order, the entries of the global permutation
 * perm[0, n) that fall in [base, base + count) (the samples this rank holds), as local indices
 * (minus base), at the front of perm; returns how many. */
size_t dlk_shard_walk(size_t *perm, size_t n, size_t base, size_t count);
/* Appends a source to ds->sources. */
void dlk_dataset_add_source(struct dlk_dataset *ds, const char *url, const char *sha256);

#endif
