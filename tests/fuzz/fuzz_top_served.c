/* libFuzzer target: what `dlk top` reads of a model server here (lib/top/served.c): its
 * registration file (dlk_top_served_parse: the document only when every field is in range) and
 * its /metrics text (dlk_top_metric_sum for a model, or all, by family). The input is the file, then a
 * NUL byte, then the metrics text. Corpus: tests/fuzz/top_served/. */
#include "lib/top/top.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, 0, size);
	size_t flen = nul ? (size_t)(nul - (const char *)data) : size;
	char *metrics;
	cJSON *doc = dlk_top_served_parse((const char *)data, flen);
	const cJSON *m;

	if (doc) {
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(doc, "pid"), *port = cJSON_GetObjectItemCaseSensitive(doc, "port");
		if (!(pid->valuedouble >= 1 && pid->valuedouble <= 1e9 && port->valuedouble >= 1 && port->valuedouble <= 65535))
			abort();
	}
	metrics = malloc(size - flen + 1);
	if (!metrics)
		return 0;
	memcpy(metrics, nul ? nul + 1 : "", nul ? size - flen - 1 : 0);
	metrics[nul ? size - flen - 1 : 0] = 0;
	dlk_top_metric_sum(metrics, "dlk_inference_request_success_total", "blobs");
	dlk_top_metric_sum(metrics, "dlk_inference_request_duration_seconds_sum", NULL); /* every model's (a pod's, --cluster) */
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(doc, "models"))
		dlk_top_metric_sum(metrics, "dlk_inference_count_total", m->valuestring);
	free(metrics);
	cJSON_Delete(doc);
	return 0;
}
