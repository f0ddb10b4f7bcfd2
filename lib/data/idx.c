/* IDX files (LeCun's MNIST format, used by Fashion-MNIST, KMNIST, EMNIST). */
#include "lib/data/decode.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/dataset.h"
#include "lib/data/image.h"
#include "lib/util/mem.h"

const char *dlk_idx_type_name(int type)
{
	switch (type) {
	case DLK_IDX_UBYTE: return "ubyte";
	case DLK_IDX_SBYTE: return "sbyte";
	case DLK_IDX_SHORT: return "short";
	case DLK_IDX_INT: return "int";
	case DLK_IDX_FLOAT: return "float";
	case DLK_IDX_DOUBLE: return "double";
	}
	return NULL;
}

static size_t idx_type_size(int type)
{
	switch (type) {
	case DLK_IDX_UBYTE:
	case DLK_IDX_SBYTE: return 1;
	case DLK_IDX_SHORT: return 2;
	case DLK_IDX_INT:
	case DLK_IDX_FLOAT: return 4;
	case DLK_IDX_DOUBLE: return 8;
	}
	return 0;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

void dlk_idx_release(struct dlk_idx *idx)
{
	free(idx->data);
	free(idx->data8);
	memset(idx, 0, sizeof(*idx));
}

/* dlk_idx_decode(); when `take` is the buffer buf lies in, a ubyte file's data8 takes it over. */
static int idx_decode(const void *buf, size_t len, const char *name, struct dlk_idx *out,
                      struct dlk_buf *take, struct dlk_err *err)
{
	const unsigned char *p = buf;
	struct dlk_idx idx = DLK_IDX_INIT;
	size_t header, esize, need, i;

	if (len < 4)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': truncated IDX header: the file ends at byte offset %zu, the magic number needs 4 bytes",
		                name, len);
	if (p[0] || p[1] || !idx_type_size(p[2]))
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': not an IDX file: bad magic 0x%02x%02x%02x%02x at byte offset 0 (expected 0x0000TTNN, TT one of 08 09 0b 0c 0d 0e)",
		                name, p[0], p[1], p[2], p[3]);
	idx.type = p[2];
	idx.ndims = p[3];
	if (idx.ndims < 1 || idx.ndims > DLK_IDX_MAX_DIMS)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': IDX header at byte offset 3 declares %d dimensions; dlk reads 1 to %d",
		                name, idx.ndims, DLK_IDX_MAX_DIMS);
	header = 4 + 4 * (size_t)idx.ndims;
	if (len < header)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': truncated IDX header: the file ends at byte offset %zu, %d dimensions need %zu header bytes",
		                name, len, idx.ndims, header);
	esize = idx_type_size(idx.type);
	idx.count = 1;
	for (i = 0; i < (size_t)idx.ndims; i++) {
		idx.dims[i] = be32(p + 4 + 4 * i);
		/* Bound the product so count * esize cannot overflow: no real file comes near 2^48. */
		if (idx.dims[i] && idx.count > ((size_t)1 << 48) / idx.dims[i])
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': IDX dimensions at byte offset 4 declare more than 2^48 values", name);
		idx.count *= idx.dims[i];
	}
	need = header + idx.count * esize;
	if (len < need) {
		/* Report where the data ran out: after the last whole element present. */
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': truncated IDX data: the file ends at byte offset %zu, but the header declares %zu %s values (%zu bytes in all)",
		                name, len, idx.count, dlk_idx_type_name(idx.type), need);
	}
	if (len > need)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': %zu unexpected bytes after the IDX data at byte offset %zu (the header declares %zu bytes in all)",
		                name, len - need, need, need);

	if (idx.type == DLK_IDX_UBYTE) {
		if (take) {
			/* slide the values over the header and give the spare capacity back */
			char *d = dlk_buf_detach(take, NULL);
			memmove(d, d + header, idx.count);
			idx.data8 = xrealloc(d, idx.count ? idx.count : 1);
		} else {
			idx.data8 = xmalloc(idx.count ? idx.count : 1);
			memcpy(idx.data8, p + header, idx.count);
		}
		*out = idx;
		return 0;
	}
	idx.data = xmalloc((idx.count ? idx.count : 1) * sizeof(float));
	p += header;
	switch (idx.type) {
	case DLK_IDX_SBYTE:
		for (i = 0; i < idx.count; i++)
			idx.data[i] = (int8_t)p[i];
		break;
	case DLK_IDX_SHORT:
		for (i = 0; i < idx.count; i++)
			idx.data[i] = (int16_t)(uint16_t)(p[2 * i] << 8 | p[2 * i + 1]);
		break;
	case DLK_IDX_INT:
		for (i = 0; i < idx.count; i++)
			idx.data[i] = (float)(int32_t)be32(p + 4 * i);
		break;
	case DLK_IDX_FLOAT:
		for (i = 0; i < idx.count; i++) {
			uint32_t u = be32(p + 4 * i);
			float f;
			memcpy(&f, &u, sizeof(f));
			if (!isfinite(f))
				goto not_finite;
			idx.data[i] = f;
		}
		break;
	case DLK_IDX_DOUBLE:
		for (i = 0; i < idx.count; i++) {
			uint64_t u = be64(p + 8 * i);
			double d;
			memcpy(&d, &u, sizeof(d));
			if (!isfinite(d) || fabs(d) > 3.4e38)
				goto not_finite;
			idx.data[i] = (float)d;
		}
		break;
	}
	*out = idx;
	return 0;

