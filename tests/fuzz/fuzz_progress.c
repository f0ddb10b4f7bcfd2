/* libFuzzer target: a run's progress as `dlk top` reads it (a run here's progress file, a Job's
 * dlk.dev/progress annotation): its "phases" judged for ranks starved by input
 * (lib/top/phases.c), with its "gpus" for idle GPUs. Every warning must be a string without control characters. Corpus:
 * tests/fuzz/progress/. */
#include "lib/top/top.h"
#include "lib/train/progress.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc = cJSON_ParseWithLength((const char *)data, size), *w;
	const cJSON *e;

	w = dlk_top_warnings(cJSON_GetObjectItemCaseSensitive(doc, DLK_PROGRESS_PHASES),
	                     cJSON_GetObjectItemCaseSensitive(doc, DLK_PROGRESS_GPUS));
	if (!cJSON_IsArray(w))
		abort();
	cJSON_ArrayForEach(e, w) {
		if (!cJSON_IsString(e))
			abort();
		for (const char *c = e->valuestring; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				abort();
	}
	cJSON_Delete(w);
	/* the phases alone, as an array at the top */
	w = dlk_top_phase_warnings(doc);
	cJSON_Delete(w);
	cJSON_Delete(doc);
	return 0;
}
