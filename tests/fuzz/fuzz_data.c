/* libFuzzer target: the data decoders (IDX, CSV, tar shards); the first byte picks one.
 * Corpus: tests/fuzz/data/ (idx/, csv/, tar/ seeds are prefixed by the harness's selector on
 * replay, so every seed reaches every decoder). */
#include "lib/data/decode.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_idx a = DLK_IDX_INIT, b = DLK_IDX_INIT;
	struct dlk_samples s = DLK_SAMPLES_INIT;
	struct dlk_csv_opts co = { -1, -1 };

	/* every decoder sees every input: the seeds of one format are mutations for the others */
	if (!dlk_idx_decode(data, size, "fuzz.idx", &a, &err)) {
		/* join an input with itself: images and labels counts agree only for 1-D files */
		if (!dlk_idx_decode(data, size, "fuzz-labels.idx", &b, &err))
			dlk_idx_join(&a, "fuzz.idx", &b, "fuzz-labels.idx", &s, &err);
		dlk_samples_release(&s);
	}
	dlk_idx_release(&a);
	dlk_idx_release(&b);
	dlk_csv_decode(data, size, "fuzz.csv", &co, &s, &err);
	dlk_samples_release(&s);
	dlk_tar_decode(data, size, "fuzz.tar", NULL, 64u << 20, &s, &err);
	dlk_samples_release(&s);
	return 0;
}
