#include "lib/render/mustache.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"
#include "lib/util/yamljson.h"

#include <stdio.h>
#include <string.h>

enum ntype { N_TEXT, N_VAR, N_SECTION, N_INVERTED, N_PARTIAL };

struct node {
	enum ntype type;
	int line;
	char *text;          /* N_TEXT: the bytes; N_PARTIAL: the indentation of a standalone tag */
	size_t len;
	char *name;          /* variable, section or partial name */
	struct node *child;  /* sections: the body */
	struct node *next;
};

struct mustache {
	char *file;
	struct node *root;
};

static void nodes_free(struct node *n)
{
	while (n) {
		struct node *next = n->next;
		nodes_free(n->child);
		free(n->text);
		free(n->name);
		free(n);
		n = next;
	}
}

void mustache_free(struct mustache *t)
{
	if (!t)
		return;
	nodes_free(t->root);
	free(t->file);
	free(t);
}

const char *mustache_file(const struct mustache *t)
{
	return t->file;
}

/* ------------------------------------------------------------------------------------------ */
/* parsing */

struct open_section {
	struct node *node;
	struct node **tail;  /* where the next node at this level goes */
};

static int count_lines(const char *s, size_t n)
{
	int lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += s[i] == '\n';
	return lines;
}

static int is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

static int valid_name(const char *s, int partial)
{
	size_t n = strlen(s);

	if (!partial && !strcmp(s, "."))
		return 1;
	if (!n || s[0] == '.' || s[n - 1] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-' || c == '.'))
			return 0;
		if (!partial && c == '.' && s[i + 1] == '.')
			return 0;
	}
	return 1;
}

static struct node *append(struct node ***tail, enum ntype type, int line)
{
	struct node *n = xcalloc(1, sizeof(*n));
	n->type = type;
	n->line = line;
	**tail = n;
	*tail = &n->next;
	return n;
}

static void append_text(struct node ***tail, const char *s, size_t n, int line)
{
	if (!n)
		return;
	struct node *t = append(tail, N_TEXT, line);
	t->text = xstrndup(s, n);
	t->len = n;
}

struct mustache *mustache_parse(const char *file, const char *text, size_t len, struct dlk_err *err)
{
	struct mustache *t = xcalloc(1, sizeof(*t));
	struct open_section stack[MUSTACHE_MAX_DEPTH + 1];
	int depth = 0, line = 1;
	size_t pos = 0;
	struct node **tail = &t->root;
	char *name = NULL;

