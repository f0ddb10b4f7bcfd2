/* safetensors files: see safetensors.h */
#include "lib/util/safetensors.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#ifndef DLK_VERSION
#define DLK_VERSION "unknown"
#endif

void dlk_st_add(struct dlk_st_list *l, const char *name, const float *src, int rank, const long long *shape,
                int transpose)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->t = xrealloc(l->t, sizeof(*l->t) * (size_t)l->cap);
	}
	struct dlk_st_tensor *t = &l->t[l->n++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->rank = rank;
	for (int d = 0; d < rank && d < DLK_ST_MAX_RANK; d++)
		t->shape[d] = shape[d];
	t->src = src;
	t->transpose = transpose && rank == 2;
	t->dtype = DLK_ST_F32;
}

void dlk_st_list_release(struct dlk_st_list *l)
{
	free(l->t);
	l->t = NULL;
	l->n = l->cap = 0;
}

size_t dlk_st_count(const struct dlk_st_tensor *t)
{
	size_t n = 1;

	for (int d = 0; d < t->rank; d++)
		n *= (size_t)t->shape[d];
	return n;
}

void dlk_st_shape_str(const long long *shape, int rank, char *out, size_t len)
{
	size_t at = 0;

	at += (size_t)snprintf(out, len, "[");
	for (int d = 0; d < rank && at < len; d++)
		at += (size_t)snprintf(out + at, len - at, "%s%lld", d ? ", " : "", shape[d]);
	if (at < len)
		snprintf(out + at, len - at, "]");
}

/* little-endian float32, whatever the host */
static void put_floats(struct dlk_buf *out, const float *src, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (size_t k = 0; k < n; k++) {
		uint32_t u;
		unsigned char le[4];
		memcpy(&u, &src[k], 4);
		for (int b = 0; b < 4; b++)
			le[b] = (unsigned char)(u >> (8 * b));
		dlk_buf_add(out, le, 4);
	}
#else
	dlk_buf_add(out, src, 4 * n);
#endif
}

void dlk_st_write(const struct dlk_st_list *l, struct dlk_buf *out)
{
	cJSON *h = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
	size_t off = 0;

	cJSON_AddStringToObject(meta, "format", "pt");
	cJSON_AddStringToObject(meta, "producer", "dlk " DLK_VERSION);
	for (int i = 0; i < l->n; i++) {
		const struct dlk_st_tensor *t = &l->t[i];
		size_t n = dlk_st_count(t);
		cJSON *o = cJSON_AddObjectToObject(h, t->name);
		cJSON_AddStringToObject(o, "dtype", "F32");
		cJSON *s = cJSON_AddArrayToObject(o, "shape");
		for (int d = 0; d < t->rank; d++)
			cJSON_AddItemToArray(s, cJSON_CreateNumber((double)t->shape[d]));
		cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
		cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off * 4)));
		cJSON_AddItemToArray(of, cJSON_CreateNumber((double)((off + n) * 4)));
		off += n;
	}
	char *js = cJSON_PrintUnformatted(h);
	cJSON_Delete(h);
	size_t len = strlen(js), padded = (len + 7) & ~(size_t)7;
	unsigned char hl[8];
	for (int i = 0; i < 8; i++)
		hl[i] = (unsigned char)((uint64_t)padded >> (8 * i));
	dlk_buf_grow(out, 8 + padded + 4 * off);
	dlk_buf_add(out, hl, 8);
	dlk_buf_add(out, js, len);
	for (size_t i = len; i < padded; i++)
		dlk_buf_addc(out, ' ');
	free(js);
	for (int i = 0; i < l->n; i++) {
		const struct dlk_st_tensor *t = &l->t[i];
		if (!t->transpose) {
			put_floats(out, t->src, dlk_st_count(t));
			continue;
		}
		/* out [r, c] = src [c, r] */
		for (long long r = 0; r < t->shape[0]; r++)
			for (long long c = 0; c < t->shape[1]; c++)
				put_floats(out, &t->src[c * t->shape[0] + r], 1);
	}
}

/* ---- reading ---- */

static const struct {
	const char *name;
	enum dlk_st_dtype dtype;
	int size;
} dtypes[] = { { "F32", DLK_ST_F32, 4 }, { "F16", DLK_ST_F16, 2 }, { "BF16", DLK_ST_BF16, 2 } };

static int whole(const cJSON *x, double max)
{
	return cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= max && x->valuedouble == floor(x->valuedouble);
}

