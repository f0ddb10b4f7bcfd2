/* jd_parse(): JSON text -> an arena tree whose arrays keep their numbers in one flat pool.
 *
 * A reader written for this job rather than a general library: a request body is mostly one long
 * array of small numbers, and a general event parser (yajl, measured: 18 us of CPU for a 2 KB
 * Fashion-MNIST request, half of what the whole server spent on it) costs more than the model. It
 * reads RFC 8259 exactly: no comments, no trailing commas, no NaN, no leading zeros, strings of
 * valid UTF-8 with every escape decoded, nothing after the value but white space. fuzz_serve
 * runs it, and test_serve_jsondoc checks each rule. */
#include "lib/serve/jsondoc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/mem.h"
#include "lib/util/utf8.h"

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

struct parser {
	struct jd_doc *doc;
	const struct jd_limits *lim;
	const unsigned char *start, *p, *end;
	struct jd_value *stack[JD_STACK]; /* open arrays and objects */
	int depth;
	const char *key;                  /* the pending key of the innermost object (arena) */
	size_t key_len;
	size_t n_values;
	struct dlk_buf scratch;           /* strings with escapes are decoded here */
	char why[160];
	size_t at;                        /* byte offset of the problem */
};

static int fail(struct parser *ps, const unsigned char *at, const char *what)
{
	ps->at = (size_t)(at - ps->start);
	snprintf(ps->why, sizeof(ps->why), "%s", what);
	return -1;
}

static int count_value(struct parser *ps)
{
	if (ps->lim->max_values && ++ps->n_values > ps->lim->max_values) {
		ps->at = (size_t)(ps->p - ps->start);
		snprintf(ps->why, sizeof(ps->why), "more than %zu values", ps->lim->max_values);
		return -1;
	}
	return 0;
}

/* Links a new node into the open container (or makes it the root). */
static struct jd_value *add_node(struct parser *ps, enum jd_type type)
{
	struct jd_value *v = arena_alloc(ps->doc, sizeof(*v));
	memset(v, 0, sizeof(*v));
	v->type = type;
	if (ps->depth == 0) {
		ps->doc->root = v;
		return v;
	}
	struct jd_value *parent = ps->stack[ps->depth - 1];
	if (parent->type == JD_OBJECT) {
		v->key = ps->key;
		v->key_len = ps->key_len;
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

static inline void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
		ps->p++;
}

/* A number at ps->p, its syntax checked. Up to 15 significant digits and a power of ten within
 * 10^22 convert exactly with one double multiplication or division (Clinger's fast path);
 * anything else goes through strtod, which rounds correctly (dlk never calls setlocale, so the
 * decimal point is '.'). */
static int parse_number(struct parser *ps, double *out)
{
	static const double pow10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	const unsigned char *s = ps->p, *p = s, *end = ps->end;
	int neg = 0, digits = 0, exp10 = 0, fast = 1;
	uint64_t m = 0;

	if (*p == '-')
		neg = 1, p++;
	if (p >= end || *p < '0' || *p > '9')
		return fail(ps, p, "a '-' not followed by a digit");
	if (*p == '0') {
		p++;
		if (p < end && *p >= '0' && *p <= '9')
			return fail(ps, p, "a number with a leading zero");
	} else {
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			if (++digits > 15)
				fast = 0;
			else
				m = m * 10 + (uint64_t)(*p - '0');
		}
	}
	if (p < end && *p == '.') {
		p++;
		if (p >= end || *p < '0' || *p > '9')
			return fail(ps, p, "a '.' not followed by a digit");
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			if (!m && *p == '0') {
				exp10--; /* leading zeros of the fraction are not significant */
				continue;
			}
			if (++digits > 15)
				fast = 0;
			else
				m = m * 10 + (uint64_t)(*p - '0'), exp10--;
		}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		int eneg = 0, e = 0;
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = *p++ == '-';
		if (p >= end || *p < '0' || *p > '9')
			return fail(ps, p, "an exponent without digits");
		for (; p < end && *p >= '0' && *p <= '9'; p++)
			if (e < 100000)
				e = e * 10 + (*p - '0');
		exp10 += eneg ? -e : e;
	}
	ps->p = p;
	if (fast && exp10 >= -22 && exp10 <= 22) {
		double v = (double)m;
		v = exp10 < 0 ? v / pow10[-exp10] : v * pow10[exp10];
		*out = neg ? -v : v;
		return 0;
	}
	size_t len = (size_t)(p - s);
	char tmp[64];
	char *buf = len < sizeof(tmp) ? tmp : xmalloc(len + 1);
	memcpy(buf, s, len);
	buf[len] = '\0';
	*out = strtod(buf, NULL);
	if (buf != tmp)
		free(buf);
	return 0;
}

static int hex4(const unsigned char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	*out = v;
	return 0;
}

