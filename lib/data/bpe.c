/* Byte-level BPE: GPT-2's word cutting, training by repeated most-frequent-pair merges, encoding by
 * merge rank, GPT-2's vocab.json/merges.txt, and a text form for bundles. */
#include "lib/data/bpe.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/mem.h"

/* ---- word cutting ---- */

static int is_space(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
static int is_letter(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}
static int is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}
/* 0 letters, 1 digits, 2 others (never called on spaces) */
static int class_of(uint8_t c)
{
	return is_letter(c) ? 0 : is_digit(c) ? 1 : 2;
}

/* The end of the word that starts at pos (pos < len). */
static size_t word_end(const uint8_t *p, size_t len, size_t pos)
{
	size_t q = pos;

	if (p[q] == '\'' && q + 1 < len) {
		uint8_t a = p[q + 1], b = q + 2 < len ? p[q + 2] : 0;
		if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
			return q + 3;
		if (a == 's' || a == 't' || a == 'm' || a == 'd')
			return q + 2;
	}
	if (p[q] == ' ' && q + 1 < len && !is_space(p[q + 1]))
		q++;
	if (!is_space(p[q])) {
		int k = class_of(p[q]);
		for (q++; q < len && !is_space(p[q]) && class_of(p[q]) == k; q++)
			;
		return q;
	}
	/* a run of spaces gives its last one back to the word that follows it */
	for (q = pos; q < len && is_space(p[q]); q++)
		;
	if (q < len && q - pos > 1)
		q--;
	return q;
}

/* ---- a byte-string -> int table (open addressing, FNV-1a) ---- */

struct strtab {
	size_t cap, n;
	uint32_t *off, *len;   /* into arena; len UINT32_MAX = empty slot */
	int64_t *val;
	struct dlk_buf arena;
};

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void strtab_init(struct strtab *t, size_t cap)
{
	memset(t, 0, sizeof(*t));
	t->cap = cap;
	t->off = xmalloc(cap * sizeof(*t->off));
	t->len = xmalloc(cap * sizeof(*t->len));
	t->val = xcalloc(cap, sizeof(*t->val));
	memset(t->len, 0xff, cap * sizeof(*t->len));
}

static void strtab_release(struct strtab *t)
{
	free(t->off), free(t->len), free(t->val);
	dlk_buf_release(&t->arena);
	memset(t, 0, sizeof(*t));
}

static size_t strtab_slot(const struct strtab *t, const uint8_t *p, size_t n)
{
	size_t i = (size_t)hash_bytes(p, n) & (t->cap - 1);
	while (t->len[i] != UINT32_MAX &&
	       (t->len[i] != n || memcmp(t->arena.data + t->off[i], p, n)))
		i = (i + 1) & (t->cap - 1);
	return i;
}

static void strtab_grow(struct strtab *t)
{
	struct strtab g;
	strtab_init(&g, t->cap * 2);
	g.arena = t->arena;
	for (size_t i = 0; i < t->cap; i++) {
		if (t->len[i] == UINT32_MAX)
			continue;
		size_t j = strtab_slot(&g, (const uint8_t *)g.arena.data + t->off[i], t->len[i]);
		g.off[j] = t->off[i], g.len[j] = t->len[i], g.val[j] = t->val[i];
	}
	g.n = t->n;
	free(t->off), free(t->len), free(t->val);
	*t = g;
}

/* the slot of p, added (value 0) when absent */
static size_t strtab_get(struct strtab *t, const uint8_t *p, size_t n)
{
	if ((t->n + 1) * 2 > t->cap)
		strtab_grow(t);
	size_t i = strtab_slot(t, p, n);
	if (t->len[i] == UINT32_MAX) {
		t->off[i] = (uint32_t)t->arena.len;
		t->len[i] = (uint32_t)n;
		dlk_buf_add(&t->arena, p, n);
		t->n++;
	}
	return i;
}

/* ---- a pair -> rank table ---- */

static uint64_t pair_key(int32_t a, int32_t b)
{
	return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}
static size_t pair_hash(uint64_t k, size_t cap)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k & (cap - 1);
}

