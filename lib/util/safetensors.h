#ifndef DLK_UTIL_SAFETENSORS_H
#define DLK_UTIL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/util/buf.h"
#include "lib/util/err.h"

/* The safetensors format (8-byte little-endian header length, a JSON header naming each tensor's
 * dtype, shape and data_offsets, then the data): the one writer of float32 files (the bundle's
 * weights.safetensors, `dlk export --hf`) and a reader of F32, F16 and BF16 tensors. */

#define DLK_ST_MAX_RANK 8
#define DLK_ST_MAX_HEADER (100u << 20) /* the format's own limit is 100 MB */

enum dlk_st_dtype { DLK_ST_OTHER, DLK_ST_F32, DLK_ST_F16, DLK_ST_BF16 };

struct dlk_st_tensor {
	char name[128];
	int rank;
	long long shape[DLK_ST_MAX_RANK];
	/* writing: the values, row-major [shape[0], shape[1]]; transpose: src is [shape[1], shape[0]]
	 * and the file gets its transpose (rank 2 only) */
	const float *src;
	int transpose;
	/* reading */
	enum dlk_st_dtype dtype;
	char dtype_name[16];
	uint64_t begin, end; /* data_offsets, within the data section */
};

struct dlk_st_list {
	struct dlk_st_tensor *t;
	int n, cap;
};

/* Appends a float32 tensor of rank 1 to 4 (shape[0..rank-1]) to be written from src. */
void dlk_st_add(struct dlk_st_list *l, const char *name, const float *src, int rank, const long long *shape,
                int transpose);
/* the whole file: __metadata__ {format: pt, producer: dlk VERSION}, the tensors in list order */
void dlk_st_write(const struct dlk_st_list *l, struct dlk_buf *out);
void dlk_st_list_release(struct dlk_st_list *l);

/* A file read: the tensors of its header, each checked to lie within the data with as many bytes
 * as its shape and dtype give (a dtype other than F32/F16/BF16 is kept as DLK_ST_OTHER, its
 * length unchecked). buf must outlive it. Errors name `who`, the tensor and the byte. */
struct dlk_st_file {
	struct dlk_st_tensor *t;
	int n;
	const unsigned char *data;
	uint64_t data_len;
};

int dlk_st_parse(const unsigned char *buf, size_t len, const char *who, struct dlk_st_file *f, struct dlk_err *err);
const struct dlk_st_tensor *dlk_st_find(const struct dlk_st_file *f, const char *name);
/* The tensor's values as float32 into out (its element count of floats); transpose (rank 2):
 * out gets [shape[1], shape[0]]. -1 with err for a dtype other than F32/F16/BF16. */
int dlk_st_read_f32(const struct dlk_st_file *f, const struct dlk_st_tensor *t, int transpose, float *out,
                    const char *who, struct dlk_err *err);
size_t dlk_st_count(const struct dlk_st_tensor *t);
/* "[a, b, c]" */
void dlk_st_shape_str(const long long *shape, int rank, char *out, size_t len);
void dlk_st_release(struct dlk_st_file *f);

#endif
