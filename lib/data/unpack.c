/* Container handling with libarchive. */
#include "lib/data/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

/* Registers a filter only when libarchive implements it in-process: without the library it
 * answers ARCHIVE_WARN and would run an external program (gzip -d, zstd -d, ...) instead, which
 * data we fetched must never be able to trigger. Probed on a scratch reader, since a filter
 * cannot be unregistered. */
static void add_filter(struct archive *a, int (*support)(struct archive *))
{
	struct archive *probe = archive_read_new();
	int ok = probe && support(probe) == ARCHIVE_OK;

	if (probe)
		archive_read_free(probe);
	if (ok)
		support(a);
}

static struct archive *archive_new(void)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	/* Not archive_read_support_filter_all(): it also registers lrzip, grzip and lzop, which
	 * always run external programs. The raw format (a lone file) bids lowest, so tar and zip
	 * win over it. */
	add_filter(a, archive_read_support_filter_gzip);
	add_filter(a, archive_read_support_filter_bzip2);
	add_filter(a, archive_read_support_filter_xz);
	add_filter(a, archive_read_support_filter_zstd);
	archive_read_support_format_tar(a);
	archive_read_support_format_zip(a);
	archive_read_support_format_raw(a);
	return a;
}

struct archive *dlk_archive_open_file(const char *path, const char *name, struct dlk_err *err)
{
	struct archive *a = archive_new();

	if (!a) {
		dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot start libarchive", name);
		return NULL;
	}
	char msg[512];
	int fd = dlk_open_regular_msg(path, msg, sizeof(msg));
	if (fd < 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s", name, msg);
		archive_read_free(a);
		return NULL;
	}
	/* a FIFO or a device is refused above, before libarchive blocks on it; libarchive opens
	 * the name itself so that archive_read_free closes what it opened */
	close(fd);
	if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s", name, archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

struct archive *dlk_archive_open_mem(const void *buf, size_t len, const char *name, struct dlk_err *err)
{
	struct archive *a = archive_new();

	if (!a) {
		dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot start libarchive", name);
		return NULL;
	}
	if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s", name, archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

void dlk_archive_close(struct archive *a)
{
	if (a)
		archive_read_free(a);
}

static int buf_sink(void *ctx, const void *data, size_t len, struct dlk_err *err)
{
	(void)err;
	dlk_buf_add(ctx, data, len);
	return 0;
}

static int read_entry_to(struct archive *a, const char *name, const char *member, unsigned long long max_bytes,
                         unsigned long long *total, dlk_data_progress_fn progress, void *progress_ctx,
                         dlk_unpack_sink_fn sink, void *sink_ctx, struct dlk_err *err);

int dlk_archive_read_entry(struct archive *a, const char *name, const char *member,
                           unsigned long long max_bytes, unsigned long long *total,
                           dlk_data_progress_fn progress, void *progress_ctx,
                           struct dlk_buf *out, struct dlk_err *err)
{
	return read_entry_to(a, name, member, max_bytes, total, progress, progress_ctx, buf_sink, out, err);
}

static int read_entry_to(struct archive *a, const char *name, const char *member, unsigned long long max_bytes,
                         unsigned long long *total, dlk_data_progress_fn progress, void *progress_ctx,
                         dlk_unpack_sink_fn sink, void *sink_ctx, struct dlk_err *err)
{
	char chunk[65536];
	unsigned long long last_report = 0;
	la_ssize_t n;

	for (;;) {
		n = archive_read_data(a, chunk, sizeof(chunk));
		if (n == 0)
			return 0;
		if (n < 0)
			return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': member '%s': %s after %llu unpacked bytes",
			                name, member, archive_error_string(a), *total);
		*total += (unsigned long long)n;
		if (max_bytes && *total > max_bytes) {
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': unpacks to more than the limit of %llu bytes (stopped in member '%s')",
			         name, max_bytes, member);
			return dlk_err_hint(err, "raise data.max_bytes if the data really is this large");
		}
		if (sink(sink_ctx, chunk, (size_t)n, err) < 0)
			return -1;
		if (progress && *total - last_report >= (1u << 22)) {
			last_report = *total;
			if (progress(progress_ctx, name, *total, 0))
				return dlk_errf(err, DLK_EXIT_FAIL, "'%s': unpacking interrupted", name);
		}
	}
}

