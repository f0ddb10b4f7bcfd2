/* A worker's failure as published (lib/jobs/failure.c): written below Kubernetes' 4096 bytes of
 * termination message whatever the message, read back, and the cause lib/jobs/jobstate picks
 * from the pods' termination messages, else from the Job's annotation once the pods are gone. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/jobs/failure.h"
#include "lib/jobs/jobstate.h"
#include "lib/util/mem.h"

static void test_roundtrip(void)
{
	struct dlk_failure f = { 1, "mnist-1-x7k2p", "config", 3, "data.train: 'train.csv': no such file", "2026-01-02T03:04:05Z" };
	struct dlk_failure g;
	char text[512];
	char *s = dlk_failure_json(&f);

	CHECK(!dlk_failure_parse(s, &g));
	CHECK(g.rank == 1 && g.exit_code == 3);
	CHECK_STR(g.pod, "mnist-1-x7k2p");
	CHECK_STR(g.cls, "config");
	CHECK_STR(g.message, f.message);
	CHECK_STR(g.time, "2026-01-02T03:04:05Z");
	dlk_failure_text(&g, text, sizeof(text));
	CHECK_STR(text, "rank 1 (pod mnist-1-x7k2p) failed: config (exit 3): data.train: 'train.csv': no such file");
	free(s);
	/* a log's tail (FallbackToLogsOnError) or another object is not a failure */
	CHECK(dlk_failure_parse("error: out of memory", &g));
	CHECK(dlk_failure_parse("{\"rank\":1}", &g));
	CHECK(dlk_failure_parse(NULL, &g));
	/* numbers out of range are unknown; a class is named from the code when missing */
	CHECK(!dlk_failure_parse("{\"rank\":1e300,\"exitCode\":75,\"message\":\"lost\"}", &g));
	CHECK(g.rank == -1 && g.exit_code == 75);
	CHECK_STR(g.cls, "restartable");
	dlk_failure_text(&g, text, sizeof(text));
	CHECK_STR(text, "a worker failed: restartable (exit 75): lost");
}

static void test_bounded(void)
{
	struct dlk_failure f = { 12, "p", "fail", 1, "", "" };
	struct dlk_failure g;
	char *s;

	/* control bytes escape to six bytes each: still below the limit, cut whole */
	memset(f.message, 1, sizeof(f.message) - 1);
	s = dlk_failure_json(&f);
	CHECK(strlen(s) < DLK_FAILURE_MAX_BYTES);
	CHECK(!dlk_failure_parse(s, &g) && g.rank == 12 && strlen(g.message) > 100);
	free(s);
	/* multi-byte characters are never cut in half; newlines become spaces */
	for (size_t i = 0; i + 2 < sizeof(f.message); i += 2)
		memcpy(f.message + i, "\xc3\xa9", 2);
	f.message[sizeof(f.message) - 1] = '\0';
	f.message[3] = '\n';
	f.message[2] = 'x';
	s = dlk_failure_json(&f);
	CHECK(!dlk_failure_parse(s, &g));
	size_t n = strlen(g.message);
	CHECK(n > 0 && (g.message[n - 1] & 0xC0) != 0xC0 && strchr(g.message, '\n') == NULL);
	free(s);
}

static cJSON *parse(const char *s)
{
	cJSON *o = cJSON_Parse(s);
	if (!o)
		printf("# bad JSON in the test: %s\n", s);
	return o;
}

static void test_jobstate(void)
{
	const char *job_json =
		"{\"metadata\":{\"name\":\"m\",\"namespace\":\"default\",\"annotations\":{\"dlk.dev/failure\":"
		"\"{\\\"rank\\\":1,\\\"pod\\\":\\\"m-1-old\\\",\\\"class\\\":\\\"config\\\",\\\"exitCode\\\":3,\\\"message\\\":\\\"from the annotation\\\"}\"}},"
		"\"spec\":{\"completions\":2},\"status\":{\"failed\":1,\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\","
		"\"reason\":\"FailedIndexes\",\"message\":\"Job has failed indexes\"}]}}";
	/* rank 0 lost its peer first (75); rank 1's config error is the cause */
	const char *pods_json =
		"[{\"metadata\":{\"name\":\"m-0-a\",\"labels\":{\"dlk.dev/job\":\"m\",\"batch.kubernetes.io/job-completion-index\":\"0\"}},"
		"\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"state\":{\"terminated\":{\"exitCode\":75,\"reason\":\"Error\","
		"\"finishedAt\":\"2026-01-01T00:00:01Z\",\"message\":\"{\\\"rank\\\":0,\\\"class\\\":\\\"restartable\\\",\\\"exitCode\\\":75,\\\"message\\\":\\\"lost rank 1\\\"}\"}}}]}},"
		"{\"metadata\":{\"name\":\"m-1-b\",\"labels\":{\"dlk.dev/job\":\"m\",\"batch.kubernetes.io/job-completion-index\":\"1\"}},"
		"\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"state\":{\"terminated\":{\"exitCode\":3,\"reason\":\"Error\","
		"\"finishedAt\":\"2026-01-01T00:00:02Z\",\"message\":\"{\\\"class\\\":\\\"config\\\",\\\"exitCode\\\":3,\\\"message\\\":\\\"bad data\\\"}\"}}}]}}]";
	cJSON *job = parse(job_json), *pods = parse(pods_json), *o;
	struct dlk_job_summary s;

	dlk_job_summarize(job, pods, NULL, &s);
	CHECK(s.state == JOB_FAILED && s.have_failure && s.failed_rank == 1);
	CHECK_STR(s.reason, "rank 1 (pod m-1-b) failed: config (exit 3): bad data");
	o = dlk_job_summary_json(&s);
	CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "failure"), "class")->valuestring, "config");
	cJSON_Delete(o);
	dlk_job_summary_release(&s);

	/* the pods are gone: the Job's annotation */
	dlk_job_summarize(job, NULL, NULL, &s);
	CHECK(s.have_failure && s.failed_rank == 1);
	CHECK_STR(s.reason, "rank 1 (pod m-1-old) failed: config (exit 3): from the annotation");
	dlk_job_summary_release(&s);
	dlk_job_summarize_job(job, &s);
	CHECK(s.have_failure && s.failed_rank == -1);
	CHECK_STR(s.reason, "rank 1 (pod m-1-old) failed: config (exit 3): from the annotation");
	dlk_job_summary_release(&s);
	cJSON_Delete(job);
	cJSON_Delete(pods);
}

