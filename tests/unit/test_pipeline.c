/* The pipeline file: a valid DAG comes back in dependency order with its references resolved;
 * each kind of mistake (a cycle, an unknown stage, a model where a dataset is expected, a stage
 * with no program or two, an unknown key, a duplicate output) is refused naming FILE:LINE:COL;
 * descendants and ancestors are exactly the stages downstream and upstream. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/pipeline/pipeline.h"

static int parse(const char *y, struct dlk_pipeline *p, struct dlk_err *err)
{
	dlk_err_clear(err);
	return dlk_pipeline_parse(y, strlen(y), "p.yaml", ".", p, err);
}

static int pos(const struct dlk_pipeline *p, const char *name)
{
	for (int k = 0; k < p->n_stages; k++)
		if (!strcmp(p->stages[p->order[k]].name, name))
			return k;
	return -1;
}

static const char *const good =
	"name: demo\n"
	"store: ./store\n"
	"stages:\n"
	"  gate:\n"
	"    inputs: {preds: score}\n"
	"    run: [python3, gate.py]\n"
	"  score:\n"
	"    inputs:\n"
	"      model: fit\n"
	"      data: prep\n"
	"    predict: {}\n"
	"    output: preds\n"
	"  prep:\n"
	"    inputs: {raw: raw@v1, extra: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef}\n"
	"    run: [python3, prep.py, --fast]\n"
	"    code: [prep.py, lib.py]\n"
	"    params: {n: 10}\n"
	"  fit:\n"
	"    inputs: {data: prep}\n"
	"    train: dlk.yaml\n"
	"    params: {training.epochs: 2}\n";

static void test_good(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_pipeline p;
	char want[8] = { 0 };
	int prep, fit, score, gate;

	CHECK_MSG(parse(good, &p, &err) == 0, "a valid pipeline parses (%s)", err.msg);
	CHECK(p.n_stages == 4);
	CHECK_STR(p.name, "demo");
	CHECK_STR(p.store, "./store");
	prep = dlk_pipeline_stage(&p, "prep");
	fit = dlk_pipeline_stage(&p, "fit");
	score = dlk_pipeline_stage(&p, "score");
	gate = dlk_pipeline_stage(&p, "gate");
	CHECK(prep >= 0 && fit >= 0 && score >= 0 && gate >= 0);
	CHECK_MSG(pos(&p, "prep") < pos(&p, "fit") && pos(&p, "fit") < pos(&p, "score") && pos(&p, "score") < pos(&p, "gate"),
	          "the order puts each stage after the stages it reads");
	CHECK(p.stages[prep].kind == DLK_STAGE_PROGRAM && p.stages[fit].kind == DLK_STAGE_TRAIN &&
	      p.stages[score].kind == DLK_STAGE_PREDICT);
	CHECK(p.stages[prep].inputs[0].stage == -1 && p.stages[fit].inputs[0].stage == prep);
	CHECK(p.stages[score].inputs[0].stage == fit && p.stages[score].inputs[1].stage == prep);
	CHECK_STR(p.stages[prep].argv[2], "--fast");
	CHECK(p.stages[prep].argv[3] == NULL);
	CHECK(p.stages[prep].n_code == 2);
	CHECK_STR(p.stages[prep].params[0].key, "n");
	CHECK_STR(p.stages[prep].params[0].value, "10");
	CHECK_STR(p.stages[fit].project, "dlk.yaml");
	CHECK_STR(p.stages[score].output, "preds");
	CHECK_MSG(!strcmp(p.stages[fit].output, "demo-fit"), "an output's name defaults to PIPELINE-STAGE");
	CHECK(dlk_stage_output_kind(&p.stages[fit]) == DLK_VALUE_MODEL);
	dlk_pipeline_descendants(&p, fit, want);
	CHECK_MSG(!want[prep] && want[fit] && want[score] && want[gate], "below fit: fit, score, gate");
	memset(want, 0, sizeof(want));
	dlk_pipeline_ancestors(&p, score, want);
	CHECK_MSG(want[prep] && want[fit] && want[score] && !want[gate], "above score: prep, fit, score");
	memset(want, 0, sizeof(want));
	dlk_pipeline_descendants(&p, gate, want);
	CHECK_MSG(!want[prep] && !want[fit] && !want[score] && want[gate], "below gate: gate only");
	dlk_pipeline_release(&p);
}

struct bad {
	const char *yaml, *msg;
};

static void test_bad(void)
{
	static const struct bad cases[] = {
		{ "name: d\nstore: s\nstages:\n  a:\n    inputs: {x: b}\n    run: [true]\n  b:\n    inputs: {y: a}\n    run: [true]\n",
		  "p.yaml:4:3: the stages form a cycle: a <- b <- a" },
		{ "name: d\nstore: s\nstages:\n  a:\n    inputs: {x: c}\n    run: [true]\n  b:\n    inputs: {y: a}\n    run: [true]\n"
		  "  c:\n    inputs: {z: b}\n    run: [true]\n",
		  "the stages form a cycle" },
		{ "name: d\nstore: s\nstages:\n  a:\n    inputs: {x: nope}\n    run: [true]\n",
		  "p.yaml:5:17: stages.a.inputs.x: 'nope' names no stage" },
		{ "name: d\nstore: s\nstages:\n  prep:\n    run: [true]\n  a:\n    inputs: {x: perp}\n    run: [true]\n",
		  "did you mean 'prep'?" },
		{ "name: d\nstore: s\nstages:\n  a:\n    inputs: {x: a}\n    run: [true]\n", "cannot read its own output" },
		{ "name: d\nstore: s\nstages:\n  t:\n    inputs: {d: x@1}\n    train: p.yaml\n  u:\n    inputs: {d: t}\n    train: p.yaml\n",
		  "p.yaml:8:17: stages.u.inputs.d: a model (stage 't' trains one) where a dataset is expected" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n  p:\n    inputs: {model: a, data: a}\n    predict: {}\n",
		  "p.yaml:7:21: stages.p.inputs.model: a dataset where a model is expected" },
		{ "name: d\nstore: s\nstages:\n  a:\n    inputs: {x: x@1}\n", "p.yaml:4:3: stage 'a' runs nothing" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n    train: p.yaml\n", "says what it runs twice" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n    ouptut: x\n",
		  "p.yaml:6:5: unknown key 'ouptut' in a stage (did you mean 'output'?)" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n    output: o\n  b:\n    run: [true]\n    output: o\n",
		  "both write dataset 'o'" },
		{ "name: d\nstore: s\nstages:\n  a:\n    inputs: {x: 'bad@@tag'}\n    run: [true]\n", "is no dataset reference" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n    output: o@v1\n", "it has a tag" },
		{ "name: D\nstore: s\nstages:\n  a:\n    run: [true]\n", "p.yaml:1:7: name 'D' is not lowercase" },
		{ "store: s\nstages:\n  a:\n    run: [true]\n", "has no name" },
		{ "name: d\nstages:\n  a:\n    run: [true]\n", "has no store" },
		{ "name: d\nstore: s\n", "has no stages" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: []\n", "write a list of words" },
		{ "name: d\nstore: s\nstages:\n  t:\n    run: [true]\n  u:\n    inputs: {a: t, b: t}\n    train: p.yaml\n",
		  "trains on one dataset" },
		{ "name: d\nstore: s\nstages: [\n", "p.yaml:" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n    run: [false]\n", "p.yaml:6:5: key 'run' twice (first at line 5)" },
		{ "name: d\nstore: s\nname: e\nstages:\n  a:\n    run: [true]\n", "p.yaml:3:1: key 'name' twice" },
		{ "name: d\nstore: s\nstages:\n  a:\n    run: [true]\n    params: {x: 1, x: 2}\n", "key 'x' twice" },
		{ "name: d\nstore: s\nlog_claim: Logs_1\nstages:\n  a:\n    run: [true]\n",
		  "p.yaml:3:12: log_claim 'Logs_1' is not the name of a PersistentVolumeClaim" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct dlk_err err = DLK_ERR_INIT;
		struct dlk_pipeline p;
		int rc = parse(cases[i].yaml, &p, &err);
		CHECK_MSG(rc != 0 && err.code == DLK_EXIT_CONFIG, "case %zu refused", i);
		CHECK_CONTAINS(err.msg, cases[i].msg);
		dlk_pipeline_release(&p);
	}
}

int main(void)
{
	test_good();
	test_bad();
	return CHECK_DONE();
}
