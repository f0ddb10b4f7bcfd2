/* GPU figures through NVML, loaded at run time (dlopen of libnvidia-ml.so.1, or the library
 * $DLK_NVML_LIBRARY names), so the dlk binary never links it and runs where there is no GPU. */
#ifndef DLK_TOP_NVML_H
#define DLK_TOP_NVML_H

#include <stddef.h>

#define DLK_ENV_NVML_LIBRARY "DLK_NVML_LIBRARY"

struct dlk_gpu_sample {
	int index;
	char name[96];
	unsigned util_percent;           /* the GPU's duty cycle over NVML's last period */
	unsigned long long mem_used, mem_total; /* bytes */
	double power_w;                  /* -1: not supported */
	unsigned sm_clock_mhz;           /* 0: not supported */
};

/* Every GPU NVML sees, sampled now, into a new array *out of *n (the caller frees it). -1 with
 * why (in words: "libnvidia-ml.so.1 is not installed", "NVML: nvmlInit_v2 failed (code 9)",
 * ...) when NVML cannot be loaded or initialised; 0 with *n = 0 when it has no GPU. */
int dlk_nvml_sample(struct dlk_gpu_sample **out, int *n, char *why, size_t why_len);

/* ---- the GPU a training rank uses ---- */
/* The CUDA driver (libcuda.so.1, or the library $DLK_CUDA_DRIVER_LIBRARY names: the tests use a
 * fake one) says which physical GPU a CUDA device ordinal is, by its PCI bus id: CUDA numbers
 * the devices CUDA_VISIBLE_DEVICES lets it see in CUDA_DEVICE_ORDER (fastest first by default),
 * NVML all of them in PCI order, so the two indices differ in general. */
#define DLK_ENV_CUDA_DRIVER_LIBRARY "DLK_CUDA_DRIVER_LIBRARY"

struct dlk_gpu_probe;
/* The NVML device of CUDA device ordinal (>= 0), or when ordinal < 0 of the device local_rank
 * takes among those CUDA sees (local_rank modulo their count, as lib/nn/device.h picks it: a
 * rank given a GPU that computes on the CPU still has it). NULL with why when the driver or
 * NVML cannot be loaded, CUDA sees no device, or NVML has no device of that bus id. NVML stays
 * initialised until dlk_gpu_probe_close, so that a sample costs a few driver calls. */
struct dlk_gpu_probe *dlk_gpu_probe_open(int ordinal, int local_rank, char *why, size_t why_len);
/* The device's figures now (index: NVML's); -1 when NVML cannot read them now. */
int dlk_gpu_probe_sample(struct dlk_gpu_probe *p, struct dlk_gpu_sample *s);
/* NVML's index of the device. */
int dlk_gpu_probe_index(const struct dlk_gpu_probe *p);
/* The PCI bus id CUDA gave ("00000000:3B:00.0"). */
const char *dlk_gpu_probe_bus_id(const struct dlk_gpu_probe *p);
void dlk_gpu_probe_close(struct dlk_gpu_probe *p);

#endif
