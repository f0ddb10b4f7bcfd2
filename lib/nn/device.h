/* Choosing the backend a process computes on, in one place for every command that computes
 * (train, serve): the CPU, or the CUDA backend on the device of the process's local rank. */
#ifndef DLK_NN_DEVICE_H
#define DLK_NN_DEVICE_H

#include <stddef.h>

#include "lib/nn/backend.h"
#include "lib/util/err.h"

enum dlk_device_kind {
	DLK_DEVICE_AUTO, /* CUDA when it can be used here, else the CPU */
	DLK_DEVICE_CPU,
	DLK_DEVICE_CUDA  /* CUDA or an error saying why not */
};

struct dlk_device_choice {
	const struct dlk_backend *be;
	int device;      /* the CUDA device, -1 on the CPU */
	int devices;     /* CUDA devices visible (0 on the CPU) */
	int shared;      /* other local ranks compute on the same device (fewer devices than local
	                  * ranks): it cannot join an NCCL communicator */
	char why[DLK_ERR_MSG_MAX]; /* AUTO that chose the CPU: why not CUDA */
};

/* "auto", "cpu" or "cuda"; 0, or -1 for anything else. */
int dlk_device_parse(const char *s, enum dlk_device_kind *kind);
const char *dlk_device_name(enum dlk_device_kind kind);

/* What the caller wants (its default `def`, e.g. CUDA when the project asks for GPUs), unless the
 * environment says otherwise: DLK_DEVICE=auto|cpu|cuda. Bad values are an error (DLK_EXIT_CONFIG)
 * naming the variable. */
int dlk_device_wanted(enum dlk_device_kind def, enum dlk_device_kind *kind, struct dlk_err *err);

/* Picks the backend. CUDA runs on device local_rank modulo the devices visible (one process per
 * GPU when local_world <= devices; ranks share devices otherwise). CPU never fails. CUDA fails
 * with an error saying exactly why it cannot be used (DLK_EXIT_CONFIG). AUTO never fails: it
 * falls back to the CPU and says why in out->why. */
int dlk_backend_select(enum dlk_device_kind want, int local_rank, int local_world, struct dlk_device_choice *out,
                       struct dlk_err *err);

#endif
