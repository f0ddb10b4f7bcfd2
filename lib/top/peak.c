/* Peak FP32 FLOP/s of a GPU (a table by name) or of this machine's CPU (threads x clock x
 * vector width). */
#include "lib/top/peak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* FP32 (non-tensor) peaks of the data sheets, in TFLOP/s; the first name contained wins, so a
 * longer name comes before one it contains ("H100 PCIe" before "H100", "A100" before "A10"). */
static const struct {
	const char *name;
	double tflops;
} gpus[] = {
	{ "H200", 66.9 },   { "H100 PCIe", 51.2 }, { "H100", 66.9 },  { "GH200", 66.9 }, { "B200", 80.0 },
	{ "A100", 19.5 },   { "A800", 19.5 },      { "A40", 37.4 },   { "A30", 10.3 },   { "A10G", 31.2 },
	{ "A10", 31.2 },    { "L40S", 91.6 },      { "L40", 90.5 },   { "L4", 30.3 },    { "T4", 8.1 },
	{ "V100", 15.7 },   { "RTX 4090", 82.6 },  { "RTX 3090", 35.6 },
};

int dlk_peak_gpu(const char *name, struct dlk_peak *p)
{
	for (size_t i = 0; name && i < sizeof(gpus) / sizeof(gpus[0]); i++)
		if (strstr(name, gpus[i].name)) {
			p->flops = gpus[i].tflops * 1e12;
			snprintf(p->source, sizeof(p->source), "%.100s: FP32 data sheet, %.1f TFLOP/s", name, gpus[i].tflops);
			return 0;
		}
	return -1;
}

/* the highest clock of CPU 0 in MHz, 0 when unknown */
static double cpu_mhz(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
	char line[256];
	double mhz = 0;

	if (f) {
		long khz = 0;
		if (fscanf(f, "%ld", &khz) == 1 && khz > 0)
			mhz = khz / 1000.0;
		fclose(f);
		if (mhz > 0)
			return mhz;
	}
	if (!(f = fopen("/proc/cpuinfo", "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "cpu MHz", 7)) {
			const char *c = strchr(line, ':');
			double v = c ? strtod(c + 1, NULL) : 0;
			if (v > mhz)
				mhz = v;
		}
	fclose(f);
	return mhz;
}

static int flops_per_cycle(const char **isa)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		*isa = "AVX-512F";
		return 64;
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		*isa = "AVX2+FMA";
		return 32;
	}
	if (__builtin_cpu_supports("avx")) {
		*isa = "AVX";
		return 16;
	}
	*isa = "SSE";
	return 8;
#else
	*isa = "2 x 4-wide FMA";
	return 16;
#endif
}

int dlk_peak_cpu(int threads, struct dlk_peak *p)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	double mhz = cpu_mhz();
	const char *isa;
	int fpc = flops_per_cycle(&isa);

	if (online < 1)
		online = 1;
	if (threads <= 0 || threads > online)
		threads = (int)online;
	if (!(mhz > 0))
		return -1;
	p->flops = threads * mhz * 1e6 * fpc;
	snprintf(p->source, sizeof(p->source), "CPU: %d thread%s x %.0f MHz x %d FP32 FLOPs a cycle (%s)", threads, threads == 1 ? "" : "s", mhz,
	         fpc, isa);
	return 0;
}
