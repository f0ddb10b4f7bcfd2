/* libFuzzer target: how `dlk status`, `dlk logs` and `dlk train --wait` read the API server's
 * objects. The input is up to three JSON documents separated by NUL bytes: a Job, a list of its
 * pods (an array, or a PodList's object whose items are taken) and a list of events. They go
 * through dlk_job_summarize (and the Job alone through dlk_job_summarize_job, which parses its
 * status counts and completedIndexes), the progress text and the -o json summary; its
 * completedIndexes also through dlk_job_peers_done for each rank. The first
 * document is also read as a CronJob and the second as a list of Jobs, its runs picked from them
 * by ownerReference (lib/jobs/cronjob.h). Bytes after the third document are parsed as a
 * duration (--timeout). Corpus:
 * tests/fuzz/jobstate/. */
#include "lib/jobs/cronjob.h"
#include "lib/jobs/jobstate.h"
#include "lib/util/duration.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* an array as it is, or the "items" of a list object */
static const cJSON *items_of(const cJSON *v)
{
	return cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "items") : v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc[3] = { NULL, NULL, NULL };
	size_t off = 0;

	for (int i = 0; i < 3 && off <= size; i++) {
		const uint8_t *nul = memchr(data + off, 0, size - off);
		size_t len = nul ? (size_t)(nul - (data + off)) : size - off;
		doc[i] = cJSON_ParseWithLength((const char *)data + off, len);
		off += len + 1;
	}

	struct dlk_job_summary s;
	char text[160], dur[32];
	dlk_job_summarize(doc[0], items_of(doc[1]), items_of(doc[2]), &s);
	dlk_job_progress_text(&s, text, sizeof(text));
	dlk_duration_text(s.age_s, dur, sizeof(dur));
	cJSON *o = dlk_job_summary_json(&s);
	char *out = cJSON_PrintUnformatted(o);
	free(out);
	cJSON_Delete(o);
	dlk_job_summary_release(&s);

	dlk_job_summarize_job(doc[0], &s);
	dlk_job_progress_text(&s, text, sizeof(text));
	o = dlk_job_summary_json(&s);
	out = cJSON_PrintUnformatted(o);
	free(out);
	cJSON_Delete(o);
	/* the other ranks done, as a retried rank counts them: never more than the others */
	for (int rank = -1; rank < 4; rank++) {
		int done = dlk_job_peers_done(doc[0], rank);
		if (done < 0 || (s.total > 0 && done > s.total))
			abort();
	}
	dlk_job_summary_release(&s);

	/* a scheduled project: the CronJob and its runs among the jobs */
	struct dlk_cron_summary cs;
	const cJSON *r;
	dlk_cron_summarize(doc[0], &cs);
	o = dlk_cron_summary_json(&cs);
	out = cJSON_PrintUnformatted(o);
	free(out);
	cJSON_Delete(o);
	cJSON *runs = dlk_cron_runs(items_of(doc[1]), doc[0]);
	cJSON_ArrayForEach(r, runs) {
		const char *owner = dlk_job_cronjob(r);
		if (!owner)
			abort(); /* a run has a CronJob for its owner */
	}
	cJSON_Delete(runs);

	/* whatever follows the third document is a --timeout value */
	if (off < size) {
		char t[48];
		size_t n = size - off < sizeof(t) - 1 ? size - off : sizeof(t) - 1;
		memcpy(t, data + off, n);
		t[n] = '\0';
		dlk_duration_parse(t);
	}
	for (int i = 0; i < 3; i++)
		cJSON_Delete(doc[i]);
	return 0;
}
