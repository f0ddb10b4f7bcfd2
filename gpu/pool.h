/* The CUDA backend's memory pool: a caching allocator, so that a training step asks the device
 * for no memory after the first (cudaMalloc and cudaFree synchronise the whole device).
 *
 * A freed block goes back to the pool, keyed by its size class, and the next request of that
 * class gets it again. Only when the device is out of memory does the pool give its idle blocks
 * back and try once more. This file is host-side bookkeeping only: the raw allocator and the
 * zeroing are callbacks, so the CPU tests drive it with malloc. It is not thread-safe: the backend
 * is used from one thread, as its stream is. */
#ifndef DLK_GPU_POOL_H
#define DLK_GPU_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct dlk_pool_ops {
	void *(*raw_alloc)(size_t bytes, void *ctx); /* NULL when out of memory */
	void (*raw_free)(void *p, void *ctx);
	void (*zero)(void *p, size_t bytes, void *ctx); /* blocks are handed out zero-filled */
	void *ctx;
};

struct dlk_pool_stats {
	size_t held;              /* bytes taken from the raw allocator and not given back */
	size_t in_use;            /* bytes of the blocks handed out (their size classes) */
	size_t peak_in_use;
	size_t blocks, idle_blocks;
	unsigned long long raw_allocs;  /* calls to raw_alloc that succeeded */
	unsigned long long reuses;      /* requests served from an idle block */
	unsigned long long trims;       /* times the idle blocks were given back to retry */
};

struct dlk_pool;

/* The size class a request of `bytes` is served from: 512-byte steps up to 1 MiB, then 1 MiB
 * steps up to 64 MiB, then 32 MiB steps (so a block is never more than a few percent too big
 * for what a layer asks, and repeated requests of one size always share a class). */
size_t dlk_pool_class(size_t bytes);

/* A new pool over ops (copied); NULL only when the host is out of memory. */
struct dlk_pool *dlk_pool_new(const struct dlk_pool_ops *ops);
/* A zero-filled block of at least `bytes` (0 is served as the smallest class), or NULL when the
 * raw allocator fails even after the idle blocks were given back. */
void *dlk_pool_alloc(struct dlk_pool *p, size_t bytes);
/* Returns a block to the pool (NULL is ignored). Returns 0, or -1 when p is not a block this
 * pool handed out and has not had back yet (a double free or a foreign pointer: nothing changes). */
int dlk_pool_free(struct dlk_pool *p, void *ptr);
/* The size class of a live block, 0 when ptr is not one. */
size_t dlk_pool_size(const struct dlk_pool *p, const void *ptr);
/* Gives every idle block back to the raw allocator. */
void dlk_pool_trim(struct dlk_pool *p);
void dlk_pool_stats(const struct dlk_pool *p, struct dlk_pool_stats *s);
/* Gives every block back, live ones included, and frees the pool. NULL is allowed. */
void dlk_pool_delete(struct dlk_pool *p);

#ifdef __cplusplus
}
#endif

#endif