static void build_pair_index(struct dlk_tokenizer *t)
{
	size_t cap = 16;
	while (cap < (size_t)t->n_merges * 2 + 2)
		cap *= 2;
	t->pair_cap = cap;
	t->pair_keys = xmalloc(cap * sizeof(*t->pair_keys));
	t->pair_rank = xmalloc(cap * sizeof(*t->pair_rank));
	for (size_t i = 0; i < cap; i++)
		t->pair_rank[i] = -1;
	for (int32_t r = 0; r < t->n_merges; r++) {
		uint64_t k = pair_key(t->merges[r].left, t->merges[r].right);
		size_t i = pair_hash(k, cap);
		while (t->pair_rank[i] >= 0 && t->pair_keys[i] != k)
			i = (i + 1) & (cap - 1);
		if (t->pair_rank[i] < 0) { /* the first (lowest) rank of a pair listed twice wins */
			t->pair_keys[i] = k;
			t->pair_rank[i] = r;
		}
	}
}

static int32_t rank_of(const struct dlk_tokenizer *t, int32_t a, int32_t b)
{
	uint64_t k = pair_key(a, b);
	size_t i = pair_hash(k, t->pair_cap);
	while (t->pair_rank[i] >= 0) {
		if (t->pair_keys[i] == k)
			return t->pair_rank[i];
		i = (i + 1) & (t->pair_cap - 1);
	}
	return -1;
}

/* ---- construction ---- */

void dlk_tokenizer_free(struct dlk_tokenizer *t)
{
	if (!t)
		return;
	free(t->merges);
	free(t->tok_off);
	free(t->tok_bytes);
	free(t->pair_keys);
	free(t->pair_rank);
	free(t);
}

/* The byte tokenizer's ids plus n_merges merges: tables sized, bytes of the first 257 ids set. */
static struct dlk_tokenizer *new_dlk_ids(int32_t n_merges)
{
	struct dlk_tokenizer *t = xcalloc(1, sizeof(*t));
	t->vocab_size = 257 + n_merges;
	t->pad_id = 0;
	for (int b = 0; b < 256; b++)
		t->byte_id[b] = b + 1;
	t->merges = xcalloc((size_t)n_merges + 1, sizeof(*t->merges));
	t->n_merges = n_merges;
	return t;
}

/* tok_off/tok_bytes from byte_id and the merges (ids without either get no bytes). */
static void build_token_bytes(struct dlk_tokenizer *t)
{
	uint32_t *len = xcalloc((size_t)t->vocab_size, sizeof(*len));
	size_t total = 0;
	for (int b = 0; b < 256; b++)
		len[t->byte_id[b]] = 1;
	for (int32_t r = 0; r < t->n_merges; r++)
		len[t->merges[r].result] = len[t->merges[r].left] + len[t->merges[r].right];
	t->tok_off = xmalloc(((size_t)t->vocab_size + 1) * sizeof(*t->tok_off));
	for (int32_t i = 0; i < t->vocab_size; i++) {
		t->tok_off[i] = (uint32_t)total;
		total += len[i];
	}
	t->tok_off[t->vocab_size] = (uint32_t)total;
	t->tok_bytes = xmalloc(total + 1);
	for (int b = 0; b < 256; b++)
		t->tok_bytes[t->tok_off[t->byte_id[b]]] = (uint8_t)b;
	for (int32_t r = 0; r < t->n_merges; r++) {
		const struct dlk_bpe_merge *m = &t->merges[r];
		uint32_t ll = t->tok_off[m->left + 1] - t->tok_off[m->left];
		uint32_t rl = t->tok_off[m->right + 1] - t->tok_off[m->right];
		memcpy(t->tok_bytes + t->tok_off[m->result], t->tok_bytes + t->tok_off[m->left], ll);
		memcpy(t->tok_bytes + t->tok_off[m->result] + ll, t->tok_bytes + t->tok_off[m->right], rl);
	}
	free(len);
}

struct dlk_tokenizer *dlk_tokenizer_byte(void)
{
	struct dlk_tokenizer *t = new_dlk_ids(0);
	build_token_bytes(t);
	build_pair_index(t);
	return t;
}

/* ---- training ---- */

struct dlk_bpe_counter {
	struct strtab words;  /* word bytes -> count */
};

