/* What a run used and what it cost: run.usage in its record, and the prices that turn it into
 * money.
 *
 *   "usage": {"wall_seconds": the time its processes ran (each start to its end, summed over
 *                             restarts and resumes: a run cut off for a day is not billed the day),
 *             "workers": the ranks it ran with (the last world),
 *             "gpus_per_worker", "cpus_per_worker": what each worker was given (resources.gpus;
 *                             resources.cpu in a cluster, absent for a run here),
 *             "gpu_seconds": wall x workers x gpus_per_worker (devices held, busy or not),
 *             "cpu_reserved_seconds": wall x workers x cpus_per_worker (in a cluster),
 *             "cpu_seconds": the CPU time its processes used (user + system), in all,
 *             "cpu_seconds_per_rank": [each rank's, where known: a gang here knows every rank's,
 *                             rank 0 in a pod its own]}
 *
 * Prices come from the environment: DLK_PRICE_GPU_HOUR and DLK_PRICE_CPU_HOUR (a number per
 * hour, in whatever currency the user keeps; DLK_PRICE_CURRENCY names it, "" by default). A
 * cost is never stored: the record says what was used, the price is applied when it is shown,
 * so a price changed later applies to the whole history and two users' prices never mix in one
 * record. What is billed is what was held: GPU-seconds, and the reserved CPU-seconds (a cluster
 * bills the request), else the CPU time used (a run here). */
#ifndef DLK_RUNS_USAGE_H
#define DLK_RUNS_USAGE_H

#include <cJSON.h>

#include "lib/util/err.h"

#define DLK_ENV_PRICE_GPU_HOUR "DLK_PRICE_GPU_HOUR"
#define DLK_ENV_PRICE_CPU_HOUR "DLK_PRICE_CPU_HOUR"
#define DLK_ENV_PRICE_CURRENCY "DLK_PRICE_CURRENCY"

/* Adds a session of the run (a start or a resume, to its end) to run.usage: wall seconds more,
 * workers, gpus and cpus per worker (cpus <= 0: not reserved, left out), and the CPU seconds of
 * the ranks this process knows (cpu_s[0..n-1], added to what earlier sessions recorded; NULL or
 * n = 0: none); then the totals again. */
void dlk_run_add_usage(cJSON *rec, double wall_s, int workers, double gpus, double cpus, const double *cpu_s, int n);

/* CPUs of a Kubernetes quantity ("2", "1.5", "500m"); -1 when it is none. */
double dlk_cpu_quantity(const char *q);

struct dlk_prices {
	double gpu_hour, cpu_hour;   /* < 0: not set */
	char currency[16];
};
/* The prices in the environment. -1 with err (DLK_EXIT_CONFIG, naming the variable) when one is
 * set but not a number >= 0. */
int dlk_prices_from_env(struct dlk_prices *p, struct dlk_err *err);
/* 1 when a price is set at all. */
int dlk_prices_set(const struct dlk_prices *p);

/* The cost of a record (or of a usage object's sums: usage), NAN when no price applies or the
 * record has no usage: gpu_seconds/3600 x gpu_hour + (cpu_reserved_seconds, else cpu_seconds)/3600
 * x cpu_hour; a part whose price is not set counts nothing. */
double dlk_usage_cost(const cJSON *usage, const struct dlk_prices *p);

/* The sums of the usage of records (an array of records): {"runs": how many had usage,
 * "wall_seconds", "gpu_seconds", "cpu_seconds", "cpu_reserved_seconds"} and, with a price,
 * "cost" and "currency". A new object. */
cJSON *dlk_usage_sum(const cJSON *records, const struct dlk_prices *p);

/* The dataset a record trained on, as a grouping key: a versioned dataset's id ("sha256:" and 64
 * hex digits; label: its tag, "NAME@TAG", or the id's first 12 digits), else the fingerprint of
 * the data sources it names ("files:" and 64 hex digits; label "files FP12"), else "" (label
 * "not recorded"). The id and the tag are the record's, made visible (no control characters). */
void dlk_run_dataset_key(const cJSON *rec, char key[80], char label[160]);

/* The usage of records summed per dataset (dlk_run_dataset_key): an array of {"dataset": key,
 * "name": label, "usage": dlk_usage_sum of its records}, the most GPU-seconds first, then CPU
 * seconds, then runs, then key. A new array; records without usage count in no sum but their
 * dataset is listed (runs 0). */
cJSON *dlk_usage_by_dataset(const cJSON *records, const struct dlk_prices *p);

/* Seconds as text: "12.3 s", "4.1 min", "2.50 h". */
void dlk_usage_seconds_text(double s, char *out, size_t n);
/* A cost as text: 4 decimals under 1, else 2, then the currency if any. */
void dlk_usage_cost_text(double c, const struct dlk_prices *p, char *out, size_t n);
/* A sum of dlk_usage_sum as one line: "total of N runs: GPU time X; CPU time Y used[, Z
 * reserved][; cost C]"; "" when no record had usage. */
void dlk_usage_total_text(const cJSON *sum, const struct dlk_prices *p, char *out, size_t n);

/* Checks run.usage of a record read from outside (types and ranges); errors name who and the
 * field (DLK_EXIT_CONFIG). */
int dlk_usage_check(const cJSON *usage, const char *who, struct dlk_err *err);

#endif