/* A failed rank the Job has not replaced yet: what the Job's spec says comes next. */
static void pending_retry(const char *spec, const char *count, int code, const char *want)
{
	char job_json[1024], pods_json[1024];
	struct dlk_job_summary s;

	snprintf(job_json, sizeof(job_json), "{\"metadata\":{\"name\":\"m\"},\"spec\":{\"completions\":2%s},\"status\":{}}", spec);
	snprintf(pods_json, sizeof(pods_json),
		 "[{\"metadata\":{\"name\":\"m-0\",\"labels\":{\"dlk.dev/job\":\"m\",\"batch.kubernetes.io/job-completion-index\":\"0\"}},"
		 "\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"worker\",\"ready\":true,\"state\":{\"running\":{}}}]}},"
		 "{\"metadata\":{\"name\":\"m-1\",\"labels\":{\"dlk.dev/job\":\"m\",\"batch.kubernetes.io/job-completion-index\":\"1\"}%s%s%s},"
		 "\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"worker\",\"state\":{\"terminated\":{\"exitCode\":%d,"
		 "\"reason\":\"Error\"}}}]}}]",
		 count ? ",\"annotations\":{\"batch.kubernetes.io/job-index-failure-count\":\"" : "", count ? count : "",
		 count ? "\"}" : "", code);
	cJSON *job = parse(job_json), *pods = parse(pods_json);
	dlk_job_summarize(job, pods, NULL, &s);
	CHECK(s.state == JOB_PENDING);
	CHECK_STR(s.reason, want);
	dlk_job_summary_release(&s);
	cJSON_Delete(job);
	cJSON_Delete(pods);
}

static void test_pending_retry(void)
{
	const char *policy = ",\"backoffLimitPerIndex\":2,\"podFailurePolicy\":{\"rules\":["
		"{\"action\":\"Ignore\",\"onPodConditions\":[{\"type\":\"DisruptionTarget\",\"status\":\"True\"}]},"
		"{\"action\":\"FailJob\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[2,3]}},"
		"{\"action\":\"Ignore\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[76]}},"
		"{\"action\":\"FailIndex\",\"onExitCodes\":{\"containerName\":\"other\",\"operator\":\"In\",\"values\":[42]}},"
		"{\"action\":\"Count\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[75]}},"
		"{\"action\":\"FailIndex\",\"onExitCodes\":{\"operator\":\"NotIn\",\"values\":[1,75]}}]}";

	/* no policy, no per-index limit: the Job's backoffLimit, which the pods do not count */
	pending_retry("", NULL, 42, "rank 1 exited with code 42 (Error); waiting for its retry");
	/* a retry per index: the annotation counts the failures before this pod */
	pending_retry(",\"backoffLimitPerIndex\":2", "0", 42, "rank 1 exited with code 42 (Error); waiting for its retry (1 of 2)");
	pending_retry(",\"backoffLimitPerIndex\":2", "1", 42, "rank 1 exited with code 42 (Error); waiting for its retry (2 of 2)");
	pending_retry(",\"backoffLimitPerIndex\":2", "2", 42,
		      "rank 1 exited with code 42 (Error); out of retries (backoffLimitPerIndex 2): its index has failed");
	pending_retry(",\"backoffLimitPerIndex\":0", "0", 42,
		      "rank 1 exited with code 42 (Error); out of retries (backoffLimitPerIndex 0): its index has failed");
	pending_retry(",\"backoffLimitPerIndex\":0", "x", 42, "rank 1 exited with code 42 (Error); waiting for its retry");
	/* the first rule that matches decides */
	pending_retry(policy, "0", 3, "rank 1 exited with code 3 (Error); its exit code fails the Job (podFailurePolicy)");
	pending_retry(policy, "2", 76, "rank 1 exited with code 76 (Error); not counted (podFailurePolicy); waiting for its retry");
	pending_retry(policy, "0", 75, "rank 1 exited with code 75 (Error); waiting for its retry (1 of 2)");
	pending_retry(policy, "2", 75,
		      "rank 1 exited with code 75 (Error); out of retries (backoffLimitPerIndex 2): its index has failed");
	/* 42 is not the rule for container "other"; NotIn [1, 75] takes it */
	pending_retry(policy, "0", 42, "rank 1 exited with code 42 (Error); its exit code fails its index (podFailurePolicy)");
	pending_retry(policy, "0", 1, "rank 1 exited with code 1 (Error); waiting for its retry (1 of 2)");
}