struct dlk_bpe_counter *dlk_bpe_counter_new(void)
{
	struct dlk_bpe_counter *c = xcalloc(1, sizeof(*c));
	strtab_init(&c->words, 1 << 12);
	return c;
}

void dlk_bpe_counter_free(struct dlk_bpe_counter *c)
{
	if (!c)
		return;
	strtab_release(&c->words);
	free(c);
}

void dlk_bpe_counter_add(struct dlk_bpe_counter *c, const void *text, size_t len)
{
	const uint8_t *p = text;
	for (size_t pos = 0; pos < len;) {
		size_t end = word_end(p, len, pos);
		size_t slot = strtab_get(&c->words, p + pos, end - pos); /* may move val */
		c->words.val[slot]++;
		pos = end;
	}
}

/* What the trainer keeps of one distinct pair: its count over all words, and the words it may
 * occur in (appended whenever a rewrite creates it there; stale entries are checked away). */
struct pair_stat {
	uint64_t key;
	int64_t count;
	uint32_t *words;
	uint32_t n_words, cap_words;
};

struct pair_map {
	size_t cap, n;
	int32_t *slot;           /* index into stats, -1 empty */
	struct pair_stat *stats;
	size_t n_stats, cap_stats;
};

static void pmap_init(struct pair_map *m)
{
	memset(m, 0, sizeof(*m));
	m->cap = 1 << 16;
	m->slot = xmalloc(m->cap * sizeof(*m->slot));
	memset(m->slot, 0xff, m->cap * sizeof(*m->slot));
}

static struct pair_stat *pmap_get(struct pair_map *m, uint64_t key)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap * 2;
		int32_t *slot = xmalloc(cap * sizeof(*slot));
		memset(slot, 0xff, cap * sizeof(*slot));
		for (size_t s = 0; s < m->n_stats; s++) {
			size_t i = pair_hash(m->stats[s].key, cap);
			while (slot[i] >= 0)
				i = (i + 1) & (cap - 1);
			slot[i] = (int32_t)s;
		}
		free(m->slot);
		m->slot = slot;
		m->cap = cap;
	}
	size_t i = pair_hash(key, m->cap);
	while (m->slot[i] >= 0) {
		if (m->stats[m->slot[i]].key == key)
			return &m->stats[m->slot[i]];
		i = (i + 1) & (m->cap - 1);
	}
	if (m->n_stats == m->cap_stats) {
		m->cap_stats = m->cap_stats ? m->cap_stats * 2 : 1024;
		m->stats = xrealloc(m->stats, m->cap_stats * sizeof(*m->stats));
	}
	memset(&m->stats[m->n_stats], 0, sizeof(m->stats[0]));
	m->stats[m->n_stats].key = key;
	m->slot[i] = (int32_t)m->n_stats;
	m->n++;
	return &m->stats[m->n_stats++];
}

static void pmap_release(struct pair_map *m)
{
	for (size_t s = 0; s < m->n_stats; s++)
		free(m->stats[s].words);
	free(m->stats);
	free(m->slot);
}

static void stat_add_word(struct pair_stat *s, uint32_t w)
{
	if (s->n_words && s->words[s->n_words - 1] == w)
		return;
	if (s->n_words == s->cap_words) {
		s->cap_words = s->cap_words ? s->cap_words * 2 : 4;
		s->words = xrealloc(s->words, s->cap_words * sizeof(*s->words));
	}
	s->words[s->n_words++] = w;
}

/* a max-heap of (count, key): the largest count first, then the smallest key */
struct heap_ent {
	int64_t count;
	uint64_t key;
};
struct heap {
	struct heap_ent *v;
	size_t n, cap;
};

static int heap_before(const struct heap_ent *a, const struct heap_ent *b)
{
	return a->count > b->count || (a->count == b->count && a->key < b->key);
}

