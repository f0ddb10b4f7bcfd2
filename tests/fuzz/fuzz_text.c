/* libFuzzer target: text rows as format text reads them (lib/data/text.c): CSV with a header row
 * or JSON Lines (bit 0 of the first byte chooses), their labels as classes or (bit 1) as float
 * targets, multi-label (bit 2) or regression, and their encoding into fixed-length ids by the
 * byte tokenizer and by a BPE trained on the rows. Corpus: tests/fuzz/text/. */
#include "lib/data/text.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_text_rows r = DLK_TEXT_ROWS_INIT;
	char **found = NULL;
	int n_found = 0;

	if (!size)
		return 0;
	const char *sep = data[0] & 2 ? "|" : NULL;
	if (dlk_text_rows_parse(data + 1, size - 1, "fuzz", data[0] & 1, "text", "label", sep, &r, &err) < 0) {
		if (r.n)
			abort();
		return 0;
	}
	int32_t *y = malloc((r.n + 1) * sizeof(*y));
	if (!sep && dlk_text_labels(&r, "fuzz", NULL, 0, y, &found, &n_found, &err) == 0)
		for (size_t i = 0; i < r.n; i++)
			if (y[i] < 0 || (found && y[i] >= n_found))
				abort();
	if (sep) {
		float *t = NULL;
		size_t k = 0;
		if (dlk_text_targets(&r, "fuzz", data[0] & 4, sep, NULL, 0, &t, &k, &found, &n_found, &err) == 0)
			for (size_t i = 0; (data[0] & 4) && i < r.n * k; i++)
				if (t[i] != 0 && t[i] != 1)
					abort();
		free(t);
	}
	for (int i = 0; i < n_found; i++)
		free(found[i]);
	free(found);
	free(y);
	struct dlk_tokenizer *t = dlk_tokenizer_byte();
	struct dlk_bpe_counter *c = dlk_bpe_counter_new();
	for (size_t i = 0; i < r.n; i++)
		dlk_bpe_counter_add(c, r.text[i], r.len[i]);
	struct dlk_tokenizer *bpe = dlk_bpe_counter_train(c, 300, &err);
	float *x = malloc((r.n + 1) * 16 * sizeof(*x));
	dlk_text_encode_rows(t, &r, 16, x);
	if (bpe)
		dlk_text_encode_rows(bpe, &r, 16, x);
	for (size_t i = 0; bpe && i < r.n * 16; i++)
		if (x[i] < 0 || x[i] >= (float)bpe->vocab_size)
			abort();
	free(x);
	dlk_tokenizer_free(bpe);
	dlk_tokenizer_free(t);
	dlk_bpe_counter_free(c);
	dlk_text_rows_release(&r);
	return 0;
}
