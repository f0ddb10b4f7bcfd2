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

enum yscalar_type yscalar_classify(const char *s)
{
	int b;

	if (is_core_null(s))
		return YS_NULL;
	if (core_bool(s, &b))
		return YS_BOOL;
	if (is_core_int(s))
		return YS_INT;
	if (is_core_float(s))
		return YS_FLOAT;
	return YS_STR;
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
	return n->quoted ? YS_STR : yscalar_classify(n->text);
}

int ynode_is_null(const struct ynode *n)
{
	return !n || (n->kind == YN_SCALAR && ynode_type(n) == YS_NULL);
}

int ynode_is_true(const struct ynode *n)
{
	int b;

	return n && n->kind == YN_SCALAR && core_bool(n->text, &b) && b;
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

/* ---- reading ---- */

struct anchor {
	char *name;
	const struct ynode *node; /* inside the document being read */
	long nodes;               /* its size, charged again for every alias */
};

struct frame {
	struct ynode *node;       /* a mapping or sequence being filled */
	struct ynode *key;        /* a mapping's key waiting for its value */
	char *anchor;             /* registered when the collection ends */
	long nodes_at_start;
};

struct reader {
	const struct ytree_opts *o;
	const struct ytree_hooks *h;
	struct ytree_error *e;
	struct frame *stack;
	int depth;
	long nodes;               /* in the whole stream */
	struct ynode *root;       /* the current document's */
	struct anchor *anchors;   /* the current document's */
	size_t n_anchors, cap_anchors;
};

static int fail(struct reader *r, enum ytree_problem p, yaml_mark_t m, const char *name)
{
	r->e->problem = p;
	r->e->line = (int)m.line + 1;
	r->e->col = (int)m.column + 1;
	snprintf(r->e->name, sizeof(r->e->name), "%s", name ? name : "");
	return -1;
}

/* libyaml's reader reports a byte offset rather than a mark: find the line and column. */
static void offset_mark(const char *text, size_t len, size_t offset, yaml_mark_t *m)
{
	m->line = m->column = 0;
	for (size_t i = 0; i < offset && i < len; i++) {
		if (text[i] == '\n')
			m->line++, m->column = 0;
		else if (((unsigned char)text[i] & 0xc0) != 0x80)
			m->column++;
	}
}

/* The byte a mark points at (libyaml counts characters, not bytes), or len when outside. */
static size_t mark_byte(const char *text, size_t len, yaml_mark_t m)
{
	size_t i = 0, line = 0, col = 0;

	while (i < len && line < m.line)
		if (text[i++] == '\n')
			line++;
	for (; i < len && text[i] != '\n'; i++) {
		if (((unsigned char)text[i] & 0xc0) == 0x80)
			continue;
		if (col++ == m.column)
			return i;
	}
	return i < len && col == m.column ? i : len;
}

static int syntax_error(struct reader *r, const yaml_parser_t *p, const char *text, size_t len)
{
	yaml_mark_t m = p->problem_mark;

	if (p->error == YAML_READER_ERROR)
		offset_mark(text, len, p->problem_offset, &m);
	fail(r, YTREE_SYNTAX, m, NULL);
	r->e->yaml_problem = p->problem;
	r->e->yaml_context = p->context;
	r->e->context_line = p->context ? (int)p->context_mark.line + 1 : 0;
	r->e->context_col = p->context ? (int)p->context_mark.column + 1 : 0;
	r->e->byte = p->error == YAML_READER_ERROR && p->problem_value >= 0 ? p->problem_value & 0xff : -1;
	/* libyaml says "found character that cannot start any token" of a tab, which names neither
	 * the tab nor the fix: an editor that indents with tabs is the usual cause */
	size_t at = mark_byte(text, len, m);
	if (p->error != YAML_READER_ERROR && at < len && text[at] == '\t') {
		size_t bol = at;
		while (bol > 0 && text[bol - 1] != '\n')
			bol--;
		while (bol < at && (text[bol] == ' ' || text[bol] == '\t'))
			bol++;
		r->e->yaml_problem = bol == at ? "tab characters are not allowed for indentation (indent with spaces)"
		                               : "a tab character is not allowed here (use spaces)";
		r->e->yaml_context = NULL;
		r->e->context_line = r->e->context_col = 0;
	}
	return -1;
}

static void clear_anchors(struct reader *r)
{
	for (size_t i = 0; i < r->n_anchors; i++)
		free(r->anchors[i].name);
	r->n_anchors = 0;
}

static void add_anchor(struct reader *r, const char *name, const struct ynode *node, long nodes)
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
	r->anchors[r->n_anchors++] = (struct anchor){ xstrdup(name), node, nodes };
}

static struct ynode *ynode_copy(const struct ynode *n)
{
	struct ynode *c = ynode_new(n->kind, n->line, n->col, n->set_index);

