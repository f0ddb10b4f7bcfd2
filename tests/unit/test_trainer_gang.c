/* The supervisor of a local gang (lib/trainer/gang.h) with 2 worker processes whose work is a
 * few lines of this test: every worker gets its rank and the gang's size; a gang that succeeds
 * is recorded so; a worker that lost its peer (75) restarts the whole gang, one generation
 * later, and the restart is counted and said; a worker that fails for good stops the others,
 * its exit code is the gang's, its "error: " line the record's message, and it is named the
 * cause, not the peer the supervisor stopped. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/jobs/podenv.h"
#include "lib/runs/runs.h"
#include "lib/trainer/gang.h"
#include "lib/trainer/trainer.h"
#include "lib/util/err.h"

#include "tests/unit/newest_run.h"

enum plan { ALL_SUCCEED, LOSE_PEER_ONCE, FAIL_FOR_GOOD };

struct seen {
	enum plan plan;
	int lines, ended, notes, warnings;
	char line[8][256];
	char note[4][512];
};

static void say(const char *s)
{
	ssize_t k = write(STDERR_FILENO, s, strlen(s));
	(void)k;
}

/* In the worker's process. */
static int worker(void *ud, int local)
{
	struct seen *s = ud;
	const char *rank = getenv(DLK_ENV_RANK), *world = getenv(DLK_ENV_WORLD_SIZE), *gen = getenv(DLK_ENV_GENERATION);
	char buf[128];

	snprintf(buf, sizeof(buf), "worker %d: rank %s of %s, generation %s\n", local, rank ? rank : "?",
	         world ? world : "?", gen ? gen : "?");
	say(buf);
	switch (s->plan) {
	case ALL_SUCCEED:
		return 0;
	case LOSE_PEER_ONCE:
		return local == 1 && gen && !strcmp(gen, "0") ? DLK_EXIT_RESTARTABLE : 0;
	case FAIL_FOR_GOOD:
		if (local == 1) {
			say("error: 'data.csv': line 3: not a number\n");
			return DLK_EXIT_CONFIG;
		}
		pause(); /* until the supervisor stops it */
		return 0;
	}
	return 1;
}

static void on_line(void *ud, int local, int rank, char *line, size_t n)
{
	struct seen *s = ud;

	(void)local;
	if (s->lines < 8)
		snprintf(s->line[s->lines], sizeof(s->line[0]), "%d|%.*s", rank, (int)n, line);
	s->lines++;
}

static void on_ended(void *ud)
{
	((struct seen *)ud)->ended++;
}

static void on_note(void *ud, enum dlk_trainer_level level, const char *msg)
{
	struct seen *s = ud;

	if (level == DLK_TRAINER_WARN)
		s->warnings++;
	if (s->notes < 4)
		snprintf(s->note[s->notes], sizeof(s->note[0]), "%s", msg);
	s->notes++;
}

static int has_line(const struct seen *s, const char *want)
{
	for (int i = 0; i < s->lines && i < 8; i++)
		if (!strcmp(s->line[i], want))
			return 1;
	return 0;
}

static int run_gang(const char *spec_file, enum plan plan, int max_restarts, struct seen *s, struct dlk_err *err)
{
	struct dlk_project spec = { 0 };
	struct dlk_trainer_opts o = DLK_TRAINER_OPTS_INIT;
	struct dlk_gang_hooks hooks = { worker, on_line, NULL, on_ended, s, NULL, NULL, NULL };
	struct dlk_trainer_sink sink = { .note = on_note, .ud = s };
	struct dlk_gang_output out = { 0 };

	memset(s, 0, sizeof(*s));
	s->plan = plan;
	spec.name = "p";
	spec.training.threads = 1;
	o.spec_file = spec_file;
	o.workers = 2;
	o.max_restarts = max_restarts;
	dlk_err_clear(err);
	return dlk_trainer_gang(&o, &spec, out, &hooks, &sink, err);
}

int main(void)
{
	const char *t = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char tmp[400], spec_file[450], cmd[500];
	struct dlk_err err = DLK_ERR_INIT;
	struct seen s;
	cJSON *rec;
	int rc;

	snprintf(tmp, sizeof(tmp), "%s/dlk-test-gang-XXXXXX", t);
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(spec_file, sizeof(spec_file), "%s/dlk.yaml", tmp);

	rc = run_gang(spec_file, ALL_SUCCEED, 0, &s, &err);
	CHECK_MSG(rc == 0 && !err.msg[0], "two workers that succeed: the gang succeeds (%d: %s)", rc, err.msg);
	CHECK(has_line(&s, "0|worker 0: rank 0 of 2, generation 0"));
	CHECK(has_line(&s, "1|worker 1: rank 1 of 2, generation 0"));
	CHECK(s.lines == 2 && s.ended == 1);
	/* no bundle was written: the record says succeeded, without metrics, and the sink hears why */
	CHECK(s.warnings == 1);
	CHECK_CONTAINS(s.note[0], "its record has no metrics");
	rec = newest_run(spec_file, "p");
	CHECK(rec && dlk_run_outcome(rec) == DLK_RUN_SUCCEEDED);
	cJSON_Delete(rec);

	rc = run_gang(spec_file, LOSE_PEER_ONCE, 1, &s, &err);
	CHECK_MSG(rc == 0, "a lost peer restarts the gang, which then succeeds (%d: %s)", rc, err.msg);
	CHECK(has_line(&s, "1|worker 1: rank 1 of 2, generation 1"));
	CHECK(s.ended == 2);
	CHECK_CONTAINS(s.note[0], "worker 1 exited with code 75; restarting all 2 workers from the last checkpoint "
	                          "(restart 1 of 1)");
	rec = newest_run(spec_file, "p");
	CHECK(rec && dlk_run_outcome(rec) == DLK_RUN_SUCCEEDED);
	CHECK(rec && cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "restarts")->valueint == 1);
	cJSON_Delete(rec);

	rc = run_gang(spec_file, LOSE_PEER_ONCE, 0, &s, &err);
	CHECK_MSG(rc == DLK_EXIT_RESTARTABLE, "no restart allowed: 75 (%d)", rc);
	CHECK_CONTAINS(err.msg, "worker 1 exited with code 75, and the 0 restarts allowed are used up");
	CHECK_CONTAINS(err.hint, "--max-restarts");

	rc = run_gang(spec_file, FAIL_FOR_GOOD, 3, &s, &err);
	CHECK_MSG(rc == DLK_EXIT_CONFIG, "a worker that fails for good stops the gang with its code (%d)", rc);
	CHECK_CONTAINS(err.msg, "worker 1 exited with code 3; the other workers were stopped");
	CHECK(has_line(&s, "1|error: 'data.csv': line 3: not a number"));
	CHECK_MSG(s.notes == 0, "no restart for a failure that would fail again");
	rec = newest_run(spec_file, "p");
	CHECK(rec && dlk_run_outcome(rec) == DLK_RUN_FAILED);
	if (rec) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "failure");
		const cJSON *rank = cJSON_GetObjectItemCaseSensitive(f, "rank");
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(f, "message");
		CHECK_MSG(cJSON_IsNumber(rank) && rank->valueint == 1, "the record names rank 1, not the peer stopped");
		CHECK_STR(cJSON_IsString(msg) ? msg->valuestring : NULL, "'data.csv': line 3: not a number");
	}
	cJSON_Delete(rec);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
	return CHECK_DONE();
}
