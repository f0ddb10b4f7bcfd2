/* libFuzzer target: a progress line from a user's program (lib/program/protocol.c). The input
 * is one line. Corpus: tests/fuzz/program_protocol/. */
#include "lib/program/protocol.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct program_report r = PROGRAM_REPORT_INIT;
	char why[256];
	int rc = program_protocol_parse((const char *)data, size, &r, why, sizeof(why));

	/* what is accepted is in range, whatever the bytes were */
	if (rc == 1) {
		if ((r.has_loss && !isfinite(r.loss)) || r.n_metrics > PROGRAM_PROTOCOL_MAX_METRICS ||
		    r.n_classes > PROGRAM_PROTOCOL_MAX_CLASSES || (r.n_classes && !r.confusion))
			abort();
		for (int i = 0; i < r.n_classes * r.n_classes; i++)
			if (r.confusion[i] < 0)
				abort();
		for (int i = 0; i < r.n_metrics; i++)
			if (!isfinite(r.metrics[i].value) || !r.metrics[i].name[0])
				abort();
	} else if (rc == -1 && !memchr(why, 0, sizeof(why))) {
		abort();
	}
	program_report_release(&r);
	return 0;
}
