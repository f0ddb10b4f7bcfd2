/* A tiny run through the trainer's service (lib/trainer/here.h), no terminal: 256 rows of a
 * small CSV, 2 epochs. The sink hears, in this order, where the process stands in the gang,
 * the data loading, what is trained, every step and epoch and the end (steps counting up, the
 * last event the end), then the result naming the bundle it wrote; the run is in the history as
 * succeeded. A run whose data is bad fails with the file named, its record says so, and the
 * sink hears no result. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/project/project.h"
#include "lib/runs/runs.h"
#include "lib/train/train.h"
#include "lib/trainer/here.h"
#include "lib/trainer/trainer.h"
#include "lib/util/err.h"

#include "tests/unit/newest_run.h"
#include "lib/util/rng.h"

#define MAX_SEEN 512

struct seen {
	char order[MAX_SEEN];    /* one letter per callback: p(laced) d(ata) s(tart) e(vent) r(esult) c(lear) n(ote) */
	int n;
	int rank, world;
	long last_step, steps_back;
	int epochs_seen, done_seen, events;
	size_t n_train;
	char bundle[512];
	double accuracy;
	int warnings;
	char note[4][512];
	int notes;
};

static void mark(struct seen *s, char c)
{
	if (s->n < MAX_SEEN - 1)
		s->order[s->n++] = c;
}

static void on_note(void *ud, enum dlk_trainer_level level, const char *msg)
{
	struct seen *s = ud;

	mark(s, 'n');
	if (level == DLK_TRAINER_WARN)
		s->warnings++;
	if (s->notes < 4)
		snprintf(s->note[s->notes], sizeof(s->note[0]), "%s", msg);
	s->notes++;
}

static int on_placed(void *ud, int rank, int world, struct dlk_err *err)
{
	struct seen *s = ud;

	(void)err;
	mark(s, 'p');
	s->rank = rank;
	s->world = world;
	return 0;
}

static void on_data(void *ud, const char *phase, const char *what, unsigned long long done, unsigned long long total)
{
	struct seen *s = ud;

	(void)what, (void)done, (void)total;
	if (phase && (s->n == 0 || s->order[s->n - 1] != 'd'))
		mark(s, 'd');
}

static void on_start(void *ud, const struct dlk_project *spec, const struct dlk_training *tr, size_t n_train,
                     size_t n_test, int world)
{
	struct seen *s = ud;

	(void)spec, (void)tr, (void)n_test, (void)world;
	mark(s, 's');
	s->n_train = n_train;
}

static void on_event(void *ud, const struct dlk_train_event *ev)
{
	struct seen *s = ud;

	/* one letter per kind of event, not per step */
	if (s->n == 0 || s->order[s->n - 1] != 'e')
		mark(s, 'e');
	s->events++;
	if (ev->global_step < s->last_step)
		s->steps_back++;
	s->last_step = ev->global_step;
	if (ev->kind == DLK_TRAIN_EPOCH)
		s->epochs_seen++;
	if (ev->kind == DLK_TRAIN_DONE)
		s->done_seen++;
	else if (s->done_seen)
		s->steps_back++; /* nothing after the end */
}

static void on_result(void *ud, const struct dlk_project *spec, const struct dlk_train_result *res, const char *bundle,
                      int world)
{
	struct seen *s = ud;

	(void)spec, (void)world;
	mark(s, 'r');
	snprintf(s->bundle, sizeof(s->bundle), "%s", bundle);
	s->accuracy = res->eval.accuracy;
}

static void on_clear(void *ud)
{
	struct seen *s = ud;

	if (s->n == 0 || s->order[s->n - 1] != 'c')
		mark(s, 'c');
}

/* rows of 4 features around one of 2 centres, the class last */
static int write_csv(const char *path, int rows, unsigned long long seed, int bad_row)
{
	FILE *f = fopen(path, "w");
	struct dlk_rng rng;

	if (!f)
		return -1;
	dlk_rng_seed(&rng, seed);
	for (int i = 0; i < rows; i++) {
		int c = (int)(dlk_rng_next(&rng) % 2);
		for (int j = 0; j < 4; j++)
			fprintf(f, "%.3f,", (c ? 1.0 : -1.0) + (double)(dlk_rng_next(&rng) % 1000) / 2000.0);
		fprintf(f, "%d\n", c);
	}
	if (bad_row)
		fprintf(f, "1,2,3\n");
	return fclose(f);
}

static const char *project_yaml = "name: tiny\n"
                                  "data:\n"
                                  "  format: csv\n"
                                  "  train: {source: train.csv}\n"
                                  "  test: {source: test.csv}\n"
                                  "model:\n"
                                  "  input: [4]\n"
                                  "  layers:\n"
                                  "    - dense: {units: 8}\n"
                                  "    - relu\n"
                                  "    - dense: {units: 2}\n"
                                  "training:\n"
                                  "  epochs: 2\n"
                                  "  batch_size: 32\n"
                                  "  optimizer: {name: adam, lr: 0.01}\n"
                                  "  threads: 1\n"
                                  "  checkpoint: {every: 4, keep: 2}\n";

