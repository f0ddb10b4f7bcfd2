/* jd_parse(): yajl events -> an arena tree whose arrays keep their numbers in one flat pool. */
#include "lib/serve/jsondoc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "lib/util/mem.h"

#define JD_CHUNK (64u << 10)
#define JD_STACK 1100 /* above the largest max_depth the project file allows (1024) */

struct jd_chunk {
	struct jd_chunk *next;
	size_t size;
	/* the memory follows; max_align_t keeps it aligned for any node */
	_Alignas(max_align_t) unsigned char mem[];
};

static void *arena_alloc(struct jd_doc *d, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n > d->left) {
		size_t size = n > JD_CHUNK ? n : JD_CHUNK;
		struct jd_chunk *c = xmalloc(sizeof(*c) + size);
		c->next = d->chunks;
		c->size = size;
		d->chunks = c;
		d->cur = (char *)c->mem;
		d->left = size;
	}
	void *p = d->cur;
	d->cur += n;
	d->left -= n;
	return p;
}

struct builder {
	struct jd_doc *doc;
	const struct jd_limits *lim;
	struct jd_value *stack[JD_STACK]; /* open arrays and objects */
	int depth;
	const unsigned char *key;         /* the pending key of the innermost object */
	size_t key_len;
	size_t n_values;
	char why[160];                    /* why a callback stopped the parse */
};

static char *arena_strdup(struct jd_doc *d, const unsigned char *s, size_t len)
{
	char *p = arena_alloc(d, len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

static int count_value(struct builder *b)
{
	if (b->lim->max_values && ++b->n_values > b->lim->max_values) {
		snprintf(b->why, sizeof(b->why), "more than %zu values", b->lim->max_values);
		return 0;
	}
	return 1;
}

/* Links a new node into the open container (or makes it the root). */
static struct jd_value *add_node(struct builder *b, enum jd_type type)
{
	struct jd_value *v = arena_alloc(b->doc, sizeof(*v));
	memset(v, 0, sizeof(*v));
	v->type = type;
	if (b->depth == 0) {
		b->doc->root = v;
		return v;
	}
	struct jd_value *parent = b->stack[b->depth - 1];
	if (parent->type == JD_OBJECT) {
		v->key = (const char *)b->key;
		v->key_len = b->key_len;
	}
	if (parent->last)
		parent->last->next = v;
	else
		parent->first = v;
	parent->last = v;
	parent->n_items++;
	/* an array holding anything but numbers and numeric arrays is not a tensor */
	if (parent->type == JD_ARRAY && type != JD_ARRAY)
		parent->numeric = 0;
	return v;
}

/* JSON numbers as yajl has checked their syntax: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
 * Up to 15 significant digits and a power of ten within 10^22 convert exactly through one double
 * multiplication or division (Clinger's fast path); anything else goes through strtod, which is
 * correctly rounded (dlk never calls setlocale, so the decimal point is '.'). */
static double parse_number(const char *s, size_t len)
{
	static const double pow10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	const char *p = s, *end = s + len;
	int neg = 0, digits = 0, exp10 = 0;
	uint64_t m = 0;

	if (p < end && *p == '-')
		neg = 1, p++;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (m || *p != '0')
			digits++;
		m = m * 10 + (uint64_t)(*p - '0');
		if (digits > 15)
			goto slow;
	}
	if (p < end && *p == '.') {
		for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
			if (m || *p != '0')
				digits++;
			m = m * 10 + (uint64_t)(*p - '0');
			exp10--;
			if (digits > 15)
				goto slow;
		}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		int eneg = 0, e = 0;
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = *p++ == '-';
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			e = e * 10 + (*p - '0');
			if (e > 10000)
				goto slow;
		}
		exp10 += eneg ? -e : e;
	}
	if (p != end)
		goto slow;
	if (exp10 < -22 || exp10 > 22)
		goto slow;
	double v = (double)m;
	v = exp10 < 0 ? v / pow10[-exp10] : v * pow10[exp10];
	return neg ? -v : v;