static void heap_push(struct heap *h, int64_t count, uint64_t key)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 1024;
		h->v = xrealloc(h->v, h->cap * sizeof(*h->v));
	}
	size_t i = h->n++;
	h->v[i].count = count;
	h->v[i].key = key;
	while (i && heap_before(&h->v[i], &h->v[(i - 1) / 2])) {
		struct heap_ent t = h->v[i];
		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static struct heap_ent heap_pop(struct heap *h)
{
	struct heap_ent top = h->v[0];
	h->v[0] = h->v[--h->n];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && heap_before(&h->v[l], &h->v[m]))
			m = l;
		if (r < h->n && heap_before(&h->v[r], &h->v[m]))
			m = r;
		if (m == i)
			break;
		struct heap_ent t = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = t;
		i = m;
	}
	return top;
}

struct word {
	int32_t *sym;
	uint32_t n;
	int64_t count;
	int32_t seen;   /* the last merge that rewrote it */
};

/* adds delta * count for every adjacent pair of w, noting w under pairs that contain `fresh` */
static void count_pairs(struct pair_map *m, struct heap *h, const struct word *w, uint32_t wi, int64_t delta,
                        int32_t fresh)
{
	for (uint32_t i = 0; i + 1 < w->n; i++) {
		struct pair_stat *s = pmap_get(m, pair_key(w->sym[i], w->sym[i + 1]));
		s->count += delta * w->count;
		if (delta > 0) {
			if (fresh < 0 || w->sym[i] == fresh || w->sym[i + 1] == fresh)
				stat_add_word(s, wi);
			if (fresh >= 0 && (w->sym[i] == fresh || w->sym[i + 1] == fresh))
				heap_push(h, s->count, s->key);
		}
	}
}

struct dlk_tokenizer *dlk_bpe_counter_train(struct dlk_bpe_counter *c, int vocab_size, struct dlk_err *err)
{
	struct strtab *wt = &c->words;
	struct pair_map m;
	struct heap h = { NULL, 0, 0 };
	struct word *words;
	struct dlk_tokenizer *t;
	uint32_t nw = 0;
	int32_t want, done = 0;

	if (vocab_size < 258) {
		dlk_errf(err, DLK_EXIT_CONFIG, "a BPE vocabulary needs at least 258 ids (257 for padding and bytes), not %d",
		         vocab_size);
		return NULL;
	}
	want = vocab_size - 257;
	t = new_dlk_ids(want);
	words = xcalloc(wt->n + 1, sizeof(*words));
	for (size_t i = 0; i < wt->cap; i++) {
		if (wt->len[i] == UINT32_MAX)
			continue;
		struct word *w = &words[nw];
		const uint8_t *p = (const uint8_t *)wt->arena.data + wt->off[i];
		w->n = wt->len[i];
		w->sym = xmalloc(((size_t)w->n + 1) * sizeof(*w->sym));
		for (uint32_t k = 0; k < w->n; k++)
			w->sym[k] = (int32_t)p[k] + 1;
		w->count = wt->val[i];
		w->seen = -1;
		nw++;
	}
	pmap_init(&m);
	for (uint32_t wi = 0; wi < nw; wi++)
		count_pairs(&m, &h, &words[wi], wi, 1, -1);
	for (size_t s = 0; s < m.n_stats; s++)
		if (m.stats[s].count > 0)
			heap_push(&h, m.stats[s].count, m.stats[s].key);

	while (done < want && h.n) {
		struct heap_ent top = heap_pop(&h);
		struct pair_stat *s = pmap_get(&m, top.key);
		if (s->count != top.count) {
			if (s->count > 0)
				heap_push(&h, s->count, s->key);
			continue;
		}
		if (top.count < 2)
			break;
		int32_t a = (int32_t)(top.key >> 32), b = (int32_t)(uint32_t)top.key, r = 257 + done;
		t->merges[done].left = a;
		t->merges[done].right = b;
		t->merges[done].result = r;
		/* the word list may grow (and move) while the words are rewritten: walk a copy */
		uint32_t nlist = s->n_words, *list = xmalloc(((size_t)nlist + 1) * sizeof(*list));
		memcpy(list, s->words, (size_t)nlist * sizeof(*list));
		free(s->words);
		s->words = NULL;
		s->n_words = s->cap_words = 0;
		for (uint32_t li = 0; li < nlist; li++) {
			struct word *w = &words[list[li]];
			uint32_t k, o;
			if (w->seen == done)
				continue;
			for (k = 0; k + 1 < w->n && !(w->sym[k] == a && w->sym[k + 1] == b); k++)
				;
			if (k + 1 >= w->n)
				continue; /* stale: an earlier merge took the pair away */
			w->seen = done;
			count_pairs(&m, &h, w, list[li], -1, -1);
			for (k = o = 0; k < w->n; k++) {
				if (k + 1 < w->n && w->sym[k] == a && w->sym[k + 1] == b) {
					w->sym[o++] = r;
					k++;
				} else {
					w->sym[o++] = w->sym[k];
				}
			}
			w->n = o;
			count_pairs(&m, &h, w, list[li], 1, r);
		}
		free(list);
		done++;
	}
	t->n_merges = done;
	t->vocab_size = 257 + done;
	build_token_bytes(t);
	build_pair_index(t);
	for (uint32_t wi = 0; wi < nw; wi++)
		free(words[wi].sym);
	free(words);
	free(h.v);
	pmap_release(&m);
	return t;
}

