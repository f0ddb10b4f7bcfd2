/* libFuzzer target: YAML (core schema) -> JSON, and emitting what was read is a fixpoint.
 * Corpus: tests/fuzz/yamljson/. */
#include "lib/util/yamljson.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	size_t line = 0;
	cJSON *docs = yamljson_parse((const char *)data, size, "fuzz.yaml", &line, &err);

	if (docs) {
		char *y = yamljson_emit_stream(docs, &err);
		if (y) {
			/* emitting is a fixpoint: what dlk prints reads back to the same documents (compared as
			 * emitted text, since NaN never compares equal to itself) */
			cJSON *again = yamljson_parse(y, strlen(y), "emitted.yaml", &line, &err);
			if (!again)
				abort();
			char *y2 = yamljson_emit_stream(again, &err);
			if (!y2 || strcmp(y, y2))
				abort();
			free(y2);
			cJSON_Delete(again);
			free(y);
		}
		cJSON_Delete(docs);
	}
	return 0;
}