int dlk_decompress_to(const char *path, const char *name, unsigned long long max_bytes,
                      dlk_data_progress_fn progress, void *progress_ctx, dlk_unpack_sink_fn sink, void *sink_ctx,
                      struct dlk_err *err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	unsigned long long total = 0;
	char msg[512];
	int fd, ret = -1;

	if (!a)
		return dlk_errf(err, DLK_EXIT_FAIL, "'%s': cannot start libarchive", name);
	/* the filters only, and the raw format: the bytes under the compression, whatever they hold */
	add_filter(a, archive_read_support_filter_gzip);
	add_filter(a, archive_read_support_filter_bzip2);
	add_filter(a, archive_read_support_filter_xz);
	add_filter(a, archive_read_support_filter_zstd);
	archive_read_support_format_raw(a);
	/* a FIFO or a device is refused before libarchive blocks on it (dlk_archive_open_file's way) */
	if ((fd = dlk_open_regular_msg(path, msg, sizeof(msg))) < 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s", name, msg);
		goto out;
	}
	close(fd);
	if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK || archive_read_next_header(a, &e) != ARCHIVE_OK) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s", name, archive_error_string(a));
		goto out;
	}
	if (archive_filter_count(a) < 2) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not compressed (gzip, bzip2, xz or zstd)", name);
		goto out;
	}
	ret = read_entry_to(a, name, "(its compressed bytes)", max_bytes, &total, progress, progress_ctx, sink, sink_ctx,
	                    err);
out:
	archive_read_free(a);
	return ret;
}

int dlk_unpack_single(const char *path, const char *name, unsigned long long max_bytes,
                      dlk_data_progress_fn progress, void *progress_ctx, struct dlk_buf *out,
                      struct dlk_err *err)
{
	return dlk_unpack_single_to(path, name, max_bytes, progress, progress_ctx, buf_sink, out, err);
}

int dlk_unpack_single_to(const char *path, const char *name, unsigned long long max_bytes,
                         dlk_data_progress_fn progress, void *progress_ctx, dlk_unpack_sink_fn sink, void *sink_ctx,
                         struct dlk_err *err)
{
	struct archive *a = NULL;
	struct archive_entry *e;
	struct dlk_buf names = DLK_BUF_INIT;
	struct stat st;
	unsigned long long total = 0;
	int files = 0, r, ret = -1;

	if (stat(path, &st) < 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "cannot read '%s': %s", name, strerror(errno));
	/* libarchive recognises no format in zero bytes; an empty file is simply empty. */
	if (S_ISREG(st.st_mode) && st.st_size == 0)
		return 0;
	a = dlk_archive_open_file(path, name, err);
	if (!a)
		return -1;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *member = archive_entry_pathname(e) ? archive_entry_pathname(e) : "?";

		if (archive_entry_filetype(e) != AE_IFREG && archive_format(a) != ARCHIVE_FORMAT_RAW)
			continue;
		if (files < 5)
			dlk_buf_addf(&names, "%s'%s'", files ? ", " : "", member);
		else if (files == 5)
			dlk_buf_adds(&names, ", ...");
		if (files++) {
			archive_read_data_skip(a);
			continue;
		}
		if (archive_entry_size_is_set(e) && max_bytes &&
		    (unsigned long long)archive_entry_size(e) > max_bytes) {
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': member '%s' is %lld bytes, more than the limit of %llu bytes", name,
			         member, (long long)archive_entry_size(e), max_bytes);
			dlk_err_hint(err, "raise data.max_bytes if the data really is this large");
			goto out;
		}
		if (read_entry_to(a, name, member, max_bytes, &total, progress, progress_ctx, sink, sink_ctx, err) < 0)
			goto out;
	}
	if (r != ARCHIVE_EOF) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %s (after %llu unpacked bytes)", name,
		         archive_error_string(a), total);
		goto out;
	}
	if (files == 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the archive holds no file", name);
		goto out;
	}
	if (files > 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the archive holds %d files (%s); expected exactly one",
		         name, files, names.data);
		dlk_err_hint(err, "give each file its own source, or pack one file per archive");
		goto out;
	}
	ret = 0;
out:
	dlk_buf_release(&names);
	dlk_archive_close(a);
	return ret;
}