struct dlk_tokenizer *dlk_bpe_train(const void *text, size_t len, int vocab_size, struct dlk_err *err)
{
	struct dlk_bpe_counter *c = dlk_bpe_counter_new();
	struct dlk_tokenizer *t;
	dlk_bpe_counter_add(c, text, len);
	t = dlk_bpe_counter_train(c, vocab_size, err);
	dlk_bpe_counter_free(c);
	return t;
}

/* ---- encoding ---- */

static size_t encode_word(const struct dlk_tokenizer *t, const uint8_t *p, size_t n, int32_t *sym)
{
	for (size_t i = 0; i < n; i++)
		sym[i] = t->byte_id[p[i]];
	while (t->n_merges && n > 1) {
		int32_t best = -1;
		for (size_t i = 0; i + 1 < n; i++) {
			int32_t r = rank_of(t, sym[i], sym[i + 1]);
			if (r >= 0 && (best < 0 || r < best))
				best = r;
		}
		if (best < 0)
			break;
		const struct dlk_bpe_merge *m = &t->merges[best];
		size_t o = 0;
		for (size_t i = 0; i < n; i++) {
			if (i + 1 < n && sym[i] == m->left && sym[i + 1] == m->right) {
				sym[o++] = m->result;
				i++;
			} else {
				sym[o++] = sym[i];
			}
		}
		n = o;
	}
	return n;
}

size_t dlk_tokenizer_encode(const struct dlk_tokenizer *t, const void *text, size_t len, int32_t *ids, size_t max)
{
	const uint8_t *p = text;
	int32_t *sym = NULL;
	size_t cap = 0, total = 0;

	for (size_t pos = 0; pos < len;) {
		size_t end = t->n_merges ? word_end(p, len, pos) : len, n;
		if (end - pos > cap) {
			cap = end - pos;
			sym = xrealloc(sym, cap * sizeof(*sym));
		}
		n = encode_word(t, p + pos, end - pos, sym);
		for (size_t i = 0; i < n; i++, total++)
			if (total < max)
				ids[total] = sym[i];
		pos = end;
	}
	free(sym);
	return total;
}

void dlk_tokenizer_decode(const struct dlk_tokenizer *t, const int32_t *ids, size_t n, struct dlk_buf *out)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= 0 && ids[i] < t->vocab_size)
			dlk_buf_add(out, t->tok_bytes + t->tok_off[ids[i]], t->tok_off[ids[i] + 1] - t->tok_off[ids[i]]);
}

/* ---- GPT-2 files ---- */

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the others for 256 + k */
static void gpt2_alphabet(uint32_t cp_of[256])
{
	int k = 0;
	for (int b = 0; b < 256; b++) {
		int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
		cp_of[b] = keep ? (uint32_t)b : (uint32_t)(256 + k++);
	}
}

/* A token in GPT-2's alphabet back to its bytes (into out, which has room for len); -1 when it
 * is not valid UTF-8 of that alphabet. */
static long gpt2_bytes(const uint8_t *s, size_t len, const int16_t byte_of[324], uint8_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		if (s[i] < 0x80) {
			cp = s[i++];
		} else if ((s[i] & 0xE0) == 0xC0 && i + 1 < len && (s[i + 1] & 0xC0) == 0x80) {
			cp = (uint32_t)(s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
			i += 2;
		} else {
			return -1;
		}
		if (cp >= 324 || byte_of[cp] < 0)
			return -1;
		out[n++] = (uint8_t)byte_of[cp];
	}
	return (long)n;
}