slow:;
	char tmp[64];
	if (len < sizeof(tmp)) {
		memcpy(tmp, s, len);
		tmp[len] = '\0';
		return strtod(tmp, NULL);
	}
	char *big = xstrndup(s, len);
	double v2 = strtod(big, NULL);
	free(big);
	return v2;
}

static int on_number(void *ctx, const char *s, size_t len)
{
	struct builder *b = ctx;
	double v = parse_number(s, len);

	if (!count_value(b))
		return 0;
	if (b->depth > 0 && b->stack[b->depth - 1]->type == JD_ARRAY) {
		struct jd_doc *d = b->doc;
		struct jd_value *arr = b->stack[b->depth - 1];
		if (d->n_nums == d->cap_nums) {
			d->cap_nums = d->cap_nums ? d->cap_nums * 2 : 1024;
			d->nums = xrealloc(d->nums, d->cap_nums * sizeof(double));
		}
		d->nums[d->n_nums++] = v;
		arr->n_items++;
		arr->n_numbers++;
		return 1;
	}
	struct jd_value *n = add_node(b, JD_NUMBER);
	n->num = v;
	return 1;
}

static int on_null(void *ctx)
{
	struct builder *b = ctx;
	if (!count_value(b))
		return 0;
	add_node(b, JD_NULL);
	return 1;
}

static int on_bool(void *ctx, int val)
{
	struct builder *b = ctx;
	if (!count_value(b))
		return 0;
	add_node(b, JD_BOOL)->boolean = !!val;
	return 1;
}

static int on_string(void *ctx, const unsigned char *s, size_t len)
{
	struct builder *b = ctx;
	if (!count_value(b))
		return 0;
	struct jd_value *v = add_node(b, JD_STRING);
	v->str = arena_strdup(b->doc, s, len);
	v->len = len;
	return 1;
}

static int open_container(struct builder *b, enum jd_type type)
{
	if (!count_value(b))
		return 0;
	if (b->depth >= b->lim->max_depth || b->depth >= JD_STACK) {
		snprintf(b->why, sizeof(b->why), "JSON nesting deeper than %d", b->lim->max_depth);
		return 0;
	}
	struct jd_value *v = add_node(b, type);
	if (type == JD_ARRAY) {
		v->numeric = 1;
		v->leaf_begin = v->leaf_end = b->doc->n_nums;
	}
	b->stack[b->depth++] = v;
	return 1;
}

static int on_start_map(void *ctx) { return open_container(ctx, JD_OBJECT); }
static int on_start_array(void *ctx) { return open_container(ctx, JD_ARRAY); }

static int on_key(void *ctx, const unsigned char *key, size_t len)
{
	struct builder *b = ctx;
	/* yajl's pointer may not outlive this callback (an escaped key is decoded in its buffer) */
	b->key = (const unsigned char *)arena_strdup(b->doc, key, len);
	b->key_len = len;
	return 1;
}

static int close_container(struct builder *b)
{
	struct jd_value *v = b->stack[--b->depth];
	if (v->type == JD_ARRAY) {
		v->leaf_end = b->doc->n_nums;
		if (b->depth > 0 && b->stack[b->depth - 1]->type == JD_ARRAY && !v->numeric)
			b->stack[b->depth - 1]->numeric = 0;
	}
	return 1;
}

static int on_end(void *ctx) { return close_container(ctx); }

static const yajl_callbacks callbacks = {
	on_null, on_bool, NULL, NULL, on_number, on_string, on_start_map, on_key, on_end, on_start_array, on_end,
};

