/* The cluster driver (lib/pipeline/drive.c) against an API kept in memory whose "pods" push the
 * stage's output to a directory store when a Job ends: the stages' Jobs are created in the DAG's
 * order and a second run reuses them all by key; a stage Job that a stopped driver left running
 * for the same key is followed, not created again; a Job of a stage's name without the
 * pipeline's label is refused and left alone; a failed stage names its Job, rank and cause and
 * blocks the stages below it; the status is published on the driver's Job. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/jobs/failure.h"
#include "lib/kube/api.h"
#include "lib/pipeline/cluster.h"
#include "lib/pipeline/drive.h"
#include "lib/util/fsutil.h"
#include "lib/pipeline/pipeline.h"
#include "lib/store/dataset.h"
#include "lib/store/manifest.h"
#include "lib/store/store.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

/* ---- the API in memory ---- */

struct fake {
	cJSON *jobs;          /* name -> Job */
	struct dlk_buf log;   /* "create NAME", "delete NAME", one a line */
	struct dlk_store *st; /* where a Job that ends well pushes its output */
	const char *dir;
	const char *failing;  /* the Job that fails */
	const char *lost;     /* looking at this Job fails as if the API were gone (the driver dies) */
	cJSON *looks;         /* name -> how often a running Job was looked at */
};

static int fake_get(void *ud, const char *name, cJSON **out, struct dlk_err *err);

static void set_condition(cJSON *job, const char *type)
{
	cJSON *status = cJSON_AddObjectToObject(job, "status"), *conds = cJSON_AddArrayToObject(status, "conditions");
	cJSON *c = cJSON_CreateObject();

	cJSON_AddStringToObject(c, "type", type);
	cJSON_AddStringToObject(c, "status", "True");
	cJSON_AddItemToArray(conds, c);
}

static const char *ann(const cJSON *job, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations"), key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The Job's pod ran: it pushes its output NAME@key-KEY (the stage's output is named like its
 * Job, PIPELINE-STAGE), or fails and says why on the Job as a worker does. */
static void finish(struct fake *f, cJSON *job)
{
	const char *name = kube_meta(job, "name"), *key = ann(job, DLK_PIPELINE_KEY_ANNOTATION);
	struct dlk_err err = DLK_ERR_INIT;

	if (f->failing && !strcmp(name, f->failing)) {
		struct dlk_failure fl = { .rank = 1, .exit_code = 3 };
		char *text;
		snprintf(fl.pod, sizeof(fl.pod), "%s-1-x7k2p", name);
		snprintf(fl.cls, sizeof(fl.cls), "config");
		snprintf(fl.message, sizeof(fl.message), "no column 'label' in the input");
		text = dlk_failure_json(&fl);
		cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"),
		                                                         "annotations"),
		                        DLK_FAILURE_ANNOTATION, text);
		free(text);
		set_condition(job, "Failed");
		return;
	}
	{
		char *file = xasprintf("%s/out-%s", f->dir, name), *tag = xasprintf("%s@key-%s", name, key);
		const char *paths[] = { file }, *tags[] = { tag };
		struct dlk_manifest m = DLK_MANIFEST_INIT;
		FILE *fp = fopen(file, "w");
		if (fp) {
			fprintf(fp, "%s %s\n", name, key);
			fclose(fp);
		}
		CHECK_MSG(!dlk_manifest_build(paths, 1, NULL, NULL, &m, &err) &&
		                  !dlk_dataset_push(f->st, &m, tags, 1, NULL, NULL, NULL, &err),
		          "the fake pod pushes %s (%s)", tag, err.msg);
		dlk_manifest_release(&m);
		free(file);
		free(tag);
	}
	set_condition(job, "Complete");
}

static int fake_get(void *ud, const char *name, cJSON **out, struct dlk_err *err)
{
	struct fake *f = ud;
	cJSON *job = cJSON_GetObjectItemCaseSensitive(f->jobs, name);

	if (!job)
		return dlk_errf(err, DLK_EXIT_NOTFOUND, "jobs.batch \"%s\" not found", name);
	if (f->lost && !strcmp(name, f->lost) && !cJSON_GetObjectItemCaseSensitive(job, "status"))
		return dlk_errf(err, DLK_EXIT_CONNECT, "cannot reach the API server");
	/* a stage Job ends at the second look after its creation */
	if (ann(job, DLK_PIPELINE_KEY_ANNOTATION) && !cJSON_GetObjectItemCaseSensitive(job, "status")) {
		cJSON *n = cJSON_GetObjectItemCaseSensitive(f->looks, name);
		if (!n)
			n = cJSON_AddNumberToObject(f->looks, name, 0);
		cJSON_SetNumberValue(n, n->valuedouble + 1);
		if (n->valuedouble >= 2)
			finish(f, job);
	}
	*out = cJSON_Duplicate(job, 1);
	return 0;
}

