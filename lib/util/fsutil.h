/* File-system helpers that keep data safe: atomic replace, mkdir -p. */
#ifndef DLK_UTIL_FSUTIL_H
#define DLK_UTIL_FSUTIL_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "lib/util/err.h"

/* Writes data to path through a temporary file in the same directory, fsyncs it, renames it over
 * path and fsyncs the directory: readers see the old file or the new one, never half of one. The
 * temporary file is a new one of a name nobody else holds (O_EXCL, never through a link planted
 * beside path) and is removed on any failure. */
int dlk_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, struct dlk_err *err);
/* Opens path for reading only when it is a regular file. A FIFO, a device, a socket or a
 * directory is refused without blocking on it (errno EISDIR for a directory, EINVAL for the
 * rest: dlk_open_strerror says "not a regular file"), so a special file planted where a file is
 * expected cannot hang the reader. extra_flags are or-ed in (O_NOFOLLOW...). Returns the fd (close
 * on exec) or -1 with errno. */
int dlk_open_regular(const char *path, int extra_flags);
/* dlk_open_regular(path, 0) with a message for the user: msg (may be NULL) is filled with
 * "'PATH' is a FIFO, not a regular file" (the kind named) or "cannot open 'PATH': REASON"; errno
 * as dlk_open_regular leaves it. */
int dlk_open_regular_msg(const char *path, char *msg, size_t msg_len);
/* The same as a stdio stream ("rb"); NULL with msg. */
FILE *dlk_fopen_regular(const char *path, char *msg, size_t msg_len);
/* strerror(e), but "not a regular file" for the EINVAL of dlk_open_regular and dlk_open_part. */
const char *dlk_open_strerror(int e);
/* Opens, for reading and writing, the temporary file path that may hold the start of an earlier
 * partial download (created when missing, mode 0644 less the umask). A symlink at path is never
 * followed, and a FIFO, device, directory or a file with other names (a hard link) there is
 * refused: a file planted at a temporary name cannot redirect the write outside its directory.
 * Returns the fd (close on exec), or -1 with err (DLK_EXIT_FAIL, naming path and what is there). */
int dlk_open_part(const char *path, struct dlk_err *err);
/* Removes path when it still names the file open as fd (not one put there since). */
void dlk_unlink_if_same(const char *path, int fd);
/* mkdir -p; existing directories are fine. */
int dlk_mkdir_p(const char *path, struct dlk_err *err);
/* A new directory $TMPDIR/PREFIX-XXXXXX (P_tmpdir without TMPDIR), mode 0700: its path (the
 * caller's to free), or NULL with err naming the directory it tried and why. */
char *dlk_mkdtemp(const char *prefix, struct dlk_err *err);
/* The directory of path, "." for a bare name: a project's directory from its project file's path
 * (where its templates/, .dlk/, relative data paths and git tree are). A new string, the
 * caller's. */
char *dlk_dir_of(const char *path);

#endif