int jd_parse(struct jd_doc *doc, const char *text, size_t len, const struct jd_limits *lim, char *msg, size_t msg_len)
{
	struct builder *b = xcalloc(1, sizeof(*b));
	yajl_handle h;
	yajl_status st;
	int ret = -1;

	*doc = (struct jd_doc)JD_DOC_INIT;
	b->doc = doc;
	b->lim = lim;
	h = yajl_alloc(&callbacks, NULL, b);
	st = yajl_parse(h, (const unsigned char *)text, len);
	if (st == yajl_status_ok)
		st = yajl_complete_parse(h);
	if (st == yajl_status_client_canceled) {
		snprintf(msg, msg_len, "%s at byte %zu", b->why, yajl_get_bytes_consumed(h));
	} else if (st != yajl_status_ok) {
		unsigned char *e = yajl_get_error(h, 0, (const unsigned char *)text, len);
		size_t at = yajl_get_bytes_consumed(h);
		/* yajl's words ("parse error: premature EOF"), without its trailing newline */
		char *nl = e ? strchr((char *)e, '\n') : NULL;
		if (nl)
			*nl = '\0';
		snprintf(msg, msg_len, "invalid JSON at byte %zu: %s", at, e ? (char *)e : "parse error");
		if (e)
			yajl_free_error(h, e);
	} else if (!doc->root) {
		snprintf(msg, msg_len, "empty body: expected a JSON object");
	} else {
		ret = 0;
	}
	yajl_free(h);
	free(b);
	if (ret)
		jd_release(doc);
	return ret;
}

void jd_release(struct jd_doc *doc)
{
	struct jd_chunk *c = doc->chunks;
	while (c) {
		struct jd_chunk *n = c->next;
		free(c);
		c = n;
	}
	free(doc->nums);
	*doc = (struct jd_doc)JD_DOC_INIT;
}

const struct jd_value *jd_get(const struct jd_value *obj, const char *key)
{
	if (!obj || obj->type != JD_OBJECT)
		return NULL;
	size_t kl = strlen(key);
	for (const struct jd_value *m = obj->first; m; m = m->next)
		if (m->key_len == kl && !memcmp(m->key, key, kl))
			return m;
	return NULL;
}

int jd_int(const struct jd_value *v, long long lo, long long hi, long long *out)
{
	if (!v || v->type != JD_NUMBER || !isfinite(v->num) || v->num != floor(v->num) || v->num < (double)lo ||
	    v->num > (double)hi)
		return 0;
	*out = (long long)v->num;
	return 1;
}

/* rank of arr's first-item chain and its dims; 0 when it is not a numeric array */
static int shape_of(const struct jd_value *arr, long long *dims, int max_rank)
{
	int r = 0;
	while (arr && arr->type == JD_ARRAY && arr->numeric) {
		if (r == max_rank)
			return -1;
		dims[r++] = (long long)arr->n_items;
		if (arr->n_numbers)
			return arr->n_numbers == arr->n_items ? r : -1;
		arr = arr->first;
	}
	return arr ? -1 : r; /* an empty array ends the chain */
}

static int same_shape(const struct jd_value *arr, const long long *dims, int rank)
{
	if (!arr || arr->type != JD_ARRAY || (long long)arr->n_items != dims[0])
		return 0;
	if (rank == 1)
		return arr->n_numbers == arr->n_items;
	if (arr->n_numbers)
		return 0;
	for (const struct jd_value *c = arr->first; c; c = c->next)
		if (!same_shape(c, dims + 1, rank - 1))
			return 0;
	return 1;
}

int jd_shape(const struct jd_value *arr, long long *dims, int max_rank, int *rank)
{
	int r = shape_of(arr, dims, max_rank);
	*rank = 0;
	if (r <= 0 || !same_shape(arr, dims, r))
		return 0;
	*rank = r;
	return 1;
}

void jd_write_string(struct dlk_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;

	dlk_buf_addc(b, '"');
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		dlk_buf_add(b, s + start, i - start);
		start = i + 1;
		switch (c) {
		case '"': dlk_buf_adds(b, "\\\""); break;
		case '\\': dlk_buf_adds(b, "\\\\"); break;
		case '\n': dlk_buf_adds(b, "\\n"); break;
		case '\r': dlk_buf_adds(b, "\\r"); break;
		case '\t': dlk_buf_adds(b, "\\t"); break;
		default: {
			char u[7] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0 };
			dlk_buf_add(b, u, 6);
		}
		}
	}
	dlk_buf_add(b, s + start, len - start);
	dlk_buf_addc(b, '"');
}

void jd_write_float(struct dlk_buf *b, float f)
{
	if (!isfinite(f)) {
		dlk_buf_adds(b, "null");
		return;
	}
	dlk_buf_grow(b, 32);
	int n = snprintf(b->data + b->len, 32, "%.9g", (double)f);
	b->len += (size_t)n;
}
