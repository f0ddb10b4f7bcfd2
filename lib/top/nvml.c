/* NVML by dlopen: the handful of entry points dlk top reads, with their C types written here
 * (NVML's header is not needed to build). dlk_nvml_sample loads and unloads the library each
 * time (dlk top samples once a second at most); a rank's probe keeps it for the run. The CUDA
 * driver is opened the same way, only to ask a device ordinal's PCI bus id. */
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

struct nvml {
	void *h;
	const char *lib;
	nvml_ret (*init)(void), (*shutdown)(void), (*count)(unsigned *), (*by_index)(unsigned, nvml_dev *);
	nvml_ret (*util)(nvml_dev, struct nvml_util *), (*mem)(nvml_dev, struct nvml_mem *);
	nvml_ret (*power)(nvml_dev, unsigned *), (*clock)(nvml_dev, int, unsigned *), (*name)(nvml_dev, char *, unsigned);
	nvml_ret (*by_bus)(const char *, nvml_dev *), (*index)(nvml_dev, unsigned *);
};

/* loads and initialises NVML; -1 with why */
static int nvml_open(struct nvml *v, char *why, size_t why_len)
{
	const char *lib = getenv(DLK_ENV_NVML_LIBRARY);
	nvml_ret rc;

	memset(v, 0, sizeof(*v));
	if (!lib || !*lib)
		lib = "libnvidia-ml.so.1";
	v->lib = lib;
	v->h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!v->h) {
		snprintf(why, why_len, "%s is not installed (NVIDIA's driver brings it): no GPU figures", lib);
		return -1;
	}
	*(void **)&v->init = dlsym(v->h, "nvmlInit_v2");
	*(void **)&v->shutdown = dlsym(v->h, "nvmlShutdown");
	*(void **)&v->count = dlsym(v->h, "nvmlDeviceGetCount_v2");
	*(void **)&v->by_index = dlsym(v->h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&v->util = dlsym(v->h, "nvmlDeviceGetUtilizationRates");
	*(void **)&v->mem = dlsym(v->h, "nvmlDeviceGetMemoryInfo");
	*(void **)&v->power = dlsym(v->h, "nvmlDeviceGetPowerUsage");
	*(void **)&v->clock = dlsym(v->h, "nvmlDeviceGetClockInfo");
	*(void **)&v->name = dlsym(v->h, "nvmlDeviceGetName");
	*(void **)&v->by_bus = dlsym(v->h, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&v->index = dlsym(v->h, "nvmlDeviceGetIndex");
	if (!v->init || !v->shutdown || !v->count || !v->by_index || !v->util || !v->mem) {
		snprintf(why, why_len, "%s lacks NVML's entry points (nvmlInit_v2, nvmlDeviceGetCount_v2, ...)", lib);
		dlclose(v->h);
		return -1;
	}
	if ((rc = v->init())) {
		snprintf(why, why_len, "NVML: nvmlInit_v2 failed (code %d): is the NVIDIA driver loaded?", rc);
		dlclose(v->h);
		return -1;
	}
	return 0;
}

static void nvml_close(struct nvml *v)
{
	v->shutdown();
	dlclose(v->h);
}

/* device d's figures into g (its index set by the caller); -1 when NVML cannot read them now */
static int nvml_read(const struct nvml *v, nvml_dev d, struct dlk_gpu_sample *g)
{
	struct nvml_util u = { 0, 0 };
	struct nvml_mem m = { 0, 0, 0 };
	unsigned mw = 0, mhz = 0;

	if (v->util(d, &u) || v->mem(d, &m))
		return -1; /* a GPU NVML cannot read now (lost, in reset) */
	if (!v->name || v->name(d, g->name, sizeof(g->name)))
		snprintf(g->name, sizeof(g->name), "GPU %d", g->index);
	g->name[sizeof(g->name) - 1] = 0;
	g->util_percent = u.gpu > 100 ? 100 : u.gpu;
	g->mem_used = m.used;
	g->mem_total = m.total;
	g->power_w = v->power && !v->power(d, &mw) ? mw / 1000.0 : -1;
	g->sm_clock_mhz = v->clock && !v->clock(d, NVML_CLOCK_SM, &mhz) ? mhz : 0;
	return 0;
}

int dlk_nvml_sample(struct dlk_gpu_sample **out, int *n, char *why, size_t why_len)
{
	struct nvml v;
	unsigned c = 0;
	nvml_ret rc;

	*out = NULL;
	*n = 0;
	if (nvml_open(&v, why, why_len))
		return -1;
	if ((rc = v.count(&c))) {
		snprintf(why, why_len, "NVML: nvmlDeviceGetCount_v2 failed (code %d)", rc);
		nvml_close(&v);
		return -1;
	}
	if (c > 1024)
		c = 1024;
	*out = xcalloc(c + 1, sizeof(**out));
	for (unsigned i = 0; i < c; i++) {
		struct dlk_gpu_sample *g = &(*out)[*n];
		nvml_dev d = NULL;
		memset(g, 0, sizeof(*g));
		g->index = (int)i;
		if (v.by_index(i, &d) || nvml_read(&v, d, g))
			continue; /* left out */
		(*n)++;
	}
	nvml_close(&v);
	return 0;
}

/* ---- a rank's GPU ---- */

struct dlk_gpu_probe {
	struct nvml v;
	nvml_dev dev;
	int index;
	char bus[64];
};

/* CUDA device ordinal's (or local_rank's, when ordinal < 0) PCI bus id, from the CUDA driver */
static int cuda_bus_id(int ordinal, int local_rank, char *bus, size_t bus_len, char *why, size_t why_len)
{
	const char *lib = getenv(DLK_ENV_CUDA_DRIVER_LIBRARY);
	int (*init)(unsigned), (*count)(int *), (*get)(int *, int), (*busid)(char *, int, int);
	int n = 0, dev = 0, rc;
	void *h;

	if (!lib || !*lib)
		lib = "libcuda.so.1";
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, why_len, "%s is not installed (NVIDIA's driver brings it): no GPU is known to be this rank's",
		         lib);
		return -1;
	}
	*(void **)&init = dlsym(h, "cuInit");
	*(void **)&count = dlsym(h, "cuDeviceGetCount");
	*(void **)&get = dlsym(h, "cuDeviceGet");
	*(void **)&busid = dlsym(h, "cuDeviceGetPCIBusId");
	if (!init || !count || !get || !busid) {
		snprintf(why, why_len, "%s lacks the CUDA driver's entry points (cuInit, cuDeviceGetPCIBusId, ...)", lib);
		dlclose(h);
		return -1;
	}
	if ((rc = init(0)) || (rc = count(&n))) {
		snprintf(why, why_len, "CUDA: cuInit failed (code %d): no GPU is known to be this rank's", rc);
		dlclose(h);
		return -1;
	}
	if (n <= 0 || ordinal >= n) {
		snprintf(why, why_len, "CUDA sees %d device%s here%s", n, n == 1 ? "" : "s",
		         ordinal >= n ? ", not the one asked for" : ": this rank has no GPU");
		dlclose(h);
		return -1;
	}
	if (ordinal < 0)
		ordinal = (local_rank < 0 ? 0 : local_rank) % n;
	if ((rc = get(&dev, ordinal)) || (rc = busid(bus, (int)bus_len, dev))) {
		snprintf(why, why_len, "CUDA: the PCI bus id of device %d is not known (code %d)", ordinal, rc);
		dlclose(h);
		return -1;
	}
	bus[bus_len - 1] = 0;
	dlclose(h);
	return 0;
}

