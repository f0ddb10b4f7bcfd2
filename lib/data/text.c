/* Text rows from CSV or JSON Lines, their labels, and their encoding into fixed-length ids. */
#include "lib/data/text.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/parallel.h"

void dlk_text_rows_release(struct dlk_text_rows *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->text[i]);
		free(r->label[i]);
	}
	free(r->text);
	free(r->len);
	free(r->label);
	free(r->line);
	memset(r, 0, sizeof(*r));
}

int dlk_text_is_jsonl_name(const char *name)
{
	static const char *const ext[] = { ".jsonl", ".ndjson", ".json" };
	size_t n = strlen(name);
	for (int i = 0; i < 3; i++) {
		size_t e = strlen(ext[i]);
		if (n >= e && !strcasecmp(name + n - e, ext[i]))
			return 1;
	}
	return 0;
}

static void rows_add(struct dlk_text_rows *r, size_t *cap, const char *text, size_t tlen, const char *label,
                     size_t llen, size_t line)
{
	if (r->n == *cap) {
		*cap = *cap ? *cap * 2 : 256;
		r->text = xrealloc(r->text, *cap * sizeof(*r->text));
		r->len = xrealloc(r->len, *cap * sizeof(*r->len));
		r->label = xrealloc(r->label, *cap * sizeof(*r->label));
		r->line = xrealloc(r->line, *cap * sizeof(*r->line));
	}
	r->text[r->n] = xstrndup(text, tlen);
	r->len[r->n] = tlen;
	r->label[r->n] = xstrndup(label, llen);
	r->line[r->n] = line;
	r->n++;
}

/* One CSV record from *pos: its fields into fields (offsets into f's data, NUL-separated), the
 * line count moved on; 0 at the end, -1 on an unterminated quote. */
struct csv_rec {
	struct dlk_buf f;       /* the fields' bytes, each followed by a NUL */
	size_t *start, *flen;
	size_t n, cap;
};

static void rec_push(struct csv_rec *r, size_t start)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 16;
		r->start = xrealloc(r->start, r->cap * sizeof(*r->start));
		r->flen = xrealloc(r->flen, r->cap * sizeof(*r->flen));
	}
	r->start[r->n] = start;
	r->flen[r->n] = r->f.len - start;
	r->n++;
	dlk_buf_addc(&r->f, 0);
}

static int csv_record(const char *p, size_t len, size_t *pos, size_t *line, struct csv_rec *r)
{
	size_t i = *pos, start;
	int quoted = 0;

	r->n = 0;
	dlk_buf_reset(&r->f);
	/* blank lines are skipped */
	while (i < len && (p[i] == '\n' || (p[i] == '\r' && i + 1 < len && p[i + 1] == '\n'))) {
		if (p[i] == '\n')
			(*line)++;
		i++;
	}
	if (i >= len) {
		*pos = i;
		return 0;
	}
	start = r->f.len;
	for (; i < len; i++) {
		char c = p[i];
		if (quoted) {
			if (c == '"' && i + 1 < len && p[i + 1] == '"') {
				dlk_buf_addc(&r->f, '"');
				i++;
			} else if (c == '"') {
				quoted = 0;
			} else {
				if (c == '\n')
					(*line)++;
				dlk_buf_addc(&r->f, c);
			}
		} else if (c == '"' && r->f.len == start) {
			quoted = 1;
		} else if (c == ',') {
			rec_push(r, start);
			start = r->f.len;
		} else if (c == '\n' || (c == '\r' && i + 1 < len && p[i + 1] == '\n')) {
			if (c == '\r')
				i++;
			(*line)++;
			i++;
			break;
		} else {
			dlk_buf_addc(&r->f, c);
		}
	}
	if (quoted)
		return -1;
	rec_push(r, start);
	*pos = i;
	return 1;
}

