/* The GPUs of a user's program's processes, sampled by their supervisor (the program is not dlk
 * and samples nothing itself). A process's GPU is the one the program's own convention gives it:
 * CUDA device LOCAL_RANK (PyTorch's `cuda:LOCAL_RANK`, PaddlePaddle's FLAGS_selected_gpus) among
 * the devices CUDA lets it see, modulo their count. The process inherits the supervisor's
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, so the supervisor's CUDA driver says which
 * physical GPU that ordinal is (its PCI bus id) and NVML samples the device of that bus id
 * (lib/top/nvml.h: never NVML's index equal to CUDA's). Under torchrun (one process a node that
 * starts the node's ranks) each rank the node runs has its local rank. A program.env that sets
 * CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER gives its processes another view than the
 * supervisor's: nothing is sampled then (said why). */
#ifndef DLK_PROGRAM_GPUS_H
#define DLK_PROGRAM_GPUS_H

#include <stddef.h>

#include "lib/project/program.h"
#include "lib/train/train.h"

struct program_gpus;

/* Probes the GPU of each of n ranks here (rank first_rank + i has local rank i % per_node; at
 * most DLK_PROGRESS_MAX_RANKS). NULL with why when no rank has one (the CUDA driver or NVML
 * missing, CUDA_VISIBLE_DEVICES set by program.env, ...). info(ud, rank, gpu, bus) is called
 * for each rank probed (NULL: none). */
struct program_gpus *program_gpus_open(const struct dlk_program *p, int first_rank, int n, int per_node,
                                       void (*info)(void *ud, int rank, int gpu, const char *bus), void *ud,
                                       char *why, size_t why_len);
/* Samples every rank's GPU when the last sample is DLK_PROGRESS_FILE_INTERVAL_SEC old or more
 * (now_anyway: at once): 1 when it did (the samples in program_gpus_last), else 0. A few NVML
 * calls a rank: it never waits on the ranks. */
int program_gpus_sample(struct program_gpus *g, int now_anyway);
/* The last samples (the ranks whose GPU NVML could read), *n of them. */
const struct dlk_rank_gpu *program_gpus_last(const struct program_gpus *g, int *n);
void program_gpus_close(struct program_gpus *g);

#endif
