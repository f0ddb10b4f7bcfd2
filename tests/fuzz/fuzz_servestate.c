/* libFuzzer target: how `dlk status` and `dlk serve --wait` read a served model's objects from the
 * API server. The input is two JSON documents separated by a NUL byte: a Deployment and a list of
 * its pods (an array, or a PodList's object whose items are taken). They go through
 * dlk_serve_track_summarize (ready and desired replicas, annotations, the rollout's verdict and
 * the pod and reason it names). Corpus: tests/fuzz/servestate/. */
#include "lib/jobs/servestate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc[2] = { NULL, NULL };
	size_t off = 0;

	for (int i = 0; i < 2 && off <= size; i++) {
		const uint8_t *nul = memchr(data + off, 0, size - off);
		size_t len = nul ? (size_t)(nul - (data + off)) : size - off;
		doc[i] = cJSON_ParseWithLength((const char *)data + off, len);
		off += len + 1;
	}
	const cJSON *pods = cJSON_IsObject(doc[1]) ? cJSON_GetObjectItemCaseSensitive(doc[1], "items") : doc[1];
	struct dlk_serve_track t;
	dlk_serve_track_summarize(doc[0], pods, &t);
	/* what status prints of it must be strings */
	if (strlen(t.reason) >= sizeof(t.reason) || strlen(t.pod) >= sizeof(t.pod) || strlen(t.sha256) >= sizeof(t.sha256))
		abort();
	char *sel = dlk_serve_selector(t.name, t.track[0] ? t.track : NULL);
	free(sel);
	for (int i = 0; i < 2; i++)
		cJSON_Delete(doc[i]);
	return 0;
}