static int parse_csv(const char *p, size_t len, const char *name, const char *column, const char *label,
                     const char *sep, struct dlk_text_rows *out, struct dlk_err *err)
{
	struct csv_rec r;
	size_t pos = 0, line = 1, cap = 0, at;
	long tc = -1, lc = -1;
	size_t ncols;
	int ret = -1, k;

	memset(&r, 0, sizeof(r));
	at = line;
	k = csv_record(p, len, &pos, &line, &r);
	if (k <= 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, k < 0 ? "%s:%zu: a quoted field is never closed" : "'%s': empty: no header row",
		         name, at);
		goto out;
	}
	ncols = r.n;
	for (size_t c = 0; c < r.n; c++) {
		const char *f = r.f.data + r.start[c];
		if (tc < 0 && !strcmp(f, column))
			tc = (long)c;
		if (lc < 0 && !strcmp(f, label))
			lc = (long)c;
	}
	if (tc < 0 || lc < 0) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s:1: the header row has no column '%s'", name, tc < 0 ? column : label);
		dlk_err_hint(err, "the first row names the columns; set data.text.%s to the %s's column",
		             tc < 0 ? "column" : "label", tc < 0 ? "text" : "label");
		goto out;
	}
	for (;;) {
		while (pos < len && (p[pos] == '\n' || p[pos] == '\r')) {
			if (p[pos] == '\n')
				line++;
			pos++;
		}
		at = line;
		k = csv_record(p, len, &pos, &line, &r);
		if (k == 0)
			break;
		if (k < 0) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: a quoted field is never closed", name, at);
			goto out;
		}
		if (r.n != ncols) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: %zu fields, but the header row has %zu", name, at, r.n, ncols);
			goto out;
		}
		if (!r.flen[lc] && !sep) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: the label column '%s' is empty", name, at, label);
			goto out;
		}
		rows_add(out, &cap, r.f.data + r.start[tc], r.flen[tc], r.f.data + r.start[lc], r.flen[lc], at);
	}
	ret = 0;
out:
	dlk_buf_release(&r.f);
	free(r.start);
	free(r.flen);
	return ret;
}

/* with sep: a JSON label that is any number (written %.9g) or an array of strings and numbers
 * (joined by sep; an element holding sep is refused), as float targets read them */
static int targets_label(const cJSON *l, const char *sep, struct dlk_buf *b)
{
	const cJSON *e;
	char num[40];

	dlk_buf_reset(b);
	if (cJSON_IsNumber(l) && isfinite(l->valuedouble)) {
		snprintf(num, sizeof(num), "%.9g", l->valuedouble);
		dlk_buf_adds(b, num);
		return 0;
	}
	if (cJSON_IsString(l)) {
		dlk_buf_adds(b, l->valuestring);
		return 0;
	}
	if (!cJSON_IsArray(l))
		return -1;
	cJSON_ArrayForEach(e, l) {
		if (b->len || e != l->child)
			dlk_buf_adds(b, sep);
		if (cJSON_IsNumber(e) && isfinite(e->valuedouble)) {
			snprintf(num, sizeof(num), "%.9g", e->valuedouble);
			dlk_buf_adds(b, num);
		} else if (cJSON_IsString(e) && *e->valuestring && !strstr(e->valuestring, sep)) {
			dlk_buf_adds(b, e->valuestring);
		} else {
			return -1;
		}
	}
	return 0;
}

