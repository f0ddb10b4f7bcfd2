/* What the runs here are doing (`dlk top`): for each project trained on this machine whose run
 * lock is held, the holding process and its children (a local gang's workers), their CPU use
 * over an interval and their resident memory, read from /proc. The first part of issue 30's
 * `dlk top`: GPUs through NVML, cluster jobs and served models are not here yet. */
#ifndef DLK_TOP_TOP_H
#define DLK_TOP_TOP_H

#include <cJSON.h>

#include "lib/util/err.h"

/* The CPU seconds (user + system) and resident bytes of pid and its children, from /proc;
 * -1 when pid is gone. */
int dlk_top_proc(long pid, double *cpu_seconds, unsigned long long *rss_bytes, int *n_procs);

/* The runs going on here (dlk_runs_local_each beside spec_file), sampled over interval_s
 * seconds: a new array [{"project", "run", "pid", "host", "since", "processes", "cpu_percent"
 * (100 = one core), "rss_bytes"}], sorted by cpu_percent, highest first. An empty array when
 * none runs. */
cJSON *dlk_top_local(const char *spec_file, double interval_s, struct dlk_err *err);

#endif
