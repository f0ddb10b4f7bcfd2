/* CSV tables: numeric features plus one label column (a class index, or a class's name). */
#include "lib/data/decode.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/buf.h"
#include "lib/data/dataset.h"
#include "lib/util/mem.h"

/* A field longer than this cannot be a number anyone wrote on purpose. */
#define CSV_FIELD_MAX 256

struct csv {
	const char *p, *end, *name;
	size_t line, col;        /* of p, 1-based */
	struct dlk_err *err;
};

struct field {
	char text[CSV_FIELD_MAX + 1];
	size_t len;
	size_t line, col;        /* where the field starts */
	int too_long;
};

/* The field as the user should see it in a message: printable, bounded. */
static void show(const struct field *f, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < f->len && o + 5 < cap; i++) {
		unsigned char c = (unsigned char)f->text[i];
		if (c >= 0x20 && c < 0x7f && c != '\'')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
		if (o >= 40) {
			out[o++] = '.', out[o++] = '.', out[o++] = '.';
			break;
		}
	}
	if (f->too_long && o + 4 < cap)
		out[o++] = '.', out[o++] = '.', out[o++] = '.';
	out[o < cap ? o : cap - 1] = '\0';
}

static void advance(struct csv *c)
{
	if (*c->p == '\n')
		c->line++, c->col = 1;
	else
		c->col++;
	c->p++;
}

static int at_eol(const struct csv *c)
{
	return c->p == c->end || *c->p == '\n' || (*c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n');
}

static void skip_eol(struct csv *c)
{
	if (c->p < c->end && *c->p == '\r')
		advance(c);
	if (c->p < c->end && *c->p == '\n')
		advance(c);
}

static void field_add(struct field *f, char ch)
{
	if (f->len < CSV_FIELD_MAX)
		f->text[f->len++] = ch;
	else
		f->too_long = 1;
}

/* Reads one field; returns 1 when more fields follow on this record, 0 at its end, -1 on error. */
static int read_field(struct csv *c, struct field *f)
{
	f->len = 0;
	f->too_long = 0;
	f->line = c->line;
	f->col = c->col;
	{
		/* Blanks before an opening quote (`1, "2"`) are not part of the field. */
		const char *q = c->p;
		while (q < c->end && (*q == ' ' || *q == '\t'))
			q++;
		if (q < c->end && *q == '"')
			while (c->p < q)
				advance(c);
	}
	if (c->p < c->end && *c->p == '"') {
		size_t qline = c->line, qcol = c->col;
		advance(c);
		for (;;) {
			if (c->p == c->end)
				return dlk_errf(c->err, DLK_EXIT_CONFIG,
				                "%s:%zu:%zu: unterminated quoted field", c->name, qline, qcol);
			if (*c->p == '"') {
				advance(c);
				if (c->p < c->end && *c->p == '"') {
					field_add(f, '"');
					advance(c);
					continue;
				}
				break;
			}
			field_add(f, *c->p);
			advance(c);
		}
		while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
			advance(c);
		if (!at_eol(c) && *c->p != ',')
			return dlk_errf(c->err, DLK_EXIT_CONFIG,
			                "%s:%zu:%zu: unexpected character after a closing quote", c->name, c->line,
			                c->col);
	} else {
		while (!at_eol(c) && *c->p != ',') {
			field_add(f, *c->p);
			advance(c);
		}
	}
	f->text[f->len] = '\0';
	if (c->p < c->end && *c->p == ',') {
		advance(c);
		return 1;
	}
	skip_eol(c);
	return 0;
}

/* Parses the whole field as a finite number (surrounding blanks allowed). */
static int field_number(const struct field *f, double *v)
{
	const char *s = f->text;
	char *e;

	if (f->too_long || memchr(f->text, '\0', f->len))
		return -1;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return -1;
	*v = strtod(s, &e);
	while (*e == ' ' || *e == '\t')
		e++;
	if (*e || !isfinite(*v))
		return -1;
	return 0;
}

/* The index of the class the field names, or -1. */
static int field_class(const struct field *f, const struct dlk_csv_opts *opts)
{
	for (int k = 0; opts && opts->classes && k < opts->n_classes; k++)
		if (!f->too_long && strlen(opts->classes[k]) == f->len && !memcmp(opts->classes[k], f->text, f->len))
			return k;
	return -1;
}

/* A label that is neither an index nor a class name: say which labels are meant and how names
 * become usable (the user's file is right; the project lacks the names). */
static int label_problem(const struct csv *c, const struct field *f, const struct dlk_csv_opts *opts)
{
	char shown[64];

	show(f, shown, sizeof(shown));
	if (opts && opts->classes && opts->n_classes > 0) {
		struct dlk_buf names = DLK_BUF_INIT;
		for (int k = 0; k < opts->n_classes && names.len < 200; k++)
			dlk_buf_addf(&names, "%s%s", k ? ", " : "", opts->classes[k]);
		dlk_errf(c->err, DLK_EXIT_CONFIG, "%s:%zu:%zu: the label '%s' is not one of data.classes (%s%s)", c->name,
		         f->line, f->col, shown, names.data, names.len >= 200 ? ", ..." : "");
		dlk_err_hint(c->err, "a label is a class's name as data.classes spells it, or its index from 0");
		dlk_buf_release(&names);
		return -1;
	}
	dlk_errf(c->err, DLK_EXIT_CONFIG, "%s:%zu:%zu: the label '%s' is not a class index (labels are numbers 0, 1, ...)",
	         c->name, f->line, f->col, shown);
	dlk_err_hint(c->err, "to use class names as labels, list them in dlk.yaml, in index order: "
	             "data: {classes: [name0, name1, ...]}");
	return -1;
}

struct row {
	struct field *f;
	size_t n, cap;
	size_t line;
};

/* Reads one record (skipping blank lines); returns 1 with a row, 0 at the end, -1 on error. */
static int read_row(struct csv *c, struct row *r)
{
	int more;

	while (c->p < c->end) {
		const char *q = c->p;
		while (q < c->end && (*q == ' ' || *q == '\t'))
			q++;
		if (q == c->end || *q == '\n' || (*q == '\r' && q + 1 < c->end && q[1] == '\n')) {
			while (c->p < q)
				advance(c);
			skip_eol(c);
			continue;
		}
		break;
	}
	if (c->p >= c->end)
		return 0;
	r->n = 0;
	r->line = c->line;
	do {
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 16;
			r->f = xrealloc(r->f, r->cap * sizeof(*r->f));
		}
		more = read_field(c, &r->f[r->n]);
		if (more < 0)
			return -1;
		r->n++;
		if (r->n > 65536)
			return dlk_errf(c->err, DLK_EXIT_CONFIG, "%s:%zu: more than 65536 fields in a row",
			                c->name, r->line);
	} while (more);
	return 1;
}

