/* The trainer's judgements, reached without a terminal: where a run's checkpoints and bundle go,
 * which rank caused a gang's failure, the data fingerprint, and whether `dlk train --local`
 * continues an interrupted run or starts a new one (its spec changed, --fresh, another worker
 * count whose global batch does not split), with the notes it says through its sink. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/jobs/failure.h"
#include "lib/runs/runs.h"
#include "lib/train/checkpoint.h"
#include "lib/trainer/run.h"
#include "lib/trainer/trainer.h"
#include "lib/util/err.h"
#include "lib/util/fsutil.h"

struct notes {
	int n, warnings;
	char text[8][512];
};

static void on_note(void *ud, enum dlk_trainer_level level, const char *msg)
{
	struct notes *ns = ud;

	if (level == DLK_TRAINER_WARN)
		ns->warnings++;
	if (ns->n < 8)
		snprintf(ns->text[ns->n], sizeof(ns->text[0]), "%s", msg);
	ns->n++;
}

static void test_paths(void)
{
	struct dlk_project spec = { 0 };
	char *s;

	spec.name = "mnist";
	CHECK_MSG(dlk_trainer_ckpt_base(&spec, "proj/dlk.yaml", 0) == NULL, "no checkpoint_dir: no checkpoints");
	spec.training.checkpoint_dir = "ckpt";
	CHECK_STR(s = dlk_trainer_ckpt_base(&spec, "proj/dlk.yaml", 0), "proj/ckpt");
	free(s);
	CHECK_STR(s = dlk_trainer_ckpt_base(&spec, "dlk.yaml", 0), "ckpt");
	free(s);
	/* in a pod without a volume: the working directory */
	CHECK_STR(s = dlk_trainer_ckpt_base(&spec, "/etc/dlk/dlk.yaml", 1), "ckpt");
	free(s);
	spec.storage.claim = "data";
	spec.storage.mount = "/ckpt";
	CHECK_STR(s = dlk_trainer_ckpt_base(&spec, "/etc/dlk/dlk.yaml", 1), "/ckpt/ckpt");
	free(s);
	spec.training.checkpoint_dir = "/abs/dir";
	CHECK_STR(s = dlk_trainer_ckpt_base(&spec, "proj/dlk.yaml", 0), "/abs/dir");
	free(s);

	CHECK_STR(s = dlk_trainer_bundle_path(NULL, &spec, "proj/dlk.yaml", 0), "proj/mnist.dlk");
	free(s);
	CHECK_STR(s = dlk_trainer_bundle_path(NULL, &spec, "dlk.yaml", 0), "mnist.dlk");
	free(s);
	CHECK_STR(s = dlk_trainer_bundle_path("out.dlk", &spec, "proj/dlk.yaml", 0), "out.dlk");
	free(s);
	CHECK_STR(s = dlk_trainer_bundle_path(NULL, &spec, "/etc/dlk/dlk.yaml", 1), "/ckpt/mnist.dlk");
	free(s);
	CHECK_STR(s = dlk_dir_of("/a/b/dlk.yaml"), "/a/b");
	free(s);
}

static void test_failure_cause(void)
{
	struct dlk_rank_end e[4];

	memset(e, 0, sizeof(e));
	for (int i = 0; i < 4; i++)
		e[i].seq = -1;
	CHECK_MSG(dlk_failure_cause(e, 4) == -1, "every rank succeeded: no cause");

	/* rank 1 lost its peer (75) before rank 3 failed for good (3): rank 3 explains it */
	e[1] = (struct dlk_rank_end){ DLK_EXIT_RESTARTABLE, 0, 0, 0, NULL };
	e[3] = (struct dlk_rank_end){ DLK_EXIT_CONFIG, 0, 0, 1, NULL };
	CHECK(dlk_failure_cause(e, 4) == 3);

	/* a signal the supervisor did not send beats a restartable exit, not a real failure */
	e[3] = (struct dlk_rank_end){ 128 + 9, 9, 0, 2, NULL };
	CHECK(dlk_failure_cause(e, 4) == 3);
	e[3].signal_ours = 1;
	CHECK_MSG(dlk_failure_cause(e, 4) == 1, "the supervisor's own SIGTERM explains nothing: the earliest end does");
	e[2] = (struct dlk_rank_end){ 2, 0, 0, 3, NULL };
	CHECK(dlk_failure_cause(e, 4) == 2);

	/* pods: the earliest finishedAt among equal causes, else the lowest rank */
	memset(e, 0, sizeof(e));
	for (int i = 0; i < 4; i++)
		e[i].seq = -1;
	e[0] = (struct dlk_rank_end){ 1, 0, 0, -1, "2026-01-01T00:00:09Z" };
	e[2] = (struct dlk_rank_end){ 1, 0, 0, -1, "2026-01-01T00:00:03Z" };
	CHECK(dlk_failure_cause(e, 4) == 2);
	e[2].finished = "";
	CHECK(dlk_failure_cause(e, 4) == 0);
}

