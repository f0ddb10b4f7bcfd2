/* Cores and memory, as a container sees them. */
#include "lib/util/machine.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ceil(quota / period) of a cgroup CPU limit, or 0 when there is none */
static int cgroup_cpus(void)
{
	char buf[128];
	FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r"); /* cgroup v2: "max 100000" or "150000 100000" */
	long long quota = -1, period = 0;

	if (f) {
		if (fgets(buf, sizeof(buf), f) && strncmp(buf, "max", 3))
			sscanf(buf, "%lld %lld", &quota, &period);
		fclose(f);
	} else if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r"))) { /* cgroup v1 */
		if (fscanf(f, "%lld", &quota) != 1)
			quota = -1;
		fclose(f);
		if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r"))) {
			if (fscanf(f, "%lld", &period) != 1)
				period = 0;
			fclose(f);
		}
	}
	if (quota <= 0 || period <= 0)
		return 0;
	return (int)((quota + period - 1) / period);
}

int dlk_machine_cores(void)
{
	cpu_set_t set;
	int n = 0;

	if (!sched_getaffinity(0, sizeof(set), &set))
		n = CPU_COUNT(&set);
	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (int)c : 1;
	}
	int q = cgroup_cpus();
	if (q > 0 && q < n)
		n = q;
	return n < 1 ? 1 : n;
}

/* a cgroup's memory limit in bytes, 0 when there is none ("max", or v1's huge "no limit") */
static unsigned long long cgroup_memory(void)
{
	static const char *const files[] = { "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes" };
	unsigned long long v = 0;

	for (int k = 0; k < 2 && !v; k++) {
		char buf[64];
		FILE *f = fopen(files[k], "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && strncmp(buf, "max", 3) && sscanf(buf, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

unsigned long long dlk_machine_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	unsigned long long phys = pages > 0 && size > 0 ? (unsigned long long)pages * (unsigned long long)size : 0;
	unsigned long long lim = cgroup_memory();

	return lim && (!phys || lim < phys) ? lim : phys;
}