/* the next line of a text file: [*pos, end) without its newline (and \r); *pos moves past it */
static int next_line(const char *buf, size_t len, size_t *pos, const char **line, size_t *n)
{
	if (*pos >= len)
		return 0;
	const char *s = buf + *pos, *nl = memchr(s, '\n', len - *pos);
	size_t l = nl ? (size_t)(nl - s) : len - *pos;
	*pos += l + (nl ? 1 : 0);
	if (l && s[l - 1] == '\r')
		l--;
	*line = s;
	*n = l;
	return 1;
}

int dlk_bpe_read_gpt2(const void *vocab, size_t vocab_len, const char *vocab_name, const void *merges,
                      size_t merges_len, const char *merges_name, struct dlk_tokenizer **out, struct dlk_err *err)
{
	uint32_t cp_of[256];
	int16_t byte_of[324];
	cJSON *root = cJSON_ParseWithLength(vocab, vocab_len), *it;
	struct strtab ids;         /* token bytes -> id + 1 */
	struct dlk_tokenizer *t = NULL;
	struct dlk_bpe_merge *mv = NULL;
	int32_t max_id = -1, nm = 0, cap = 0;
	uint8_t *tmp = NULL;
	size_t pos = 0, line_no = 0, tmp_cap = 0;
	const char *line;
	size_t n;
	int ret = -1;

	*out = NULL;
	strtab_init(&ids, 1 << 10);
	gpt2_alphabet(cp_of);
	memset(byte_of, 0xff, sizeof(byte_of));
	for (int b = 0; b < 256; b++)
		byte_of[cp_of[b]] = (int16_t)b;
	if (!cJSON_IsObject(root)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': not a JSON object of tokens and ids", vocab_name);
		goto out;
	}
	cJSON_ArrayForEach(it, root) {
		size_t kl = strlen(it->string);
		long bl;
		if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (1 << 24) ||
		    it->valuedouble != (double)(int32_t)it->valuedouble) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': token '%.60s': the id must be an integer from 0 to %d",
			         vocab_name, it->string, (1 << 24) - 1);
			goto out;
		}
		if (kl > tmp_cap) {
			tmp_cap = kl;
			tmp = xrealloc(tmp, tmp_cap);
		}
		if ((bl = gpt2_bytes((const uint8_t *)it->string, kl, byte_of, tmp)) <= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': token '%.60s' is not written in GPT-2's byte alphabet",
			         vocab_name, it->string);
			goto out;
		}
		size_t slot = strtab_get(&ids, tmp, (size_t)bl);
		if (ids.val[slot]) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': token '%.60s' is listed twice", vocab_name, it->string);
			goto out;
		}
		ids.val[slot] = (int64_t)it->valueint + 1;
		if (it->valueint > max_id)
			max_id = it->valueint;
	}
	{
		/* one token an id: two tokens sharing one would decode to the wrong bytes */
		uint8_t *seen = xcalloc((size_t)max_id + 2, 1);
		int32_t dup = -1;
		for (size_t i = 0; i < ids.cap && dup < 0; i++)
			if (ids.len[i] != UINT32_MAX && ids.val[i] && seen[ids.val[i] - 1]++)
				dup = (int32_t)(ids.val[i] - 1);
		free(seen);
		if (dup >= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': id %d is given to two tokens", vocab_name, (int)dup);
			goto out;
		}
	}
	t = xcalloc(1, sizeof(*t));
	t->bpe = 1;
	t->pad_id = max_id + 1;
	t->vocab_size = max_id + 2;
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		size_t slot = strtab_get(&ids, &c, 1);
		if (!ids.val[slot]) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': byte 0x%02x has no token (GPT-2 vocabularies hold all 256)",
			         vocab_name, b);
			goto out;
		}
		t->byte_id[b] = (int32_t)(ids.val[slot] - 1);
	}
	while (next_line(merges, merges_len, &pos, &line, &n)) {
		const char *sp;
		long la, lb;
		uint8_t *joined;
		line_no++;
		if (!n || (line_no == 1 && n >= 8 && !memcmp(line, "#version", 8)))
			continue;
		sp = memchr(line, ' ', n);
		if (!sp || sp == line || sp == line + n - 1 || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - line))) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: expected two tokens separated by one space", merges_name, line_no);
			goto out;
		}
		if (n > tmp_cap) {
			tmp_cap = n;
			tmp = xrealloc(tmp, tmp_cap);
		}
		la = gpt2_bytes((const uint8_t *)line, (size_t)(sp - line), byte_of, tmp);
		lb = la < 0 ? -1 : gpt2_bytes((const uint8_t *)sp + 1, n - (size_t)(sp + 1 - line), byte_of, tmp + la);
		if (la <= 0 || lb <= 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: a token not written in GPT-2's byte alphabet", merges_name, line_no);
			goto out;
		}
		joined = tmp;
		size_t sa = strtab_get(&ids, joined, (size_t)la), sb, sr;
		int64_t ia = ids.val[sa];
		sb = strtab_get(&ids, joined + la, (size_t)lb);
		int64_t ib = ids.val[sb];
		sr = strtab_get(&ids, joined, (size_t)(la + lb));
		int64_t ir = ids.val[sr];
		if (!ia || !ib || !ir) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: '%.*s' %s not in %s", merges_name, line_no, (int)(n > 80 ? 80 : n),
			         line, !ia || !ib ? "has a part that is" : "makes a token that is", vocab_name);
			dlk_err_hint(err, "vocab.json and merges.txt must come from the same tokenizer");
			goto out;
		}
		if (nm == cap) {
			cap = cap ? cap * 2 : 1024;
			mv = xrealloc(mv, (size_t)cap * sizeof(*mv));
		}
		mv[nm].left = (int32_t)(ia - 1);
		mv[nm].right = (int32_t)(ib - 1);
		mv[nm].result = (int32_t)(ir - 1);
		nm++;
	}
	t->merges = mv;
	mv = NULL;
	t->n_merges = nm;
	/* every id's bytes, from the vocabulary itself (ids no merge makes still decode) */
	t->tok_off = xcalloc((size_t)t->vocab_size + 1, sizeof(*t->tok_off));
	{
		uint32_t *len = xcalloc((size_t)t->vocab_size, sizeof(*len)), *at = xcalloc((size_t)t->vocab_size, sizeof(*at));
		size_t total = 0;
		for (size_t i = 0; i < ids.cap; i++)
			if (ids.len[i] != UINT32_MAX && ids.val[i])
				len[ids.val[i] - 1] = ids.len[i], at[ids.val[i] - 1] = ids.off[i];
		for (int32_t i = 0; i < t->vocab_size; i++) {
			t->tok_off[i] = (uint32_t)total;
			total += len[i];
		}
		t->tok_off[t->vocab_size] = (uint32_t)total;
		t->tok_bytes = xmalloc(total + 1);
		for (int32_t i = 0; i < t->vocab_size; i++)
			memcpy(t->tok_bytes + t->tok_off[i], ids.arena.data + at[i], len[i]);
		free(len);
		free(at);
	}
	build_pair_index(t);
	*out = t;
	t = NULL;
	ret = 0;
