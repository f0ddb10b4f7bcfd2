/* What a training worker serves for Prometheus on GET /metrics (lib/serve/metricsd.h), from
 * the training loop's events and the gradient all-reduces:
 *   dlk_train_info{rank,world_size,job}          1, naming the worker
 *   dlk_train_steps_total                          optimizer steps done (this run, resumed ones included)
 *   dlk_train_epoch                                the epoch in progress (1-based)
 *   dlk_train_loss                                 the last step's loss, averaged over the ranks
 *   dlk_train_samples_per_second                   the whole gang's training throughput
 *   dlk_train_allreduce_seconds_total / _bytes_total / _count_total   time waiting for the
 *                                                  gradient all-reduce, the bytes reduced, how many
 *   dlk_train_allreduce_bus_bandwidth_bytes_per_second   the last all-reduce's bus bandwidth
 *                                                  (bytes / time * 2 (n-1) / n, as nccl-tests count it)
 *   dlk_train_step_seconds_total{phase}           seconds of the steps waiting for the batch ("data"),
 *                                                  computing ("compute"), waiting for the all-reduce ("allreduce")
 *   dlk_train_data_load_seconds                    time spent loading the data before the first step
 *   dlk_train_restarts                             how often the gang was started again
 *   dlk_train_up                                   1 while training, 0 once it ended
 *   dlk_train_test_loss, dlk_train_test_metric{metric}   the last evaluation's loss and metrics
 *   dlk_gpu_utilization{rank,gpu}                  the rank's GPU's duty cycle (0 to 1), and
 *   dlk_gpu_memory_used_bytes, dlk_gpu_memory_total_bytes, dlk_gpu_power_watts,
 *   dlk_gpu_sm_clock_hertz {rank,gpu}              its memory, power and SM clock, as NVML last
 *                                                  reported them (at most a second old; gpu is
 *                                                  NVML's index), once the rank sampled its GPU
 * A user's program (lib/program/supervise.h) feeds the same series from what its rank 0 reports
 * (dlk_train_metrics_progress, dlk_train_metrics_test), and the dlk_gpu_* series of each of its
 * processes' GPUs from its supervisor's samples (lib/program/gpus.h); its all-reduce series stay 0. */
#ifndef DLK_TRAINER_METRICS_H
#define DLK_TRAINER_METRICS_H

#include "lib/train/train.h"
#include "lib/util/err.h"

struct dlk_train_metrics;

#define DLK_TRAIN_METRICS_MAX_TEST 64 /* a program's reported metrics (lib/program/protocol.h) */
#define DLK_TRAIN_METRICS_MAX_NAME 64
#define DLK_TRAIN_METRICS_MAX_GPUS 64 /* the progress's bound (DLK_PROGRESS_MAX_RANKS) */

/* Serves the metrics on port (every address; 0: any free port). NULL with err when the port
 * cannot be bound. job may be NULL (a run here). */
struct dlk_train_metrics *dlk_train_metrics_start(int port, int rank, int world, const char *job, int restarts,
                                                  struct dlk_err *err);
/* The same with no thread of its own (lib/serve/metricsd.h): for a supervisor that forks its
 * processes; scrapes are answered in dlk_train_metrics_poll, which it calls every few tens of
 * milliseconds. */
struct dlk_train_metrics *dlk_train_metrics_start_polled(int port, int rank, int world, const char *job,
                                                         int restarts, struct dlk_err *err);
void dlk_train_metrics_poll(struct dlk_train_metrics *m);
int dlk_train_metrics_port(const struct dlk_train_metrics *m);
/* Updates from a step, epoch or end event (loss and samples/s as the gang sees them). */
void dlk_train_metrics_event(struct dlk_train_metrics *m, const struct dlk_train_event *ev);
/* One gradient all-reduce of bytes that took seconds, among world ranks. */
/* A program's report: steps and epoch (-1: unchanged), the loss (NULL: unchanged), samples/s (< 0:
 * unchanged). */
void dlk_train_metrics_progress(struct dlk_train_metrics *m, long long steps, int epoch, const double *loss,
                                double samples_per_sec);
/* A program's evaluation: its test loss (NULL: none) and n named metrics, replacing the last. */
void dlk_train_metrics_test(struct dlk_train_metrics *m, const double *test_loss, const char *const *names,
                            const double *values, int n);
/* The gang was started again: how often so far. */
void dlk_train_metrics_restarts(struct dlk_train_metrics *m, int restarts);
void dlk_train_metrics_allreduce(struct dlk_train_metrics *m, double seconds, double bytes, int world);
void dlk_train_metrics_data_load(struct dlk_train_metrics *m, double seconds);
/* The rank's GPU sampled (lib/top/nvml.h): NVML's index, utilisation in percent, memory bytes,
 * power (< 0: not reported), SM clock in MHz (0: not reported). */
void dlk_train_metrics_gpu(struct dlk_train_metrics *m, int gpu, unsigned util_percent, double mem_used,
                           double mem_total, double power_w, unsigned sm_clock_mhz);
/* A rank's GPU sampled, as the progress carries it: a program's supervisor serves each of its
 * processes' GPUs (rank, gpu) on its one endpoint; a sample of a (rank, gpu) already known
 * replaces it. At most DLK_TRAIN_METRICS_MAX_GPUS pairs; the others are left out. */
void dlk_train_metrics_rank_gpu(struct dlk_train_metrics *m, const struct dlk_rank_gpu *g);
/* Training ended: dlk_train_up is 0 from now on. */
void dlk_train_metrics_done(struct dlk_train_metrics *m);
void dlk_train_metrics_stop(struct dlk_train_metrics *m);

#endif
