#include "lib/util/ytree.h"
#include "lib/util/mem.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct ynode *ynode_new(enum ynode_kind kind, int line, int col, int set_index)
{
	struct ynode *n = xcalloc(1, sizeof(*n));
	n->kind = kind;
	n->line = line;
	n->col = col;
	n->set_index = set_index;
	return n;
}

struct ynode *ynode_scalar(const char *text, int quoted, int line, int col, int set_index)
{
	struct ynode *n = ynode_new(YN_SCALAR, line, col, set_index);
	n->text = xstrdup(text);
	n->quoted = quoted;
	return n;
}

void ynode_append(struct ynode *parent, struct ynode *key, struct ynode *val)
{
	if (parent->n == parent->cap) {
		parent->cap = parent->cap ? parent->cap * 2 : 8;
		parent->vals = xrealloc(parent->vals, (size_t)parent->cap * sizeof(*parent->vals));
		if (parent->kind == YN_MAP)
			parent->keys = xrealloc(parent->keys, (size_t)parent->cap * sizeof(*parent->keys));
	}
	if (parent->kind == YN_MAP)
		parent->keys[parent->n] = key;
	parent->vals[parent->n++] = val;
}

void ynode_free(struct ynode *n)
{
	if (!n)
		return;
	for (int i = 0; i < n->n; i++) {
		if (n->keys)
			ynode_free(n->keys[i]);
		ynode_free(n->vals[i]);
	}
	free(n->keys);
	free(n->vals);
	free(n->text);
	free(n->tag);
	free(n);
}

/* ---- core schema ---- */

#define TAG_PREFIX "tag:yaml.org,2002:"

static int is_core_null(const char *s)
{
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static int core_bool(const char *s, int *v)
{
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return *v = 1, 1;
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return *v = 0, 1;
	return 0;
}

static int all_of(const char *s, const char *set)
{
	return *s && strspn(s, set) == strlen(s);
}

static int is_core_int(const char *s)
{
	if (!strncmp(s, "0o", 2))
		return all_of(s + 2, "01234567");
	if (!strncmp(s, "0x", 2))
		return all_of(s + 2, "0123456789abcdefABCDEF");
	if (*s == '-' || *s == '+')
		s++;
	return all_of(s, "0123456789");
}

static int is_core_float(const char *s)
{
	const char *p = s;
	int digits = 0;

	if (*p == '-' || *p == '+')
		p++;
	if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF"))
		return 1;
	if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return 1;
	while (*p >= '0' && *p <= '9')
		p++, digits++;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9')
			p++, digits++;
	}
	if (!digits)
		return 0;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return !*p;
}

enum yscalar_type ynode_type(const struct ynode *n)
{
	int b;

	if (!n || n->kind != YN_SCALAR)
		return YS_STR;
	if (n->tag) {
		if (!strcmp(n->tag, TAG_PREFIX "str"))
			return YS_STR;
		if (!strcmp(n->tag, TAG_PREFIX "null"))
			return is_core_null(n->text) ? YS_NULL : YS_BADTAG;
		if (!strcmp(n->tag, TAG_PREFIX "bool"))
			return core_bool(n->text, &b) ? YS_BOOL : YS_BADTAG;
		if (!strcmp(n->tag, TAG_PREFIX "int"))
			return is_core_int(n->text) ? YS_INT : YS_BADTAG;
		if (!strcmp(n->tag, TAG_PREFIX "float"))
			return is_core_float(n->text) || is_core_int(n->text) ? YS_FLOAT : YS_BADTAG;
		if (strcmp(n->tag, "!"))
			return YS_BADTAG;
		return YS_STR; /* "!" is the non-specific tag: a string */
	}
	if (n->quoted)
		return YS_STR;
	if (is_core_null(n->text))
		return YS_NULL;
	if (core_bool(n->text, &b))
		return YS_BOOL;
	if (is_core_int(n->text))
		return YS_INT;
	if (is_core_float(n->text))
		return YS_FLOAT;
	return YS_STR;
}

int ynode_is_null(const struct ynode *n)
{
	return !n || (n->kind == YN_SCALAR && ynode_type(n) == YS_NULL);
}

