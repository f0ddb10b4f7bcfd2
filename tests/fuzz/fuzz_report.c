/* libFuzzer target: run documents, as `dlk report` reads them from a JSON file or a Job's
 * dlk.dev/metrics annotation, and a bundle's model.json made into one; then everything drawn
 * from what was accepted: the page alone and beside itself (the comparison), the report
 * document, and the document cut down to fit an annotation. Corpus: tests/fuzz/report/. */
#include "lib/report/report.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf page = DLK_BUF_INIT;
	cJSON *run = NULL, *j = cJSON_ParseWithLength((const char *)data, size);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format");

	if (cJSON_IsString(f) && !strcmp(f->valuestring, "dlk-model"))
		run = report_run_from_meta(j, "bundle", "fuzz.dlk", &err);
	else
		run = report_run_parse((const char *)data, size, "'fuzz.json'", &err);
	if (run) {
		char *small;
		cJSON *doc;
		report_html(run, NULL, &page, &err);
		dlk_buf_reset(&page);
		report_html(run, run, &page, &err);
		doc = report_document(run, run, &err);
		cJSON_Delete(doc);
		small = report_run_compact(run, 4096);
		free(small);
	}
	dlk_buf_release(&page);
	cJSON_Delete(run);
	cJSON_Delete(j);
	return 0;
}