	if (!text) {
		text = "";
		len = 0;
	}
	t->file = xstrdup(file ? file : "<template>");
	if (len > MUSTACHE_MAX_TEMPLATE) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: larger than the limit of %u bytes", t->file, MUSTACHE_MAX_TEMPLATE);
		goto fail;
	}
	if (memchr(text, '\0', len)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: the template holds a NUL byte", t->file,
		         1 + count_lines(text, (size_t)((const char *)memchr(text, '\0', len) - text)));
		goto fail;
	}
	while (pos < len) {
		const char *open = memmem(text + pos, len - pos, "{{", 2);
		if (!open) {
			append_text(&tail, text + pos, len - pos, line);
			break;
		}
		size_t tag_start = (size_t)(open - text);
		int tag_line = line + count_lines(text + pos, tag_start - pos);
		const char *close = memmem(open + 2, len - tag_start - 2, "}}", 2);
		char sigil = tag_start + 2 < len ? open[2] : '\0';
		if (!close || (sigil != '!' && memchr(open, '\n', (size_t)(close - open)))) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: unterminated tag '{{' (no '}}' on its line)", t->file, tag_line);
			goto fail;
		}
		size_t tag_end = (size_t)(close - text) + 2;
		/* standalone: a section, comment or partial tag with only white space around it on its
		 * line, which it consumes whole */
		size_t ls = tag_start, le = tag_end;
		int standalone = 0;
		if (strchr("#^/!>", sigil) && sigil) {
			while (ls > 0 && text[ls - 1] != '\n')
				ls--;
			while (le < len && text[le] != '\n')
				le++;
			standalone = ls >= pos && is_blank(text + ls, tag_start - ls) && is_blank(text + tag_end, le - tag_end);
		}
		append_text(&tail, text + pos, (standalone ? ls : tag_start) - pos, line);
		{
			const char *b = open + 2 + (strchr("#^/!>&{=", sigil) && sigil ? 1 : 0), *e = close;
			while (b < e && (*b == ' ' || *b == '\t'))
				b++;
			while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			free(name);
			name = xstrndup(b, (size_t)(e - b));
		}
		if (standalone) {
			line = tag_line + count_lines(text + tag_start, (le < len ? le + 1 : le) - tag_start);
			pos = le < len ? le + 1 : le;
		} else {
			line = tag_line + count_lines(text + tag_start, tag_end - tag_start);
			pos = tag_end;
		}
		if (sigil == '>') {
			if (!valid_name(name, 1)) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: bad partial name '%s'", t->file, tag_line, name);
				goto fail;
			}
			struct node *p = append(&tail, N_PARTIAL, tag_line);
			p->name = name;
			if (standalone) { /* its indentation, for every line it brings in */
				p->text = xstrndup(text + ls, tag_start - ls);
				p->len = tag_start - ls;
			}
			name = NULL;
			continue;
		}
		if (sigil == '!')
			continue;
		if (sigil == '{' || sigil == '&') {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: unescaped output '{{%c...' is not supported: every value is "
			         "written as a quoted YAML scalar", t->file, tag_line, sigil);
			goto fail;
		}
		if (sigil == '=') {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: changing delimiters ('{{=') is not supported", t->file, tag_line);
			goto fail;
		}
		if (!*name) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: empty tag '%.*s'", t->file, tag_line,
			         (int)(tag_end - tag_start), open);
			goto fail;
		}
		if (!valid_name(name, 0)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: bad name '%.60s' in tag", t->file, tag_line, name);
			goto fail;
		}
		if (sigil == '#' || sigil == '^') {
			if (depth >= MUSTACHE_MAX_DEPTH) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: sections nested deeper than %d", t->file, tag_line,
				         MUSTACHE_MAX_DEPTH);
				goto fail;
			}
			struct node *s = append(&tail, sigil == '#' ? N_SECTION : N_INVERTED, tag_line);
			s->name = name;
			name = NULL;
			stack[depth].node = s;
			stack[depth].tail = tail;
			depth++;
			tail = &s->child;
		} else if (sigil == '/') {
			if (!depth) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: '{{/%s}}' closes no open section", t->file, tag_line, name);
				goto fail;
			}
			struct node *s = stack[depth - 1].node;
			if (strcmp(s->name, name)) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: '{{/%s}}' does not match '{{%c%s}}' opened at line %d",
				         t->file, tag_line, name, s->type == N_SECTION ? '#' : '^', s->name, s->line);
				goto fail;
			}
			depth--;
			tail = stack[depth].tail;
		} else {
			struct node *v = append(&tail, N_VAR, tag_line);
			v->name = name;
			name = NULL;
		}
	}
	if (depth) {
		struct node *s = stack[depth - 1].node;
		dlk_errf(err, DLK_EXIT_CONFIG, "%s:%d: section '{{%c%s}}' is never closed", t->file, s->line,
		         s->type == N_SECTION ? '#' : '^', s->name);
		goto fail;
	}
	free(name);
	return t;
fail:
	free(name);
	mustache_free(t);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* rendering */

#define CTX_MAX (1 + (MUSTACHE_MAX_DEPTH + 1) * (MUSTACHE_MAX_PARTIAL_DEPTH + 1))

struct renderer {
	const cJSON *stack[CTX_MAX];
	int depth;
	const struct mustache_partials *partials;
	int partial_depth;
	size_t max_out;
	int check_only;       /* mustache_check(): enter every branch, print nothing */
	size_t steps;         /* nodes visited: partials that include each other many times could
	                       * otherwise multiply into a hang without printing a byte */
	struct dlk_err *err;
};

/* In check mode, a section over an empty list is entered with this on top of the context: its
 * items' fields are unknown, so any name resolves (to this) there. */
static const cJSON any_value = { .type = cJSON_NULL };

static int fail(struct renderer *r, const struct mustache *t, const struct node *n, const char *fmt, const char *arg)
{
	char what[DLK_ERR_MSG_MAX / 2];

	snprintf(what, sizeof(what), fmt, arg);
	return dlk_errf(r->err, DLK_EXIT_CONFIG, "%s:%d: %s", t->file, n->line, what);
}

static int unknown(struct renderer *r, const struct mustache *t, const struct node *n, const char *shown,
                   const char *seg, const cJSON *where)
{
	const char *cands[256];
	size_t nc = 0;
	char sug[DLK_ERR_MSG_MAX / 2];

	/* suggest among the names visible where the lookup failed */
	if (where) {
		for (const cJSON *c = where->child; c && nc < DLK_ARRAY_SIZE(cands); c = c->next)
			cands[nc++] = c->string;
	} else {
		for (int i = r->depth - 1; i >= 0; i--)
			if (cJSON_IsObject(r->stack[i]))
				for (const cJSON *c = r->stack[i]->child; c && nc < DLK_ARRAY_SIZE(cands); c = c->next)
					cands[nc++] = c->string;
	}
	dlk_suggest_or_list(sug, sizeof(sug), seg, cands, nc, "names here are");
	dlk_errf(r->err, DLK_EXIT_CONFIG, "%s:%d: unknown name '%s'%s", t->file, n->line, shown, sug);
	return -1;
}