not_finite:
	dlk_idx_release(&idx);
	return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': value at byte offset %zu is not a finite float32", name,
	                header + i * esize);
}

int dlk_idx_decode(const void *buf, size_t len, const char *name, struct dlk_idx *out,
                   struct dlk_err *err)
{
	return idx_decode(buf, len, name, out, NULL, err);
}

int dlk_idx_decode_buf(struct dlk_buf *b, const char *name, struct dlk_idx *out, struct dlk_err *err)
{
	return idx_decode(b->data, b->len, name, out, b, err);
}

void dlk_idx_range_init(struct dlk_idx_range *r, int rank, int world)
{
	memset(r, 0, sizeof(*r));
	r->rank = world > 0 ? rank : 0;
	r->world = world > 0 ? world : 1;
	r->out = (struct dlk_buf)DLK_BUF_INIT;
}

void dlk_idx_range_release(struct dlk_idx_range *r)
{
	dlk_buf_release(&r->out);
}

/* The header is complete: check it as idx_decode() does, choose the range, write the header of
 * the shard. */
static int range_header(struct dlk_idx_range *r, const char *name, struct dlk_err *err)
{
	const unsigned char *p = r->head;
	int ndims = p[3];
	size_t esize = idx_type_size(p[2]), count = 1, end;

	r->item = esize;
	for (int i = 0; i < ndims; i++) {
		size_t d = be32(p + 4 + 4 * (size_t)i);
		if (d && count > ((size_t)1 << 48) / d)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': IDX dimensions at byte offset 4 declare more than 2^48 values", name);
		count *= d;
		if (i == 0)
			r->n = d;
		else
			r->item *= d;
	}
	dlk_part_range(r->n, r->rank, r->world, &r->first, &end);
	r->count = end - r->first;
	dlk_buf_add(&r->out, p, r->header);
	r->out.data[4] = (char)(r->count >> 24);
	r->out.data[5] = (char)(r->count >> 16);
	r->out.data[6] = (char)(r->count >> 8);
	r->out.data[7] = (char)r->count;
	return 0;
}

int dlk_idx_range_feed(struct dlk_idx_range *r, const void *data, size_t len, const char *name, struct dlk_err *err)
{
	const unsigned char *p = data;

	while (!r->header && len) {
		r->head[r->head_len++] = *p++;
		len--;
		if (r->head_len == 4) {
			if (r->head[0] || r->head[1] || !idx_type_size(r->head[2]))
				return dlk_errf(err, DLK_EXIT_CONFIG,
				                "'%s': not an IDX file: bad magic 0x%02x%02x%02x%02x at byte offset 0 (expected 0x0000TTNN, TT one of 08 09 0b 0c 0d 0e)",
				                name, r->head[0], r->head[1], r->head[2], r->head[3]);
			if (r->head[3] < 1 || r->head[3] > DLK_IDX_MAX_DIMS)
				return dlk_errf(err, DLK_EXIT_CONFIG,
				                "'%s': IDX header at byte offset 3 declares %d dimensions; dlk reads 1 to %d", name,
				                r->head[3], DLK_IDX_MAX_DIMS);
		}
		if (r->head_len >= 4 && r->head_len == 4 + 4 * (size_t)r->head[3]) {
			r->header = r->head_len;
			if (range_header(r, name, err))
				return -1;
		}
	}
	if (!len)
		return 0;
	/* keep what falls in [first * item, (first + count) * item) of the data */
	unsigned long long lo = (unsigned long long)r->first * r->item, hi = lo + (unsigned long long)r->count * r->item;
	unsigned long long a = r->seen, b = r->seen + len;
	if (b > lo && a < hi) {
		unsigned long long from = a > lo ? a : lo, to = b < hi ? b : hi;
		dlk_buf_add(&r->out, p + (from - a), (size_t)(to - from));
	}
	r->seen = b;
	return 0;
}