int ynode_int(const struct ynode *n, long long *out)
{
	const char *s;
	char *end;
	int base = 10;

	if (!n || n->kind != YN_SCALAR || ynode_type(n) != YS_INT)
		return -1;
	s = n->text;
	if (!strncmp(s, "0o", 2))
		s += 2, base = 8;
	else if (!strncmp(s, "0x", 2))
		s += 2, base = 16;
	errno = 0;
	*out = strtoll(s, &end, base);
	return errno || *end ? -1 : 0;
}

int ynode_float(const struct ynode *n, double *out)
{
	enum yscalar_type t = n && n->kind == YN_SCALAR ? ynode_type(n) : YS_STR;
	const char *s;
	long long i;

	if (t == YS_INT) {
		if (ynode_int(n, &i))
			return -1;
		*out = (double)i;
		return 0;
	}
	if (t != YS_FLOAT)
		return -1;
	s = n->text;
	if (strstr(s, "inf") || strstr(s, "Inf") || strstr(s, "INF")) {
		*out = *s == '-' ? -INFINITY : INFINITY;
		return 0;
	}
	if (strstr(s, "nan") || strstr(s, "NaN") || strstr(s, "NAN")) {
		*out = NAN;
		return 0;
	}
	errno = 0;
	*out = strtod(s, NULL);
	return errno == ERANGE && isinf(*out) ? -1 : 0;
}

const char *ynode_describe(const struct ynode *n, char *buf, size_t len)
{
	const char *what = NULL;
	char shown[48];

	if (!n || ynode_is_null(n))
		return snprintf(buf, len, "null"), buf;
	if (n->kind == YN_MAP)
		return snprintf(buf, len, "a mapping"), buf;
	if (n->kind == YN_SEQ)
		return snprintf(buf, len, "a sequence"), buf;
	if (strlen(n->text) > 40)
		snprintf(shown, sizeof(shown), "%.37s...", n->text);
	else
		snprintf(shown, sizeof(shown), "%s", n->text);
	switch (ynode_type(n)) {
	case YS_STR:
		what = n->quoted || n->tag ? "the string " : NULL;
		break;
	case YS_BOOL:
		what = "the boolean ";
		break;
	case YS_INT:
		what = "the integer ";
		break;
	case YS_FLOAT:
		what = "the number ";
		break;
	default:
		break;
	}
	if (what && !strcmp(what, "the string "))
		snprintf(buf, len, "the string \"%s\"", shown);
	else if (what)
		snprintf(buf, len, "%s%s", what, shown);
	else
		snprintf(buf, len, "'%s'", shown);
	return buf;
}

/* ---- parsing ---- */

struct builder {
	struct ynode *stack[YTREE_MAX_DEPTH + 1];
	struct ynode *pending_key[YTREE_MAX_DEPTH + 1]; /* a mapping's key awaiting its value */
	int depth;
	long nodes;
	struct ynode *root;
};

static int fail(char *msg, size_t msg_len, int *line, int *col, int l, int c, const char *fmt, const char *arg)
{
	*line = l;
	*col = c;
	snprintf(msg, msg_len, fmt, arg);
	return -1;
}

/* Attaches a finished node to the collection on top of the stack, or makes it the root.
 * Returns the message when a bound is exceeded, NULL otherwise. */
static const char *attach(struct builder *b, struct ynode *n)
{
	struct ynode *top;

	if (++b->nodes > YTREE_MAX_NODES) {
		ynode_free(n);
		return "document has too many nodes";
	}
	if (!b->depth) {
		b->root = n;
		return NULL;
	}
	top = b->stack[b->depth - 1];
	if (top->n >= YTREE_MAX_ITEMS) {
		ynode_free(n);
		return top->kind == YN_MAP ? "mapping has too many keys" : "sequence has too many items";
	}
	if (top->kind == YN_SEQ) {
		ynode_append(top, NULL, n);
	} else if (!b->pending_key[b->depth - 1]) {
		if (n->kind != YN_SCALAR) {
			ynode_free(n);
			return "a mapping key must be a scalar";
		}
		b->pending_key[b->depth - 1] = n;
	} else {
		ynode_append(top, b->pending_key[b->depth - 1], n);
		b->pending_key[b->depth - 1] = NULL;
	}
	return NULL;
}

