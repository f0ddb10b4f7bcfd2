/* NVML by dlopen: the handful of entry points dlk top reads, with their C types written here
 * (NVML's header is not needed to build). Everything is read per call; the library is loaded
 * and unloaded each time (dlk top samples once a second at most). */
#include "lib/top/nvml.h"
#include "lib/util/mem.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_ret;
typedef void *nvml_dev;
struct nvml_util {
	unsigned gpu, memory;
};
struct nvml_mem {
	unsigned long long total, free, used;
};
#define NVML_CLOCK_SM 1

int dlk_nvml_sample(struct dlk_gpu_sample **out, int *n, char *why, size_t why_len)
{
	const char *lib = getenv(DLK_ENV_NVML_LIBRARY);
	void *h;
	nvml_ret (*init)(void), (*shutdown)(void), (*count)(unsigned *), (*by_index)(unsigned, nvml_dev *);
	nvml_ret (*util)(nvml_dev, struct nvml_util *), (*mem)(nvml_dev, struct nvml_mem *);
	nvml_ret (*power)(nvml_dev, unsigned *), (*clock)(nvml_dev, int, unsigned *), (*name)(nvml_dev, char *, unsigned);
	unsigned c = 0;
	nvml_ret rc;

	*out = NULL;
	*n = 0;
	if (!lib || !*lib)
		lib = "libnvidia-ml.so.1";
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, why_len, "%s is not installed (NVIDIA's driver brings it): no GPU figures", lib);
		return -1;
	}
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(h, "nvmlShutdown");
	*(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&util = dlsym(h, "nvmlDeviceGetUtilizationRates");
	*(void **)&mem = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&power = dlsym(h, "nvmlDeviceGetPowerUsage");
	*(void **)&clock = dlsym(h, "nvmlDeviceGetClockInfo");
	*(void **)&name = dlsym(h, "nvmlDeviceGetName");
	if (!init || !shutdown || !count || !by_index || !util || !mem) {
		snprintf(why, why_len, "%s lacks NVML's entry points (nvmlInit_v2, nvmlDeviceGetCount_v2, ...)", lib);
		dlclose(h);
		return -1;
	}
	if ((rc = init())) {
		snprintf(why, why_len, "NVML: nvmlInit_v2 failed (code %d): is the NVIDIA driver loaded?", rc);
		dlclose(h);
		return -1;
	}
	if ((rc = count(&c))) {
		snprintf(why, why_len, "NVML: nvmlDeviceGetCount_v2 failed (code %d)", rc);
		shutdown();
		dlclose(h);
		return -1;
	}
	if (c > 1024)
		c = 1024;
	*out = xcalloc(c + 1, sizeof(**out));
	for (unsigned i = 0; i < c; i++) {
		struct dlk_gpu_sample *g = &(*out)[*n];
		struct nvml_util u = { 0, 0 };
		struct nvml_mem m = { 0, 0, 0 };
		unsigned mw = 0, mhz = 0;
		nvml_dev d = NULL;
		if (by_index(i, &d) || util(d, &u) || mem(d, &m))
			continue; /* a GPU NVML cannot read now (lost, in reset) is left out */
		g->index = (int)i;
		if (!name || name(d, g->name, sizeof(g->name)))
			snprintf(g->name, sizeof(g->name), "GPU %u", i);
		g->name[sizeof(g->name) - 1] = 0;
		g->util_percent = u.gpu > 100 ? 100 : u.gpu;
		g->mem_used = m.used;
		g->mem_total = m.total;
		g->power_w = power && !power(d, &mw) ? mw / 1000.0 : -1;
		g->sm_clock_mhz = clock && !clock(d, NVML_CLOCK_SM, &mhz) ? mhz : 0;
		(*n)++;
	}
	shutdown();
	dlclose(h);
	return 0;
}