	c->tag = n->tag ? xstrdup(n->tag) : NULL;
	c->anchored = n->anchored;
	c->text = n->text ? xstrdup(n->text) : NULL;
	c->quoted = n->quoted;
	for (int i = 0; i < n->n; i++)
		ynode_append(c, n->keys ? ynode_copy(n->keys[i]) : NULL, ynode_copy(n->vals[i]));
	return c;
}

static int in_key_position(const struct reader *r)
{
	return r->depth > 0 && r->stack[r->depth - 1].node->kind == YN_MAP && !r->stack[r->depth - 1].key;
}

static int charge(struct reader *r, long n, yaml_mark_t m)
{
	if (n > r->o->max_nodes - r->nodes)
		return fail(r, YTREE_TOO_MANY_NODES, m, NULL);
	r->nodes += n;
	return 0;
}

/* Hands n (owned) to the collection on top of the stack, or makes it the document's root. */
static int attach(struct reader *r, struct ynode *n, yaml_mark_t m)
{
	struct frame *f;

	if (!r->depth) {
		r->root = n;
		return 0;
	}
	f = &r->stack[r->depth - 1];
	if (r->o->max_items && f->node->n >= r->o->max_items) {
		ynode_free(n);
		return fail(r, f->node->kind == YN_MAP ? YTREE_TOO_MANY_KEYS : YTREE_TOO_MANY_ITEMS, m, NULL);
	}
	if (f->node->kind == YN_SEQ) {
		ynode_append(f->node, NULL, n);
	} else if (!f->key) {
		f->key = n;
	} else {
		ynode_append(f->node, f->key, n);
		f->key = NULL;
	}
	return 0;
}

static int hook(struct reader *r, const struct ynode *n, enum ytree_visit v)
{
	return r->h && r->h->node ? r->h->node(n, v, r->h->ud) : 0;
}

static int on_scalar(struct reader *r, const yaml_event_t *ev)
{
	const char *anchor = (const char *)ev->data.scalar.anchor;
	struct ynode *n;
	int rc;

	if (strlen((const char *)ev->data.scalar.value) != ev->data.scalar.length)
		return fail(r, YTREE_NUL, ev->start_mark, NULL);
	if (charge(r, 1, ev->start_mark))
		return -1;
	if (anchor && r->o->aliases && in_key_position(r))
		return fail(r, YTREE_ANCHOR_KEY, ev->start_mark, NULL);
	n = ynode_scalar((const char *)ev->data.scalar.value, ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE,
	                 (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1, -1);
	if (ev->data.scalar.tag)
		n->tag = xstrdup((const char *)ev->data.scalar.tag);
	n->anchored = !!anchor;
	if ((rc = hook(r, n, in_key_position(r) ? YTREE_KEY : YTREE_VALUE))) {
		ynode_free(n);
		return rc;
	}
	if (attach(r, n, ev->start_mark))
		return -1;
	if (anchor && r->o->aliases)
		add_anchor(r, anchor, n, 1);
	return 0;
}

static int on_start(struct reader *r, const yaml_event_t *ev)
{
	int is_map = ev->type == YAML_MAPPING_START_EVENT;
	const char *tag = (const char *)(is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag);
	const char *anchor = (const char *)(is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor);
	struct ynode *n;
	int rc;

	if (in_key_position(r))
		return fail(r, YTREE_KEY_NOT_SCALAR, ev->start_mark, NULL);
	n = ynode_new(is_map ? YN_MAP : YN_SEQ, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1, -1);
	n->tag = tag ? xstrdup(tag) : NULL;
	n->anchored = !!anchor;
	rc = hook(r, n, YTREE_VALUE);
	if (!rc && r->depth >= r->o->max_depth)
		rc = fail(r, YTREE_TOO_DEEP, ev->start_mark, NULL);
	if (!rc)
		rc = charge(r, 1, ev->start_mark);
	if (rc) {
		ynode_free(n);
		return rc;
	}
	if (attach(r, n, ev->start_mark))
		return -1;
	r->stack[r->depth++] = (struct frame){ n, NULL, anchor && r->o->aliases ? xstrdup(anchor) : NULL,
	                                       r->nodes - 1 };
	return 0;
}

static int on_end(struct reader *r)
{
	struct frame *f = &r->stack[r->depth - 1];
	int rc = hook(r, f->node, YTREE_END);

	if (rc)
		return rc;
	r->depth--;
	if (f->anchor)
		add_anchor(r, f->anchor, f->node, r->nodes - f->nodes_at_start);
	free(f->anchor);
	return 0;
}

static int on_alias(struct reader *r, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	const struct anchor *a = NULL;

	if (!r->o->aliases)
		return fail(r, YTREE_ALIAS, ev->start_mark, name);
	for (size_t i = 0; i < r->n_anchors; i++)
		if (!strcmp(r->anchors[i].name, name))
			a = &r->anchors[i];
	if (!a)
		return fail(r, YTREE_UNKNOWN_ALIAS, ev->start_mark, name);
	if (in_key_position(r))
		return fail(r, YTREE_ALIAS_KEY, ev->start_mark, NULL);
	if (charge(r, a->nodes, ev->start_mark))
		return -1;
	return attach(r, ynode_copy(a->node), ev->start_mark);
}

/* Drops the document being read: the nodes on the stack are all reachable from its root; only
 * keys waiting for their values are loose. */
static void drop_document(struct reader *r)
{
	while (r->depth > 0) {
		struct frame *f = &r->stack[--r->depth];
		ynode_free(f->key);
		free(f->anchor);
	}
	ynode_free(r->root);
	r->root = NULL;
	clear_anchors(r);
}

/* one: a second document is an error, and the first one's root is left in *root */
static int read_stream(const char *text, size_t len, const struct ytree_opts *o, int one,
                       const struct ytree_hooks *h, struct ytree_error *e, struct ynode **root)
{
	struct reader r = { .o = o, .h = h, .e = e };
	yaml_parser_t parser;
	yaml_event_t ev;
	int rc = 0, docs = 0;

	memset(e, 0, sizeof(*e));
	e->byte = -1;
	if (!yaml_parser_initialize(&parser)) {
		e->problem = YTREE_SYNTAX;
		e->yaml_problem = "cannot initialise the YAML parser";
		return -1;
	}
	r.stack = xcalloc((size_t)o->max_depth + 1, sizeof(*r.stack));
	/* libyaml asserts on a NULL input, even an empty one */
	yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), text ? len : 0);
	for (int done = 0; !done && !rc;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = syntax_error(&r, &parser, text, len);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (one && docs)
				rc = fail(&r, YTREE_MORE_DOCS, ev.start_mark, NULL);
			docs++;
			break;
		case YAML_DOCUMENT_END_EVENT:
			if (!one) {
				struct ynode *doc = r.root;
				r.root = NULL;
				clear_anchors(&r);
				rc = h->document(doc, h->ud);
			}
			break;
		case YAML_ALIAS_EVENT:
			rc = on_alias(&r, &ev);
			break;
		case YAML_SCALAR_EVENT:
			rc = on_scalar(&r, &ev);
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			rc = on_start(&r, &ev);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			rc = on_end(&r);
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	if (!rc && one) {
		*root = r.root;
		r.root = NULL;
	}
	drop_document(&r);
	free(r.anchors);
	free(r.stack);
	yaml_parser_delete(&parser);
	return rc;
}

