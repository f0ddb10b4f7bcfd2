/* Decoders for the data formats dlk trains on. Each takes a whole file already in memory, so the
 * fuzz targets can call them directly; none of them reads past `len`, prints, or exits. `name`
 * is the file's name as the user knows it and starts every error message; content errors carry
 * the byte offset (or line and column) and the code DLK_EXIT_CONFIG. */
#ifndef DLK_DATA_DECODE_H
#define DLK_DATA_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

/* Labels are class indices; anything at or above this is rejected as corrupt. */
#define DLK_MAX_CLASSES 100000
#define DLK_IDX_MAX_DIMS 4

/* ---- IDX (the MNIST family): 0x00 0x00 type ndims, ndims big-endian u32 dims, then data ---- */

enum dlk_idx_type {
	DLK_IDX_UBYTE = 0x08,
	DLK_IDX_SBYTE = 0x09,
	DLK_IDX_SHORT = 0x0B,
	DLK_IDX_INT = 0x0C,
	DLK_IDX_FLOAT = 0x0D,
	DLK_IDX_DOUBLE = 0x0E,
};

struct dlk_idx {
	int type;                       /* enum dlk_idx_type */
	int ndims;                      /* 1..DLK_IDX_MAX_DIMS */
	size_t dims[DLK_IDX_MAX_DIMS];
	size_t count;                   /* the product of dims */
	float *data;                    /* count values converted to float, unscaled, owned; NULL
	                                   for a ubyte file */
	uint8_t *data8;                 /* a ubyte file's count values as they are, owned; else NULL */
};
#define DLK_IDX_INIT { 0, 0, { 0, 0, 0, 0 }, 0, NULL, NULL }

/* Parses and checks an IDX file: magic, type, dimensions, and that the data is exactly as long
 * as the header declares (a short file names the offset where the data ran out). NaN or infinite
 * values in float/double files are rejected with their offset. A ubyte file's values land in
 * data8 (1 byte each), every other type's in data. */
int dlk_idx_decode(const void *buf, size_t len, const char *name, struct dlk_idx *out,
                   struct dlk_err *err);
/* The same over the bytes of b, which a ubyte file's data8 takes over rather than copies (b is
 * then reset): the file is never held twice. b is left alone on failure or for other types. */
int dlk_idx_decode_buf(struct dlk_buf *b, const char *name, struct dlk_idx *out, struct dlk_err *err);
void dlk_idx_release(struct dlk_idx *idx);
const char *dlk_idx_type_name(int type);

/* An IDX file read as a stream and cut down to one shard of its samples: fed the file's bytes
 * in any chunks, it keeps the header (with the first dimension changed to the shard's count)
 * and only the bytes of samples [n * rank / world, n * (rank + 1) / world) of the n the header
 * declares, so that a worker never holds more than its shard. out is then an IDX file that
 * dlk_idx_decode_buf() reads. The header is checked as dlk_idx_decode() checks it, the length
 * of the whole stream at the end; errors name `name` and the byte offset. */
struct dlk_idx_range {
	int rank, world;
	unsigned char head[4 + 4 * DLK_IDX_MAX_DIMS];
	size_t head_len;             /* header bytes received so far */
	size_t header;               /* the header's length, once known (else 0) */
	size_t item;                 /* bytes per sample (the product of dims[1..] times the type's size) */
	size_t n;                    /* samples the file holds */
	size_t first, count;         /* the samples kept */
	unsigned long long seen;     /* bytes of data (after the header) seen */
	struct dlk_buf out;
};
void dlk_idx_range_init(struct dlk_idx_range *r, int rank, int world);
int dlk_idx_range_feed(struct dlk_idx_range *r, const void *data, size_t len, const char *name, struct dlk_err *err);
/* The data bytes before data offset `upto` were passed over without being fed (a file read by
 * range: the header, then a seek to the shard's bytes): they count towards the length that
 * dlk_idx_range_finish() checks. */
void dlk_idx_range_skip(struct dlk_idx_range *r, unsigned long long upto);
/* The end of the stream: the data must be as long as the header declares. */
int dlk_idx_range_finish(struct dlk_idx_range *r, const char *name, struct dlk_err *err);
void dlk_idx_range_release(struct dlk_idx_range *r);

/* ---- decoded samples, common to every format ---- */

struct dlk_image_files;