static int parse_jsonl(const char *p, size_t len, const char *name, const char *column, const char *label,
                       const char *sep, struct dlk_text_rows *out, struct dlk_err *err)
{
	size_t pos = 0, line = 0, cap = 0;

	while (pos < len) {
		const char *s = p + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos, k;
		char num[32];
		cJSON *o, *t, *l;
		pos += n + (nl ? 1 : 0);
		line++;
		for (k = 0; k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r'); k++)
			;
		if (k == n)
			continue;
		o = cJSON_ParseWithLength(s, n);
		if (!cJSON_IsObject(o)) {
			cJSON_Delete(o);
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: not a JSON object", name, line);
		}
		t = cJSON_GetObjectItemCaseSensitive(o, column);
		l = cJSON_GetObjectItemCaseSensitive(o, label);
		if (!cJSON_IsString(t)) {
			cJSON_Delete(o);
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: no string '%s' in the object", name, line, column);
			return dlk_err_hint(err, "set data.text.column to the key that holds the text");
		}
		if (sep) {
			struct dlk_buf b = DLK_BUF_INIT;
			int bad = targets_label(l, sep, &b);
			if (!bad)
				rows_add(out, &cap, t->valuestring, strlen(t->valuestring), b.len ? b.data : "", b.len, line);
			dlk_buf_release(&b);
			if (bad) {
				cJSON_Delete(o);
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: '%s' must be a number, a label, or a list of them "
				         "(without '%s' inside one)", name, line, label, sep);
				return dlk_err_hint(err, "set data.text.label to the key that holds the targets");
			}
		} else if (cJSON_IsNumber(l) && l->valuedouble >= 0 && l->valuedouble < DLK_MAX_CLASSES &&
		    l->valuedouble == (double)(int)l->valuedouble) {
			snprintf(num, sizeof(num), "%d", (int)l->valuedouble);
			rows_add(out, &cap, t->valuestring, strlen(t->valuestring), num, strlen(num), line);
		} else if (cJSON_IsString(l) && *l->valuestring) {
			rows_add(out, &cap, t->valuestring, strlen(t->valuestring), l->valuestring, strlen(l->valuestring), line);
		} else {
			cJSON_Delete(o);
			dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: '%s' must be a class name or an index from 0 to %d", name, line,
			         label, DLK_MAX_CLASSES - 1);
			return dlk_err_hint(err, "set data.text.label to the key that holds the label");
		}
		cJSON_Delete(o);
	}
	return 0;
}

int dlk_text_rows_parse(const void *buf, size_t len, const char *name, int jsonl, const char *column,
                        const char *label, const char *sep, struct dlk_text_rows *out, struct dlk_err *err)
{
	if (sep && !*sep)
		return dlk_errf(err, DLK_EXIT_CONFIG, "data.text.separator must not be empty");
	int r = jsonl ? parse_jsonl(buf, len, name, column, label, sep, out, err)
	              : parse_csv(buf, len, name, column, label, sep, out, err);
	if (r < 0)
		dlk_text_rows_release(out);
	return r;
}

static int index_of(const char *s, long *v)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	*v = strtol(s, &end, 10);
	return *end || *v >= DLK_MAX_CLASSES ? -1 : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dlk_text_labels(const struct dlk_text_rows *r, const char *name, const char *const *classes, int n_classes,
                    int32_t *y, char ***found, int *n_found, struct dlk_err *err)
{
	long v = 0;
	int all_ints = 1;

	*found = NULL;
	*n_found = 0;
	if (classes) {
		for (size_t i = 0; i < r->n; i++) {
			int c;
			for (c = 0; c < n_classes && strcmp(classes[c], r->label[i]); c++)
				;
			if (c == n_classes && (index_of(r->label[i], &v) || v >= n_classes)) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: label '%.80s' is not one of the %d classes", name, r->line[i],
				         r->label[i], n_classes);
				return dlk_err_hint(err, "list every class in data.classes");
			}
			y[i] = c < n_classes ? c : (int32_t)v;
		}
		return 0;
	}
	for (size_t i = 0; i < r->n && all_ints; i++)
		all_ints = !index_of(r->label[i], &v);
	if (all_ints) {
		for (size_t i = 0; i < r->n; i++) {
			index_of(r->label[i], &v);
			y[i] = (int32_t)v;
		}
		return 0;
	}
	/* class names: the distinct labels, sorted */
	char **names = xmalloc((r->n + 1) * sizeof(*names));
	size_t nn = 0;
	memcpy(names, r->label, r->n * sizeof(*names));
	qsort(names, r->n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < r->n; i++)
		if (!nn || strcmp(names[nn - 1], names[i]))
			names[nn++] = names[i];
	if (nn > DLK_MAX_CLASSES) {
		free(names);
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %zu distinct labels, more than %d", name, nn, DLK_MAX_CLASSES);
	}
	for (size_t i = 0; i < r->n; i++) {
		char **hit = bsearch(&r->label[i], names, nn, sizeof(*names), cmp_str);
		y[i] = (int32_t)(hit - names);
	}
	*found = xcalloc(nn, sizeof(**found));
	for (size_t i = 0; i < nn; i++)
		(*found)[i] = xstrdup(names[i]);
	*n_found = (int)nn;
	free(names);
	return 0;
}

