/* libFuzzer target: workers' log archives as `dlk logs --run` reads them from a store
 * (lib/jobs/logarchive.c): gzip members, cut anywhere, expanded within a bound, split into lines;
 * and the archive names a store lists. Corpus: tests/fuzz/logarchive/. */
#include "lib/jobs/logarchive.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int line(const char *l, size_t len, void *ud)
{
	if (memchr(l, '\n', len))
		abort(); /* a line never holds its newline */
	return ++*(long *)ud > 1000000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	char run[96], pod[96], key[256], *s;
	int rank, cut;
	long n = 0;

	dlk_log_archive_read(data, size, line, &n, &cut, &err);
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	if (!dlk_log_archive_parse_name(s, run, sizeof(run), &rank, pod, sizeof(pod))) {
		/* what parses names itself again */
		if (dlk_log_archive_key(run, rank, pod, key, sizeof(key)) || strcmp(key + 5, s) || strchr(s, '/'))
			abort();
	}
	free(s);
	return 0;
}
