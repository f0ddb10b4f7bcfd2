/* The peak FLOP/s a device could reach with dlk's training arithmetic, the denominator of a
 * run's model FLOP utilisation (MFU = the model's FLOPs per sample x samples per second / the
 * peak of every rank's device). dlk trains in FP32, and the CUDA backend's GEMMs are strict FP32
 * (no TF32): a GPU's peak is its FP32 (non-tensor) peak from its vendor's data sheet. */
#ifndef DLK_TOP_PEAK_H
#define DLK_TOP_PEAK_H

struct dlk_peak {
	double flops;       /* FLOP/s of one device (one rank) */
	char source[160];   /* how it was found: "NVIDIA H100 80GB HBM3: FP32 data sheet", ... */
};

/* A GPU by the name NVML gives it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", ...): 0
 * with *p, -1 when the table does not know it. */
int dlk_peak_gpu(const char *name, struct dlk_peak *p);

/* This machine's CPU used by `threads` threads (<= 0 or more than the CPUs online: all of them):
 * threads x the cores' highest clock (cpufreq's cpuinfo_max_freq, else /proc/cpuinfo's "cpu
 * MHz") x the FP32 FLOPs a core can start per cycle by its vector units (x86: 64 with AVX-512F,
 * 32 with AVX2 and FMA, 16 with AVX, 8 below; other architectures: 16, two 4-wide FMA units),
 * a data-sheet style upper bound. -1 when the clock cannot be read. */
int dlk_peak_cpu(int threads, struct dlk_peak *p);

#endif
