/* What the machine (or the container's cgroup) gives this process: cores and memory. */
#ifndef DLK_UTIL_MACHINE_H
#define DLK_UTIL_MACHINE_H

/* The cores this process may use: its CPU affinity's count, or the online cores, lowered to
 * ceil(quota / period) of a cgroup CPU limit (v2 cpu.max, v1 cfs_quota_us); at least 1. */
int dlk_machine_cores(void);

/* The bytes of memory this process may use: the cgroup's limit (v2 memory.max, v1
 * memory.limit_in_bytes) when it is below the physical memory, else the physical memory; 0 when
 * neither can be read. */
unsigned long long dlk_machine_memory(void);

#endif