int dlk_st_parse(const unsigned char *buf, size_t len, const char *who, struct dlk_st_file *f, struct dlk_err *err)
{
	cJSON *h = NULL;
	uint64_t hl = 0;
	const char *vis;

	memset(f, 0, sizeof(*f));
	if (len < 8)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: truncated at byte %zu (no header length)", who, len);
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)buf[i] << (8 * i);
	if (hl > DLK_ST_MAX_HEADER || hl > len - 8)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: header length %llu at byte 0 runs past the end of the %zu-byte file",
		                who, (unsigned long long)hl, len);
	h = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hl);
	if (!cJSON_IsObject(h)) {
		cJSON_Delete(h);
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: the header (bytes 8..%llu) is not a JSON object", who,
		                (unsigned long long)(8 + hl));
	}
	f->data = buf + 8 + hl;
	f->data_len = len - 8 - hl;
	f->t = xcalloc((size_t)cJSON_GetArraySize(h) + 1, sizeof(*f->t));
	for (const cJSON *e = h->child; e; e = e->next) {
		if (!strcmp(e->string, "__metadata__"))
			continue;
		struct dlk_st_tensor *t = &f->t[f->n];
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
		const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
		int size = 0;
		vis = dlk_visible(e->string);
		if (strlen(e->string) >= sizeof(t->name)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor name '%s' is longer than %zu bytes", who, vis, sizeof(t->name) - 1);
			goto bad;
		}
		snprintf(t->name, sizeof(t->name), "%s", e->string);
		/* tensors are found by name: two of one name (JSON allows the repeat, and a name holding
		 * a \u0000 ends there) would make one of them unreachable */
		for (int k = 0; k < f->n; k++)
			if (!strcmp(f->t[k].name, t->name)) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor name '%s' appears twice in the header", who, vis);
				goto bad;
			}
		if (!cJSON_IsString(dt)) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' has no dtype", who, vis);
			goto bad;
		}
		snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", dt->valuestring);
		for (size_t k = 0; k < sizeof(dtypes) / sizeof(dtypes[0]); k++)
			if (!strcmp(dt->valuestring, dtypes[k].name)) {
				t->dtype = dtypes[k].dtype;
				size = dtypes[k].size;
			}
		if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > DLK_ST_MAX_RANK) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' has no shape of at most %d dimensions", who, vis,
			         DLK_ST_MAX_RANK);
			goto bad;
		}
		double count = 1;
		for (const cJSON *x = sh->child; x; x = x->next) {
			if (!whole(x, 1e15)) {
				dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' has a dimension that is not a whole number", who, vis);
				goto bad;
			}
			t->shape[t->rank++] = (long long)x->valuedouble;
			count *= x->valuedouble;
		}
		if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !whole(of->child, (double)f->data_len) ||
		    !whole(of->child->next, (double)f->data_len) || of->child->next->valuedouble < of->child->valuedouble) {
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' has data_offsets outside the %llu data bytes", who, vis,
			         (unsigned long long)f->data_len);
			goto bad;
		}
		t->begin = (uint64_t)of->child->valuedouble;
		t->end = (uint64_t)of->child->next->valuedouble;
		if (size && (double)(t->end - t->begin) != count * size) {
			char s[160];
			dlk_st_shape_str(t->shape, t->rank, s, sizeof(s));
			dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' (%s %s) has %llu data bytes, not %.0f", who, vis,
			         t->dtype_name, s, (unsigned long long)(t->end - t->begin), count * size);
			goto bad;
		}
		f->n++;
	}
	cJSON_Delete(h);
	return 0;
bad:
	cJSON_Delete(h);
	dlk_st_release(f);
	return -1;
}

const struct dlk_st_tensor *dlk_st_find(const struct dlk_st_file *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

static float value(const unsigned char *p, enum dlk_st_dtype dt)
{
	uint32_t u;
	float v;

	if (dt == DLK_ST_F32) {
		u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	} else if (dt == DLK_ST_BF16) {
		u = ((uint32_t)p[0] | (uint32_t)p[1] << 8) << 16;
	} else { /* IEEE half */
		uint32_t hv = (uint32_t)p[0] | (uint32_t)p[1] << 8, s = (hv >> 15) << 31, e = (hv >> 10) & 31, m = hv & 1023;
		if (e == 31)
			u = s | 0x7f800000u | (m << 13);
		else if (e)
			u = s | ((e + 112) << 23) | (m << 13);
		else {
			v = ldexpf((float)m, -24);
			return s ? -v : v;
		}
	}
	memcpy(&v, &u, 4);
	return v;
}

int dlk_st_read_f32(const struct dlk_st_file *f, const struct dlk_st_tensor *t, int transpose, float *out,
                    const char *who, struct dlk_err *err)
{
	size_t n = dlk_st_count(t), size = t->dtype == DLK_ST_F32 ? 4 : 2;
	const unsigned char *p = f->data + t->begin;

	if (t->dtype == DLK_ST_OTHER) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: tensor '%s' has dtype %s; dlk reads F32, F16 and BF16", who,
		         dlk_visible(t->name), dlk_visible(t->dtype_name));
		return -1;
	}
	if (!transpose || t->rank != 2) {
		for (size_t k = 0; k < n; k++)
			out[k] = value(p + k * size, t->dtype);
		return 0;
	}
	/* out [c, r] = file [r, c] */
	long long R = t->shape[0], C = t->shape[1];
	for (long long r = 0; r < R; r++)
		for (long long c = 0; c < C; c++)
			out[c * R + r] = value(p + (size_t)(r * C + c) * size, t->dtype);
	return 0;
}

void dlk_st_release(struct dlk_st_file *f)
{
	free(f->t);
	memset(f, 0, sizeof(*f));
}
