#include "lib/util/yamljson.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/ytree.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_PREFIX "tag:yaml.org,2002:"
/* Integers from 10^15 up become raw digits: beyond 2^53 a double is not exact, and cJSON prints
 * numbers with 15 significant digits when that is "close enough", which would lose digits. */
#define INT_NUMBER_LIMIT 1000000000000000ull

/* ------------------------------------------------------------------------------------------ */
/* reading: lib/util/ytree's nodes to cJSON */

static const struct ytree_opts read_opts = {
	.max_depth = YAMLJSON_MAX_DEPTH, .max_nodes = YAMLJSON_MAX_NODES, .max_items = 0, .aliases = 1,
};

struct reader {
	const char *name;
	cJSON *docs;
	size_t *err_line;
	struct dlk_err *err;
};

static int fail_pos(struct reader *r, int line, int col, const char *fmt, const char *arg)
{
	char what[DLK_ERR_MSG_MAX / 2];

	snprintf(what, sizeof(what), fmt, arg);
	if (r->err_line)
		*r->err_line = (size_t)line;
	return dlk_errf(r->err, DLK_EXIT_CONFIG, "%s:%d:%d: %s", r->name, line, col, what);
}

static int fail_at(struct reader *r, const struct ynode *n, const char *fmt, const char *arg)
{
	return fail_pos(r, n->line, n->col, fmt, arg);
}

/* An integer in core-schema syntax to a cJSON node: a number up to 2^53, a raw node with exact
 * decimal digits up to int64, NULL beyond. */
static cJSON *make_int(const char *s)
{
	size_t i = 0, n = strlen(s);
	int neg = 0, base = 10;
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

static const char *short_tag(const char *tag)
{
	if (!tag)
		return NULL;
	if (!strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)))
		return tag + strlen(TAG_PREFIX);
	return tag;
}

/* Why ytree typed a tagged scalar YS_BADTAG, in words. */
static int bad_tag(struct reader *r, const struct ynode *n)
{
	const char *tag = short_tag(n->tag);

	if (!strcmp(tag, "null"))
		return fail_at(r, n, "'%.100s' is not a null", tag);
	if (!strcmp(tag, "bool") || !strcmp(tag, "int") || !strcmp(tag, "float"))
		return fail_at(r, n, "the value does not match its tag '!!%s'", tag);
	return fail_at(r, n, "unsupported tag '%.200s'", n->tag);
}

static cJSON *scalar_json(struct reader *r, const struct ynode *n)
{
	cJSON *v = NULL;
	double d;

	switch (ynode_type(n)) {
	case YS_BADTAG:
		bad_tag(r, n);
		return NULL;
	case YS_NULL:
		v = cJSON_CreateNull();
		break;
	case YS_BOOL:
		v = cJSON_CreateBool(ynode_is_true(n));
		break;
	case YS_INT:
		v = make_int(n->text);
		if (!v)
			return fail_at(r, n, "integer '%.60s' is out of the int64 range", n->text), NULL;
		break;
	case YS_FLOAT:
		if (yscalar_classify(n->text) == YS_INT) { /* "!!float 0x10": the integer's value as a double */
			cJSON *iv = make_int(n->text);
			if (!iv)
				return fail_at(r, n, "integer '%.60s' is out of the int64 range", n->text), NULL;
			d = cJSON_IsRaw(iv) ? strtod(iv->valuestring, NULL) : iv->valuedouble;
			cJSON_Delete(iv);
		} else if (ynode_float(n, &d) < 0) {
			d = n->text[0] == '-' ? -INFINITY : INFINITY; /* beyond the double range */
		}
		v = cJSON_CreateNumber(d);
		break;
	case YS_STR:
		v = cJSON_CreateString(n->text);
		break;
	}
	if (!v)
		fail_at(r, n, "%s", "out of memory");
	return v;
}

struct keyref {
	const struct ynode *key;
	int seq;
};

