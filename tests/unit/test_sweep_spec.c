/* The sweep: section: every kind of parameter read with its defaults, and each mistake refused
 * with FILE:LINE:COL and the key it is about. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/sweep/sweep.h"

static int parse(const char *text, struct dlk_sweep_spec *s, struct dlk_err *err)
{
	dlk_err_clear(err);
	return dlk_sweep_spec_parse(text, strlen(text), "p.yaml", "proj", s, err);
}

static void test_full(void)
{
	struct dlk_sweep_spec s;
	struct dlk_err err = DLK_ERR_INIT;
	const char *y = "name: proj\n"
	                "sweep:\n"
	                "  method: tpe\n"
	                "  metric: loss\n"
	                "  trials: 20\n"
	                "  parallel: 3\n"
	                "  gpu_hours: 1.5\n"
	                "  seed: 9\n"
	                "  parameters:\n"
	                "    training.optimizer.lr: {loguniform: [0.0001, 0.1]}\n"
	                "    model.layers.1.dense.units: [16, 32, 64]\n"
	                "    training.batch_size: {int: [16, 256]}\n"
	                "    training.optimizer.momentum: {uniform: [0.5, 0.99]}\n"
	                "    training.optimizer.name: {values: [adam, sgd]}\n"
	                "  early_stopping: {method: asha, at: steps, min: 100, reduction_factor: 4}\n";

	CHECK(parse(y, &s, &err) == 0);
	CHECK_STR(s.name, "proj-sweep");
	CHECK(s.method == DLK_SWEEP_TPE);
	CHECK_STR(s.metric, "loss");
	CHECK(!s.maximize); /* a loss is minimised unless goal says otherwise */
	CHECK(s.trials == 20 && s.parallel == 3 && s.seed == 9);
	CHECK(s.gpu_hours == 1.5);
	CHECK(s.n_params == 5);
	CHECK(s.params[0].kind == DLK_SWEEP_LOGUNIFORM && s.params[0].lo == 0.0001 && s.params[0].hi == 0.1);
	CHECK(s.params[1].kind == DLK_SWEEP_VALUES && s.params[1].n_values == 3 && !strcmp(s.params[1].values[2], "64"));
	CHECK(s.params[2].kind == DLK_SWEEP_INT && s.params[2].lo == 16 && s.params[2].hi == 256);
	CHECK(s.params[3].kind == DLK_SWEEP_UNIFORM);
	CHECK(s.params[4].kind == DLK_SWEEP_VALUES && !strcmp(s.params[4].values[1], "sgd"));
	CHECK(s.params[1].line == 11 && s.params[1].col == 5);
	CHECK(s.asha && s.asha_steps && s.asha_min == 100 && s.asha_factor == 4);
	dlk_sweep_spec_release(&s);

	/* defaults: random, accuracy maximised, 10 trials one at a time, no early stopping */
	CHECK(parse("sweep:\n  parameters:\n    training.epochs: [1, 2]\n", &s, &err) == 0);
	CHECK(s.method == DLK_SWEEP_RANDOM && s.maximize && !strcmp(s.metric, "accuracy"));
	CHECK(s.trials == 10 && s.parallel == 1 && !s.asha && s.asha_factor == 3);
	dlk_sweep_spec_release(&s);

	/* grid: the trials are at most the grid's points */
	CHECK(parse("sweep:\n  method: grid\n  trials: 50\n  parameters:\n    a.b: [1, 2, 3]\n    c.d: [x, y]\n", &s,
	            &err) == 0);
	CHECK(dlk_sweep_grid_size(&s) == 6 && s.trials == 6);
	dlk_sweep_spec_release(&s);

	/* no section: 1, nothing to release */
	CHECK(parse("name: proj\ntraining: {epochs: 2}\n", &s, &err) == 1);
}

static void refused(const char *y, const char *want)
{
	struct dlk_sweep_spec s;
	struct dlk_err err = DLK_ERR_INIT;
	int rc = parse(y, &s, &err);
	CHECK_MSG(rc == -1 && err.code == DLK_EXIT_CONFIG && strstr(err.msg, want), "refused with '%s'", want);
	if (rc != -1 || !strstr(err.msg, want))
		printf("#   got rc %d: %s\n", rc, err.msg);
	if (rc == 0)
		dlk_sweep_spec_release(&s);
}

static void test_errors(void)
{
	refused("sweep:\n  method: bayes\n  parameters: {a.b: [1]}\n", "p.yaml:2:11: sweep.method: is 'bayes'");
	refused("sweep:\n  methd: tpe\n", "p.yaml:2:3: sweep.methd: unknown key");
	refused("sweep:\n  trials: 0\n  parameters: {a.b: [1]}\n", "p.yaml:2:11: sweep.trials: is 0, outside 1..10000");
	refused("sweep:\n  trials: 1\n", "sweep.parameters: missing or empty");
	refused("sweep:\n  parameters:\n    a.b: {uniform: [2, 1]}\n", "p.yaml:3:20: sweep.parameters.a.b: LO (2) is not below HI (1)");
	refused("sweep:\n  parameters:\n    a.b: {loguniform: [0, 1]}\n", "a log-uniform range is positive");
	refused("sweep:\n  parameters:\n    a.b: {int: [1.5, 3]}\n", "sweep.parameters.a.b: is the number 1.5, not a whole number");
	refused("sweep:\n  parameters:\n    a.b: {normal: [1, 3]}\n", "p.yaml:3:11: sweep.parameters.a.b: is 'normal'; one of values");
	refused("sweep:\n  parameters:\n    a.b: 3\n", "p.yaml:3:10: sweep.parameters.a.b: is the integer 3; give {values");
	refused("sweep:\n  parameters:\n    A..B: [1]\n", "p.yaml:3:5: sweep.parameters.A..B: is not a project key");
	refused("sweep:\n  parameters:\n    name: [a, b]\n", "cannot be swept");
	refused("sweep:\n  method: grid\n  parameters:\n    a.b: {uniform: [0, 1]}\n", "grid search needs a list of values");
	refused("sweep:\n  parameters:\n    a.b: [1]\n    a.b: [2]\n", "'a.b' given twice (first at line 3)");
	refused("sweep:\n  name: Big_Name\n  parameters: {a.b: [1]}\n", "p.yaml:2:9: sweep.name: is not a name");
	refused("sweep:\n  parameters: {a.b: [1]}\n  early_stopping: {at: steps}\n",
	        "sweep.early_stopping.at: rungs at steps judge the training loss");
	refused("sweep:\n  parameters: {a.b: [1]}\n  early_stopping: {reduction_factor: 1}\n",
	        "sweep.early_stopping.reduction_factor: is 1, outside 2..100");
	refused("sweep: [1, 2]\n", "p.yaml:1:8: sweep: is a sequence, not a mapping");
	refused("sweep:\n  parameters:\n    a.b: [\"x\\ny\"]\n", "value 0 spans lines");
	refused("sweep: {\n", "p.yaml:");
}

int main(void)
{
	test_full();
	test_errors();
	return CHECK_DONE();
}
