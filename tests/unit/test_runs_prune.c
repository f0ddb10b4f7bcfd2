/* dlk_runs_prune without a terminal: which runs go whole (record, own bundle, checkpoints), which
 * finished runs lose only their checkpoints, what resuming needs stays, and a dry run removes
 * nothing. */
#include "lib/runs/prune.h"
#include "lib/runs/runs.h"
#include "lib/util/fsutil.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <sys/stat.h>
#include <unistd.h>

static int exists(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	struct stat st;
	int r = stat(p, &st) == 0;

	free(p);
	return r;
}

static void touch(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	FILE *f = fopen(p, "w");

	if (f) {
		fputs("0123456789", f);
		fclose(f);
	}
	free(p);
}

/* a run of project "p", started on day (of January 2024), with its bundle and a checkpoint */
static void put_run(struct dlk_run_store *s, const char *runs, const char *ckpts, const char *id, int day,
                    enum dlk_run_outcome o)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *rec = dlk_run_record_new("p", id);
	char t[32], *dir;

	snprintf(t, sizeof(t), "2024-01-%02dT00:00:00.000Z", day);
	dlk_run_set_str(rec, "started_at", t);
	dlk_run_set_outcome(rec, o);
	CHECK_MSG(dlk_runs_put(s, rec, &err) == 0, "record %s written %s", id, err.msg);
	cJSON_Delete(rec);
	dir = xasprintf("%s/%s/step-00000004", ckpts, id);
	dlk_mkdir_p(dir, &err);
	touch(dir, "params.f32");
	free(dir);
	dir = xasprintf("%s.dlk", id);
	touch(runs, dir);
	free(dir);
}

int main(void)
{
	char *tmp = test_tmpdir("prune");
	char *runs, *ckpts;
	struct dlk_run_store *s;
	struct dlk_prune_opts o = DLK_PRUNE_OPTS_INIT;
	struct dlk_prune p = DLK_PRUNE_INIT;
	struct dlk_err err = DLK_ERR_INIT;

	if (!tmp)
		return 1;
	runs = xasprintf("%s/.dlk/runs/p", tmp);
	ckpts = xasprintf("%s/.dlk/checkpoints/p", tmp);
	s = dlk_runs_open_dir(runs, "p");
	/* oldest to newest: a, b finished; c failed; d still going; e interrupted (the newest) */
	put_run(s, runs, ckpts, "a", 1, DLK_RUN_SUCCEEDED);
	put_run(s, runs, ckpts, "b", 2, DLK_RUN_SUCCEEDED);
	put_run(s, runs, ckpts, "c", 3, DLK_RUN_FAILED);
	put_run(s, runs, ckpts, "d", 4, DLK_RUN_RUNNING);
	put_run(s, runs, ckpts, "e", 5, DLK_RUN_INTERRUPTED);
	dlk_runs_close(s);
	o.runs_dir = runs;
	o.project = "p";
	o.ckpt_base = ckpts;
	o.now = 1704067200.0 + 10 * 86400; /* 2024-01-11 */

	/* a dry run: the checkpoints of a, b and c (nothing resumes them), nothing removed */
	o.dry_run = 1;
	CHECK(dlk_runs_prune(&o, &p, &err) == 0);
	CHECK_MSG(p.n == 3, "three runs lose their checkpoints (%zu)", p.n);
	for (size_t i = 0; i < p.n; i++)
		CHECK_MSG(!p.items[i].whole && p.items[i].checkpoints && !p.items[i].record, "run %s: its checkpoints only",
		          p.items[i].id);
	CHECK(p.n == 3 && !strcmp(p.items[0].id, "c") && !strcmp(p.items[2].id, "a"));
	CHECK(p.bytes == 30);
	CHECK(exists(ckpts, "a/step-00000004/params.f32"));
	dlk_prune_release(&p);

	/* --keep 2 (e and d): c, b and a go whole; d (running) and e (the newest) are not touched */
	o.dry_run = 0;
	o.keep = 2;
	CHECK(dlk_runs_prune(&o, &p, &err) == 0);
	CHECK_MSG(p.n == 3, "three runs go (%zu)", p.n);
	for (size_t i = 0; i < p.n; i++)
		CHECK_MSG(p.items[i].whole && p.items[i].record && p.items[i].bundle, "run %s goes whole", p.items[i].id);
	CHECK(!exists(runs, "a.json") && !exists(runs, "a.dlk") && !exists(ckpts, "a"));
	CHECK(!exists(runs, "c.json") && !exists(ckpts, "c"));
	CHECK(exists(runs, "d.json") && exists(ckpts, "d/step-00000004") && exists(runs, "d.dlk"));
	CHECK(exists(runs, "e.json") && exists(ckpts, "e/step-00000004"));
	dlk_prune_release(&p);

	/* --older-than: the running run stays whatever its age; the newest too */
	o.keep = -1;
	o.older_than = 86400;
	CHECK(dlk_runs_prune(&o, &p, &err) == 0);
	CHECK_MSG(p.n == 0, "nothing more goes (%zu)", p.n);
	dlk_prune_release(&p);

	/* a project with no history: nothing to do, no error */
	o.runs_dir = ckpts;
	CHECK(dlk_runs_prune(&o, &p, &err) == 0 && p.n == 0);
	dlk_prune_release(&p);

	free(runs);
	free(ckpts);
	test_tmpdir_remove(tmp);
	return CHECK_DONE();
}
