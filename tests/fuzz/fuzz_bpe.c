/* libFuzzer target: tokenizers (lib/data/bpe.c). The input is, at once: a GPT-2 vocab.json and
 * merges.txt (split at the first "\n--\n"), a tokenizer's text form as a bundle keeps it, and text
 * for the BPE trainer. Whatever is accepted must give back any text it encodes, byte for byte, and
 * the text form must read back to the same encoding. Corpus: tests/fuzz/bpe/. */
#include "lib/data/bpe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* decode(encode(text)) == text, and the saved form encodes the same */
static void check(const struct dlk_tokenizer *t, const uint8_t *text, size_t len)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf back = DLK_BUF_INIT, saved = DLK_BUF_INIT;
	struct dlk_tokenizer *again = NULL;
	int32_t *ids = malloc((len + 1) * sizeof(*ids)), *ids2 = malloc((len + 1) * sizeof(*ids2));
	size_t n = dlk_tokenizer_encode(t, text, len, ids, len + 1);

	if (n > len)
		abort();
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= t->vocab_size || ids[i] == t->pad_id)
			abort();
	dlk_tokenizer_decode(t, ids, n, &back);
	if (back.len != len || (len && memcmp(back.data, text, len)))
		abort();
	dlk_tokenizer_save(t, &saved);
	if (dlk_tokenizer_load(saved.data, saved.len, "saved", &again, &err) < 0)
		abort();
	if (dlk_tokenizer_encode(again, text, len, ids2, len + 1) != n || (n && memcmp(ids, ids2, n * sizeof(*ids))))
		abort();
	dlk_tokenizer_free(again);
	dlk_buf_release(&back);
	dlk_buf_release(&saved);
	free(ids);
	free(ids2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_tokenizer *t = NULL;
	const uint8_t *sep = NULL;

	for (size_t i = 0; i + 4 <= size && !sep; i++)
		if (!memcmp(data + i, "\n--\n", 4))
			sep = data + i;
	if (sep && dlk_bpe_read_gpt2(data, (size_t)(sep - data), "vocab.json", sep + 4, size - (size_t)(sep + 4 - data),
	                             "merges.txt", &t, &err) == 0) {
		check(t, data, size);
		dlk_tokenizer_free(t);
	}
	if (dlk_tokenizer_load(data, size, "tokenizer.txt", &t, &err) == 0) {
		check(t, data, size);
		dlk_tokenizer_free(t);
	}
	t = dlk_bpe_train(data, size, 258 + (int)(size % 64), &err);
	if (!t)
		abort();
	check(t, data, size);
	dlk_tokenizer_free(t);
	return 0;
}
