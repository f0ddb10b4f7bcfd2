/* The CUDA backend's memory pool, on the host: its bookkeeping is plain C over an allocator
 * callback, so malloc stands in for cudaMalloc here and a budget stands in for the device's
 * memory. What the GPU relies on: blocks are reused by size class, handed out zero-filled,
 * never double-freed, given back when the device runs out, and all returned at the end. */
#include "tests/unit/check.h"

#include <stdint.h>
#include <stdlib.h>

#include "gpu/pool.h"

struct fake {
	size_t budget, used;
	int allocs, frees, zeroes;
	int fail_next; /* the next raw allocation fails once */
};

static void *fake_alloc(size_t bytes, void *ctx)
{
	struct fake *f = ctx;
	if (f->fail_next) {
		f->fail_next = 0;
		return NULL;
	}
	if (f->used + bytes > f->budget)
		return NULL;
	void *p = malloc(bytes + sizeof(size_t));
	*(size_t *)p = bytes;
	f->used += bytes;
	f->allocs++;
	/* garbage, as device memory would be */
	memset((char *)p + sizeof(size_t), 0xa5, bytes);
	return (char *)p + sizeof(size_t);
}

static void fake_free(void *p, void *ctx)
{
	struct fake *f = ctx;
	size_t *h = (size_t *)((char *)p - sizeof(size_t));
	f->used -= *h;
	f->frees++;
	free(h);
}

static void fake_zero(void *p, size_t bytes, void *ctx)
{
	struct fake *f = ctx;
	f->zeroes++;
	memset(p, 0, bytes);
}

static int all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i])
			return 0;
	return 1;
}

int main(void)
{
	struct fake f = { .budget = 64u << 20 };
	struct dlk_pool_ops ops = { fake_alloc, fake_free, fake_zero, &f };
	struct dlk_pool_stats st;
	struct dlk_pool *p = dlk_pool_new(&ops);

	/* size classes */
	CHECK(dlk_pool_class(0) == 512 && dlk_pool_class(1) == 512 && dlk_pool_class(512) == 512);
	CHECK(dlk_pool_class(513) == 1024 && dlk_pool_class(1u << 20) == 1u << 20);
	CHECK(dlk_pool_class((1u << 20) + 1) == 2u << 20 && dlk_pool_class(64u << 20) == 64u << 20);
	CHECK(dlk_pool_class((64u << 20) + 1) == 96u << 20);
	CHECK_MSG(dlk_pool_class(SIZE_MAX - 3) == 0, "a request too large for any class has none");
	CHECK(dlk_pool_alloc(p, SIZE_MAX - 3) == NULL);

	/* a block is zero-filled, and its class is what was reserved */
	char *a = dlk_pool_alloc(p, 1000);
	CHECK(a && all_zero(a, 1024) && dlk_pool_size(p, a) == 1024);
	memset(a, 0xff, 1000);
	void *b = dlk_pool_alloc(p, 3000);
	CHECK(b && b != a && f.allocs == 2);

	/* freed, then asked for again in the same class: the same block, zeroed again, no new
	 * raw allocation (no cudaMalloc in a training step) */
	CHECK(dlk_pool_free(p, a) == 0);
	char *a2 = dlk_pool_alloc(p, 600);
	CHECK_MSG(a2 == a && f.allocs == 2, "a freed block of the class is handed out again");
	CHECK_MSG(all_zero(a2, 1024), "a reused block is zero-filled again");
	dlk_pool_stats(p, &st);
	CHECK(st.reuses == 1 && st.raw_allocs == 2 && st.blocks == 2 && st.idle_blocks == 0);
	CHECK(st.in_use == 1024 + 3072 && st.held == 1024 + 3072);

	/* a training loop: the same requests step after step allocate nothing after the first */
	int before = 0;
	for (int step = 0; step < 50; step++) {
		void *bl[8];
		if (step == 1)
			before = f.allocs;
		for (int i = 0; i < 8; i++)
			bl[i] = dlk_pool_alloc(p, (size_t)(i + 1) * 70000);
		for (int i = 0; i < 8; i++)
			CHECK_MSG(bl[i] != NULL && dlk_pool_free(p, bl[i]) == 0, "step %d, block %d", step, i);
	}
	CHECK_MSG(f.allocs == before, "50 steps of the same requests: no raw allocation after the first (%d, %d)",
	          before, f.allocs);

	/* frees that are not: a double free and a foreign pointer change nothing */
	int dummy;
	CHECK(dlk_pool_free(p, b) == 0);
	CHECK_MSG(dlk_pool_free(p, b) == -1, "a double free is refused");
	CHECK_MSG(dlk_pool_free(p, &dummy) == -1, "a pointer the pool never handed out is refused");
	CHECK(dlk_pool_free(p, NULL) == 0);
	CHECK(dlk_pool_size(p, b) == 0);

	/* out of device memory: the idle blocks go back and the request is tried once more */
	dlk_pool_stats(p, &st);
	size_t idle = st.held - st.in_use;
	CHECK(idle > (1u << 20) + 1000);
	f.budget = f.used + 1000; /* only the idle blocks' bytes would make room */
	void *big = dlk_pool_alloc(p, 1u << 20); /* under the idle bytes, over what is free */
	dlk_pool_stats(p, &st);
	CHECK_MSG(big != NULL && st.trims == 1, "the idle blocks are given back when the device is full");
	CHECK(st.idle_blocks == 0);
	f.budget = f.used;
	CHECK_MSG(dlk_pool_alloc(p, 5000) == NULL, "a request the device cannot serve is NULL, not a crash");
	f.budget = 64u << 20;
	f.fail_next = 1;
	void *c = dlk_pool_alloc(p, 1u << 20);
	CHECK_MSG(c == NULL, "with no idle block there is nothing to give back: NULL");
	dlk_pool_free(p, big);
	f.fail_next = 1;
	c = dlk_pool_alloc(p, 2u << 20); /* another class: the idle 1 MiB block cannot serve it */
	dlk_pool_stats(p, &st);
	CHECK_MSG(c != NULL && st.trims == 2, "a transient failure is retried after giving back the idle blocks");

	/* the peak and the end: every block goes back, live ones too */
	CHECK(st.peak_in_use >= st.in_use);
	dlk_pool_delete(p);
	CHECK_MSG(f.used == 0 && f.frees == f.allocs, "delete gives every block back (%d allocations, %d frees)",
	          f.allocs, f.frees);
	dlk_pool_delete(NULL);
	return CHECK_DONE();
}