static int fake_create(void *ud, const cJSON *job, cJSON **out, struct dlk_err *err)
{
	struct fake *f = ud;
	const char *name = kube_meta(job, "name");

	if (cJSON_GetObjectItemCaseSensitive(f->jobs, name))
		return dlk_errf(err, DLK_EXIT_EXISTS, "jobs.batch \"%s\" already exists", name);
	dlk_buf_addf(&f->log, "create %s\n", name);
	cJSON_DeleteItemFromObjectCaseSensitive(f->looks, name);
	cJSON_AddItemToObject(f->jobs, name, cJSON_Duplicate(job, 1));
	*out = cJSON_Duplicate(job, 1);
	return 0;
}

static int fake_delete(void *ud, const char *name, struct dlk_err *err)
{
	struct fake *f = ud;

	if (!cJSON_GetObjectItemCaseSensitive(f->jobs, name))
		return dlk_errf(err, DLK_EXIT_NOTFOUND, "jobs.batch \"%s\" not found", name);
	dlk_buf_addf(&f->log, "delete %s\n", name);
	cJSON_DeleteItemFromObjectCaseSensitive(f->jobs, name);
	return 0;
}

static int fake_annotate(void *ud, const char *name, const char *key, const char *value, struct dlk_err *err)
{
	struct fake *f = ud;
	cJSON *job = cJSON_GetObjectItemCaseSensitive(f->jobs, name), *a;

	if (!job)
		return dlk_errf(err, DLK_EXIT_NOTFOUND, "jobs.batch \"%s\" not found", name);
	a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "annotations");
	cJSON_DeleteItemFromObjectCaseSensitive(a, key);
	cJSON_AddStringToObject(a, key, value);
	return 0;
}

static cJSON *job_json(const char *name, const char *pipeline)
{
	char *text = pipeline ? xasprintf("{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\","
	                                  "\"labels\":{\"dlk.dev/pipeline\":\"%s\"},\"annotations\":{}}}",
	                                  name, pipeline)
	                       : xasprintf("{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\","
	                                   "\"annotations\":{}}}",
	                                   name);
	cJSON *j = cJSON_Parse(text);
	free(text);
	return j;
}

/* ---- the test ---- */

static struct dlk_buf notes = DLK_BUF_INIT;

static void on_note(void *ud, int warn, const char *msg)
{
	(void)ud;
	dlk_buf_addf(&notes, "%s%s\n", warn ? "! " : "", msg);
}

static int has(const struct dlk_buf *b, const char *s)
{
	return b->data && strstr(b->data, s) != NULL;
}

/* the line number of s in the log, or -1 */
static int pos(const struct dlk_buf *b, const char *s)
{
	const char *at = b->data ? strstr(b->data, s) : NULL;
	int n = 0;

	if (!at)
		return -1;
	for (const char *c = b->data; c < at; c++)
		n += *c == '\n';
	return n;
}

static const char *stage_state(const cJSON *status, const char *stage)
{
	const cJSON *s;

	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(status, "stages"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name"), *st = cJSON_GetObjectItemCaseSensitive(s, "state");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, stage) && cJSON_IsString(st))
			return st->valuestring;
	}
	return "";
}

/* what a run said and did, as TAP comments */
static void show(const struct fake *f)
{
	const struct dlk_buf *bufs[2] = { &notes, &f->log };

	for (int i = 0; i < 2; i++)
		for (const char *l = bufs[i]->data; l && *l;) {
			const char *nl = strchr(l, '\n');
			int len = nl ? (int)(nl - l) : (int)strlen(l);
			printf("# %.*s\n", len, l);
			l += len + (nl ? 1 : 0);
		}
}