/* Copies the dotted name's segment at start into seg; *dot is the dot after it, or NULL. */
static int segment(struct renderer *r, const struct mustache *t, const struct node *n, const char *start,
                   char seg[256], const char **dot)
{
	size_t sl;

	*dot = strchr(start, '.');
	sl = *dot ? (size_t)(*dot - start) : strlen(start);
	if (sl >= 256)
		return fail(r, t, n, "name '%.60s...' is too long", n->name);
	memcpy(seg, start, sl);
	seg[sl] = '\0';
	return 0;
}

static const cJSON *lookup(struct renderer *r, const struct mustache *t, const struct node *n)
{
	const char *name = n->name;
	const cJSON *v = NULL;
	char seg[256];
	const char *dot;

	if (!strcmp(name, "."))
		return r->stack[r->depth - 1];

	if (segment(r, t, n, name, seg, &dot))
		return NULL;
	for (int i = r->depth - 1; i >= 0 && !v; i--)
		if (cJSON_IsObject(r->stack[i]))
			v = cJSON_GetObjectItemCaseSensitive(r->stack[i], seg);
	if (!v) {
		for (int i = r->depth - 1; r->check_only && i >= 0; i--)
			if (r->stack[i] == &any_value)
				return &any_value;
		unknown(r, t, n, name, seg, NULL);
		return NULL;
	}
	while (dot) {
		if (segment(r, t, n, dot + 1, seg, &dot))
			return NULL;
		if (!cJSON_IsObject(v)) {
			fail(r, t, n, "'%s' reaches into a value that is not an object", name);
			return NULL;
		}
		const cJSON *next = cJSON_GetObjectItemCaseSensitive(v, seg);
		if (!next) {
			unknown(r, t, n, name, seg, v);
			return NULL;
		}
		v = next;
	}
	return v;
}

static int truthy(const cJSON *v)
{
	if (cJSON_IsArray(v))
		return v->child != NULL;
	if (cJSON_IsString(v))
		return v->valuestring[0] != '\0';
	if (cJSON_IsNumber(v))
		return v->valuedouble != 0;
	if (cJSON_IsRaw(v) || cJSON_IsObject(v) || cJSON_IsTrue(v))
		return 1;
	return 0;
}

static int check_size(struct renderer *r, const struct mustache *t, const struct node *n, const struct dlk_buf *out)
{
	if (out->len > r->max_out) {
		char lim[32];
		snprintf(lim, sizeof(lim), "%zu", r->max_out);
		return fail(r, t, n, "rendered output is larger than the limit of %s bytes", lim);
	}
	return 0;
}

static int render_nodes(struct renderer *r, const struct mustache *t, const struct node *n, struct dlk_buf *out);

static int render_partial(struct renderer *r, const struct mustache *t, const struct node *n, struct dlk_buf *out)
{
	const struct mustache *p;
	struct dlk_buf tmp = DLK_BUF_INIT;
	int rc = -1;

	if (!r->partials)
		return fail(r, t, n, "partial '{{> %s}}' cannot be used here", n->name);
	if (r->partial_depth >= MUSTACHE_MAX_PARTIAL_DEPTH)
		return fail(r, t, n, "partial '%s' nested too deep (does a partial include itself?)", n->name);
	p = r->partials->lookup(r->partials->ud, n->name, r->err);
	if (!p)
		return dlk_err_prefix(r->err, "%s:%d", t->file, n->line);
	r->partial_depth++;
	if (render_nodes(r, p, p->root, &tmp) < 0)
		goto out;
	/* a standalone partial tag indents every line of what the partial printed */
	for (size_t i = 0; i < tmp.len;) {
		const char *nl = memchr(tmp.data + i, '\n', tmp.len - i);
		size_t end = nl ? (size_t)(nl - tmp.data) + 1 : tmp.len;
		if (n->text && end - i > 1)
			dlk_buf_add(out, n->text, n->len);
		dlk_buf_add(out, tmp.data + i, end - i);
		i = end;
	}
	rc = check_size(r, t, n, out);
out:
	r->partial_depth--;
	dlk_buf_release(&tmp);
	return rc;
}

