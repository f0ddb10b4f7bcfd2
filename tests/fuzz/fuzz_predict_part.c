/* libFuzzer target: a part of `dlk predict --workers N` as rank 0 reads it from the store before
 * joining the parts: part.json (the reader, then what it accepted written and read back to the
 * same fields, and the check of the parts of one run: the input split in three as three parts),
 * and part.csv checked against a part.json (the one read, and a fixed one of samples [5, 8)).
 * Corpus: tests/fuzz/predict_part/. */
#include "lib/serve/predict.h"
#include "lib/serve/predict_workers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_predict_part p, q, parts[3], fixed = { "0123456789abcdef", 1, 3, 5, 3, 10, 0 };
	struct dlk_err err = DLK_ERR_INIT;
	char *s;

	(void)dlk_predict_part_rows_check((const char *)data, size, &fixed, &err);
	dlk_err_clear(&err);
	if (dlk_predict_part_parse((const char *)data, size, &p, &err))
		return 0;
	(void)dlk_predict_part_rows_check((const char *)data, size, &p, &err);
	s = dlk_predict_part_json(&p);
	if (dlk_predict_part_parse(s, strlen(s), &q, &err) || strcmp(p.key, q.key) || p.rank != q.rank ||
	    p.workers != q.workers || p.first != q.first || p.count != q.count || p.samples != q.samples ||
	    p.correct != q.correct) {
		fprintf(stderr, "part.json does not read back the same: %s\n", s);
		abort();
	}
	free(s);
	for (int i = 0; i < 3; i++) {
		parts[i] = p;
		parts[i].rank = i;
		parts[i].workers = 3;
	}
	dlk_err_clear(&err);
	(void)dlk_predict_parts_check(parts, 3, p.key, &err);
	return 0;
}
