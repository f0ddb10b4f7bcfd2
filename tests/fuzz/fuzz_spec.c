/* libFuzzer target: the project-file loader (YAML parse, validation, defaults, dump round trip).
 * Corpus: tests/fuzz/spec/. */
#include "lib/project/project.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *s = project_load_mem((const char *)data, size, "fuzz.yaml", NULL, 0, &err);

	if (s) {
		/* whatever loads must dump to something that loads again to the same bytes */
		char *y = project_dump_yaml(s);
		struct dlk_project *t = project_load_mem(y, strlen(y), "dump.yaml", NULL, 0, &err);
		if (!t)
			abort();
		char *y2 = project_dump_yaml(t);
		if (strcmp(y, y2))
			abort();
		free(y2);
		project_free(t);
		free(y);
		project_free(s);
	}
	return 0;
}