/* The cause its worker published (the termination message) is told while the retry is awaited:
 * the retry may fail another way, and this attempt's cause would be gone. Line breaks become
 * spaces; a long cause leaves room for what comes next. */
static void test_pending_cause(void)
{
	const char *job_json = "{\"metadata\":{\"name\":\"m\"},\"spec\":{\"completions\":2,\"backoffLimitPerIndex\":3},\"status\":{}}";
	char pods_json[4096], longmsg[1500];
	struct dlk_job_summary s;

	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	for (int k = 0; k < 3; k++) {
		const char *msg = k == 0 ? "killed by SIGABRT\\\\nits last line: terminate called" : k == 1 ? longmsg : NULL;
		char term[1800] = "";
		if (msg)
			snprintf(term, sizeof(term), ",\"message\":\"{\\\"rank\\\":1,\\\"class\\\":\\\"restartable\\\",\\\"exitCode\\\":75,"
			         "\\\"message\\\":\\\"%s\\\"}\"", msg);
		snprintf(pods_json, sizeof(pods_json),
			 "[{\"metadata\":{\"name\":\"m-1\",\"labels\":{\"dlk.dev/job\":\"m\",\"batch.kubernetes.io/job-completion-index\":\"1\"},"
			 "\"annotations\":{\"batch.kubernetes.io/job-index-failure-count\":\"0\"}},"
			 "\"status\":{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"worker\",\"state\":{\"terminated\":{\"exitCode\":75,"
			 "\"reason\":\"Error\"%s}}}]}}]", term);
		cJSON *job = parse(job_json), *pods = parse(pods_json);
		dlk_job_summarize(job, pods, NULL, &s);
		CHECK(s.state == JOB_PENDING);
		if (k == 0)
			CHECK_STR(s.reason, "rank 1 exited with code 75 (Error): killed by SIGABRT its last line: terminate called; "
			                    "waiting for its retry (1 of 3)");
		else if (k == 1)
			CHECK(strstr(s.reason, "rank 1 exited with code 75 (Error): xxx") == s.reason &&
			      strstr(s.reason, "x; waiting for its retry (1 of 3)") != NULL);
		else
			CHECK_STR(s.reason, "rank 1 exited with code 75 (Error); waiting for its retry (1 of 3)");
		dlk_job_summary_release(&s);
		cJSON_Delete(job);
		cJSON_Delete(pods);
	}
}

/* How many of the other indexes are done: what a retried rank checks before waiting for them. */
static void peers_done(const char *status, int completions, int self, int want)
{
	char json[512];
	snprintf(json, sizeof(json), "{\"spec\":{\"completions\":%d},\"status\":{%s}}", completions, status);
	cJSON *job = parse(json);
	int got = dlk_job_peers_done(job, self);
	CHECK_MSG(got == want, "%s, completions %d, rank %d: %d done, not %d", status, completions, self, got, want);
	cJSON_Delete(job);
}

static void test_peers_done(void)
{
	peers_done("", 2, 0, 0);
	peers_done("\"completedIndexes\":\"\"", 2, 0, 0);
	peers_done("\"completedIndexes\":\"1\"", 2, 0, 1);
	peers_done("\"completedIndexes\":\"0\"", 2, 0, 0);
	peers_done("\"completedIndexes\":\"0-2,4\"", 5, 1, 3);
	peers_done("\"completedIndexes\":\"0-2,4\"", 5, 3, 4);
	peers_done("\"completedIndexes\":\"0-99999999999\"", 4, 0, 3);
	peers_done("\"completedIndexes\":\"x,1\"", 2, 0, 0);
	peers_done("\"completedIndexes\":7", 2, 0, 0);
	peers_done("\"completedIndexes\":\"1\"", 0, 0, 0);
}

int main(void)
{
	test_roundtrip();
	test_bounded();
	test_jobstate();
	test_pending_retry();
	test_pending_cause();
	test_peers_done();
	return CHECK_DONE();
}
