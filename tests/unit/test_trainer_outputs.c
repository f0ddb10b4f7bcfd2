/* Where a run here leaves its bundle, and the hint after it stopped: each run's own bundle beside
 * its record, NAME.dlk made the same file (replaced whole), none in a pod; the resume hint names
 * the command that resumes (never --fresh again), none in a pod. */
#include "lib/trainer/trainer.h"
#include "lib/util/fsutil.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#include <sys/stat.h>

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[64] = "";
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return xstrdup(buf);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

int main(void)
{
	struct dlk_trainer_opts o = DLK_TRAINER_OPTS_INIT;
	struct dlk_project spec = { 0 };
	struct dlk_err err = DLK_ERR_INIT;
	char *tmp = test_tmpdir("outputs"), *p, *a, *b, *latest, *got;
	struct stat sa, sl;

	if (!tmp)
		return 1;
	/* the hints */
	CHECK_CONTAINS(dlk_trainer_resume_hint(&o), "run the same command again to resume from it");
	o.fresh = 1;
	CHECK_CONTAINS(dlk_trainer_resume_hint(&o), "without --fresh");
	o.in_pod = 1;
	CHECK(dlk_trainer_resume_hint(&o) == NULL);

	/* each run's own bundle */
	spec.name = "blobs";
	p = dlk_trainer_run_bundle_path(&spec, "proj/dlk.yaml", 0, "1234-abcd");
	CHECK_STR(p, "proj/.dlk/runs/blobs/1234-abcd.dlk");
	free(p);
	CHECK(dlk_trainer_run_bundle_path(&spec, "proj/dlk.yaml", 1, "1234-abcd") == NULL);
	CHECK(dlk_trainer_run_bundle_path(&spec, "proj/dlk.yaml", 0, "") == NULL);

	/* NAME.dlk made the newest run's, replacing the one before; the older run's stays */
	a = xasprintf("%s/a.dlk", tmp);
	b = xasprintf("%s/b.dlk", tmp);
	latest = xasprintf("%s/blobs.dlk", tmp);
	put(a, "first run");
	put(b, "second run");
	CHECK(dlk_trainer_publish_bundle(a, latest, &err) == 0);
	got = slurp(latest);
	CHECK_STR(got, "first run");
	free(got);
	CHECK(stat(a, &sa) == 0 && stat(latest, &sl) == 0 && sa.st_ino == sl.st_ino);
	CHECK(dlk_trainer_publish_bundle(b, latest, &err) == 0);
	got = slurp(latest);
	CHECK_STR(got, "second run");
	free(got);
	got = slurp(a);
	CHECK_STR(got, "first run");
	free(got);
	/* a run's bundle that is not there: an error naming it, NAME.dlk untouched */
	p = xasprintf("%s/gone.dlk", tmp);
	CHECK(dlk_trainer_publish_bundle(p, latest, &err) == -1);
	CHECK_CONTAINS(err.msg, "gone.dlk");
	got = slurp(latest);
	CHECK_STR(got, "second run");
	free(got);
	free(p);
	free(a);
	free(b);
	free(latest);
	test_tmpdir_remove(tmp);
	return CHECK_DONE();
}
