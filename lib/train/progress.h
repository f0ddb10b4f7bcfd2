/* The progress a training Job publishes on itself (annotation dlk.dev/progress). */
#ifndef DLK_TRAIN_PROGRESS_H
#define DLK_TRAIN_PROGRESS_H

#include "lib/train/train.h"

/* The annotation, and the keys of its JSON value: the writer (the worker) and the readers
 * (dlk status, dlk train --wait) both use these names. */
#define DLK_PROGRESS_ANNOTATION "dlk.dev/progress"
#define DLK_PROGRESS_EPOCH "epoch"
#define DLK_PROGRESS_EPOCHS "epochs"
#define DLK_PROGRESS_STEP "step"             /* optimizer steps done, in all epochs */
#define DLK_PROGRESS_TOTAL_STEPS "totalSteps"
#define DLK_PROGRESS_LOSS "loss"
#define DLK_PROGRESS_ACCURACY "accuracy"
#define DLK_PROGRESS_TEST_METRIC "test_metric" /* another task's headline: "r2 0.9123" */
#define DLK_PROGRESS_SAMPLES_PER_SEC "samplesPerSec"
#define DLK_PROGRESS_UPDATED "updated"
#define DLK_PROGRESS_WORKERS "workers"       /* the ranks the gang trains with now */
/* each rank's share of its step time in the current epoch: [{"rank", "data", "compute",
 * "allreduce"}] (shares from 0 to 1, lib/train/train.h's phases), for the first
 * DLK_PROGRESS_MAX_RANKS ranks */
#define DLK_PROGRESS_PHASES "phases"
#define DLK_PROGRESS_MAX_RANKS 64
/* the GPU of each rank that has one (of the first DLK_PROGRESS_MAX_RANKS), sampled through NVML
 * at most once a second: [{"rank", "gpu" (NVML's index), "utilization" (percent),
 * "memoryUsed", "memoryTotal" (bytes, to the MiB), "powerWatts" and "smClockMhz" when the GPU
 * reports them}] */
#define DLK_PROGRESS_GPUS "gpus"
#define DLK_PROGRESS_GPU_UTIL "utilization"
#define DLK_PROGRESS_GPU_MEM_USED "memoryUsed"
#define DLK_PROGRESS_GPU_MEM_TOTAL "memoryTotal"
#define DLK_PROGRESS_GPU_POWER "powerWatts"
#define DLK_PROGRESS_GPU_SM_CLOCK "smClockMhz"
/* the model FLOP utilisation, when the model's FLOPs are known: "flopsPerSample" (a training
 * step's, 3x the forward), "flops" (the gang's FLOP/s), and with a known peak "peakFlops" (all
 * the gang's devices) and "mfu" (flops / peakFlops, from 0 to 1) */
#define DLK_PROGRESS_FLOPS_PER_SAMPLE "flopsPerSample"
#define DLK_PROGRESS_FLOPS "flops"
#define DLK_PROGRESS_PEAK_FLOPS "peakFlops"
#define DLK_PROGRESS_MFU "mfu"
/* A run here (not in a pod) writes the same value, with "run" (its id) and without "accuracy",
 * in the file DLK_PROGRESS_FILE of the project's run directory (dlk_runs_local_dir), where
 * `dlk top` reads it. */
#define DLK_PROGRESS_RUN "run"
#define DLK_PROGRESS_FILE_INTERVAL_SEC 1.0 /* at most this often, but at the end */
#define DLK_PROGRESS_FILE "progress" /* not .json: the directory's *.json are its records */

/* The annotation rank 0 publishes after every epoch and at the end: the run document
 * (lib/report/report.h) of the run so far, from the same writer as the bundle's model.json, at
 * most DLK_METRICS_MAX_BYTES (annotations share 256 KiB; the confusion matrix, then the detail
 * of the history give way first). `dlk report JOB` reads it. */
#define DLK_METRICS_ANNOTATION "dlk.dev/metrics"
#define DLK_METRICS_MAX_BYTES (128u << 10)

/* The annotation's value for ev: {"epoch","epochs","step","totalSteps","loss","accuracy",
 * "samplesPerSec","updated"}, "workers" when ev->world is known, "phases" from
 * ev->rank_phase_sec (else this rank's ev->phase_sec, as rank 0) once a step was timed, "gpus"
 * from ev->rank_gpu; accuracy is the last test accuracy known (null when none).
 * updated is RFC 3339. The caller frees the string. */
char *dlk_progress_json(const struct dlk_train_event *ev, double accuracy, int have_accuracy, const char *updated);

/* The "gpus" array of n ranks' GPU samples (at most DLK_PROGRESS_MAX_RANKS of them): what
 * dlk_progress_json writes, and a program's supervisor for its processes (lib/program/gpus.h). */
struct cJSON;
struct cJSON *dlk_progress_gpus(const struct dlk_rank_gpu *gpus, int n);

#endif
