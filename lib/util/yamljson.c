#include "lib/util/yamljson.h"
#include "lib/util/mem.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#define TAG_PREFIX "tag:yaml.org,2002:"
/* Integers from 10^15 up become raw digits: beyond 2^53 a double is not exact, and cJSON prints
 * numbers with 15 significant digits when that is "close enough", which would lose digits. */
#define INT_NUMBER_LIMIT 1000000000000000ull

/* ------------------------------------------------------------------------------------------ */
/* core-schema resolution of a plain scalar */

static int all_in(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(set, s[i]))
			return 0;
	return n > 0;
}

static int is_one_of(const char *s, size_t n, const char *const *words)
{
	for (; *words; words++)
		if (strlen(*words) == n && !memcmp(s, *words, n))
			return 1;
	return 0;
}

static const char *const null_words[] = { "null", "Null", "NULL", "~", NULL };
static const char *const true_words[] = { "true", "True", "TRUE", NULL };
static const char *const false_words[] = { "false", "False", "FALSE", NULL };
static const char *const inf_words[] = { ".inf", ".Inf", ".INF", NULL };
static const char *const nan_words[] = { ".nan", ".NaN", ".NAN", NULL };

enum kind { K_STR, K_NULL, K_BOOL, K_INT, K_FLOAT };

static int is_float_text(const char *s, size_t n)
{
	size_t i = 0, digits = 0;

	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, digits++;
	}
	if (!digits)
		return 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t ed = 0;
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, ed++;
		if (!ed)
			return 0;
	}
	return i == n;
}

static enum kind classify(const char *s, size_t n)
{
	if (n == 0 || is_one_of(s, n, null_words))
		return K_NULL;
	if (is_one_of(s, n, true_words) || is_one_of(s, n, false_words))
		return K_BOOL;
	if (n > 2 && s[0] == '0' && s[1] == 'o' && all_in(s + 2, n - 2, "01234567"))
		return K_INT;
	if (n > 2 && s[0] == '0' && s[1] == 'x' && all_in(s + 2, n - 2, "0123456789abcdefABCDEF"))
		return K_INT;
	{
		size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
		if (all_in(s + i, n - i, "0123456789"))
			return K_INT;
	}
	if (is_float_text(s, n))
		return K_FLOAT;
	if (is_one_of(s, n, inf_words) ||
	    ((s[0] == '-' || s[0] == '+') && is_one_of(s + 1, n - 1, inf_words)) ||
	    is_one_of(s, n, nan_words))
		return K_FLOAT;
	return K_STR;
}

/* An integer in core-schema syntax to a cJSON node: a number up to 2^53, a raw node with exact
 * decimal digits up to int64, NULL beyond. */
static cJSON *make_int(const char *s, size_t n)
{
	int neg = 0, base = 10;
	size_t i = 0;
	uint64_t v = 0, limit;

	if (s[0] == '-' || s[0] == '+')
		neg = s[0] == '-', i = 1;
	else if (n > 2 && s[0] == '0' && s[1] == 'o')
		base = 8, i = 2;
	else if (n > 2 && s[0] == '0' && s[1] == 'x')
		base = 16, i = 2;
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < n; i++) {
		int d = s[i] >= 'a' ? s[i] - 'a' + 10 : s[i] >= 'A' ? s[i] - 'A' + 10 : s[i] - '0';
		if (v > (limit - (uint64_t)d) / (uint64_t)base)
			return NULL;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (v < INT_NUMBER_LIMIT)
		return cJSON_CreateNumber(neg ? -(double)v : (double)v);
	char digits[32];
	if (neg)
		snprintf(digits, sizeof(digits), "-%llu", (unsigned long long)v);
	else
		snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	return cJSON_CreateRaw(digits);
}

