/* libFuzzer target: the safetensors reader (lib/util/safetensors.h) that model.init_from uses on a
 * Hugging Face checkpoint: the header, each tensor's dtype, shape and data_offsets, then every
 * F32, F16 and BF16 tensor read as float32, straight and transposed. Whatever it reads is
 * written back by the one writer and must read again as the same values. Corpus:
 * tests/fuzz/safetensors/. */
#include "lib/util/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_st_file f;
	struct dlk_st_list l = { NULL, 0, 0 };
	float **vals;

	if (dlk_st_parse(data, size, "model.safetensors", &f, &err))
		return 0;
	vals = calloc((size_t)f.n + 1, sizeof(*vals));
	for (int i = 0; i < f.n; i++) {
		const struct dlk_st_tensor *t = dlk_st_find(&f, f.t[i].name);
		size_t n = dlk_st_count(&f.t[i]);
		if (!t || t->dtype == DLK_ST_OTHER || n > (1u << 20) || f.t[i].rank < 1 || f.t[i].rank > 4)
			continue;
		float *a = malloc(sizeof(float) * (n ? n : 1)), *b = malloc(sizeof(float) * (n ? n : 1));
		if (dlk_st_read_f32(&f, &f.t[i], 0, a, "model.safetensors", &err) ||
		    dlk_st_read_f32(&f, &f.t[i], 1, b, "model.safetensors", &err))
			abort(); /* a supported dtype within the data reads */
		free(b);
		vals[i] = a;
		dlk_st_add(&l, f.t[i].name, a, f.t[i].rank, f.t[i].shape, 0);
	}
	struct dlk_buf out = DLK_BUF_INIT;
	struct dlk_st_file g;
	dlk_st_write(&l, &out);
	if (dlk_st_parse((const unsigned char *)out.data, out.len, "again", &g, &err) || g.n != l.n)
		abort();
	for (int i = 0; i < g.n; i++) {
		size_t n = dlk_st_count(&g.t[i]);
		float *c = malloc(sizeof(float) * (n ? n : 1));
		if (dlk_st_read_f32(&g, &g.t[i], 0, c, "again", &err) || memcmp(c, l.t[i].src, sizeof(float) * n))
			abort();
		free(c);
	}
	dlk_st_release(&g);
	dlk_buf_release(&out);
	dlk_st_list_release(&l);
	for (int i = 0; i < f.n; i++)
		free(vals[i]);
	free(vals);
	dlk_st_release(&f);
	return 0;
}