out:
	dlk_tokenizer_free(t);
	free(mv);
	free(tmp);
	strtab_release(&ids);
	cJSON_Delete(root);
	return ret;
}

/* ---- the text form ---- */

void dlk_tokenizer_save(const struct dlk_tokenizer *t, struct dlk_buf *out)
{
	dlk_buf_addf(out, "dlk-tokenizer 1\nkind %s\nvocab_size %d\npad %d\nbytes", t->bpe || t->n_merges ? "bpe" : "byte",
	             (int)t->vocab_size, (int)t->pad_id);
	for (int b = 0; b < 256; b++)
		dlk_buf_addf(out, " %d", (int)t->byte_id[b]);
	dlk_buf_addf(out, "\nmerges %d\n", (int)t->n_merges);
	for (int32_t r = 0; r < t->n_merges; r++)
		dlk_buf_addf(out, "%d %d %d\n", (int)t->merges[r].left, (int)t->merges[r].right, (int)t->merges[r].result);
}

/* reads a decimal integer in [0, hi] at *s (moving past it and the spaces after it) */
static int read_int(const char **s, const char *end, long hi, long *v)
{
	const char *p = *s;
	long x = 0;
	if (p >= end || *p < '0' || *p > '9')
		return -1;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		x = x * 10 + (*p - '0');
		if (x > hi)
			return -1;
	}
	while (p < end && *p == ' ')
		p++;
	*s = p;
	*v = x;
	return 0;
}