int ytree_parse(const char *text, size_t len, struct ynode **root, char *msg, size_t msg_len,
                int *line, int *col)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	struct builder b;
	int rc = -1, done = 0;

	memset(&b, 0, sizeof(b));
	*root = NULL;
	if (!yaml_parser_initialize(&parser))
		return fail(msg, msg_len, line, col, 0, 0, "%s", "cannot initialise the YAML parser");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (!done) {
		struct ynode *n = NULL;
		const char *bound = NULL;
		int l, c;

		if (!yaml_parser_parse(&parser, &ev)) {
			const char *problem = parser.problem ? parser.problem : "invalid YAML";
			yaml_mark_t m = parser.problem_mark;
			char ctxbuf[256] = "";
			if (parser.error == YAML_READER_ERROR) {
				/* the reader reports a byte offset, not a mark: find the line and column */
				m.line = m.column = 0;
				for (size_t i = 0; i < parser.problem_offset && i < len; i++) {
					if (text[i] == '\n')
						m.line++, m.column = 0;
					else if (((unsigned char)text[i] & 0xc0) != 0x80)
						m.column++;
				}
				if (parser.problem_value >= 0)
					snprintf(ctxbuf, sizeof(ctxbuf), " (byte 0x%02x)", (unsigned)parser.problem_value & 0xff);
			}
			if (parser.context)
				snprintf(ctxbuf, sizeof(ctxbuf), " (%s at line %zu, column %zu)", parser.context,
				         parser.context_mark.line + 1, parser.context_mark.column + 1);
			*line = (int)m.line + 1;
			*col = (int)m.column + 1;
			snprintf(msg, msg_len, "invalid YAML: %s%s", problem, ctxbuf);
			goto out;
		}
		l = (int)ev.start_mark.line + 1;
		c = (int)ev.start_mark.column + 1;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (b.root) {
				fail(msg, msg_len, line, col, l, c, "%s",
				     "the file holds more than one YAML document; dlk.yaml must hold one");
				yaml_event_delete(&ev);
				goto out;
			}
			break;
		case YAML_ALIAS_EVENT:
			fail(msg, msg_len, line, col, l, c,
			     "alias '*%s' is not supported: dlk.yaml does not allow anchors and aliases; write the value out",
			     (const char *)ev.data.alias.anchor);
			yaml_event_delete(&ev);
			goto out;
		case YAML_SCALAR_EVENT:
			if (strlen((const char *)ev.data.scalar.value) != ev.data.scalar.length) {
				fail(msg, msg_len, line, col, l, c, "%s", "a string contains a NUL character");
				yaml_event_delete(&ev);
				goto out;
			}
			n = ynode_scalar((const char *)ev.data.scalar.value,
			                 ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE, l, c, -1);
			if (ev.data.scalar.tag)
				n->tag = xstrdup((const char *)ev.data.scalar.tag);
			bound = attach(&b, n);
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (b.depth >= YTREE_MAX_DEPTH) {
				fail(msg, msg_len, line, col, l, c, "nesting is deeper than %s levels", "32");
				yaml_event_delete(&ev);
				goto out;
			}
			n = ynode_new(ev.type == YAML_MAPPING_START_EVENT ? YN_MAP : YN_SEQ, l, c, -1);
			bound = attach(&b, n);
			if (!bound) {
				b.pending_key[b.depth] = NULL;
				b.stack[b.depth++] = n;
			}
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			b.depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
		if (bound) {
			fail(msg, msg_len, line, col, l, c, "%s", bound);
			goto out;
		}
	}
	*root = b.root;
	b.root = NULL;
	rc = 0;
out:
	/* the nodes on the stack are all reachable from the root; only pending keys are loose */
	for (int i = 0; i < b.depth; i++)
		ynode_free(b.pending_key[i]);
	ynode_free(b.root);
	yaml_parser_delete(&parser);
	return rc;
}
