/* A worker's log kept with its run: what the worker writes to stdout and stderr still goes
 * there (the container's log), and each line also goes, with the time it was written (RFC 3339
 * with nanoseconds, as the kubelet stamps it), into a gzip file on a volume that outlives the
 * pod. The file is flushed at every batch of lines, so a worker killed mid-run leaves an archive
 * readable up to its last lines (a restarted worker archives into a file of its own). The
 * archive stops growing at a bound and says so in its last line.
 *
 * Layout, under the archive directory (DLK_LOG_ARCHIVE, a folder of the checkpoint volume):
 *	logs/<run id>_rank-<N>_<pod>.log.gz */
#ifndef DLK_JOBS_LOGARCHIVE_H
#define DLK_JOBS_LOGARCHIVE_H

#include <stddef.h>

#include "lib/util/err.h"

#define DLK_LOG_ARCHIVE_DIR "dlk-logs"            /* on the checkpoint volume: dlk-logs/<job>/ */
#define DLK_LOG_ARCHIVE_MAX_BYTES (64ull << 20)   /* per worker and attempt, before compression */
#define DLK_LOG_ARCHIVE_READ_MAX (256u << 20)     /* what one archive may expand to when read */
#define DLK_LOG_ARCHIVE_KEEP_RUNS 20              /* runs of a job whose archives are kept */

struct dlk_log_archive;

/* The key of a worker's archive: "logs/<run>_rank-<rank>_<pod>.log.gz". -1 when run or pod has
 * characters other than letters, digits, '.', '_' and '-' (or is empty). */
int dlk_log_archive_key(const char *run, int rank, const char *pod, char *buf, size_t len);
/* Splits a key's name (without "logs/") into its run, rank and pod: 0, or -1 when it is not one. */
int dlk_log_archive_parse_name(const char *name, char *run, size_t run_len, int *rank, char *pod, size_t pod_len);

/* Starts archiving this process's stdout and stderr into path, a new file (its directory is
 * created), through a pump process, and ignores SIGPIPE from then on; at most max_bytes (0: DLK_LOG_ARCHIVE_MAX_BYTES). Returns 0 and
 * *out, or -1 with err; nothing changed then. */
int dlk_log_archive_start(const char *path, unsigned long long max_bytes, struct dlk_log_archive **out,
                          struct dlk_err *err);
/* Bounds a job's archive folder dir: the files of all but the keep runs written last (by their
 * newest file) are removed; run's are always kept. *removed counts the files removed. A
 * folder that does not exist yet is no error. */
int dlk_log_archive_prune(const char *dir, const char *run, unsigned keep, unsigned *removed, struct dlk_err *err);
/* Puts stdout and stderr back, writes the last lines and closes the archive (NULL is fine). */
void dlk_log_archive_stop(struct dlk_log_archive *a);

/* Reads an archive (gzip, one member or several) and calls fn for each whole line, without its
 * newline, until fn returns nonzero. A stream cut short (a worker killed mid-write) gives the
 * lines before the cut and sets *truncated. -1 with err when the bytes are not gzip or expand
 * beyond DLK_LOG_ARCHIVE_READ_MAX. */
int dlk_log_archive_read(const void *data, size_t len, int (*fn)(const char *line, size_t len, void *ud), void *ud,
                         int *truncated, struct dlk_err *err);

#endif