static double float_value(const char *s, size_t n)
{
	char tmp[512];

	if (s[0] == '-' && is_one_of(s + 1, n - 1, inf_words))
		return -INFINITY;
	if (is_one_of(s, n, inf_words) || (s[0] == '+' && is_one_of(s + 1, n - 1, inf_words)))
		return INFINITY;
	if (is_one_of(s, n, nan_words))
		return NAN;
	if (n >= sizeof(tmp)) { /* an absurdly long mantissa: strtod on a heap copy */
		char *c = xstrndup(s, n);
		double d = strtod(c, NULL);
		free(c);
		return d;
	}
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	return strtod(tmp, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* reading */

struct keyref {
	const char *key;  /* borrowed from the cJSON node */
	size_t line, col, seq;
};

struct frame {
	cJSON *node;
	int is_map;
	char *key;            /* map: the key waiting for its value */
	size_t key_line, key_col;
	char *anchor;         /* anchor named on this collection, registered when it ends */
	size_t nodes_at_start;
	struct keyref *keys;  /* map: every key with its position, checked for duplicates at the end */
	size_t n_keys, cap_keys;
};

struct anchor {
	char *name;
	const cJSON *node;    /* inside the document being built */
	size_t nodes;         /* size of the subtree, charged again for every alias */
};

struct reader {
	const char *name;
	struct frame stack[YAMLJSON_MAX_DEPTH + 1];
	int depth;
	struct anchor *anchors;
	size_t n_anchors, cap_anchors;
	size_t nodes;
	cJSON *doc;           /* the current document's root, once seen */
	int doc_empty;        /* the root is an empty untagged plain scalar: skip the document */
	size_t *err_line;
	struct dlk_err *err;
};

static int fail_at(struct reader *r, yaml_mark_t m, const char *fmt, const char *arg)
{
	char what[DLK_ERR_MSG_MAX / 2];

	snprintf(what, sizeof(what), fmt, arg);
	if (r->err_line)
		*r->err_line = m.line + 1;
	return dlk_errf(r->err, DLK_EXIT_CONFIG, "%s:%zu:%zu: %s", r->name, m.line + 1, m.column + 1, what);
}

static void clear_anchors(struct reader *r)
{
	for (size_t i = 0; i < r->n_anchors; i++)
		free(r->anchors[i].name);
	r->n_anchors = 0;
}

static void add_anchor(struct reader *r, const char *name, const cJSON *node, size_t nodes)
{
	/* a later anchor of the same name shadows the earlier one (YAML 1.2 says so) */
	for (size_t i = 0; i < r->n_anchors; i++) {
		if (!strcmp(r->anchors[i].name, name)) {
			r->anchors[i].node = node;
			r->anchors[i].nodes = nodes;
			return;
		}
	}
	if (r->n_anchors == r->cap_anchors) {
		r->cap_anchors = r->cap_anchors ? 2 * r->cap_anchors : 16;
		r->anchors = xrealloc(r->anchors, r->cap_anchors * sizeof(*r->anchors));
	}
	r->anchors[r->n_anchors].name = xstrdup(name);
	r->anchors[r->n_anchors].node = node;
	r->anchors[r->n_anchors].nodes = nodes;
	r->n_anchors++;
}

static int charge(struct reader *r, size_t n, yaml_mark_t m)
{
	if (n > YAMLJSON_MAX_NODES - r->nodes)
		return fail_at(r, m, "document expands to more than %s nodes (aliases included)", "1000000");
	r->nodes += n;
	return 0;
}

/* Hands v (owned) to the collection on top of the stack, or makes it the document root. */
static int attach(struct reader *r, cJSON *v, yaml_mark_t m)
{
	struct frame *f;

	if (r->depth == 0) {
		r->doc = v;
		return 0;
	}
	f = &r->stack[r->depth - 1];
	if (!f->is_map) {
		cJSON_AddItemToArray(f->node, v);
		return 0;
	}
	if (!f->key) {
		cJSON_Delete(v);
		return fail_at(r, m, "%s", "a mapping key must be a scalar");
	}
	cJSON_AddItemToObject(f->node, f->key, v);
	if (f->n_keys == f->cap_keys) {
		f->cap_keys = f->cap_keys ? 2 * f->cap_keys : 8;
		f->keys = xrealloc(f->keys, f->cap_keys * sizeof(*f->keys));
	}
	/* the key string now lives in the child node: cJSON copied it */
	f->keys[f->n_keys].key = v->string;
	f->keys[f->n_keys].line = f->key_line;
	f->keys[f->n_keys].col = f->key_col;
	f->keys[f->n_keys].seq = f->n_keys;
	f->n_keys++;
	free(f->key);
	f->key = NULL;
	return 0;
}

static int keyref_cmp(const void *a, const void *b)
{
	const struct keyref *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorting instead of a lookup per insert keeps a mapping with many keys O(n log n). */
static int check_duplicates(struct reader *r, struct frame *f)
{
	const struct keyref *dup = NULL;

	if (f->n_keys < 2)
		return 0;
	qsort(f->keys, f->n_keys, sizeof(*f->keys), keyref_cmp);
	for (size_t i = 1; i < f->n_keys; i++) {
		if (!strcmp(f->keys[i - 1].key, f->keys[i].key) && (!dup || f->keys[i].seq < dup->seq))
			dup = &f->keys[i];
	}
	if (!dup)
		return 0;
	yaml_mark_t m = { 0, dup->line, dup->col };
	return fail_at(r, m, "duplicate key '%s'", dup->key);
}

static void frame_release(struct frame *f)
{
	free(f->key);
	free(f->anchor);
	free(f->keys);
	memset(f, 0, sizeof(*f));
}

static const char *short_tag(const char *tag)
{
	if (!tag)
		return NULL;
	if (!strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)))
		return tag + strlen(TAG_PREFIX);
	return tag;
}

static int on_scalar(struct reader *r, yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	const char *tag = short_tag((const char *)ev->data.scalar.tag);
	int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	enum kind k = K_STR;
	cJSON *v = NULL;

	if (memchr(s, '\0', n))
		return fail_at(r, ev->start_mark, "%s", "a string holds a NUL character");
	if (charge(r, 1, ev->start_mark))
		return -1;
	if (r->depth > 0 && r->stack[r->depth - 1].is_map && !r->stack[r->depth - 1].key) {
		struct frame *f = &r->stack[r->depth - 1];
		if (ev->data.scalar.anchor)
			return fail_at(r, ev->start_mark, "%s", "an anchor on a mapping key is not supported");
		f->key = xstrndup(s, n);
		f->key_line = ev->start_mark.line;
		f->key_col = ev->start_mark.column;
		return 0;
	}
	if (!tag) {
		k = plain ? classify(s, n) : K_STR;
	} else if (!strcmp(tag, "!") || !strcmp(tag, "str")) {
		k = K_STR;
	} else if (!strcmp(tag, "null")) {
		if (classify(s, n) != K_NULL)
			return fail_at(r, ev->start_mark, "'%.100s' is not a null", tag);
		k = K_NULL;
	} else if (!strcmp(tag, "bool") || !strcmp(tag, "int") || !strcmp(tag, "float")) {
		k = classify(s, n);
		int ok = (!strcmp(tag, "bool") && k == K_BOOL) || (!strcmp(tag, "int") && k == K_INT) ||
		         (!strcmp(tag, "float") && (k == K_FLOAT || k == K_INT));
		if (!ok)
			return fail_at(r, ev->start_mark, "the value does not match its tag '!!%s'", tag);
		if (!strcmp(tag, "float"))
			k = K_FLOAT;
	} else {
		return fail_at(r, ev->start_mark, "unsupported tag '%.200s'", (const char *)ev->data.scalar.tag);
	}
	switch (k) {
	case K_NULL:
		v = cJSON_CreateNull();
		if (r->depth == 0 && n == 0 && !tag && plain && !ev->data.scalar.anchor)
			r->doc_empty = 1;
		break;
	case K_BOOL:
		v = cJSON_CreateBool(is_one_of(s, n, true_words));
		break;
	case K_INT:
		v = make_int(s, n);
		if (!v)
			return fail_at(r, ev->start_mark, "integer '%.60s' is out of the int64 range", s);
		break;
	case K_FLOAT:
		if (classify(s, n) == K_INT) { /* "!!float 0x10": the integer's value as a double */
			cJSON *iv = make_int(s, n);
			if (!iv)
				return fail_at(r, ev->start_mark, "integer '%.60s' is out of the int64 range", s);
			v = cJSON_CreateNumber(cJSON_IsRaw(iv) ? strtod(iv->valuestring, NULL) : iv->valuedouble);
			cJSON_Delete(iv);
		} else {
			v = cJSON_CreateNumber(float_value(s, n));
		}
		break;
	case K_STR:
		/* libyaml NUL-terminates every scalar, and NULs inside were refused above */
		v = cJSON_CreateString(s);
		break;
	}
	if (!v)
		return fail_at(r, ev->start_mark, "%s", "out of memory");
	if (ev->data.scalar.anchor)
		add_anchor(r, (const char *)ev->data.scalar.anchor, v, 1);
	return attach(r, v, ev->start_mark);
}

static int on_start(struct reader *r, yaml_event_t *ev, int is_map)
{
	const char *tag = short_tag((const char *)(is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag));
	const char *anchor = (const char *)(is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor);
	struct frame *f;

	if (r->depth > 0 && r->stack[r->depth - 1].is_map && !r->stack[r->depth - 1].key)
		return fail_at(r, ev->start_mark, "%s", "a mapping key must be a scalar");
	if (tag && strcmp(tag, "!") && strcmp(tag, is_map ? "map" : "seq"))
		return fail_at(r, ev->start_mark, "unsupported tag '%.200s'", tag);
	if (r->depth >= YAMLJSON_MAX_DEPTH)
		return fail_at(r, ev->start_mark, "nesting deeper than %s levels", "256");
	if (charge(r, 1, ev->start_mark))
		return -1;
	f = &r->stack[r->depth++];
	memset(f, 0, sizeof(*f));
	f->is_map = is_map;
	f->node = is_map ? cJSON_CreateObject() : cJSON_CreateArray();
	f->anchor = anchor ? xstrdup(anchor) : NULL;
	f->nodes_at_start = r->nodes - 1;
	return 0;
}

static int on_end(struct reader *r, yaml_event_t *ev)
{
	struct frame *f = &r->stack[r->depth - 1];
	cJSON *node = f->node;
	int rc;

	if (f->is_map && check_duplicates(r, f))
		return -1;
	if (f->anchor)
		add_anchor(r, f->anchor, node, r->nodes - f->nodes_at_start);
	f->node = NULL;
	frame_release(f);
	r->depth--;
	rc = attach(r, node, ev->start_mark);
	return rc;
}

static int on_alias(struct reader *r, yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	const struct anchor *a = NULL;
	cJSON *copy;

	for (size_t i = 0; i < r->n_anchors; i++)
		if (!strcmp(r->anchors[i].name, name))
			a = &r->anchors[i];
	if (!a)
		return fail_at(r, ev->start_mark, "unknown alias '*%.200s'", name);
	if (r->depth > 0 && r->stack[r->depth - 1].is_map && !r->stack[r->depth - 1].key)
		return fail_at(r, ev->start_mark, "%s", "an alias as a mapping key is not supported");
	if (charge(r, a->nodes, ev->start_mark))
		return -1;
	copy = cJSON_Duplicate(a->node, 1);
	if (!copy)
		return fail_at(r, ev->start_mark, "%s", "out of memory");
	return attach(r, copy, ev->start_mark);
}

static void reader_reset_doc(struct reader *r)
{
	while (r->depth > 0) {
		struct frame *f = &r->stack[--r->depth];
		cJSON_Delete(f->node);
		frame_release(f);
	}
	cJSON_Delete(r->doc);
	r->doc = NULL;
	r->doc_empty = 0;
	clear_anchors(r);
}

cJSON *yamljson_parse(const char *text, size_t len, const char *name, size_t *err_line, struct dlk_err *err)
{
	struct reader *r = xcalloc(1, sizeof(*r));
	yaml_parser_t parser;
	yaml_event_t ev;
	cJSON *docs = cJSON_CreateArray();
	int done = 0, failed = 0;

	if (!text) { /* libyaml asserts on a NULL input, even an empty one */
		text = "";
		len = 0;
	}
	r->name = name ? name : "<yaml>";
	r->err_line = err_line;
	r->err = err;
	if (err_line)
		*err_line = 0;
	if (len > YAMLJSON_MAX_INPUT) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: larger than the limit of %u bytes", r->name, YAMLJSON_MAX_INPUT);
		free(r);
		cJSON_Delete(docs);
		return NULL;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (!done && !failed) {
		if (!yaml_parser_parse(&parser, &ev)) {
			const char *ctx = parser.context;
			yaml_mark_t m = parser.problem_mark;
			if (err_line)
				*err_line = m.line + 1;
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu:%zu: %s%s%s", r->name, m.line + 1, m.column + 1,
			         parser.problem ? parser.problem : "invalid YAML", ctx ? " " : "", ctx ? ctx : "");
			failed = 1;
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			reader_reset_doc(r);
			break;
		case YAML_DOCUMENT_END_EVENT:
			if (r->doc && !r->doc_empty) {
				cJSON_AddItemToArray(docs, r->doc);
				r->doc = NULL;
			}
			reader_reset_doc(r);
			break;
		case YAML_SCALAR_EVENT:
			failed = on_scalar(r, &ev) < 0;
			break;
		case YAML_SEQUENCE_START_EVENT:
			failed = on_start(r, &ev, 0) < 0;
			break;
		case YAML_MAPPING_START_EVENT:
			failed = on_start(r, &ev, 1) < 0;
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			failed = on_end(r, &ev) < 0;
			break;
		case YAML_ALIAS_EVENT:
			failed = on_alias(r, &ev) < 0;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	reader_reset_doc(r);
	free(r->anchors);
	free(r);
	if (failed) {
		cJSON_Delete(docs);
		return NULL;
	}
	return docs;
}

/* ------------------------------------------------------------------------------------------ */
/* writing */

/* Decodes one UTF-8 sequence at s (n bytes left); returns its length or 0 when invalid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* What libyaml reads raw without complaint and without treating it as a line break. */
static int printable_inline(uint32_t c)
{
	return (c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c <= 0xd7ff && c != 0x2028 && c != 0x2029) ||
	       (c >= 0xe000 && c <= 0xfffd && c != 0xfeff) || (c >= 0x10000 && c <= 0x10ffff);
}

int yamljson_quote(struct dlk_buf *b, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t start = b->len;

	dlk_buf_addc(b, '"');
	for (size_t i = 0; i < len;) {
		uint32_t c;
		size_t n = utf8_decode(u + i, len - i, &c);
		if (!n || c == 0) {
			b->len = start;
			b->data[start] = '\0';
			return -1;
		}
		switch (c) {
		case '"': dlk_buf_adds(b, "\\\""); break;
		case '\\': dlk_buf_adds(b, "\\\\"); break;
		case '\a': dlk_buf_adds(b, "\\a"); break;
		case '\b': dlk_buf_adds(b, "\\b"); break;
		case '\t': dlk_buf_adds(b, "\\t"); break;
		case '\n': dlk_buf_adds(b, "\\n"); break;
		case '\v': dlk_buf_adds(b, "\\v"); break;
		case '\f': dlk_buf_adds(b, "\\f"); break;
		case '\r': dlk_buf_adds(b, "\\r"); break;
		case 0x1b: dlk_buf_adds(b, "\\e"); break;
		case 0x85: dlk_buf_adds(b, "\\N"); break;
		case 0x2028: dlk_buf_adds(b, "\\L"); break;
		case 0x2029: dlk_buf_adds(b, "\\P"); break;
		default:
			if (printable_inline(c))
				dlk_buf_add(b, s + i, n);
			else if (c < 0x100)
				dlk_buf_addf(b, "\\x%02x", (unsigned)c);
			else
				dlk_buf_addf(b, "\\u%04x", (unsigned)c);
		}
		i += n;
	}
	dlk_buf_addc(b, '"');
	return 0;
}

void yamljson_number(struct dlk_buf *b, double d)
{
	char tmp[64];

	if (isnan(d)) {
		dlk_buf_adds(b, ".nan");
		return;
	}
	if (isinf(d)) {
		dlk_buf_adds(b, d > 0 ? ".inf" : "-.inf");
		return;
	}
	if (d == trunc(d) && fabs(d) < (double)INT_NUMBER_LIMIT) {
		if (d == 0 && signbit(d))
			dlk_buf_adds(b, "-0.0");
		else
			dlk_buf_addf(b, "%.0f", d);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	/* "9007199254740994" would read back as a raw integer, not a number: make it a float */
	if (!strpbrk(tmp, ".eE"))
		strcat(tmp, ".0");
	dlk_buf_adds(b, tmp);
}

/* Plain only when no YAML 1.2 or 1.1 reader (kubectl's) can see anything but this string. */
static int plain_ok(const char *s)
{
	static const char *const yaml11_words[] = { "y", "n", "yes", "no", "on", "off", "true", "false", "null", NULL };
	size_t n = strlen(s);

	if (!n || n > 256)
		return 0;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_' || s[0] == '/'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("_./@=+-: ", c)))
			return 0;
		if (c == ':' && (i + 1 == n || s[i + 1] == ' '))
			return 0;
	}
	if (s[n - 1] == ' ')
		return 0;
	for (const char *const *w = yaml11_words; *w; w++)
		if (!strcasecmp(s, *w))
			return 0;
	return classify(s, n) == K_STR;
}

/* A literal block (|) is used for multi-line text when it reads back byte for byte. */
static int literal_ok(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);
	int has_nl = 0;

	if (!n || s[0] == ' ' || s[0] == '\t' || s[0] == '\n')
		return 0;
	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t k = utf8_decode(u + i, n - i, &c);
		if (!k)
			return 0;
		if (c == '\n') {
			has_nl = 1;
			if (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t'))
				return 0;
			/* more-indented lines are content; a tab there is not indentation: keep it quoted */
			if (i + 1 < n && s[i + 1] == '\t')
				return 0;
		} else if (c != '\t' && !printable_inline(c)) {
			return 0;
		}
		i += k;
	}
	if (s[n - 1] == ' ' || s[n - 1] == '\t')
		return 0;
	return has_nl;
}

struct emitter {
	struct dlk_buf out;
	struct dlk_err *err;
};

enum emode { E_ROOT, E_MAPV, E_SEQI };

static void pad(struct dlk_buf *b, int col)
{
	for (int i = 0; i < col; i++)
		dlk_buf_addc(b, ' ');
}

static int emit_string(struct emitter *e, const char *s, int content_col, int allow_literal)
{
	if (plain_ok(s)) {
		dlk_buf_adds(&e->out, s);
		return 0;
	}
	if (allow_literal && literal_ok(s)) {
		size_t n = strlen(s), trail = 0;
		while (trail < n && s[n - 1 - trail] == '\n')
			trail++;
		dlk_buf_adds(&e->out, trail == 0 ? "|-" : trail == 1 ? "|" : "|+");
		for (size_t i = 0; i < n - trail;) {
			const char *nl = memchr(s + i, '\n', n - trail - i);
			size_t end = nl ? (size_t)(nl - s) : n - trail;
			dlk_buf_addc(&e->out, '\n');
			if (end > i) {
				pad(&e->out, content_col);
				dlk_buf_add(&e->out, s + i, end - i);
			}
			i = end + 1;
		}
		for (size_t i = 1; i < trail; i++)
			dlk_buf_addc(&e->out, '\n');
		return 0;
	}
	if (yamljson_quote(&e->out, s, strlen(s)) < 0)
		return dlk_errf(e->err, DLK_EXIT_FAIL, "string '%.40s' is not valid UTF-8", s);
	return 0;
}

static int emit_key(struct emitter *e, const char *k)
{
	size_t before = e->out.len;

	if (emit_string(e, k, 0, 0) < 0)
		return -1;
	if (e->out.len - before > 1000)
		return dlk_errf(e->err, DLK_EXIT_FAIL, "key '%.40s...' is longer than 1000 bytes", k);
	return 0;
}

static int emit_node(struct emitter *e, const cJSON *v, int col, enum emode mode, int depth)
{
	struct dlk_buf *b = &e->out;

	if (depth > YAMLJSON_MAX_DEPTH)
		return dlk_errf(e->err, DLK_EXIT_FAIL, "value nested deeper than %d levels", YAMLJSON_MAX_DEPTH);
	if ((cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child) {
		int is_map = cJSON_IsObject(v);
		int inner = mode == E_ROOT ? 0 : (mode == E_MAPV && !is_map) ? col : col + 2;
		int first = 1;
		if (mode == E_MAPV)
			dlk_buf_addc(b, '\n');
		for (const cJSON *c = v->child; c; c = c->next) {
			if (!(first && mode == E_SEQI))
				pad(b, inner);
			first = 0;
			if (is_map) {
				if (emit_key(e, c->string ? c->string : "") < 0)
					return -1;
				dlk_buf_addc(b, ':');
				if (emit_node(e, c, inner, E_MAPV, depth + 1) < 0)
					return -1;
			} else {
				dlk_buf_adds(b, "- ");
				if (emit_node(e, c, inner, E_SEQI, depth + 1) < 0)
					return -1;
			}
		}
		return 0;
	}
	if (mode == E_MAPV)
		dlk_buf_addc(b, ' ');
	if (cJSON_IsObject(v))
		dlk_buf_adds(b, "{}");
	else if (cJSON_IsArray(v))
		dlk_buf_adds(b, "[]");
	else if (cJSON_IsString(v)) {
		if (emit_string(e, v->valuestring, mode == E_ROOT ? 0 : col + 2, mode != E_ROOT) < 0)
			return -1;
	} else if (cJSON_IsNumber(v))
		yamljson_number(b, v->valuedouble);
	else if (cJSON_IsRaw(v))
		dlk_buf_adds(b, v->valuestring);
	else if (cJSON_IsTrue(v))
		dlk_buf_adds(b, "true");
	else if (cJSON_IsFalse(v))
		dlk_buf_adds(b, "false");
	else
		dlk_buf_adds(b, "null");
	dlk_buf_addc(b, '\n');
	return 0;
}

char *yamljson_emit(const cJSON *v, struct dlk_err *err)
{
	struct emitter e = { DLK_BUF_INIT, err };

	if (emit_node(&e, v, 0, E_ROOT, 0) < 0) {
		dlk_buf_release(&e.out);
		return NULL;
	}
	return dlk_buf_detach(&e.out, NULL);
}

char *yamljson_emit_stream(const cJSON *docs, struct dlk_err *err)
{
	struct dlk_buf out = DLK_BUF_INIT;
	int first = 1;

	for (const cJSON *d = docs ? docs->child : NULL; d; d = d->next) {
		char *s = yamljson_emit(d, err);
		if (!s) {
			dlk_buf_release(&out);
			return NULL;
		}
		if (!first)
			dlk_buf_adds(&out, "---\n");
		first = 0;
		dlk_buf_adds(&out, s);
		free(s);
	}
	return dlk_buf_detach(&out, NULL);
}