struct dlk_gpu_probe *dlk_gpu_probe_open(int ordinal, int local_rank, char *why, size_t why_len)
{
	struct dlk_gpu_probe *p = xcalloc(1, sizeof(*p));
	unsigned idx = 0;
	nvml_ret rc;

	if (cuda_bus_id(ordinal, local_rank, p->bus, sizeof(p->bus), why, why_len) || nvml_open(&p->v, why, why_len)) {
		free(p);
		return NULL;
	}
	if (!p->v.by_bus || !p->v.index) {
		snprintf(why, why_len, "%s lacks nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetIndex", p->v.lib);
		goto fail;
	}
	if ((rc = p->v.by_bus(p->bus, &p->dev)) || (rc = p->v.index(p->dev, &idx))) {
		snprintf(why, why_len, "NVML has no GPU at PCI bus id %s, CUDA's (code %d)", p->bus, rc);
		goto fail;
	}
	p->index = (int)idx;
	return p;
fail:
	nvml_close(&p->v);
	free(p);
	return NULL;
}

int dlk_gpu_probe_sample(struct dlk_gpu_probe *p, struct dlk_gpu_sample *s)
{
	memset(s, 0, sizeof(*s));
	s->index = p->index;
	return nvml_read(&p->v, p->dev, s);
}

int dlk_gpu_probe_index(const struct dlk_gpu_probe *p)
{
	return p->index;
}

const char *dlk_gpu_probe_bus_id(const struct dlk_gpu_probe *p)
{
	return p->bus;
}

void dlk_gpu_probe_close(struct dlk_gpu_probe *p)
{
	if (!p)
		return;
	nvml_close(&p->v);
	free(p);
}