/* the next field of a label split by sep: [*at, end) of s, *at moved past it; 0 at the end */
static int next_field(const char *sep, const char **at, const char **end)
{
	if (!*at)
		return 0;
	const char *e = strstr(*at, sep);
	*end = e ? e : *at + strlen(*at);
	return 1;
}

static void field_advance(const char *sep, const char **at, const char *end)
{
	*at = *end ? end + strlen(sep) : NULL;
}

int dlk_text_targets(const struct dlk_text_rows *r, const char *name, int multilabel, const char *sep,
                     const char *const *classes, int n_classes, float **t, size_t *target_size, char ***found,
                     int *n_found, struct dlk_err *err)
{
	const char *at, *end;
	size_t k = 0;
	char **names = NULL;
	size_t nn = 0;
	int ret = -1;

	*t = NULL;
	*target_size = 0;
	*found = NULL;
	*n_found = 0;
	if (!multilabel) {
		/* regression: every row the same count of numbers */
		for (size_t i = 0; i < r->n; i++) {
			size_t c = 0;
			for (at = r->label[i]; next_field(sep, &at, &end); field_advance(sep, &at, end))
				c++;
			if (!i) {
				k = c;
				*t = xmalloc((r->n ? r->n : 1) * k * sizeof(float));
			} else if (c != k) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: %zu target%s, but the first row has %zu", name, r->line[i], c,
				         c == 1 ? "" : "s", k);
				dlk_err_hint(err, "every row holds as many numbers, separated by '%s' (data.text.separator)", sep);
				goto out;
			}
			c = 0;
			for (at = r->label[i]; next_field(sep, &at, &end); field_advance(sep, &at, end)) {
				char buf[64], *e;
				size_t fl = (size_t)(end - at);
				double v = 0;
				if (fl && fl < sizeof(buf)) {
					memcpy(buf, at, fl);
					buf[fl] = 0;
					v = strtod(buf, &e);
				}
				if (!fl || fl >= sizeof(buf) || *e || !isfinite(v) || fabs(v) > 3e38) {
					dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: target %zu, '%.*s', is not a number", name, r->line[i], c + 1,
					         (int)(fl < 40 ? fl : 40), at);
					goto out;
				}
				(*t)[i * k + c++] = (float)v;
			}
		}
		*target_size = k;
		return 0;
	}
	/* multilabel: the labels a row names, from data.classes or the distinct ones in byte order */
	if (!classes) {
		int all_ints = 1;
		long v = 0, max = -1;
		for (size_t i = 0; i < r->n; i++)
			for (at = r->label[i]; *r->label[i] && next_field(sep, &at, &end); field_advance(sep, &at, end)) {
				char *one = xstrndup(at, (size_t)(end - at));
				if (!*one) {
					free(one);
					dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: an empty label in '%.80s'", name, r->line[i], r->label[i]);
					goto out;
				}
				if (index_of(one, &v))
					all_ints = 0;
				else if (v > max)
					max = v;
				if (nn % 64 == 0)
					names = xrealloc(names, (nn + 64) * sizeof(*names));
				names[nn++] = one;
			}
		if (all_ints) {
			k = (size_t)(max + 1);
		} else {
			size_t u = 0;
			qsort(names, nn, sizeof(*names), cmp_str);
			for (size_t i = 0; i < nn; i++) {
				if (u && !strcmp(names[u - 1], names[i]))
					free(names[i]);
				else
					names[u++] = names[i];
			}
			nn = u;
			if (nn > DLK_MAX_CLASSES) {
				dlk_errf(err, DLK_EXIT_CONFIG, "'%s': %zu distinct labels, more than %d", name, nn, DLK_MAX_CLASSES);
				goto out;
			}
			classes = (const char *const *)names;
			n_classes = (int)nn;
			k = nn;
		}
		if (!k) {
			dlk_errf(err, DLK_EXIT_CONFIG, "'%s': no row has a label", name);
			goto out;
		}
	} else {
		k = (size_t)n_classes;
	}
	*t = xcalloc((r->n ? r->n : 1) * k, sizeof(float));
	for (size_t i = 0; i < r->n; i++)
		for (at = r->label[i]; *r->label[i] && next_field(sep, &at, &end); field_advance(sep, &at, end)) {
			char *one = xstrndup(at, (size_t)(end - at));
			long v = -1;
			int c = 0;
			for (c = 0; classes && c < n_classes && strcmp(classes[c], one); c++)
				;
			if (classes && c < n_classes)
				v = c;
			else if (index_of(one, &v) || v >= (long)k)
				v = -1;
			if (v < 0) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s:%zu: label '%.80s' is not one of the %zu labels", name, r->line[i],
				         one, k);
				dlk_err_hint(err, "list every label in data.classes");
				free(one);
				goto out;
			}
			free(one);
			(*t)[i * k + (size_t)v] = 1.0f;
		}
	*target_size = k;
	if (classes && classes == (const char *const *)names) {
		*found = names;
		*n_found = (int)nn;
		names = NULL;
		nn = 0;
	}
	ret = 0;
