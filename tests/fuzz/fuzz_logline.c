/* libFuzzer target: `dlk logs` reading a worker's --log-format json line back as text
 * (lib/jobs/logline.c). The input is one log line. Corpus: tests/fuzz/logline/. */
#include "lib/jobs/logline.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[512], tiny[4];

	if (dlk_logline_text((const char *)data, size, out, sizeof(out)) && !memchr(out, '\n', strlen(out)))
		(void)strlen(out);
	dlk_logline_text((const char *)data, size, tiny, sizeof(tiny));
	return 0;
}
