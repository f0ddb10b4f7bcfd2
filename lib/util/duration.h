/* Durations as people write them on a command line and read them in a table. */
#ifndef DLK_UTIL_DURATION_H
#define DLK_UTIL_DURATION_H

#include <stddef.h>

/* Parses "90s", "30m", "1h30m", "2h", "2d", "45" (seconds); -1 when malformed or beyond a year. */
double dlk_duration_parse(const char *s);
/* Writes "12s", "1m20s", "3h", "2d" (whole seconds, rounded down) into out. */
void dlk_duration_text(double s, char *out, size_t n);

/* Writes how long something took, the one format of every duration dlk shows (the terminal, the
 * report page, the run history): "3.5s" under a minute (tenths), "1m05s" under an hour, "2h03m"
 * beyond; "-" for a negative, NaN or infinite s. */
void dlk_duration_span(double s, char *out, size_t n);

#endif
