/* A fake NVML for the tests of `dlk top`'s GPU samples (t1922, t1924). */
#include <stdio.h>
#include <stdlib.h>
/* two GPUs at PCI buses 3B and 5B; their utilisation from FAKE_NVML_UTIL ("U0,U1") */
struct util { unsigned gpu, memory; };
struct mem { unsigned long long total, free, used; };
static unsigned dev(void *d) { return (unsigned)(unsigned long)d - 1; }
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { if (i > 1) return 2; *d = (void *)(unsigned long)(i + 1); return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **d)
{
	unsigned dom, bus, slot, fn;
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 || (bus != 0x3b && bus != 0x5b)) return 6;
	*d = (void *)(unsigned long)((bus - 0x3b) / 0x20 + 1);
	return 0;
}
int nvmlDeviceGetIndex(void *d, unsigned *i) { *i = dev(d); return 0; }
int nvmlDeviceGetName(void *d, char *s, unsigned n) { snprintf(s, n, "Fake GPU %u", dev(d)); return 0; }
int nvmlDeviceGetUtilizationRates(void *d, struct util *u)
{
	const char *e = getenv("FAKE_NVML_UTIL");
	unsigned a = 0, b = 0;
	if (e) sscanf(e, "%u,%u", &a, &b);
	u->gpu = dev(d) ? b : a;
	u->memory = 0;
	return 0;
}
int nvmlDeviceGetMemoryInfo(void *d, struct mem *m) { m->total = 80ull << 30; m->used = (dev(d) + 1) * (10ull << 30); m->free = m->total - m->used; return 0; }
int nvmlDeviceGetPowerUsage(void *d, unsigned *mw) { if (dev(d)) return 3; *mw = 412000; return 0; }
int nvmlDeviceGetClockInfo(void *d, int type, unsigned *mhz) { (void)d; if (type != 1) return 2; *mhz = 1755; return 0; }
