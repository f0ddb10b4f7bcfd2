/* The memory pool's bookkeeping (see pool.h). A model holds tens to a few hundred blocks, all
 * allocated before the first step, so plain arrays and linear searches are fast enough and easy
 * to get right; nothing here runs per kernel launch. */
#include "gpu/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct block {
	void *p;
	size_t size; /* the size class */
	int live;
};

struct dlk_pool {
	struct dlk_pool_ops ops;
	struct block *b;
	size_t n, cap;
	struct dlk_pool_stats st;
};

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

static size_t round_up(size_t v, size_t step)
{
	if (v > SIZE_MAX - step)
		return 0; /* no class: the request cannot be served */
	return (v + step - 1) / step * step;
}

size_t dlk_pool_class(size_t bytes)
{
	if (bytes == 0)
		bytes = 1;
	if (bytes <= MIB)
		return round_up(bytes, 512);
	if (bytes <= 64 * MIB)
		return round_up(bytes, MIB);
	return round_up(bytes, 32 * MIB);
}

struct dlk_pool *dlk_pool_new(const struct dlk_pool_ops *ops)
{
	struct dlk_pool *p = calloc(1, sizeof(*p));
	if (p)
		p->ops = *ops;
	return p;
}

static struct block *find_live(const struct dlk_pool *p, const void *ptr)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->b[i].p == ptr && p->b[i].live)
			return &p->b[i];
	return NULL;
}

static void drop(struct dlk_pool *p, size_t i)
{
	p->ops.raw_free(p->b[i].p, p->ops.ctx);
	p->st.held -= p->b[i].size;
	p->b[i] = p->b[--p->n];
}

void dlk_pool_trim(struct dlk_pool *p)
{
	for (size_t i = p->n; i-- > 0;)
		if (!p->b[i].live)
			drop(p, i);
}

static void *hand_out(struct dlk_pool *p, struct block *b)
{
	b->live = 1;
	p->st.in_use += b->size;
	if (p->st.in_use > p->st.peak_in_use)
		p->st.peak_in_use = p->st.in_use;
	p->ops.zero(b->p, b->size, p->ops.ctx);
	return b->p;
}

void *dlk_pool_alloc(struct dlk_pool *p, size_t bytes)
{
	size_t size = dlk_pool_class(bytes);
	void *raw;

	if (!size)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		if (!p->b[i].live && p->b[i].size == size) {
			p->st.reuses++;
			return hand_out(p, &p->b[i]);
		}
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		struct block *nb = realloc(p->b, cap * sizeof(*nb));
		if (!nb)
			return NULL;
		p->b = nb;
		p->cap = cap;
	}
	raw = p->ops.raw_alloc(size, p->ops.ctx);
	if (!raw) {
		/* idle blocks of other classes may be what the device is missing */
		int idle = 0;
		for (size_t i = 0; i < p->n; i++)
			idle |= !p->b[i].live;
		if (!idle)
			return NULL;
		dlk_pool_trim(p);
		p->st.trims++;
		raw = p->ops.raw_alloc(size, p->ops.ctx);
		if (!raw)
			return NULL;
	}
	p->st.raw_allocs++;
	p->st.held += size;
	p->b[p->n] = (struct block){ raw, size, 0 };
	return hand_out(p, &p->b[p->n++]);
}

int dlk_pool_free(struct dlk_pool *p, void *ptr)
{
	struct block *b;

	if (!ptr)
		return 0;
	b = find_live(p, ptr);
	if (!b)
		return -1;
	b->live = 0;
	p->st.in_use -= b->size;
	return 0;
}

size_t dlk_pool_size(const struct dlk_pool *p, const void *ptr)
{
	const struct block *b = find_live(p, ptr);
	return b ? b->size : 0;
}

void dlk_pool_stats(const struct dlk_pool *p, struct dlk_pool_stats *s)
{
	*s = p->st;
	s->blocks = p->n;
	s->idle_blocks = 0;
	for (size_t i = 0; i < p->n; i++)
		s->idle_blocks += !p->b[i].live;
}

void dlk_pool_delete(struct dlk_pool *p)
{
	if (!p)
		return;
	while (p->n)
		drop(p, p->n - 1);
	free(p->b);
	free(p);
}