/* A record whose data is the sources train.csv (sha train) and test.csv (sha test), in that
 * order or the other. */
static cJSON *with_data(const char *train, const char *test, int reversed)
{
	cJSON *r = dlk_run_record_new("p", "0000"), *data = cJSON_CreateArray();
	const char *split[2] = { "train", "test" }, *sha[2] = { train, test };

	for (int k = 0; k < 2; k++) {
		int i = reversed ? 1 - k : k;
		cJSON *d = cJSON_CreateObject();
		char url[32];
		snprintf(url, sizeof(url), "%s.csv", split[i]);
		cJSON_AddStringToObject(d, "split", split[i]);
		cJSON_AddStringToObject(d, "url", url);
		cJSON_AddStringToObject(d, "sha256", sha[i]);
		cJSON_AddItemToArray(data, d);
	}
	dlk_run_set_item(r, "data", data);
	return r;
}

static void test_fingerprint(void)
{
	cJSON *a = with_data("aa", "bb", 0), *b = with_data("aa", "bb", 1), *c = with_data("aa", "cc", 0);
	cJSON *swapped = with_data("bb", "aa", 0), *none = dlk_run_record_new("p", "0001");
	char fa[65], fb[65], fn[65];

	dlk_run_data_fingerprint(a, fa);
	dlk_run_data_fingerprint(b, fb);
	dlk_run_data_fingerprint(none, fn);
	CHECK_MSG(strlen(fa) == 64 && !strcmp(fa, fb), "the sources' order does not change the fingerprint");
	CHECK_MSG(fn[0] == '\0', "a record without data has no fingerprint");
	CHECK(dlk_run_same_data(a, b) && !dlk_run_same_data(a, c));
	CHECK_MSG(!dlk_run_same_data(a, swapped), "the same digests in other splits are other data");
	CHECK_MSG(!dlk_run_same_data(none, none), "no data is never the same data");
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(c);
	cJSON_Delete(swapped);
	cJSON_Delete(none);
}

/* An interrupted run in the local history of spec (written at `world` workers, with digest). */
static void put_interrupted(const char *spec_file, const char *name, const char *digest, int world, char id[37])
{
	struct dlk_err err = DLK_ERR_INIT;
	char *dir = dlk_runs_local_dir(spec_file, name);
	struct dlk_run_store *s = dlk_runs_open_dir(dir, name);
	cJSON *rec;

	CHECK(dlk_run_new_id(id, &err) == 0);
	/* records are ordered by their start, in milliseconds, then by their random ids: the one
	 * prepared here must be strictly newer than those before it and older than those after */
	usleep(3000);
	rec = dlk_run_record_new(name, id);
	usleep(3000);
	dlk_run_set_str(rec, "where", "local");
	dlk_run_set_str(rec, "spec_sha256", digest);
	dlk_run_add_world(rec, world);
	dlk_run_set_outcome(rec, DLK_RUN_INTERRUPTED);
	CHECK_MSG(dlk_runs_put(s, rec, &err) == 0, "prepared record: %s", err.msg);
	cJSON_Delete(rec);
	dlk_runs_close(s);
	free(dir);
}