/* Length of the valid UTF-8 sequence at p (no overlong forms, no surrogates, at most U+10FFFF),
 * or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0];
	size_t n = (size_t)(end - p);
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
			return 0;
		return 4;
	}
	return 0;
}

static void put_utf8(struct dlk_buf *b, unsigned cp)
{
	char u[4];
	size_t n;
	if (cp < 0x80)
		u[0] = (char)cp, n = 1;
	else if (cp < 0x800)
		u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
	else if (cp < 0x10000)
		u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
	else
		u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
	dlk_buf_add(b, u, n);
}

/* The string at ps->p (its opening quote), decoded into the arena: *out (NUL-terminated), *len. */
static int parse_string(struct parser *ps, const char **out, size_t *len)
{
	const unsigned char *s = ps->p + 1, *p = s, *end = ps->end;

	/* the common case: plain ASCII up to the closing quote */
	while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
		p++;
	if (p < end && *p == '"') {
		char *c = arena_alloc(ps->doc, (size_t)(p - s) + 1);
		memcpy(c, s, (size_t)(p - s));
		c[p - s] = '\0';
		*out = c;
		*len = (size_t)(p - s);
		ps->p = p + 1;
		return 0;
	}
	struct dlk_buf *b = &ps->scratch;
	dlk_buf_reset(b);
	dlk_buf_add(b, s, (size_t)(p - s));
	for (;;) {
		if (p >= end)
			return fail(ps, s - 1, "a string without its closing quote");
		unsigned c = *p;
		if (c == '"')
			break;
		if (c < 0x20)
			return fail(ps, p, "a control character in a string (escape it)");
		if (c >= 0x80) {
			size_t n = utf8_len(p, end);
			if (!n)
				return fail(ps, p, "a string that is not valid UTF-8");
			dlk_buf_add(b, p, n);
			p += n;
			continue;
		}
		if (c != '\\') {
			dlk_buf_addc(b, (char)c);
			p++;
			continue;
		}
		if (p + 1 >= end)
			return fail(ps, p, "a string without its closing quote");
		switch (p[1]) {
		case '"': dlk_buf_addc(b, '"'); break;
		case '\\': dlk_buf_addc(b, '\\'); break;
		case '/': dlk_buf_addc(b, '/'); break;
		case 'b': dlk_buf_addc(b, '\b'); break;
		case 'f': dlk_buf_addc(b, '\f'); break;
		case 'n': dlk_buf_addc(b, '\n'); break;
		case 'r': dlk_buf_addc(b, '\r'); break;
		case 't': dlk_buf_addc(b, '\t'); break;
		case 'u': {
			unsigned cp, lo;
			if (end - p < 6 || hex4(p + 2, &cp))
				return fail(ps, p, "a \\u escape without four hex digits");
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return fail(ps, p, "a \\u escape of a lone low surrogate");
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
					return fail(ps, p, "a \\u escape of a high surrogate without its low one");
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			}
			put_utf8(b, cp);
			p += 6;
			continue;
		}
		default:
			return fail(ps, p, "an unknown escape in a string");
		}
		p += 2;
	}
	char *c = arena_alloc(ps->doc, b->len + 1);
	memcpy(c, b->data, b->len);
	c[b->len] = '\0';
	*out = c;
	*len = b->len;
	ps->p = p + 1;
	return 0;
}

static int literal(struct parser *ps, const char *word, size_t n)
{
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
		return fail(ps, ps->p, "an unexpected character (expected a value)");
	ps->p += n;
	return 0;
}

static int open_container(struct parser *ps, enum jd_type type)
{
	if (count_value(ps))
		return -1;
	if (ps->depth >= ps->lim->max_depth || ps->depth >= JD_STACK) {
		char what[64];
		snprintf(what, sizeof(what), "JSON nesting deeper than %d", ps->lim->max_depth);
		return fail(ps, ps->p, what);
	}
	struct jd_value *v = add_node(ps, type);
	if (type == JD_ARRAY) {
		v->numeric = 1;
		v->leaf_begin = v->leaf_end = ps->doc->n_nums;
	}
	ps->stack[ps->depth++] = v;
	ps->p++;
	return 0;
}

static void close_container(struct parser *ps)
{
	struct jd_value *v = ps->stack[--ps->depth];
	if (v->type == JD_ARRAY) {
		v->leaf_end = ps->doc->n_nums;
		if (ps->depth > 0 && ps->stack[ps->depth - 1]->type == JD_ARRAY && !v->numeric)
			ps->stack[ps->depth - 1]->numeric = 0;
	}
	ps->p++;
}

