/* A CronJob and its runs (lib/jobs/cronjob.c): the fields `dlk status NAME` shows, and which Jobs
 * are its runs (by the ownerReference's uid; by name when a uid is missing), newest first. */
#include "tests/unit/check.h"

#include "lib/jobs/cronjob.h"

#include <stdlib.h>

static const char *run_name(const cJSON *runs, int i)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, i), "metadata");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
	return cJSON_IsString(n) ? n->valuestring : "";
}

int main(void)
{
	cJSON *cj = cJSON_Parse("{\"kind\":\"CronJob\",\"metadata\":{\"name\":\"nightly\",\"namespace\":\"ml\",\"uid\":\"u1\"},"
	                        "\"spec\":{\"schedule\":\"0 3 * * *\",\"suspend\":true,\"timeZone\":\"Europe/Paris\"},"
	                        "\"status\":{\"active\":[{\"name\":\"nightly-2\"}],\"lastScheduleTime\":\"2026-01-02T03:00:00Z\"}}");
	cJSON *jobs = cJSON_Parse(
		"[{\"metadata\":{\"name\":\"nightly-1\",\"creationTimestamp\":\"2026-01-01T03:00:00Z\","
		"  \"ownerReferences\":[{\"kind\":\"CronJob\",\"name\":\"nightly\",\"uid\":\"u1\"}]}},"
		" {\"metadata\":{\"name\":\"old\",\"creationTimestamp\":\"2026-01-03T03:00:00Z\","
		"  \"ownerReferences\":[{\"kind\":\"CronJob\",\"name\":\"nightly\",\"uid\":\"gone\"}]}},"
		" {\"metadata\":{\"name\":\"nightly-now\",\"creationTimestamp\":\"2026-01-02T10:00:00Z\","
		"  \"ownerReferences\":[{\"kind\":\"Deployment\",\"name\":\"x\"},{\"kind\":\"CronJob\",\"name\":\"nightly\",\"uid\":\"u1\"}]}},"
		" {\"metadata\":{\"name\":\"nightly-2\",\"creationTimestamp\":\"2026-01-02T03:00:00Z\","
		"  \"ownerReferences\":[{\"kind\":\"CronJob\",\"name\":\"nightly\",\"uid\":\"u1\"}]}},"
		" {\"metadata\":{\"name\":\"plain\",\"creationTimestamp\":\"2026-01-09T03:00:00Z\"}}]");
	struct dlk_cron_summary s;
	cJSON *runs, *o;

	dlk_cron_summarize(cj, &s);
	CHECK_STR(s.name, "nightly");
	CHECK_STR(s.ns, "ml");
	CHECK_STR(s.schedule, "0 3 * * *");
	CHECK_STR(s.time_zone, "Europe/Paris");
	CHECK(s.suspended == 1);
	CHECK(s.active == 1);
	CHECK_STR(s.last_schedule, "2026-01-02T03:00:00Z");
	CHECK_STR(s.last_success, "");
	o = dlk_cron_summary_json(&s);
	CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "lastSuccessfulTime")));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "suspended")));
	cJSON_Delete(o);

	/* its runs, newest first; "old" belongs to an earlier CronJob of that name, "plain" to none */
	runs = dlk_cron_runs(jobs, cj);
	CHECK(cJSON_GetArraySize(runs) == 3);
	CHECK_STR(run_name(runs, 0), "nightly-now");
	CHECK_STR(run_name(runs, 1), "nightly-2");
	CHECK_STR(run_name(runs, 2), "nightly-1");
	cJSON_Delete(runs);
	CHECK_STR(dlk_job_cronjob(cJSON_GetArrayItem(jobs, 2)), "nightly");
	CHECK(dlk_job_cronjob(cJSON_GetArrayItem(jobs, 4)) == NULL);

	/* without uids, the name decides */
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(cj, "metadata"), "uid");
	runs = dlk_cron_runs(jobs, cj);
	CHECK(cJSON_GetArraySize(runs) == 4);
	CHECK_STR(run_name(runs, 0), "old");
	cJSON_Delete(runs);

	/* anything else reads as nothing */
	dlk_cron_summarize(NULL, &s);
	CHECK_STR(s.schedule, "");
	runs = dlk_cron_runs(NULL, cj);
	CHECK(cJSON_GetArraySize(runs) == 0);
	cJSON_Delete(runs);
	runs = dlk_cron_runs(jobs, NULL);
	CHECK(cJSON_GetArraySize(runs) == 0);
	cJSON_Delete(runs);

	cJSON_Delete(cj);
	cJSON_Delete(jobs);
	return CHECK_DONE();
}