/* One pass over the table: checks every row; stores (when s->y is wanted, keep != 0) the data rows
 * in [from, to) of the data rows; *rows counts them all. */
static int csv_pass(const void *buf, size_t len, const char *name, const struct dlk_csv_opts *opts, size_t from,
                    size_t to, int keep, struct dlk_samples *s, size_t *rows, size_t *ncols_out, struct dlk_err *err)
{
	struct csv c = { buf, (const char *)buf + len, name, 1, 1, err };
	struct row r = { NULL, 0, 0, 0 };
	size_t ncols = 0, first_line = 0, cap = 0, i, j, row = 0;
	int header = opts ? opts->header : -1, label_col = opts ? opts->label_column : -1;
	size_t ntarget = opts && opts->targets > 0 ? (size_t)opts->targets : 0, nfeat = 0;
	int got, first = 1, ret = -1;
	char shown[64];

	/* A UTF-8 byte order mark, as spreadsheet programs write it. */
	if (len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3))
		c.p += 3;
	while ((got = read_row(&c, &r)) > 0) {
		if (first) {
			int numeric = 1;
			first = 0;
			ncols = r.n;
			first_line = r.line;
			if (ncols < 2) {
				dlk_errf(err, DLK_EXIT_CONFIG,
				         "%s:%zu: a row needs at least two fields (features and a label), this one has %zu",
				         name, r.line, ncols);
				goto out;
			}
			if (ntarget && ntarget >= ncols) {
				dlk_errf(err, DLK_EXIT_CONFIG,
				         "%s:%zu: data.csv.targets is %zu but rows have %zu fields: no feature is left", name,
				         r.line, ntarget, ncols);
				goto out;
			}
			if (ntarget)
				label_col = -2; /* no label: the last ntarget columns are the targets */
			else if (label_col < 0)
				label_col = (int)ncols - 1;
			nfeat = ntarget ? ncols - ntarget : ncols - 1;
			if (!ntarget && (size_t)label_col >= ncols) {
				dlk_errf(err, DLK_EXIT_CONFIG,
				         "%s:%zu: the label column %d does not exist (rows have %zu fields, counted from 0)",
				         name, r.line, label_col, ncols);
				goto out;
			}
			if (header < 0) {
				double v;
				/* a class name in the label column is data, not a header */
				for (j = 0; j < r.n && numeric; j++)
					numeric = field_number(&r.f[j], &v) == 0 ||
					          (j == (size_t)label_col && field_class(&r.f[j], opts) >= 0);
			}
			if (header > 0 || (header < 0 && !numeric))
				continue;
		}
		if (r.n != ncols) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: the row has %zu fields, expected %zu (as on line %zu)",
			         name, r.line, r.n, ncols, first_line);
			goto out;
		}
		int store = keep && row >= from && row < to;
		if (store && s->n == cap) {
			cap = cap ? 2 * cap : 1024;
			s->x = xrealloc(s->x, cap * nfeat * sizeof(float));
			s->y = xrealloc(s->y, cap * sizeof(int32_t));
			if (ntarget)
				s->t = xrealloc(s->t, cap * ntarget * sizeof(float));
		}
		if (store && ntarget)
			s->y[s->n] = 0;
		for (i = 0, j = 0; j < ncols; j++) {
			double v;
			if (j == (size_t)label_col && field_number(&r.f[j], &v) < 0) {
				int k = field_class(&r.f[j], opts);
				if (k < 0) {
					label_problem(&c, &r.f[j], opts);
					goto out;
				}
				v = k;
			}
			if ((j != (size_t)label_col && field_number(&r.f[j], &v) < 0) ||
			    (j != (size_t)label_col && fabs(v) > 3.4e38)) {
				show(&r.f[j], shown, sizeof(shown));
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu:%zu: expected a number, got '%s'", name,
				         r.f[j].line, r.f[j].col, shown);
				goto out;
			}
			if (j == (size_t)label_col) {
				if (v < 0 || v >= DLK_MAX_CLASSES || v != floor(v)) {
					show(&r.f[j], shown, sizeof(shown));
					dlk_errf(err, DLK_EXIT_CONFIG,
					         "%s:%zu:%zu: the label '%s' is not a non-negative integer below %d", name,
					         r.f[j].line, r.f[j].col, shown, DLK_MAX_CLASSES);
					goto out;
				}
				if ((int32_t)v > s->max_label)
					s->max_label = (int32_t)v;
				if (store)
					s->y[s->n] = (int32_t)v;
			} else if (store && ntarget && j >= nfeat) {
				s->t[s->n * ntarget + (j - nfeat)] = (float)v;
			} else if (store) {
				s->x[s->n * nfeat + i++] = (float)v;
			}
		}
		if (store)
			s->n++;
		row++;
	}
	if (got < 0)
		goto out;
	*rows = row;
	*ncols_out = ncols;
	ret = 0;
