/* libFuzzer target: the token cache file of a text corpus (lib/data/corpus.c). Whatever the parser
 * accepts must hold only ids of its tokenizer's vocabulary and write back to the same bytes.
 * Corpus: tests/fuzz/tokens/. */
#include "lib/data/corpus.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_tokenizer *t = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	if (dlk_token_cache_parse(data, size, "fuzz.tok", &t, &ids, &n, &err) == 0) {
		struct dlk_buf b = DLK_BUF_INIT, again = DLK_BUF_INIT;
		struct dlk_tokenizer *t2 = NULL;
		int32_t *ids2 = NULL;
		size_t n2 = 0;
		for (size_t i = 0; i < n; i++)
			if (ids[i] < 0 || ids[i] >= t->vocab_size)
				abort();
		/* what it wrote reads back to the same, and writes the same bytes again */
		dlk_token_cache_write(&b, t, ids, n);
		if (dlk_token_cache_parse(b.data, b.len, "again", &t2, &ids2, &n2, &err) < 0 || n2 != n ||
		    (n && memcmp(ids, ids2, n * sizeof(*ids))))
			abort();
		dlk_token_cache_write(&again, t2, ids2, n2);
		if (again.len != b.len || memcmp(again.data, b.data, b.len))
			abort();
		dlk_tokenizer_free(t2);
		free(ids2);
		dlk_buf_release(&b);
		dlk_buf_release(&again);
	} else if (t || ids) {
		abort(); /* a refusal owns nothing */
	}
	dlk_tokenizer_free(t);
	free(ids);
	return 0;
}