static int render_var(struct renderer *r, const struct mustache *t, const struct node *n, struct dlk_buf *out)
{
	const cJSON *v = lookup(r, t, n);

	if (!v)
		return -1;
	if (r->check_only && !cJSON_IsArray(v) && !cJSON_IsObject(v))
		return 0;
	if (cJSON_IsString(v)) {
		if (yamljson_quote(out, v->valuestring, strlen(v->valuestring)) < 0)
			return fail(r, t, n, "the value of '%s' is not valid UTF-8", n->name);
	} else if (cJSON_IsNumber(v)) {
		yamljson_number(out, v->valuedouble);
	} else if (cJSON_IsRaw(v)) {
		dlk_buf_adds(out, v->valuestring);
	} else if (cJSON_IsBool(v)) {
		dlk_buf_adds(out, cJSON_IsTrue(v) ? "true" : "false");
	} else if (cJSON_IsNull(v)) {
		dlk_buf_adds(out, "null");
	} else {
		char what[300];
		snprintf(what, sizeof(what), "'%s' is %s: use a section '{{#%s}}...{{/%s}}'", n->name,
		         cJSON_IsArray(v) ? "a list" : "an object", n->name, n->name);
		return fail(r, t, n, "%s", what);
	}
	return check_size(r, t, n, out);
}

static int push(struct renderer *r, const struct mustache *t, const struct node *n, const cJSON *v)
{
	if (r->depth >= CTX_MAX)
		return fail(r, t, n, "section '%s' nested too deep", n->name);
	r->stack[r->depth++] = v;
	return 0;
}

/* Renders section n's body with v on top of the context stack. */
static int render_with(struct renderer *r, const struct mustache *t, const struct node *n, const cJSON *v,
                       struct dlk_buf *out)
{
	int rc;

	if (push(r, t, n, v) < 0)
		return -1;
	rc = render_nodes(r, t, n->child, out);
	r->depth--;
	return rc < 0 ? -1 : 0;
}

static int render_nodes(struct renderer *r, const struct mustache *t, const struct node *n, struct dlk_buf *out)
{
	for (; n; n = n->next) {
		const cJSON *v;
		if (++r->steps > MUSTACHE_MAX_STEPS)
			return fail(r, t, n, "%s", "the template expands to too much work (partials including partials?)");
		switch (n->type) {
		case N_TEXT:
			if (r->check_only)
				break;
			dlk_buf_add(out, n->text, n->len);
			if (check_size(r, t, n, out) < 0)
				return -1;
			break;
		case N_VAR:
			if (render_var(r, t, n, out) < 0)
				return -1;
			break;
		case N_PARTIAL:
			if (render_partial(r, t, n, out) < 0)
				return -1;
			break;
		case N_INVERTED:
			v = lookup(r, t, n);
			if (!v)
				return -1;
			if ((!truthy(v) || r->check_only) && render_nodes(r, t, n->child, out) < 0)
				return -1;
			break;
		case N_SECTION:
			v = lookup(r, t, n);
			if (!v)
				return -1;
			if (r->check_only) {
				/* one pass through the body: with the first item, or with anything */
				const cJSON *top = cJSON_IsArray(v) ? (v->child ? v->child : &any_value) : v;
				if (render_with(r, t, n, top, out) < 0)
					return -1;
				break;
			}
			if (!truthy(v))
				break;
			if (!cJSON_IsArray(v)) {
				if (render_with(r, t, n, v, out) < 0)
					return -1;
				break;
			}
			for (const cJSON *item = v->child; item; item = item->next)
				if (render_with(r, t, n, item, out) < 0)
					return -1;
			break;
		}
	}
	return 0;
}

int mustache_check(const struct mustache *t, const cJSON *ctx, const struct mustache_partials *partials,
                   struct dlk_err *err)
{
	struct renderer r;
	struct dlk_buf sink = DLK_BUF_INIT;
	int rc;

	memset(&r, 0, sizeof(r));
	r.partials = partials;
	r.max_out = 0; /* nothing is printed */
	r.check_only = 1;
	r.err = err;
	r.stack[r.depth++] = ctx;
	rc = render_nodes(&r, t, t->root, &sink);
	dlk_buf_release(&sink);
	return rc;
}

int mustache_render(const struct mustache *t, const cJSON *ctx, const struct mustache_partials *partials,
                    size_t max_out, struct dlk_buf *out, struct dlk_err *err)
{
	struct renderer r;

	memset(&r, 0, sizeof(r));
	r.partials = partials;
	r.max_out = max_out;
	r.err = err;
	r.stack[r.depth++] = ctx;
	return render_nodes(&r, t, t->root, out);
}
