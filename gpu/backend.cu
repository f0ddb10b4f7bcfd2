/* The CUDA backend's entry points: finding out whether a device can be used (and saying exactly
 * why not), taking one device, its stream and memory pool, and the copies and error checks of the
 * backend interface. The kernels are in kernels.cu, the GEMMs in blas.cu, NCCL in nccl.c.
 * dlk loads libdlk-cuda.so with dlopen and resolves DLK_BACKEND_ENTRY and DLK_BACKEND_PROBE only. */
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda.h"
#include "gpu/pool.h"

#ifndef DLK_CUDA_ARCHS
#define DLK_CUDA_ARCHS "unknown"
#endif

cudaStream_t dlk_cu_stream;
int dlk_cu_device = -1;

static char g_error[512]; /* the first error since the last check() */
static struct dlk_pool *g_pool;
static struct dlk_backend g_backend;
static int g_ready;

extern "C" void dlk_cu_note(const char *what, cudaError_t e)
{
	if (e != cudaSuccess && !g_error[0])
		snprintf(g_error, sizeof(g_error), "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" void dlk_cu_notef(const char *fmt, ...)
{
	va_list ap;
	if (g_error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(g_error, sizeof(g_error), fmt, ap);
	va_end(ap);
}

/* ---- the memory pool over cudaMalloc ---- */

static void *raw_alloc(size_t bytes, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		cudaGetLastError(); /* out of memory is the NULL, not a sticky error */
		return NULL;
	}
	return p;
}

static void raw_free(void *p, void *ctx)
{
	(void)ctx;
	dlk_cu_note("cudaFree", cudaFree(p));
}

/* zeroing on the stream: the block's previous user ran on the same stream, so it is done first */
static void zero(void *p, size_t bytes, void *ctx)
{
	(void)ctx;
	dlk_cu_note("cudaMemsetAsync", cudaMemsetAsync(p, 0, bytes, dlk_cu_stream));
}

extern "C" void *dlk_cu_alloc(size_t bytes) { return dlk_pool_alloc(g_pool, bytes); }

extern "C" void dlk_cu_free(void *p)
{
	if (dlk_pool_free(g_pool, p))
		dlk_cu_notef("free: %p is not a block of the device memory pool", p);
}

static void cu_mem_stats(struct dlk_mem_stats *s)
{
	struct dlk_pool_stats ps;
	size_t fr = 0, tot = 0;
	dlk_pool_stats(g_pool, &ps);
	if (cudaMemGetInfo(&fr, &tot) != cudaSuccess)
		cudaGetLastError();
	memset(s, 0, sizeof(*s));
	s->held = ps.held;
	s->in_use = ps.in_use;
	s->peak_in_use = ps.peak_in_use;
	s->device_total = tot;
	s->device_free = fr;
	s->device_allocs = ps.raw_allocs;
	s->reuses = ps.reuses;
}

/* ---- copies and errors ---- */

static void cu_set_threads(int n) { (void)n; }

/* From pageable host memory the copy returns once the bytes are staged, so src may be reused at
 * once; the stream orders it before the kernels that read dst. */
static void cu_to_device(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		dlk_cu_note("cudaMemcpyAsync to device",
		            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, dlk_cu_stream));
}

static void cu_to_host(void *dst, const void *src, size_t bytes)
{
	if (!bytes)
		return;
	dlk_cu_note("cudaMemcpyAsync to host", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, dlk_cu_stream));
	dlk_cu_note("cudaStreamSynchronize", cudaStreamSynchronize(dlk_cu_stream));
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes && dst != src)
		dlk_cu_note("cudaMemcpyAsync on device",
		            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dlk_cu_stream));
}

static void cu_copy_rows(void *dst, size_t ldd, const void *src, size_t lds, size_t rows, size_t row_bytes)
{
	if (rows && row_bytes)
		dlk_cu_note("cudaMemcpy2DAsync on device", cudaMemcpy2DAsync(dst, ldd, src, lds, row_bytes, rows,
		                                                               cudaMemcpyDeviceToDevice, dlk_cu_stream));
}

static int cu_check(char *msg, size_t len)
{
	dlk_cu_note("cudaStreamSynchronize", cudaStreamSynchronize(dlk_cu_stream));
	dlk_cu_note("a kernel", cudaGetLastError());
	if (!g_error[0]) {
		if (len)
			msg[0] = 0;
		return 0;
	}
	snprintf(msg, len, "%s", g_error);
	g_error[0] = 0;
	return -1;
}

/* ---- can a device be used, and why not ---- */

static int major_of(int v) { return v / 1000; }

/* 0 when `device` (or, with device < 0, any device) can be used; else -1 and why, in a
 * sentence. Takes no device: no context is created. */