static void test_resume(const char *tmp)
{
	struct dlk_project spec = { 0 };
	struct dlk_trainer_opts o = DLK_TRAINER_OPTS_INIT;
	struct notes ns = { 0 };
	struct dlk_trainer_sink sink = { .note = on_note, .ud = &ns };
	struct dlk_err err = DLK_ERR_INIT;
	char spec_file[512], id[37], ckdir[600];
	const char *digest = "1111111111111111111111111111111111111111111111111111111111111111";

	snprintf(spec_file, sizeof(spec_file), "%s/dlk.yaml", tmp);
	spec.name = "p";
	spec.training.checkpoint_dir = "ckpt";
	o.spec_file = spec_file;

	/* an empty history: a new run, recorded as running */
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		CHECK_MSG(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 1, &err) == 0, "%s", err.msg);
		CHECK(!r.resumed && strlen(r.id) == 36 && dlk_run_outcome(r.rec) == DLK_RUN_RUNNING);
		CHECK_STR(dlk_run_str(r.rec, "trigger"), "manual");
		/* then it is interrupted: the next open continues it */
		snprintf(id, sizeof(id), "%.36s", r.id);
		dlk_train_run_finish(&r, DLK_RUN_INTERRUPTED, -1, DLK_EXIT_RESTARTABLE, "stopped by SIGTERM");
		dlk_train_run_release(&r);
	}
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		char *ck;
		CHECK(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 1, &err) == 0);
		CHECK_MSG(r.resumed && !strcmp(r.id, id), "an interrupted run of the same spec goes on");
		CHECK(ns.n == 0);
		ck = dlk_train_run_ckpt_dir(&r, "base");
		snprintf(ckdir, sizeof(ckdir), "base/%s", id);
		CHECK_STR(ck, ckdir);
		free(ck);
		/* it succeeds; nothing is left to continue */
		dlk_train_run_finish(&r, DLK_RUN_SUCCEEDED, -1, 0, NULL);
		dlk_train_run_release(&r);
	}
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		CHECK(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 1, &err) == 0);
		CHECK_MSG(!r.resumed && strcmp(r.id, id), "after a success: a new run");
		dlk_train_run_release(&r);
	}

	/* the project changed since: a new run, said so */
	put_interrupted(spec_file, "p", "2222222222222222222222222222222222222222222222222222222222222222", 1, id);
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		CHECK(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 1, &err) == 0);
		CHECK(!r.resumed && strcmp(r.id, id));
		CHECK(ns.n == 1 && ns.warnings == 0);
		CHECK_CONTAINS(ns.text[0], "was interrupted, but the project has changed since: starting a new run");
		dlk_train_run_release(&r);
	}

	/* --fresh: a new run, the interrupted one stays */
	put_interrupted(spec_file, "p", digest, 1, id);
	o.fresh = 1;
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		CHECK(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 1, &err) == 0);
		CHECK(!r.resumed && strcmp(r.id, id));
		CHECK(ns.n == 2);
		CHECK_CONTAINS(ns.text[1], "starting a new run (--fresh)");
		dlk_train_run_release(&r);
	}
	o.fresh = 0;

	/* resized: interrupted at 2 workers x batch 3 (global 6), its checkpoint says so */
	put_interrupted(spec_file, "p", digest, 2, id);
	{
		const char *state = "{\"world\":2,\"batchSize\":3}";
		struct ckpt_blob b = { "state.json", state, strlen(state) };
		snprintf(ckdir, sizeof(ckdir), "%s/ckpt", tmp);
		CHECK(mkdir(ckdir, 0755) == 0);
		snprintf(ckdir, sizeof(ckdir), "%s/ckpt/%s", tmp, id);
		CHECK_MSG(ckpt_write_atomic(ckdir, 40, &b, 1, NULL, &err) == 0, "prepared checkpoint: %s", err.msg);
	}
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		dlk_err_clear(&err);
		CHECK_MSG(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 4, &err) == -1,
		          "6 samples a step do not split into 4 workers: refused");
		CHECK(err.code == DLK_EXIT_CONFIG);
		CHECK_CONTAINS(err.msg, "(checkpoint at step 40)");
		CHECK_CONTAINS(err.msg, "does not split into 4 equal batches");
		dlk_train_run_release(&r);
	}
	{
		struct dlk_train_run r = DLK_TRAIN_RUN_INIT;
		const cJSON *w;
		dlk_err_clear(&err);
		CHECK_MSG(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 3, &err) == 0, "3 x 2 goes on: %s", err.msg);
		CHECK(r.resumed && !strcmp(r.id, id));
		w = cJSON_GetObjectItemCaseSensitive(dlk_run_info(r.rec), "worlds");
		CHECK_MSG(cJSON_GetArraySize(w) == 2 && cJSON_GetArrayItem(w, 1)->valueint == 3, "the record says 2 then 3 workers");
		dlk_train_run_release(&r);
	}
	CHECK(ns.warnings == 0);
}

