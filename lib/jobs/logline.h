/* The lines of --log-format json: one JSON object per line, for log collectors, written by
 * commands/ui.c and read back by `dlk logs`, which shows a job whose workers log JSON as it
 * shows one whose workers log text:
 *   {"time": "2026-01-02T03:04:05.678Z", "level": "info", "rank": 0, "msg": "epoch 1/5 ...",
 *    "epoch": 1, "epochs": 5, "step": 120, "loss": 0.41, "samples_per_sec": 5400, ...}
 * level is info, warning or error; an error may carry "hint". */
#ifndef DLK_JOBS_LOGLINE_H
#define DLK_JOBS_LOGLINE_H

#include <stddef.h>

#define DLK_LOG_KEY_TIME "time"
#define DLK_LOG_KEY_LEVEL "level"
#define DLK_LOG_KEY_RANK "rank"
#define DLK_LOG_KEY_MSG "msg"
#define DLK_LOG_KEY_HINT "hint"

/* When line (len bytes, no newline) is such an object: its text as the text format writes it
 * ("warning: MSG", "error: MSG (hint: HINT)", or MSG), one line, into out (n bytes), and 1.
 * Otherwise 0 (the line is shown as it is). */
int dlk_logline_text(const char *line, size_t len, char *out, size_t n);

#endif