static int why_not(int device, char *msg, size_t len, int *n_out)
{
	int drv = 0, n = 0;
	cudaError_t e;

	*n_out = 0;
	cudaDriverGetVersion(&drv);
	if (drv == 0) {
		snprintf(msg, len,
		         "no NVIDIA driver: libcuda.so.1 is not on this machine (in a pod that asks for nvidia.com/gpu, "
		         "the NVIDIA container runtime mounts it)");
		return -1;
	}
	if (major_of(drv) < major_of(CUDART_VERSION)) {
		snprintf(msg, len,
		         "the NVIDIA driver supports CUDA %d.%d but this backend was built with CUDA %d.%d: it needs a "
		         "driver for CUDA %d (release 580 or newer)",
		         drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
		         major_of(CUDART_VERSION));
		return -1;
	}
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");
		cudaGetLastError();
		if (e == cudaSuccess || e == cudaErrorNoDevice)
			snprintf(msg, len, "no CUDA device is visible%s%s%s", vis ? " (CUDA_VISIBLE_DEVICES is '" : "",
			         vis ? vis : "", vis ? "')" : "");
		else
			snprintf(msg, len, "the CUDA driver cannot list the devices: %s (%s)", cudaGetErrorString(e),
			         cudaGetErrorName(e));
		return -1;
	}
	*n_out = n;
	if (device >= n) {
		snprintf(msg, len, "there is no CUDA device %d (the local rank picks it): %d device%s visible", device, n,
		         n == 1 ? " is" : "s are");
		return -1;
	}
	int d = device < 0 ? 0 : device, maj = 0, min = 0;
	cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, d);
	cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, d);
	if (maj < 8) {
		char name[256] = "";
		cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
			snprintf(name, sizeof(name), "%s", p.name);
		snprintf(msg, len,
		         "CUDA device %d (%s) has compute capability %d.%d; this backend has code for 8.0 and newer "
		         "(%s)",
		         d, name, maj, min, DLK_CUDA_ARCHS);
		return -1;
	}
	return 0;
}

static void describe_device(int d, char *out, size_t len)
{
	cudaDeviceProp p;
	if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
		cudaGetLastError();
		snprintf(out, len, "cuda:%d", d);
		return;
	}
	snprintf(out, len, "cuda:%d (%.80s, sm_%d%d, %.0f GiB)", d, p.name, p.major, p.minor,
	         (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
}

extern "C" __attribute__((visibility("default"))) const int dlk_backend_cuda_abi = DLK_BACKEND_ABI;

extern "C" __attribute__((visibility("default"))) void dlk_backend_cuda_probe(struct dlk_device_probe *p)
{
	int n = 0;
	memset(p, 0, sizeof(*p));
	p->runtime = CUDART_VERSION;
	cudaDriverGetVersion(&p->driver);
	snprintf(p->archs, sizeof(p->archs), "%s", DLK_CUDA_ARCHS);
	dlk_cu_blas_version(p->blas, sizeof(p->blas));
	dlk_cu_nccl.describe(p->comm, sizeof(p->comm));
	p->usable = why_not(-1, p->why, sizeof(p->why), &n) == 0;
	p->devices = n;
	if (n > 0)
		describe_device(0, p->device0, sizeof(p->device0));
}

extern "C" __attribute__((visibility("default"))) const struct dlk_backend *dlk_backend_cuda_entry(int device, char *msg,
                                                                                                  size_t len)
{
	int n = 0;
	cudaError_t e;

	if (g_ready) {
		if (device == dlk_cu_device)
			return &g_backend;
		snprintf(msg, len, "this process already uses CUDA device %d and cannot also use %d", dlk_cu_device, device);
		return NULL;
	}
	if (device < 0) {
		snprintf(msg, len, "CUDA device %d does not exist", device);
		return NULL;
	}
	if (why_not(device, msg, len, &n))
		return NULL;
	if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
		snprintf(msg, len, "cannot start CUDA device %d: %s (%s)", device, cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError();
		return NULL;
	}
	if ((e = cudaStreamCreateWithFlags(&dlk_cu_stream, cudaStreamNonBlocking)) != cudaSuccess) {
		snprintf(msg, len, "cannot create a CUDA stream: %s", cudaGetErrorString(e));
		return NULL;
	}
	dlk_cu_device = device;
	if (!g_pool) {
		struct dlk_pool_ops ops = { raw_alloc, raw_free, zero, NULL };
		g_pool = dlk_pool_new(&ops);
		if (!g_pool) {
			snprintf(msg, len, "out of host memory");
			return NULL;
		}
	}

	struct dlk_backend *b = &g_backend;
	memset(b, 0, sizeof(*b));
	b->abi = DLK_BACKEND_ABI;
	b->name = "cuda";
	describe_device(device, b->device, sizeof(b->device));
	b->set_threads = cu_set_threads;
	b->alloc = dlk_cu_alloc;
	b->free = dlk_cu_free;
	b->to_device = cu_to_device;
	b->to_host = cu_to_host;
	b->copy = cu_copy;
	b->copy_rows = cu_copy_rows;
	b->check = cu_check;
	b->mem_stats = cu_mem_stats;
	dlk_cu_install_kernels(b);
	dlk_cu_install_loss(b);
	dlk_cu_install_layers(b);
	dlk_cu_install_attention(b);
	dlk_cu_install_batchnorm(b);
	if (dlk_cu_blas_init(b, msg, len))
		return NULL;
	b->comm = &dlk_cu_nccl;
	/* whatever failed while starting is an error of starting, not of the first step */
	char why[512];
	if (cu_check(why, sizeof(why))) {
		snprintf(msg, len, "CUDA device %d: %s", device, why);
		return NULL;
	}
	g_ready = 1;
	return b;
}
