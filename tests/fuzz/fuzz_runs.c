/* libFuzzer target: run records as the run history reads them back (a file of .dlk/runs, a key
 * of the ConfigMap NAME-runs): the parser and checker, then what the commands do with a record
 * that passed: shorten it to fit the ConfigMap, make it a report's run document and draw it,
 * compare its data, cost its usage. Corpus: tests/fuzz/runs/. */
#include "lib/report/report.h"
#include "lib/runs/runs.h"
#include "lib/runs/usage.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct report_run r = REPORT_RUN_INIT;
	cJSON *rec, *doc;
	char *small;

	rec = dlk_run_record_parse((const char *)data, size, "'fuzz.json'", &err);
	if (!rec)
		return 0;
	(void)dlk_run_id(rec);
	(void)dlk_run_outcome(rec);
	(void)dlk_run_uses_data(rec, "0000000000000000000000000000000000000000000000000000000000000000");
	(void)dlk_run_same_data(rec, rec);
	{
		/* what the history and a sweep's status make of run.usage: its cost and sums */
		struct dlk_prices pr = { 2.5, 0.04, "EUR" };
		cJSON *one = cJSON_CreateArray(), *sum;
		(void)dlk_usage_cost(cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "usage"), &pr);
		cJSON_AddItemReferenceToArray(one, rec);
		sum = dlk_usage_sum(one, &pr);
		cJSON_Delete(sum);
		cJSON_Delete(one);
	}
	small = dlk_run_record_compact(rec, 2048);
	if (small) {
		/* what is shortened must still read back */
		cJSON *again = dlk_run_record_parse(small, strlen(small), "'compact'", &err);
		if (!again) {
			fprintf(stderr, "the compacted record does not read back: %s\n%s\n", err.msg, small);
			abort();
		}
		cJSON_Delete(again);
		free(small);
	}
	doc = dlk_run_report_doc(rec, "local");
	if (report_run_load(doc, "'fuzz.json'", &r, &err) == 0) {
		struct dlk_buf b = DLK_BUF_INIT;
		report_html(doc, NULL, &b, &err);
		dlk_buf_release(&b);
	}
	report_run_release(&r);
	cJSON_Delete(doc);
	cJSON_Delete(rec);
	return 0;
}
