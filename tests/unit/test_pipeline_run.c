/* The local runner as a library call, on a directory store and shell programs: the first run
 * runs every stage it can, a failing stage blocks exactly the stages below it, the error names
 * them; the second run reuses what succeeded (its key found) and runs the failed stage again;
 * --force runs a reused stage again; a dry run runs nothing. The outputs as a graph of the store
 * (lib/store/graph): what was made from the input, which dataset holds a file. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <unistd.h>

#include "lib/pipeline/pipeline.h"
#include "lib/store/dataset.h"
#include "lib/store/graph.h"
#include "lib/store/manifest.h"
#include "lib/store/store.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

static struct dlk_buf notes = DLK_BUF_INIT;

static void on_note(void *ud, int warn, const char *msg)
{
	(void)ud;
	dlk_buf_addf(&notes, "%s%s\n", warn ? "! " : "", msg);
}

static int has(const char *line_start)
{
	return notes.data && strstr(notes.data, line_start) != NULL;
}

int main(void)
{
	char *tmpl = xasprintf("%s/dlk-test-pipeline-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	char *dir = mkdtemp(tmpl), *store_dir, *text, *f, *cmd;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_store_opts so = { 0 };
	struct dlk_store *st;
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_pipeline p;
	struct dlk_pipeline_sink sink = { on_note, NULL };
	struct dlk_pipeline_run_opts o = { 0 };
	const char *tags[] = { "in@v1" };
	const char *paths[1];
	const char *force[] = { "a" };
	FILE *fp;
	int rc;

	if (!dir)
		return 1;
	store_dir = xasprintf("%s/store", dir);
	f = xasprintf("%s/f", dir);
	fp = fopen(f, "w");
	fputs("hello\n", fp);
	fclose(fp);
	st = dlk_store_open(store_dir, &so, &err);
	CHECK_MSG(st != NULL, "a directory store opens (%s)", err.msg);
	if (!st)
		return CHECK_DONE();
	paths[0] = f;
	CHECK(!dlk_manifest_build(paths, 1, NULL, NULL, &m, &err) && !dlk_dataset_push(st, &m, tags, 1, NULL, NULL, NULL, &err));
	text = xasprintf("name: t\nstore: %s\nstages:\n"
	                 "  a:\n    inputs: {x: in@v1}\n    run: [sh, -c, 'tr a-z A-Z <$DLK_INPUT_X/f >$DLK_OUTPUT/g']\n"
	                 "  b:\n    inputs: {a: a}\n    run: [sh, -c, 'echo broken; exit 3']\n"
	                 "  c:\n    inputs: {b: b}\n    run: [sh, -c, 'true']\n"
	                 "  d:\n    inputs: {a: a}\n    run: [sh, -c, 'cp $DLK_INPUT_A/g $DLK_OUTPUT/h']\n",
	                 store_dir);
	CHECK_MSG(!dlk_pipeline_parse(text, strlen(text), "t.yaml", dir, &p, &err), "the pipeline parses (%s)", err.msg);
	o.store = st;
	o.store_url = store_dir;
	o.parallel = 2;

	rc = dlk_pipeline_run_local(&p, &o, &sink, &err);
	printf("# %s", notes.data ? notes.data : "");
	CHECK_MSG(rc != 0 && err.code == DLK_EXIT_FAIL, "a failed stage fails the run");
	CHECK_CONTAINS(err.msg, "stage b failed; not run: c");
	CHECK(has("stage a: runs (key") && has("stage d: runs (key"));
	CHECK(has("! stage b: failed, exit code 3: broken"));
	CHECK(has("! stage c: not run: its input stage 'b' failed"));
	cmd = xasprintf("test \"$(cat %s/.dlk/pipelines/t/logs/b.log)\" = broken", dir);
	CHECK_MSG(system(cmd) == 0, "the failed stage's log holds what it printed");
	free(cmd);
	{
		char id[65];
		dlk_err_clear(&err);
		CHECK_MSG(!dlk_dataset_resolve(st, "t-d@latest", 0, id, &err), "d's output is in the store (%s)", err.msg);
	}

	dlk_buf_reset(&notes);
	dlk_err_clear(&err);
	rc = dlk_pipeline_run_local(&p, &o, &sink, &err);
	printf("# %s", notes.data ? notes.data : "");
	CHECK(rc != 0);
	CHECK(has("stage a: reused (key") && has("stage d: reused (key"));
	CHECK_MSG(has("stage b: runs (key"), "the failed stage runs again");
	CHECK(!has("stage a: runs") && !has("stage d: runs"));

	dlk_buf_reset(&notes);
	dlk_err_clear(&err);
	o.force = force;
	o.n_force = 1;
	o.only = force;
	o.n_only = 1;
	rc = dlk_pipeline_run_local(&p, &o, &sink, &err);
	CHECK_MSG(rc == 0, "--force a, only a: runs a alone (%s)", err.msg);
	CHECK(has("stage a: runs (key") && !has("stage b:") && !has("stage d:"));

	dlk_buf_reset(&notes);
	dlk_err_clear(&err);
	o.force = NULL;
	o.n_force = 0;
	o.only = NULL;
	o.n_only = 0;
	o.dry_run = 1;
	rc = dlk_pipeline_run_local(&p, &o, &sink, &err);
	CHECK_MSG(rc == 0, "a dry run runs nothing and fails nothing (%s)", err.msg);
	CHECK(has("stage a: reused") && has("stage b: would run (key") && has("stage c: would run (an input stage would run)"));

	{
		/* the store as a graph (lib/store/graph): what was made from in@v1, through the stages */
		cJSON *down = NULL, *d;
		char in_id[65], a_id[65], id[65];
		int n_a = 0, n_d = 0, found;
		dlk_err_clear(&err);
		CHECK(!dlk_dataset_resolve(st, "in@v1", 0, in_id, &err) && !dlk_dataset_resolve(st, "t-a@latest", 0, a_id, &err));
		CHECK_MSG(!dlk_dataset_downstream(st, in_id, &down, &err), "downstream of in@v1 (%s)", err.msg);
		cJSON_ArrayForEach(d, down)
		{
			const char *by = cJSON_GetObjectItemCaseSensitive(d, "made_by")->valuestring;
			int depth = cJSON_GetObjectItemCaseSensitive(d, "depth")->valueint;
			n_a += !strcmp(by, "dlk pipeline t, stage a") && depth == 1;
			n_d += !strcmp(by, "dlk pipeline t, stage d") && depth == 2;
		}
		CHECK_MSG(n_a == 2 && n_d == 1 && cJSON_GetArraySize(down) == 3,
		          "a's two outputs (the forced run's too) and d's, from in@v1 (%d, %d of %d)", n_a, n_d,
		          cJSON_GetArraySize(down));
		cJSON_Delete(down);
		down = NULL;
		CHECK(!dlk_dataset_resolve(st, "t-d@latest", 0, id, &err) && !dlk_dataset_downstream(st, id, &down, &err));
		CHECK_MSG(cJSON_GetArraySize(down) == 0, "nothing was made from d's output");
		cJSON_Delete(down);
		/* the file g of a's output: the dataset that holds it */
		{
			struct dlk_manifest am = DLK_MANIFEST_INIT;
			const struct dlk_manifest_entry *g;
			CHECK(!dlk_dataset_manifest(st, a_id, &am, &err));
			g = dlk_manifest_find(&am, "g");
			found = g ? dlk_dataset_holding(st, g->sha256, id, &err) : -1;
			CHECK_MSG(found == 1, "a dataset holds a's file g (%d)", found);
			dlk_manifest_release(&am);
		}
		found = dlk_dataset_holding(st, "0000000000000000000000000000000000000000000000000000000000000000", id, &err);
		CHECK_MSG(found == 0, "no dataset holds a file of that digest (%d)", found);
	}

	dlk_pipeline_release(&p);
	dlk_manifest_release(&m);
	dlk_store_close(st);
	dlk_buf_release(&notes);
	free(text);
	free(f);
	cmd = xasprintf("rm -rf %s", dir);
	if (system(cmd))
		printf("# cannot remove %s\n", dir);
	free(cmd);
	free(store_dir);
	free(tmpl);
	return CHECK_DONE();
}