void dlk_idx_range_skip(struct dlk_idx_range *r, unsigned long long upto)
{
	if (upto > r->seen)
		r->seen = upto;
}

int dlk_idx_range_finish(struct dlk_idx_range *r, const char *name, struct dlk_err *err)
{
	unsigned long long need = (unsigned long long)r->n * r->item;

	if (!r->header) {
		if (r->head_len < 4)
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': truncated IDX header: the file ends at byte offset %zu, the magic number needs 4 bytes",
			                name, r->head_len);
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': truncated IDX header: the file ends at byte offset %zu, %d dimensions need %zu header bytes",
		                name, r->head_len, r->head[3], 4 + 4 * (size_t)r->head[3]);
	}
	if (r->seen < need)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': truncated IDX data: the file ends at byte offset %llu, but the header declares %zu %s values (%llu bytes in all)",
		                name, r->header + r->seen, r->n * (r->item / idx_type_size(r->head[2])),
		                dlk_idx_type_name(r->head[2]), r->header + need);
	if (r->seen > need)
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': %llu unexpected bytes after the IDX data at byte offset %llu (the header declares %llu bytes in all)",
		                name, r->seen - need, r->header + need, r->header + need);
	return 0;
}

void dlk_samples_release(struct dlk_samples *s)
{
	free(s->x);
	free(s->x8);
	free(s->y);
	free(s->t);
	free(s->t8);
	dlk_image_files_free(s->files);
	memset(s, 0, sizeof(*s));
	s->max_label = -1;
}

int dlk_idx_join(struct dlk_idx *images, const char *images_name, const struct dlk_idx *labels,
                 const char *labels_name, struct dlk_samples *out, struct dlk_err *err)
{
	struct dlk_samples s = DLK_SAMPLES_INIT;
	size_t i, label_esize = idx_type_size(labels->type);

	switch (images->ndims) {
	case 2: s.shape[0] = 1, s.shape[1] = 1, s.shape[2] = (int)images->dims[1]; break;
	case 3: s.shape[0] = 1, s.shape[1] = (int)images->dims[1], s.shape[2] = (int)images->dims[2]; break;
	case 4:
		s.shape[0] = (int)images->dims[1], s.shape[1] = (int)images->dims[2];
		s.shape[2] = (int)images->dims[3];
		break;
	default:
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': an images file needs 2 to 4 dimensions (N x F, N x H x W or N x C x H x W), this one has %d",
		                images_name, images->ndims);
	}
	for (i = 1; i < (size_t)images->ndims; i++)
		if (images->dims[i] == 0 || images->dims[i] > (1u << 24))
			return dlk_errf(err, DLK_EXIT_CONFIG,
			                "'%s': dimension %zu of the images is %zu; expected 1 to %u", images_name,
			                i + 1, images->dims[i], 1u << 24);
	if (labels->ndims != 1 && !(labels->ndims == 2 && labels->dims[1] == 1))
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s': a labels file has one dimension (N), this one has %d", labels_name,
		                labels->ndims);
	if (images->dims[0] != labels->dims[0])
		return dlk_errf(err, DLK_EXIT_CONFIG,
		                "'%s' holds %zu images but '%s' holds %zu labels", images_name, images->dims[0],
		                labels_name, labels->dims[0]);
	if (images->dims[0] == 0)
		return dlk_errf(err, DLK_EXIT_CONFIG, "'%s': the file holds no samples", images_name);
	s.n = images->dims[0];
	s.sample_size = images->count / s.n;
	s.y = xmalloc(s.n * sizeof(*s.y));
	for (i = 0; i < s.n; i++) {
		float v = labels->data8 ? labels->data8[i] : labels->data[i];
		if (!(v >= 0) || v >= DLK_MAX_CLASSES || v != (float)(int32_t)v) {
			dlk_errf(err, DLK_EXIT_CONFIG,
			         "'%s': label %g of sample %zu at byte offset %zu is not a class index (0 to %d)",
			         labels_name, v, i, 4 + 4 * (size_t)labels->ndims + i * label_esize,
			         DLK_MAX_CLASSES - 1);
			free(s.y);
			return -1;
		}
		s.y[i] = (int32_t)v;
		if (s.y[i] > s.max_label)
			s.max_label = s.y[i];
	}
	s.x = images->data;
	s.x8 = images->data8;
	images->data = NULL;
	images->data8 = NULL;
	*out = s;
	return 0;
}