int dlk_tokenizer_load(const void *buf, size_t len, const char *name, struct dlk_tokenizer **out, struct dlk_err *err)
{
	const char *line, *s, *end;
	size_t pos = 0, n, line_no = 0;
	long v, vocab = 0, pad = 0, nm = 0;
	int kind_bpe = 0;
	struct dlk_tokenizer *t = NULL;
	static const char *const keys[] = { "dlk-tokenizer ", "kind ", "vocab_size ", "pad ", "bytes ", "merges " };

	*out = NULL;
	for (int k = 0; k < 6; k++) {
		line_no++;
		if (!next_line(buf, len, &pos, &line, &n) || n < strlen(keys[k]) || memcmp(line, keys[k], strlen(keys[k])))
			goto bad;
		s = line + strlen(keys[k]);
		end = line + n;
		switch (k) {
		case 0:
			if (read_int(&s, end, 1, &v) || v != 1 || s != end)
				goto bad;
			break;
		case 1:
			if ((size_t)(end - s) == 3 && !memcmp(s, "bpe", 3))
				kind_bpe = 1;
			else if (!((size_t)(end - s) == 4 && !memcmp(s, "byte", 4)))
				goto bad;
			break;
		case 2:
			if (read_int(&s, end, 1 << 24, &vocab) || s != end || vocab < 2)
				goto bad;
			break;
		case 3:
			if (read_int(&s, end, vocab - 1, &pad) || s != end)
				goto bad;
			t = xcalloc(1, sizeof(*t));
			t->bpe = kind_bpe;
			t->vocab_size = (int32_t)vocab;
			t->pad_id = (int32_t)pad;
			break;
		case 4:
			for (int b = 0; b < 256; b++) {
				if (read_int(&s, end, vocab - 1, &v) || v == pad)
					goto bad;
				t->byte_id[b] = (int32_t)v;
			}
			if (s != end)
				goto bad;
			break;
		case 5:
			if (read_int(&s, end, vocab, &nm) || s != end || (!kind_bpe && nm))
				goto bad;
			t->merges = xcalloc((size_t)nm + 1, sizeof(*t->merges));
			break;
		}
	}
	for (long r = 0; r < nm; r++) {
		long a, b, c;
		line_no++;
		if (!next_line(buf, len, &pos, &line, &n))
			goto bad;
		s = line;
		end = line + n;
		if (read_int(&s, end, vocab - 1, &a) || read_int(&s, end, vocab - 1, &b) || read_int(&s, end, vocab - 1, &c) ||
		    s != end || a == pad || b == pad || c == pad)
			goto bad;
		t->merges[r].left = (int32_t)a;
		t->merges[r].right = (int32_t)b;
		t->merges[r].result = (int32_t)c;
		t->n_merges = (int32_t)(r + 1);
	}
	/* a token's bytes must be defined before a merge uses it (bytes first, then in rank order),
	 * and each id made once: what build_token_bytes() relies on */
	{
		uint8_t *made = xcalloc((size_t)vocab, 1);
		int ok = 1;
		for (int b = 0; b < 256 && ok; b++)
			ok = !made[t->byte_id[b]]++;
		for (int32_t r = 0; r < t->n_merges && ok; r++) {
			const struct dlk_bpe_merge *m = &t->merges[r];
			ok = made[m->left] && made[m->right] && !made[m->result]++;
		}
		free(made);
		if (!ok) {
			line_no = 0;
			goto bad;
		}
	}
	build_token_bytes(t);
	build_pair_index(t);
	*out = t;
	return 0;
bad:
	dlk_tokenizer_free(t);
	if (line_no)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: not a dlk tokenizer line (the file is damaged)", name, line_no);
	return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': a merge uses a token made later or makes one twice", name);
}