static int parse(struct parser *ps)
{
	struct jd_doc *d = ps->doc;

	skip_ws(ps);
	if (ps->p == ps->end)
		return fail(ps, ps->p, "an empty body (expected a JSON object)");
value:
	skip_ws(ps);
	if (ps->p == ps->end)
		return fail(ps, ps->p, "the body ends where a value should be");
	switch (*ps->p) {
	case '{':
		if (open_container(ps, JD_OBJECT))
			return -1;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == '}') {
			close_container(ps);
			goto after;
		}
		goto key;
	case '[':
		if (open_container(ps, JD_ARRAY))
			return -1;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ']') {
			close_container(ps);
			goto after;
		}
		goto value;
	case '"': {
		const char *str;
		size_t len;
		if (count_value(ps) || parse_string(ps, &str, &len))
			return -1;
		struct jd_value *v = add_node(ps, JD_STRING);
		v->str = str;
		v->len = len;
		goto after;
	}
	case 't':
	case 'f': {
		int is_true = *ps->p == 't';
		if (count_value(ps) || literal(ps, is_true ? "true" : "false", is_true ? 4 : 5))
			return -1;
		add_node(ps, JD_BOOL)->boolean = is_true;
		goto after;
	}
	case 'n':
		if (count_value(ps) || literal(ps, "null", 4))
			return -1;
		add_node(ps, JD_NULL);
		goto after;
	default: {
		double v;
		if (*ps->p != '-' && (*ps->p < '0' || *ps->p > '9'))
			return fail(ps, ps->p, "an unexpected character (expected a value)");
		if (count_value(ps) || parse_number(ps, &v))
			return -1;
		if (ps->depth > 0 && ps->stack[ps->depth - 1]->type == JD_ARRAY) {
			struct jd_value *arr = ps->stack[ps->depth - 1];
			if (d->n_nums == d->cap_nums) {
				d->cap_nums = d->cap_nums ? d->cap_nums * 2 : 1024;
				d->nums = xrealloc(d->nums, d->cap_nums * sizeof(double));
			}
			d->nums[d->n_nums++] = v;
			arr->n_items++;
			arr->n_numbers++;
		} else {
			add_node(ps, JD_NUMBER)->num = v;
		}
		goto after;
	}
	}
key:
	skip_ws(ps);
	if (ps->p == ps->end || *ps->p != '"')
		return fail(ps, ps->p, "expected a key (a string)");
	if (parse_string(ps, &ps->key, &ps->key_len))
		return -1;
	skip_ws(ps);
	if (ps->p == ps->end || *ps->p != ':')
		return fail(ps, ps->p, "expected ':' after a key");
	ps->p++;
	goto value;
after:
	skip_ws(ps);
	if (ps->depth == 0) {
		if (ps->p != ps->end)
			return fail(ps, ps->p, "trailing characters after the JSON value");
		return 0;
	}
	if (ps->p == ps->end)
		return fail(ps, ps->p, "the body ends inside an array or object");
	if (*ps->p == ',') {
		ps->p++;
		if (ps->stack[ps->depth - 1]->type == JD_OBJECT)
			goto key;
		goto value;
	}
	if (*ps->p == (ps->stack[ps->depth - 1]->type == JD_ARRAY ? ']' : '}')) {
		close_container(ps);
		goto after;
	}
	return fail(ps, ps->p, ps->stack[ps->depth - 1]->type == JD_ARRAY ? "expected ',' or ']'" : "expected ',' or '}'");
}

int jd_parse(struct jd_doc *doc, const char *text, size_t len, const struct jd_limits *lim, char *msg, size_t msg_len)
{
	struct parser *ps = xmalloc(sizeof(*ps));
	int ret;

	*doc = (struct jd_doc)JD_DOC_INIT;
	ps->doc = doc;
	ps->lim = lim;
	ps->start = ps->p = (const unsigned char *)text;
	ps->end = ps->start + len;
	ps->depth = 0;
	ps->key = NULL;
	ps->key_len = 0;
	ps->n_values = 0;
	ps->scratch = (struct dlk_buf)DLK_BUF_INIT;
	ps->why[0] = '\0';
	ps->at = 0;
	ret = parse(ps);
	if (ret) {
		if (!strncmp(ps->why, "JSON nesting", 12) || !strncmp(ps->why, "more than", 9))
			snprintf(msg, msg_len, "%s at byte %zu", ps->why, ps->at);
		else
			snprintf(msg, msg_len, "invalid JSON at byte %zu: %s", ps->at, ps->why);
		jd_release(doc);
	}
	dlk_buf_release(&ps->scratch);
	free(ps);
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
		if (c >= 0x80) {
			/* JSON is UTF-8: a byte that starts no well-formed sequence (a URL from the client
			 * can hold any) is written as U+FFFD */
			uint32_t cp;
			size_t n = dlk_utf8_decode((const unsigned char *)s + i, len - i, &cp);
			if (n) {
				i += n - 1;
				continue;
			}
			dlk_buf_add(b, s + start, i - start);
			start = i + 1;
			dlk_buf_adds(b, "\\ufffd");
			continue;
		}
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