out:
	for (size_t i = 0; i < nn; i++)
		free(names ? names[i] : NULL);
	free(names);
	if (ret) {
		free(*t);
		*t = NULL;
	}
	return ret;
}

struct encode_job {
	const struct dlk_tokenizer *t;
	const struct dlk_text_rows *r;
	int length;
	float *x;
};

static void encode_part(void *ctx, int part, int nparts)
{
	const struct encode_job *j = ctx;
	size_t lo = j->r->n * (size_t)part / (size_t)nparts, hi = j->r->n * (size_t)(part + 1) / (size_t)nparts;
	int32_t *ids = xmalloc((size_t)j->length * sizeof(*ids));
	for (size_t i = lo; i < hi; i++)
		dlk_text_encode_row(j->t, j->r->text[i], j->r->len[i], j->length, ids, j->x + i * (size_t)j->length);
	free(ids);
}

void dlk_text_encode_row(const struct dlk_tokenizer *t, const void *text, size_t len, int length, int32_t *ids,
                         float *row)
{
	size_t n = dlk_tokenizer_encode(t, text, len, ids, (size_t)length);
	if (n > (size_t)length)
		n = (size_t)length;
	for (size_t k = 0; k < (size_t)length; k++)
		row[k] = (float)(k < n ? ids[k] : t->pad_id);
}

void dlk_text_encode_rows(const struct dlk_tokenizer *t, const struct dlk_text_rows *r, int length, float *x)
{
	struct encode_job j = { t, r, length, x };
	int parts = dlk_parallel_threads() * 4;
	if ((size_t)parts > r->n)
		parts = (int)r->n;
	if (parts > 0)
		dlk_parallel_for(parts, encode_part, &j);
}

void dlk_text_mask(const struct dlk_tokenizer *t, const float *ids, size_t n, uint8_t *mask)
{
	for (size_t i = 0; i < n; i++)
		mask[i] = ids[i] != (float)t->pad_id;
}
