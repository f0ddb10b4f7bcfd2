/* libFuzzer target: the text of a project's run lock (.dlk/runs/NAME/lock), as a second
 * `dlk train --local` reads it to name the run that holds the project: the holder's parser,
 * then the description the refusal prints, which must hold no control character.
 * Corpus: tests/fuzz/runlock/. */
#include "lib/runs/lock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_run_holder h;
	char who[512];

	if (dlk_run_holder_parse((const char *)data, size, &h))
		return 0;
	dlk_run_holder_describe(&h, who, sizeof(who));
	for (const unsigned char *s = (const unsigned char *)who; *s; s++)
		if (*s < 0x20 || *s == 0x7f) {
			fprintf(stderr, "a control character reaches the refusal: %s\n", who);
			abort();
		}
	return 0;
}
