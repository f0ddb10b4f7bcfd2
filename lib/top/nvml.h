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

#endif
