/* A fake CUDA driver for the tests of `dlk top`'s GPU samples (t1922, t1924): the devices
 * CUDA_VISIBLE_DEVICES lists, at PCI buses 3B + 20 x the physical index. */
#include <stdio.h>
#include <stdlib.h>
/* CUDA's view: the physical devices CUDA_VISIBLE_DEVICES lists in its order, else both */
static int vis[8], nvis = -1;
static void scan(void)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	char *end;
	if (nvis >= 0)
		return;
	nvis = 0;
	if (!v) { vis[nvis++] = 0; vis[nvis++] = 1; return; }
	while (*v && nvis < 8) { vis[nvis++] = (int)strtol(v, &end, 10); v = *end == ',' ? end + 1 : end; if (!*end) break; }
}
int cuInit(unsigned f) { (void)f; scan(); return 0; }
int cuDeviceGetCount(int *n) { scan(); *n = nvis; return 0; }
int cuDeviceGet(int *d, int ordinal) { scan(); if (ordinal < 0 || ordinal >= nvis) return 101; *d = vis[ordinal]; return 0; }
int cuDeviceGetPCIBusId(char *s, int len, int d) { snprintf(s, (size_t)len, "0000:%02x:00.0", 0x3b + 0x20 * d); return 0; }