static void reset(struct fake *f, struct dlk_err *err)
{
	dlk_buf_reset(&notes);
	dlk_buf_reset(&f->log);
	dlk_err_clear(err);
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = dlk_mkdtemp("dlk-test-drive", &err), *store_dir, *text, *in;
	struct dlk_store_opts so = { 0 };
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_pipeline p = DLK_PIPELINE_INIT, p2 = DLK_PIPELINE_INIT;
	struct dlk_pipeline_sink sink = { on_note, NULL };
	struct dlk_pipeline_run_opts o = { 0 };
	struct fake f = { 0 };
	struct dlk_pipeline_api api = { fake_get, fake_create, fake_delete, fake_annotate, NULL, &f };
	const char *tags[] = { "in@v1" }, *paths[1];
	const char *force_b[] = { "b" }, *force_d[] = { "d" };
	cJSON *jobs, *status;
	FILE *fp;
	int rc;

	if (!dir)
		return 1;
	store_dir = xasprintf("%s/store", dir);
	in = xasprintf("%s/raw", dir);
	fp = fopen(in, "w");
	fputs("raw\n", fp);
	fclose(fp);
	f.dir = dir;
	f.jobs = cJSON_CreateObject();
	f.looks = cJSON_CreateObject();
	f.st = dlk_store_open(store_dir, &so, &err);
	CHECK_MSG(f.st != NULL, "a directory store opens (%s)", err.msg);
	if (!f.st)
		return CHECK_DONE();
	paths[0] = in;
	CHECK(!dlk_manifest_build(paths, 1, NULL, NULL, &m, &err) && !dlk_dataset_push(f.st, &m, tags, 1, NULL, NULL, NULL, &err));
	/* a -> b -> c, a -> d; the programs never run here: the Jobs are the fake's */
	text = xasprintf("name: t\nstore: %s\nstages:\n"
	                 "  a:\n    inputs: {x: in@v1}\n    run: [sh, -c, 'true']\n"
	                 "  b:\n    inputs: {a: a}\n    run: [sh, -c, 'true']\n"
	                 "  c:\n    inputs: {b: b}\n    run: [sh, -c, 'true']\n    params: {n: 1}\n"
	                 "  d:\n    inputs: {a: a}\n    run: [sh, -c, 'true']\n",
	                 store_dir);
	CHECK_MSG(!dlk_pipeline_parse(text, strlen(text), "t.yaml", dir, &p, &err), "the pipeline parses (%s)", err.msg);
	free(text);
	jobs = cJSON_CreateObject();
	cJSON_AddItemToObject(jobs, "a", job_json("t-a", "t"));
	cJSON_AddItemToObject(jobs, "b", job_json("t-b", "t"));
	cJSON_AddItemToObject(jobs, "c", job_json("t-c", "t"));
	cJSON_AddItemToObject(jobs, "d", job_json("t-d", "t"));
	cJSON_AddItemToObject(f.jobs, "t-pipeline", job_json("t-pipeline", "t"));
	o.store = f.st;
	o.store_url = store_dir;

	/* the first run creates every stage's Job, inputs first */
	rc = dlk_pipeline_drive(&p, jobs, &api, "t-pipeline", &o, &sink, &err);
	show(&f);
	CHECK_MSG(rc == 0, "the first run succeeds (%s)", err.msg);
	CHECK(pos(&f.log, "create t-a") == 0);
	CHECK(pos(&f.log, "create t-b") > 0 && pos(&f.log, "create t-d") > 0);
	CHECK(pos(&f.log, "create t-c") > pos(&f.log, "create t-b"));
	CHECK(!has(&f.log, "delete"));
	{
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(f.jobs, "t-a");
		CHECK_MSG(ann(a, DLK_PIPELINE_KEY_ANNOTATION) && strlen(ann(a, DLK_PIPELINE_KEY_ANNOTATION)) == 64,
		          "a stage Job carries the key it makes");
	}
	status = cJSON_Parse(ann(cJSON_GetObjectItemCaseSensitive(f.jobs, "t-pipeline"), DLK_PIPELINE_STATUS_ANNOTATION)
	                             ? ann(cJSON_GetObjectItemCaseSensitive(f.jobs, "t-pipeline"), DLK_PIPELINE_STATUS_ANNOTATION)
	                             : "");
	CHECK_MSG(status != NULL, "the status is published on the driver's Job");
	CHECK_STR(stage_state(status, "a"), "succeeded");
	CHECK_STR(stage_state(status, "c"), "succeeded");
	cJSON_Delete(status);

	/* a second run: every key has its output, no Job is touched */
	reset(&f, &err);
	rc = dlk_pipeline_drive(&p, jobs, &api, "t-pipeline", &o, &sink, &err);
	CHECK_MSG(rc == 0, "the second run succeeds (%s)", err.msg);
	CHECK(has(&notes, "stage a: reused (key") && has(&notes, "stage b: reused (key") &&
	      has(&notes, "stage c: reused (key") && has(&notes, "stage d: reused (key"));
	CHECK_MSG(f.log.len == 0, "the second run creates and deletes nothing (%s)", f.log.data ? f.log.data : "");

	/* c's parameter changes: the driver creates c's Job (deleting the old one) and dies while it runs */
	text = xasprintf("name: t\nstore: %s\nstages:\n"
	                 "  a:\n    inputs: {x: in@v1}\n    run: [sh, -c, 'true']\n"
	                 "  b:\n    inputs: {a: a}\n    run: [sh, -c, 'true']\n"
	                 "  c:\n    inputs: {b: b}\n    run: [sh, -c, 'true']\n    params: {n: 2}\n"
	                 "  d:\n    inputs: {a: a}\n    run: [sh, -c, 'true']\n",
	                 store_dir);
	CHECK(!dlk_pipeline_parse(text, strlen(text), "t.yaml", dir, &p2, &err));
	free(text);
	reset(&f, &err);
	f.lost = "t-c";
	rc = dlk_pipeline_drive(&p2, jobs, &api, "t-pipeline", &o, &sink, &err);
	show(&f);
	CHECK_MSG(rc != 0 && err.code == DLK_EXIT_CONNECT, "the driver stops on the API's error (%d)", err.code);
	CHECK_CONTAINS(err.msg, "stage 'c': following job 't-c'");
	CHECK(has(&f.log, "delete t-c\ncreate t-c\n"));
	CHECK(has(&notes, "stage b: reused (key") && has(&notes, "stage c: runs (key"));
	/* it is started again: the Job it left for the same key is followed, not created again */
	reset(&f, &err);
	f.lost = NULL;
	rc = dlk_pipeline_drive(&p2, jobs, &api, "t-pipeline", &o, &sink, &err);
	show(&f);
	CHECK_MSG(rc == 0, "the restarted driver ends well (%s)", err.msg);
	CHECK(has(&notes, "stage c: its job 't-c' runs already (key"));
	CHECK(has(&notes, "following it"));
	CHECK_MSG(f.log.len == 0, "the restarted driver creates and deletes nothing (%s)", f.log.data ? f.log.data : "");
	CHECK(has(&notes, "stage c: done in"));

	/* a Job named like a stage's but without the pipeline's label is not the driver's to delete */
	reset(&f, &err);
	cJSON_ReplaceItemInObjectCaseSensitive(f.jobs, "t-d", job_json("t-d", NULL));
	o.force = force_d;
	o.n_force = 1;
	rc = dlk_pipeline_drive(&p2, jobs, &api, "t-pipeline", &o, &sink, &err);
	CHECK(rc != 0);
	CHECK_CONTAINS(err.msg, "job 't-d' is not pipeline t's");
	CHECK_MSG(!has(&f.log, "t-d"), "the foreign Job is neither deleted nor replaced");
	CHECK(cJSON_GetObjectItemCaseSensitive(f.jobs, "t-d") != NULL);
	/* nor does it create a Job whose template lacks the label */
	reset(&f, &err);
	cJSON_ReplaceItemInObjectCaseSensitive(jobs, "d", job_json("t-d", "other"));
	cJSON_DeleteItemFromObjectCaseSensitive(f.jobs, "t-d");
	rc = dlk_pipeline_drive(&p2, jobs, &api, "t-pipeline", &o, &sink, &err);
	CHECK(rc != 0);
	CHECK_CONTAINS(err.msg, "stage 'd' has no Job of pipeline t");
	CHECK(!has(&f.log, "create"));
	cJSON_ReplaceItemInObjectCaseSensitive(jobs, "d", job_json("t-d", "t"));

	/* a stage fails: its reason names the Job, the rank and the cause; the stage below is not run */
	reset(&f, &err);
	f.failing = "t-b";
	o.force = force_b;
	o.n_force = 1;
	rc = dlk_pipeline_drive(&p2, jobs, &api, "t-pipeline", &o, &sink, &err);
	show(&f);
	CHECK(rc != 0 && err.code == DLK_EXIT_FAIL);
	CHECK_CONTAINS(err.msg, "stage b failed; not run: c");
	CHECK(has(&notes, "! stage b: failed, its job 't-b' failed: rank 1 (pod t-b-1-x7k2p) failed: config (exit 3): "
	                  "no column 'label' in the input"));
	CHECK(has(&notes, "! stage c: not run: its input stage 'b' failed"));
	CHECK(has(&f.log, "create t-b") && !has(&f.log, "create t-c"));
	status = cJSON_Parse(ann(cJSON_GetObjectItemCaseSensitive(f.jobs, "t-pipeline"), DLK_PIPELINE_STATUS_ANNOTATION));
	CHECK_MSG(status != NULL, "the status is published when a stage failed too");
	CHECK_STR(stage_state(status, "b"), "failed");
	CHECK_STR(stage_state(status, "c"), "blocked");
	CHECK_STR(stage_state(status, "a"), "reused");
	cJSON_Delete(status);

	{
		/* a Job the Job controller failed without a worker's word: its condition says why */
		cJSON *j = job_json("t-x", "t");
		char why[512];
		cJSON *c = cJSON_CreateObject(), *st = cJSON_AddObjectToObject(j, "status");
		cJSON_AddStringToObject(c, "type", "Failed");
		cJSON_AddStringToObject(c, "status", "True");
		cJSON_AddStringToObject(c, "reason", "DeadlineExceeded");
		cJSON_AddStringToObject(c, "message", "Job was active longer than specified deadline");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(st, "conditions"), c);
		CHECK_STR(dlk_pipeline_job_state(j), "failed");
		dlk_pipeline_job_failure(j, why, sizeof(why));
		CHECK_STR(why, "its job 't-x' failed: DeadlineExceeded: Job was active longer than specified deadline");
		cJSON_Delete(j);
	}

	{
		/* the driver's runs: its Job and the Jobs its CronJob started, newest first */
		cJSON *list = cJSON_Parse(
			"[{\"metadata\":{\"name\":\"t-pipeline\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
			"\"annotations\":{\"dlk.dev/pipeline-status\":\"{\\\"stages\\\":[]}\"}},"
			"\"status\":{\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]}},"
			"{\"metadata\":{\"name\":\"t-pipeline-29100000\",\"creationTimestamp\":\"2026-01-03T00:00:00Z\","
			"\"ownerReferences\":[{\"kind\":\"CronJob\",\"name\":\"t-pipeline\"}]}},"
			"{\"metadata\":{\"name\":\"manual\",\"creationTimestamp\":\"2026-01-02T00:00:00Z\","
			"\"ownerReferences\":[{\"kind\":\"CronJob\",\"name\":\"t-pipeline\"}]}},"
			"{\"metadata\":{\"name\":\"t-a\",\"creationTimestamp\":\"2026-01-04T00:00:00Z\"}},"
			"{\"metadata\":{\"name\":\"x-pipeline\",\"creationTimestamp\":\"2026-01-05T00:00:00Z\","
			"\"ownerReferences\":[{\"kind\":\"CronJob\",\"name\":\"tt-pipeline\"}]}}]");
		cJSON *runs = dlk_pipeline_driver_runs(list, "t");
		CHECK_MSG(cJSON_GetArraySize(runs) == 3, "three runs of t's driver (%d)", cJSON_GetArraySize(runs));
		CHECK_STR(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 0), "job")->valuestring, "t-pipeline-29100000");
		CHECK_STR(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 1), "job")->valuestring, "manual");
		CHECK_STR(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 2), "job")->valuestring, "t-pipeline");
		CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 0), "status")));
		CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 2), "status")));
		CHECK_STR(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(runs, 2), "state")->valuestring, "succeeded");
		cJSON_Delete(runs);
		cJSON_Delete(list);
	}

	cJSON_Delete(jobs);
	cJSON_Delete(f.jobs);
	cJSON_Delete(f.looks);
	dlk_buf_release(&f.log);
	dlk_buf_release(&notes);
	dlk_pipeline_release(&p);
	dlk_pipeline_release(&p2);
	dlk_manifest_release(&m);
	dlk_store_close(f.st);
	{
		char *cmd = xasprintf("rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("# cannot remove %s\n", dir);
		free(cmd);
	}
	free(in);
	free(store_dir);
	free(dir);
	return CHECK_DONE();
}
