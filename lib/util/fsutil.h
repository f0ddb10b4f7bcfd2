/* File-system helpers that keep data safe: atomic replace, mkdir -p. */
#ifndef DLK_UTIL_FSUTIL_H
#define DLK_UTIL_FSUTIL_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "lib/util/err.h"

/* Writes data to path through a temporary file in the same directory, fsyncs it, renames it over
 * path and fsyncs the directory: readers see the old file or the new one, never half of one. */
int dlk_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, struct dlk_err *err);
/* Opens path for reading only when it is a regular file (after symlinks): a FIFO, a device, a
 * socket or a directory is refused at once instead of blocking or reading forever. Returns the
 * descriptor (blocking, close-on-exec), or -1 with errno set (EINVAL for a file of the wrong
 * kind) and msg filled ("'PATH' is a FIFO, not a regular file"), msg may be NULL. */
int dlk_open_regular(const char *path, char *msg, size_t msg_len);
/* The same as a stdio stream ("rb"); NULL with msg. */
FILE *dlk_fopen_regular(const char *path, char *msg, size_t msg_len);
/* mkdir -p; existing directories are fine. */
int dlk_mkdir_p(const char *path, struct dlk_err *err);
/* The directory of path, "." for a bare name: a project's directory from its project file's path
 * (where its templates/, .dlk/, relative data paths and git tree are). A new string, the
 * caller's. */
char *dlk_dir_of(const char *path);

#endif
