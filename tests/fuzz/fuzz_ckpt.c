/* libFuzzer target: the checkpoint manifest parser. Corpus: tests/fuzz/ckpt/. */
#include "lib/train/checkpoint.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct ckpt_manifest m = CKPT_MANIFEST_INIT;

	ckpt_manifest_parse((const char *)data, size, &m, &err);
	ckpt_manifest_release(&m);
	return 0;
}