/* A run whose record still says running on this host, with a pid that is alive but not its own
 * (the pid of a crashed run, taken again by another process), is continued; a run that really
 * goes on holds the project: a second one is refused naming it, --fresh too, its record as it was. */
static void test_lock(const char *tmp)
{
	struct dlk_project spec = { 0 };
	struct dlk_trainer_opts o = DLK_TRAINER_OPTS_INIT;
	struct notes ns = { 0 };
	struct dlk_trainer_sink sink = { .note = on_note, .ud = &ns };
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_train_run r = DLK_TRAIN_RUN_INIT, r2 = DLK_TRAIN_RUN_INIT;
	const char *digest = "3333333333333333333333333333333333333333333333333333333333333333";
	char spec_file[512], id[37], host[256] = "", want[128], *dir;
	struct dlk_run_store *s;
	cJSON *rec, *all = NULL;

	snprintf(spec_file, sizeof(spec_file), "%s/q/dlk.yaml", tmp);
	spec.name = "q";
	o.spec_file = spec_file;
	dir = dlk_runs_local_dir(spec_file, "q");
	s = dlk_runs_open_dir(dir, "q");
	gethostname(host, sizeof(host) - 1);
	CHECK(dlk_run_new_id(id, &err) == 0);
	rec = dlk_run_record_new("q", id);
	dlk_run_set_str(rec, "where", "local");
	dlk_run_set_str(rec, "spec_sha256", digest);
	dlk_run_set_str(rec, "host", host);
	dlk_run_set_num(rec, "pid", (double)getppid());
	dlk_run_add_world(rec, 1);
	CHECK(dlk_run_outcome(rec) == DLK_RUN_RUNNING);
	CHECK_MSG(dlk_runs_put(s, rec, &err) == 0, "prepared record: %s", err.msg);
	cJSON_Delete(rec);

	CHECK_MSG(dlk_train_run_open_local(&r, &sink, &o, &spec, digest, 1, &err) == 0, "%s", err.msg);
	CHECK_MSG(r.resumed && !strcmp(r.id, id), "a running record whose pid is alive but another's: continued");

	snprintf(want, sizeof(want), "'q' is being trained by run %.8s (pid %ld on '", id, (long)getpid());
	CHECK(dlk_train_run_open_local(&r2, &sink, &o, &spec, digest, 1, &err) == -1);
	CHECK(err.code == DLK_EXIT_FAIL);
	CHECK_CONTAINS(err.msg, want);
	CHECK_CONTAINS(err.hint, "kill -INT");
	dlk_train_run_release(&r2);
	o.fresh = 1;
	dlk_err_clear(&err);
	CHECK_MSG(dlk_train_run_open_local(&r2, &sink, &o, &spec, digest, 1, &err) == -1 && err.code == DLK_EXIT_FAIL,
	          "--fresh is refused too");
	CHECK_CONTAINS(err.msg, want);
	dlk_train_run_release(&r2);
	o.fresh = 0;
	CHECK(dlk_runs_list(s, &all, NULL, NULL, &err) == 0 && cJSON_GetArraySize(all) == 1);
	CHECK_MSG(dlk_run_outcome(cJSON_GetArrayItem(all, 0)) == DLK_RUN_RUNNING, "the running run's record untouched");
	cJSON_Delete(all);

	dlk_train_run_finish(&r, DLK_RUN_INTERRUPTED, -1, DLK_EXIT_RESTARTABLE, "stopped by SIGTERM");
	dlk_train_run_release(&r);
	dlk_err_clear(&err);
	CHECK_MSG(dlk_train_run_open_local(&r2, &sink, &o, &spec, digest, 1, &err) == 0 && r2.resumed,
	          "the run over, the lock is free: continued");
	dlk_train_run_release(&r2);
	CHECK(ns.warnings == 0);
	dlk_runs_close(s);
	free(dir);
}

int main(void)
{
	const char *t = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char tmp[400], cmd[500];

	test_paths();
	test_failure_cause();
	test_fingerprint();
	snprintf(tmp, sizeof(tmp), "%s/dlk-test-trainer-XXXXXX", t);
	CHECK(mkdtemp(tmp) != NULL);
	test_resume(tmp);
	test_lock(tmp);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
	return CHECK_DONE();
}
