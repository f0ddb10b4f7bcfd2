/* libFuzzer target: the RFC 3339 time parser (lib/util/clock.c), which reads the times a Job, an
 * exec plugin's credential and the run records carry. The input as one string; a time it accepts
 * is finite and, printed back at whole seconds, parses again. Corpus: tests/fuzz/rfc3339/. */
#include "lib/util/clock.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	double t;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (dlk_rfc3339_parse(s, &t) == 0) {
		char back[64];
		time_t whole = (time_t)floor(t);
		struct tm tm;
		double u;
		if (!isfinite(t))
			abort();
		if (gmtime_r(&whole, &tm) && tm.tm_year >= 1000 - 1900 && tm.tm_year <= 9999 - 1900) {
			strftime(back, sizeof(back), "%Y-%m-%dT%H:%M:%SZ", &tm);
			if (dlk_rfc3339_parse(back, &u) != 0 || u != (double)whole)
				abort();
		}
	}
	free(s);
	return 0;
}