out:
	free(r.f);
	return ret;
}

int dlk_csv_decode(const void *buf, size_t len, const char *name, const struct dlk_csv_opts *opts,
                   struct dlk_samples *out, struct dlk_err *err)
{
	struct dlk_samples s = DLK_SAMPLES_INIT;
	int world = opts && opts->shard_world > 1 ? opts->shard_world : 1, rank = world > 1 ? opts->shard_rank : 0;
	size_t rows = 0, ncols = 0, from = 0, to = (size_t)-1;

	if (world > 1) {
		/* the rows are counted (and every one checked) first, then the shard's are kept */
		if (csv_pass(buf, len, name, opts, 0, 0, 0, &s, &rows, &ncols, err) < 0)
			goto fail;
		dlk_part_range(rows, rank, world, &from, &to);
		s.max_label = -1;
	}
	if (csv_pass(buf, len, name, opts, from, to, 1, &s, &rows, &ncols, err) < 0)
		goto fail;
	if (rows == 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the table holds no data rows", name);
		goto fail;
	}
	{
		size_t nt = opts && opts->targets > 0 ? (size_t)opts->targets : 0, nf = nt ? ncols - nt : ncols - 1;
		s.shape[0] = 1;
		s.shape[1] = 1;
		s.shape[2] = (int)nf;
		s.sample_size = nf;
		s.target_size = nt;
	}
	if (world > 1) {
		s.base = from;
		s.total = rows;
	}
	*out = s;
	return 0;
fail:
	dlk_samples_release(&s);
	return -1;
}