struct dlk_samples {
	size_t n;
	int shape[3];         /* C, H, W; flat features are [1, 1, F] */
	size_t sample_size;
	float *x;             /* n * sample_size raw values (unscaled), owned; NULL when x8 is used */
	int32_t *y;           /* n labels, each in [0, DLK_MAX_CLASSES), owned */
	int32_t max_label;    /* -1 when n == 0 */
	uint8_t *x8;          /* instead of x, for 8-bit data (IDX ubyte, tar .u8/.pgm): the raw
	                         n * sample_size bytes, owned; exactly one of x and x8 is set once n > 0 */
	size_t base, total;   /* a shard: these are samples [base, base + n) of the file's total
	                         (total 0: not a shard, all of them) */
	float *t;             /* float targets, n * target_size, owned (y then all 0); NULL: labels */
	size_t target_size;
	uint8_t *t8;          /* instead of t, image targets as bytes (the target is byte / 255): paired
	                         folders' n * target_size, owned */
	struct dlk_image_files *files; /* instead of x8 (and t8): image files decoded each time a sample
	                         is read (data.images.decode: stream; lib/data/image.h), owned */
};
#define DLK_SAMPLES_INIT { 0, { 0, 0, 0 }, 0, NULL, NULL, -1, NULL, 0, 0, NULL, 0, NULL, NULL }
void dlk_samples_release(struct dlk_samples *s);

/* Joins an images IDX file (N x F, N x H x W or N x C x H x W) and a labels IDX file (N) into
 * samples: counts must agree, labels must be non-negative integers below DLK_MAX_CLASSES. On
 * success the image values move into out (images->data or ->data8 into x or x8, leaving NULL);
 * both stay the caller's to release. */
int dlk_idx_join(struct dlk_idx *images, const char *images_name, const struct dlk_idx *labels,
                 const char *labels_name, struct dlk_samples *out, struct dlk_err *err);

/* ---- CSV: numeric features and one label column ---- */

struct dlk_csv_opts {
	int header;           /* -1 detect (a first row with a non-numeric field is a header), 0, 1 */
	int label_column;     /* 0-based; -1 = the last column */
	int shard_rank, shard_world; /* world > 1: keep only the data rows of dlk_part_range(rows,
	                                rank, world); every row is still parsed and checked, and
	                                max_label is the whole table's */
	const char *const *classes;  /* the spec's data.classes (borrowed), or NULL: a label that is
	                                one of these names is its index */
	int n_classes;
	int targets;          /* > 0: the last `targets` columns are float targets (out->t), not a label;
	                         label_column and classes are then unused */
};

/* Parses RFC 4180-ish CSV (quoted fields with "" escapes, CRLF or LF, blank lines skipped) into
 * samples of shape [1, 1, F] (with a shard in opts, only its rows: base and total say which). A
 * label is a class index, or one of opts->classes by name. Errors read "NAME:LINE:COLUMN:
 * expected a number, got 'abc'", name ragged rows and labels that are neither non-negative
 * integers nor class names (saying how to list the names in data.classes). */
int dlk_csv_decode(const void *buf, size_t len, const char *name, const struct dlk_csv_opts *opts,
                   struct dlk_samples *out, struct dlk_err *err);

/* ---- tar shards (the WebDataset convention) ---- */

/* Decodes a .tar (optionally gzip/xz/bzip2/zstd compressed) whose members are grouped by key (the
 * member's base name up to its first dot): KEY.cls holds an ASCII integer label, and exactly one
 * of KEY.u8 (raw uint8 values), KEY.f32 (little-endian float32), KEY.pgm (P5, maxval <= 255) or
 * KEY.png / KEY.jpg / KEY.jpeg (decoded and resized to `shape`, which must then be given: see
 * lib/data/image.h) holds the sample. Members of a key must be adjacent, as tar writers of shards emit them. Every
 * sample must have the same number of values; a .pgm gives the shape [1, H, W], otherwise it is
 * [1, 1, F] unless `shape` (may be NULL or zeros) says otherwise. The values land in x8 when
 * every sample is .u8 or .pgm, else in x. max_bytes bounds the unpacked size (0 = no bound). */
int dlk_tar_decode(const void *buf, size_t len, const char *name, const int shape[3],
                   unsigned long long max_bytes, struct dlk_samples *out, struct dlk_err *err);

#endif