static int keyref_cmp(const void *a, const void *b)
{
	const struct keyref *x = a, *y = b;
	int c = strcmp(x->key->text, y->key->text);
	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorting instead of a lookup per key keeps a mapping with many keys O(n log n). The duplicate
 * reported is the first one in the mapping. */
static int check_duplicates(struct reader *r, const struct ynode *map)
{
	struct keyref *keys;
	const struct keyref *dup = NULL;
	int ret = 0;

	if (map->n < 2)
		return 0;
	keys = xmalloc((size_t)map->n * sizeof(*keys));
	for (int i = 0; i < map->n; i++)
		keys[i] = (struct keyref){ map->keys[i], i };
	qsort(keys, (size_t)map->n, sizeof(*keys), keyref_cmp);
	for (int i = 1; i < map->n; i++)
		if (!strcmp(keys[i - 1].key->text, keys[i].key->text) && (!dup || keys[i].seq < dup->seq))
			dup = &keys[i];
	if (dup)
		ret = fail_at(r, dup->key, "duplicate key '%s'", dup->key->text);
	free(keys);
	return ret;
}

/* What cJSON cannot hold is refused as the reader meets it, so that problems are reported in the
 * order of the text, a syntax error further down included. Returns 1 (stop) or 0. */
static int check_node(const struct ynode *n, enum ytree_visit v, void *ud)
{
	struct reader *r = ud;
	const char *tag = short_tag(n->tag);

	if (v == YTREE_KEY)
		return 0; /* a key is its text, whatever its tag */
	if (v == YTREE_END)
		return n->kind == YN_MAP && check_duplicates(r, n) ? 1 : 0;
	if (n->kind != YN_SCALAR) {
		if (tag && strcmp(tag, "!") && strcmp(tag, n->kind == YN_MAP ? "map" : "seq"))
			return fail_at(r, n, "unsupported tag '%.200s'", tag), 1;
		return 0;
	}
	cJSON *s = scalar_json(r, n);
	cJSON_Delete(s);
	return !s;
}

/* A checked node to cJSON: NULL only when out of memory. */
static cJSON *node_json(struct reader *r, const struct ynode *n)
{
	cJSON *v;

	if (n->kind == YN_SCALAR)
		return scalar_json(r, n);
	v = n->kind == YN_MAP ? cJSON_CreateObject() : cJSON_CreateArray();
	for (int i = 0; v && i < n->n; i++) {
		cJSON *c = node_json(r, n->vals[i]);
		if (!c) {
			cJSON_Delete(v);
			return NULL;
		}
		if (n->kind == YN_MAP)
			cJSON_AddItemToObject(v, n->keys[i]->text, c);
		else
			cJSON_AddItemToArray(v, c);
	}
	if (!v)
		fail_at(r, n, "%s", "out of memory");
	return v;
}

static int on_document(struct ynode *root, void *ud)
{
	struct reader *r = ud;
	int rc = 0;

	/* a document that is empty or holds only comments is skipped */
	if (!(root->kind == YN_SCALAR && !*root->text && !root->tag && !root->quoted && !root->anchored)) {
		cJSON *v = node_json(r, root);
		if (v)
			cJSON_AddItemToArray(r->docs, v);
		rc = !v;
	}
	ynode_free(root);
	return rc;
}

cJSON *yamljson_parse(const char *text, size_t len, const char *name, size_t *err_line, struct dlk_err *err)
{
	struct reader r = { name ? name : "<yaml>", cJSON_CreateArray(), err_line, err };
	struct ytree_hooks hooks = { check_node, on_document, &r };
	struct ytree_error ye;
	int rc;

	if (err_line)
		*err_line = 0;
	if (len > YAMLJSON_MAX_INPUT) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: larger than the limit of %u bytes", r.name, YAMLJSON_MAX_INPUT);
		cJSON_Delete(r.docs);
		return NULL;
	}
	rc = ytree_parse_stream(text, len, &read_opts, &hooks, &ye);
	if (rc < 0) {
		char what[DLK_ERR_MSG_MAX / 2];
		fail_pos(&r, ye.line, ye.col, "%s", ytree_error_text(&ye, &read_opts, what, sizeof(what)));
	}
	if (rc) {
		cJSON_Delete(r.docs);
		return NULL;
	}
	return r.docs;
}

/* ------------------------------------------------------------------------------------------ */
/* writing */

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
		size_t n = dlk_utf8_decode(u + i, len - i, &c);
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
	return yscalar_classify(s) == YS_STR;
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
		size_t k = dlk_utf8_decode(u + i, n - i, &c);
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
