/* Images as training data: PNG (libpng) and JPEG (libjpeg-turbo) decoded to 8-bit pixels, resized
 * to the model's input, and image folders (torchvision ImageFolder's layout: one folder per class)
 * read into samples. Like the decoders of decode.h, nothing here prints or exits; errors start with
 * the file's name and carry DLK_EXIT_CONFIG for bad contents. */
#ifndef DLK_DATA_IMAGE_H
#define DLK_DATA_IMAGE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/data/decode.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

/* Images larger than this many pixels are refused before anything is allocated. */
#define DLK_IMAGE_MAX_PIXELS (1u << 26)

struct dlk_image {
	int w, h, c;          /* c: 1 (gray) or 3 (RGB) */
	uint8_t *px;          /* h * w * c bytes, row-major, channels interleaved; owned */
};
#define DLK_IMAGE_INIT { 0, 0, 0, NULL }
void dlk_image_release(struct dlk_image *im);

/* Decodes a PNG or a JPEG (told apart by their signatures) into `channels` (1 or 3) channels.
 * Conversions are Pillow's: RGB to gray is L = (19595 R + 38470 G + 7471 B + 32768) >> 16, gray to
 * RGB repeats the value, an alpha channel is dropped (not composited), palettes expanded. 16-bit
 * PNG samples v become round(v / 257) (Pillow truncates or clips them instead), an alpha channel
 * of a 16-bit PNG composited onto black. CMYK JPEGs are refused. */
int dlk_image_decode(const void *buf, size_t len, const char *name, int channels, struct dlk_image *out,
                     struct dlk_err *err);

/* Resizes in to w x h (bilinear, pixel centres aligned as in PyTorch's interpolate with
 * align_corners=False, no antialiasing) into out; a copy when the size is already right. */
void dlk_image_resize(const struct dlk_image *in, int w, int h, struct dlk_image *out);

/* Writes the image planar (channel by channel, C x H x W) into out (c * h * w bytes). */
void dlk_image_to_planar(const struct dlk_image *im, uint8_t *out);

/* Decodes one image file's bytes straight into a sample of shape[0] x shape[1] x shape[2] planar
 * bytes (decode, resize when its size differs, planar). */
int dlk_image_sample(const void *buf, size_t len, const char *name, const int shape[3], uint8_t *out,
                     struct dlk_err *err);

/* What len bytes start with: DLK_IMAGE_PNG or DLK_IMAGE_JPEG by their signature, else 0. */
enum { DLK_IMAGE_PNG = 1, DLK_IMAGE_JPEG = 2 };
int dlk_image_signature(const void *buf, size_t len);

/* True when name ends in .png, .jpg or .jpeg (any case): the files an image folder holds. */
int dlk_image_is_image_name(const char *name);

/* An image folder's or paired folders' files, listed and not yet decoded: what
 * dlk_image_files_decode() decodes once, or what data.images.decode: stream reads and decodes
 * each time a sample is used (dlk_image_files_sample(), safe from several threads at once). */
struct dlk_image_files {
	size_t n;
	char **paths, **names;      /* n each, owned: where each file is read, how messages name it */
	/* paired images: the targets' names, n (NULL otherwise: tnames says whether f is paired), and
	 * for paired folders their paths */
	char **tpaths, **tnames;
	/* instead of paths: tar shards' members, sample i the bytes [offset[i], offset[i] + length[i])
	 * of the uncompressed archive shards[shard[i]] (n_shards of them, owned), and its target
	 * image (paired shards) [toffset[i], toffset[i] + tlength[i]) of the same archive */
	char **shards;
	int n_shards;
	int *shard;
	unsigned long long *offset, *length, *toffset, *tlength;
	int shape[3], tshape[3];    /* what inputs and targets are decoded to (C x H x W) */
	size_t sample_size, tsample_size;
	/* the first failure of dlk_image_files_sample() in sample order, under mu */
	pthread_mutex_t mu;
	int failed;
	size_t failed_at;
	struct dlk_err err;
};
void dlk_image_files_free(struct dlk_image_files *f);
/* An empty list of tar members to decode to shape (sample_size C*H*W), and with tshape (not NULL)
 * paired ones, whose targets are decoded to tshape. */
struct dlk_image_files *dlk_image_files_members(const int shape[3], const int tshape[3]);
/* A tar member: where it lies in the uncompressed archive, how messages name it. */
struct dlk_member {
	unsigned long long offset, length;
	const char *name;
};
/* Appends a sample: member `in` of the archive at `shard` (its local path; the last shard
 * appended unless another) and, for a paired list, its target member `target` (else NULL). */
void dlk_image_files_add_member(struct dlk_image_files *f, const char *shard, const struct dlk_member *in,
                                const struct dlk_member *target);
/* Moves b's members to the end of a (both lists of members, of one shape); frees b. */
void dlk_image_files_join(struct dlk_image_files *a, struct dlk_image_files *b);
/* Keeps files [from, to) (a rank's part of a sharded split). */
void dlk_image_files_cut(struct dlk_image_files *f, size_t from, size_t to);
/* Reads and decodes file i (target: paired images' target) into out, a sample of shape (or
 * tshape) planar bytes; b is scratch. Errors name the file as the user wrote it. */
