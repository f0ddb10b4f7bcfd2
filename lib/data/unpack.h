/* Container handling with libarchive: what a fetched file holds is decided by its content (gzip,
 * bzip2, xz or zstd compression; tar or zip archives; or a lone plain file), never by its name. */
#ifndef DLK_DATA_UNPACK_H
#define DLK_DATA_UNPACK_H

#include <stddef.h>

#include "lib/data/dataset.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

struct archive;

/* Opens a reader over a file or a memory buffer (borrowed until dlk_archive_close) that accepts
 * tar, zip and raw (a lone, possibly compressed, file) through the gzip, bzip2, xz and zstd
 * filters. Returns NULL with err set (naming `name`) on failure. */
struct archive *dlk_archive_open_file(const char *path, const char *name, struct dlk_err *err);
struct archive *dlk_archive_open_mem(const void *buf, size_t len, const char *name, struct dlk_err *err);
void dlk_archive_close(struct archive *a);

/* Appends the data of the entry whose header was just read to out. *total counts unpacked bytes
 * across the whole archive; when it passes max_bytes (0 = no limit) this fails, so a
 * decompression bomb stops early. Errors name `name` and `member`. */
int dlk_archive_read_entry(struct archive *a, const char *name, const char *member,
                           unsigned long long max_bytes, unsigned long long *total,
                           dlk_data_progress_fn progress, void *progress_ctx,
                           struct dlk_buf *out, struct dlk_err *err);

/* Where a stream of unpacked bytes goes, chunk by chunk; -1 (with err) stops it. */
typedef int (*dlk_unpack_sink_fn)(void *ctx, const void *data, size_t len, struct dlk_err *err);

/* dlk_unpack_single() that hands the bytes to sink as they are unpacked instead of keeping them:
 * what a reader that keeps only part of a file (a shard) uses. */
int dlk_unpack_single_to(const char *path, const char *name, unsigned long long max_bytes,
                         dlk_data_progress_fn progress, void *progress_ctx, dlk_unpack_sink_fn sink, void *sink_ctx,
                         struct dlk_err *err);

/* The bytes a compressed file (gzip, bzip2, xz or zstd) holds, decompressed, handed to sink as
 * they come, whatever they are (a compressed tar stays a tar); bounded by max_bytes (0 = no
 * limit). A file that is not compressed is an error; messages name `name`. */
int dlk_decompress_to(const char *path, const char *name, unsigned long long max_bytes,
                      dlk_data_progress_fn progress, void *progress_ctx, dlk_unpack_sink_fn sink, void *sink_ctx,
                      struct dlk_err *err);

/* The contents of `path`: the file itself when plain, decompressed when it is a lone compressed
 * file, or the one regular file an archive holds (an archive with several files is an error that
 * lists them). The unpacked size is bounded by max_bytes (0 = no limit). `name` is used in
 * messages. out receives the bytes (appended). */
int dlk_unpack_single(const char *path, const char *name, unsigned long long max_bytes,
                      dlk_data_progress_fn progress, void *progress_ctx, struct dlk_buf *out,
                      struct dlk_err *err);

/* dlk_tar_decode() over an archive already opened with dlk_archive_open_*() (lib/data/tar.c):
 * lets dlk_data_load() stream a shard from disk rather than read it into memory first. With
 * tshape (not NULL) the shard holds paired images: KEY.png or KEY.jpg, the input, decoded to
 * shape, and KEY.target.png or KEY.target.jpg, its target, decoded to tshape into out->t8
 * (out->target_size bytes a sample); KEY.cls members are then ignored and the labels are 0. */
struct dlk_samples;
int dlk_tar_decode_archive(struct archive *a, const char *name, const int shape[3], const int tshape[3],
                           unsigned long long max_bytes, struct dlk_samples *out, struct dlk_err *err);
/* The index of an uncompressed tar shard of KEY.png / KEY.jpg + KEY.cls samples (with tshape:
 * KEY.png / KEY.jpg + KEY.target.png / KEY.target.jpg pairs) at the local path `local` (its name
 * for messages), to decode member by member later (data.images.decode: stream): labels gets the
 * labels and the shape (no pixels), *index the members (lib/data/image.h). The shard is checked
 * as dlk_tar_decode_archive() checks it, but for the images' contents. Returns 1, with nothing
 * set, when the shard cannot be read by member: compressed, not a tar, or a sample whose payload
 * is not a PNG or JPEG file. */
struct dlk_image_files;
int dlk_tar_index_archive(struct archive *a, const char *name, const char *local, const int shape[3],
                          const int tshape[3], struct dlk_samples *labels, struct dlk_image_files **index,
                          struct dlk_err *err);

#endif