int ytree_parse(const char *text, size_t len, const struct ytree_opts *o, struct ynode **root, struct ytree_error *e)
{
	*root = NULL;
	return read_stream(text, len, o, 1, NULL, e, root);
}

int ytree_parse_stream(const char *text, size_t len, const struct ytree_opts *o, const struct ytree_hooks *h,
                       struct ytree_error *e)
{
	return read_stream(text, len, o, 0, h, e, NULL);
}

const char *ytree_error_text(const struct ytree_error *e, const struct ytree_opts *o, char *buf, size_t len)
{
	static const char *const words[] = {
		[YTREE_MORE_DOCS] = "more than one YAML document where one was expected",
		[YTREE_ALIAS_KEY] = "an alias as a mapping key is not supported",
		[YTREE_ANCHOR_KEY] = "an anchor on a mapping key is not supported",
		[YTREE_NUL] = "a string holds a NUL character",
		[YTREE_KEY_NOT_SCALAR] = "a mapping key must be a scalar",
		[YTREE_TOO_MANY_KEYS] = "mapping has too many keys",
		[YTREE_TOO_MANY_ITEMS] = "sequence has too many items",
	};

	switch (e->problem) {
	case YTREE_SYNTAX:
		snprintf(buf, len, "%s%s%s", e->yaml_problem ? e->yaml_problem : "invalid YAML",
		         e->yaml_context ? " " : "", e->yaml_context ? e->yaml_context : "");
		break;
	case YTREE_ALIAS:
	case YTREE_UNKNOWN_ALIAS:
		snprintf(buf, len, e->problem == YTREE_ALIAS ? "alias '*%.200s' is not supported" : "unknown alias '*%.200s'",
		         e->name);
		break;
	case YTREE_TOO_DEEP:
		snprintf(buf, len, "nesting deeper than %d levels", o->max_depth);
		break;
	case YTREE_TOO_MANY_NODES:
		snprintf(buf, len, "document expands to more than %ld nodes (aliases included)", o->max_nodes);
		break;
	default:
		snprintf(buf, len, "%s", words[e->problem]);
	}
	return buf;
}