int dlk_image_files_read(const struct dlk_image_files *f, size_t i, int target, uint8_t *out, struct dlk_buf *b,
                         struct dlk_err *err);
/* The same, for readers that cannot stop: a failure leaves out zeros and is kept (the first in
 * sample order) for dlk_image_files_failed(). */
void dlk_image_files_sample(struct dlk_image_files *f, size_t i, int target, uint8_t *out, struct dlk_buf *b);
/* -1 with the kept failure in *err (when err is not NULL) once a dlk_image_files_sample() failed. */
int dlk_image_files_failed(struct dlk_image_files *f, struct dlk_err *err);
/* Reads the first bytes of every file (inputs, and targets when paired) on `threads` threads (0:
 * one per core): -1 with the first file in order that is no PNG or JPEG by them, or that cannot
 * be read; what a streamed folder checks before its first step. Tar members were checked when
 * their shards were indexed. */
int dlk_image_files_check(const struct dlk_image_files *f, int threads, struct dlk_err *err);
/* Decodes every file once on `threads` threads (0: one per core): *x8 gets n samples, *t8 (when
 * not NULL; paired images) n targets; the caller frees both. The first failing file in sample
 * order is the error. */
int dlk_image_files_decode(const struct dlk_image_files *f, int threads, uint8_t **x8, uint8_t **t8,
                           struct dlk_err *err);

/* Where the folders below are listed: the file system (a NULL tree) or another tree, such as the
 * paths of a dataset's manifest (lib/data/load.c). list gives the names of dir's entries as the
 * file system's listing does: sorted in byte order, NULL-terminated (*n of them, the caller frees
 * each and the array), hidden ones left out, only sub-folders (want_dirs) or only image files;
 * NULL with err when dir cannot be read (name is dir as the user wrote it). A tree's files keep
 * their paths in the tree (dir/class/file): the caller makes them local files. */
struct dlk_image_tree {
	char **(*list)(void *ctx, const char *dir, const char *name, int want_dirs, size_t *n, struct dlk_err *err);
	void *ctx;
};

/* A tree of '/'-separated paths (a dataset manifest's: relative, no empty, "." or ".." segment,
 * sorted in byte order, borrowed) as a struct dlk_image_tree: "." is its top (the paths listed
 * below it then begin with "./"); the entries of a folder are what lies below "dir/". */
struct dlk_image_paths {
	char *const *paths;
	size_t n;
};
struct dlk_image_tree dlk_image_paths_tree(const struct dlk_image_paths *p);
/* 1 when some path lies below folder dir ("." any path), else 0 */
int dlk_image_paths_has_dir(const struct dlk_image_paths *p, const char *dir);

/* Lists an image folder: dir holds one sub-folder per class, each holding .png/.jpg/.jpeg files
 * (other files and hidden entries are skipped). Classes are the sub-folders' names in byte order,
 * unless `classes` (n_classes names, borrowed) lists them: then every sub-folder must be one of
 * them, and its label is that index. Files are taken in byte order of their names within a class,
 * classes in label order, so the same folder always gives the same samples. On success *files
 * holds the files to decode to shape (C x H x W), *labels their labels (caller frees both), and
 * *found (when not NULL) the class names in label order (the caller frees each and the array;
 * *n_found of them). `name` is the folder as the user wrote it, for messages. */
int dlk_image_folder_list(const struct dlk_image_tree *tree, const char *dir, const char *name, const int shape[3],
                          const char *const *classes, int n_classes, struct dlk_image_files **files,
                          int32_t **labels, char ***found, int *n_found, struct dlk_err *err);

/* dlk_image_folder_list() and every image decoded on `threads` threads (0: one per core) into
 * out's x8 samples. */
int dlk_image_folder_load(const char *dir, const char *name, const int shape[3], const char *const *classes,
                          int n_classes, int threads, struct dlk_samples *out, char ***found, int *n_found,
                          struct dlk_err *err);

/* Paired folders for image-to-image (pix2pix's layout): input_dir and target_dir hold images of
 * the same names up to the extension (inputs/0001.png and targets/0001.jpg are a pair), taken in
 * byte order of the names; inputs are decoded to in_shape, targets to target_shape. An input
 * without its target, or a target without its input, is an error naming it; so are two files of
 * one stem. */
int dlk_image_pairs_list(const struct dlk_image_tree *tree, const char *input_dir, const char *input_name,
                         const char *target_dir, const char *target_name, const int in_shape[3],
                         const int target_shape[3], struct dlk_image_files **files, struct dlk_err *err);

/* dlk_image_pairs_list() and every pair decoded on `threads` threads (0: one per core): out gets
 * the inputs as x8 samples (labels all 0) and *targets (caller frees) the targets, target_shape's
 * C*H*W bytes a pair. */
int dlk_image_pairs_load(const char *input_dir, const char *input_name, const char *target_dir,
                         const char *target_name, const int in_shape[3], const int target_shape[3], int threads,
                         struct dlk_samples *out, uint8_t **targets, struct dlk_err *err);

#endif