static int run(const char *spec_file, struct seen *s, struct dlk_err *err)
{
	struct dlk_trainer_sink sink = { on_note, s, on_placed, on_data, on_start, on_event, on_result, on_clear };
	struct dlk_trainer_here_opts o;
	struct dlk_project *spec;
	int rc;

	memset(s, 0, sizeof(*s));
	s->rank = -1;
	memset(&o, 0, sizeof(o));
	o.run = (struct dlk_trainer_opts)DLK_TRAINER_OPTS_INIT;
	o.run.spec_file = spec_file;
	dlk_err_clear(err);
	spec = project_load(spec_file, NULL, 0, err);
	if (!spec)
		return -100;
	rc = dlk_trainer_here(&o, spec, &sink, err);
	project_free(spec);
	return rc;
}

int main(void)
{
	const char *t = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char tmp[400], path[600], spec_file[600], bundle[600], cmd[700];
	struct dlk_err err = DLK_ERR_INIT;
	struct seen s;
	struct stat st;
	cJSON *rec;
	FILE *f;
	int rc;

	snprintf(tmp, sizeof(tmp), "%s/dlk-test-here-XXXXXX", t);
	CHECK(mkdtemp(tmp) != NULL);
	snprintf(spec_file, sizeof(spec_file), "%s/dlk.yaml", tmp);
	snprintf(bundle, sizeof(bundle), "%s/tiny.dlk", tmp);
	f = fopen(spec_file, "w");
	CHECK(f && fputs(project_yaml, f) >= 0 && fclose(f) == 0);
	snprintf(path, sizeof(path), "%s/train.csv", tmp);
	CHECK(write_csv(path, 256, 1, 0) == 0);
	snprintf(path, sizeof(path), "%s/test.csv", tmp);
	CHECK(write_csv(path, 64, 2, 0) == 0);

	rc = run(spec_file, &s, &err);
	CHECK_MSG(rc == 0, "a tiny run succeeds (%d: %s)", rc, err.msg);
	s.order[s.n] = '\0';
	CHECK_MSG(s.order[0] == 'p' && s.rank == 0 && s.world == 1, "placed first, rank 0 of 1: %s", s.order);
	{
		/* the data's progress (d) depends on the files' sizes, the notes (n) on the machine */
		char plain[MAX_SEEN];
		int k = 0;
		for (int i = 0; s.order[i]; i++)
			if (s.order[i] != 'd' && s.order[i] != 'n')
				plain[k++] = s.order[i];
		plain[k] = '\0';
		CHECK_STR(plain, "pcsecr"); /* placed, loaded (cleared), start, events, the loop's end (cleared), result */
	}
	CHECK_MSG(strchr(s.order, 's') && strchr(s.order, 'e') && strchr(s.order, 's') < strchr(s.order, 'e'),
	          "what is trained is said before the first step: %s", s.order);
	CHECK_MSG(strrchr(s.order, 'r') && strrchr(s.order, 'r') > strrchr(s.order, 'e'), "the result comes last: %s",
	          s.order);
	CHECK_MSG(s.n_train == 256, "256 training samples (%zu)", s.n_train);
	CHECK_MSG(s.epochs_seen == 2 && s.done_seen == 1 && s.steps_back == 0,
	          "2 epochs, one end, steps counting up (%d epochs, %d ends, %ld back)", s.epochs_seen, s.done_seen,
	          s.steps_back);
	CHECK_MSG(s.last_step == 16, "2 epochs of 8 steps (%ld)", s.last_step);
	CHECK_STR(s.bundle, bundle);
	CHECK_MSG(stat(bundle, &st) == 0 && st.st_size > 0, "the bundle is written");
	CHECK_MSG(s.accuracy > 0.9, "two clear blobs are learnt (accuracy %.3f)", s.accuracy);
	CHECK_MSG(s.warnings == 0, "no warnings (%d: %s)", s.warnings, s.notes ? s.note[0] : "");
	rec = newest_run(spec_file, "tiny");
	CHECK(rec && dlk_run_outcome(rec) == DLK_RUN_SUCCEEDED);
	CHECK(rec && cJSON_GetObjectItemCaseSensitive(dlk_run_info(rec), "bundle"));
	cJSON_Delete(rec);

	/* bad data: the error names the file, the record the failure; no result */
	snprintf(path, sizeof(path), "%s/train.csv", tmp);
	CHECK(write_csv(path, 256, 3, 1) == 0);
	rc = run(spec_file, &s, &err);
	s.order[s.n] = '\0';
	CHECK_MSG(rc == DLK_EXIT_CONFIG, "a bad row is the data's fault (%d)", rc);
	CHECK_CONTAINS(err.msg, "train.csv");
	CHECK_MSG(!strchr(s.order, 'r') && !strchr(s.order, 'e'), "no step, no result: %s", s.order);
	rec = newest_run(spec_file, "tiny");
	CHECK(rec && dlk_run_outcome(rec) == DLK_RUN_FAILED);
	cJSON_Delete(rec);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	CHECK(system(cmd) == 0);
	return CHECK_DONE();
}
