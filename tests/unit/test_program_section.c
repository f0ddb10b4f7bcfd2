/* The program: and serving.program: sections (lib/project/program.c): values, defaults, the
 * dump's round trip, a project without a model, and the problems with file:line. */
#include "tests/unit/check.h"
#include "tests/unit/test_project.h"

#define DATA_ONLY                                                             \
	"name: demo\n"                                                        \
	"data:\n"                                                             \
	"  train:\n"                                                          \
	"    images: /d/train-images.gz\n"                                    \
	"    labels: /d/train-labels.gz\n"

static int round_trips(const struct dlk_project *s)
{
	char *d1 = project_dump_yaml(s), *d2 = NULL;
	struct dlk_err e = DLK_ERR_INIT;
	struct dlk_project *s2 = project_load_mem(d1, strlen(d1), "dump.yaml", NULL, 0, &e);
	int ok = 0;
	if (!s2)
		printf("# reload failed: %s\n%s\n", e.msg, d1);
	else {
		d2 = project_dump_yaml(s2);
		ok = !strcmp(d1, d2);
		if (!ok)
			printf("# first dump:\n%s\n# second dump:\n%s\n", d1, d2);
	}
	free(d1);
	free(d2);
	project_free(s2);
	return ok;
}

static void test_full_section(void)
{
	struct dlk_project *s = load(DATA_ONLY
	                             "program:\n"
	                             "  framework: pytorch\n"
	                             "  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
	                             "  command: [torchrun, train.py]\n"
	                             "  args: [--epochs, 3, \"--name=a b\"]\n"
	                             "  workdir: /workspace\n"
	                             "  env: {NCCL_DEBUG: INFO, OMP_NUM_THREADS: 1}\n"
	                             "  code: ./src\n"
	                             "  procs_per_worker: 2\n"
	                             "  port: 29400\n"
	                             "  exit_codes: {restart: [1, 2], fail: [3]}\n");
	CHECK_MSG(s != NULL, "a full program section loads: %s", spec_test_err.msg);
	if (!s)
		return;
	CHECK(s->program.present && s->program.line == 7);
	CHECK(s->program.framework == DLK_FW_PYTORCH);
	CHECK_STR(s->program.image, "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime");
	CHECK(s->program.n_command == 2 && s->program.command[2] == NULL);
	CHECK_STR(s->program.command[0], "torchrun");
	CHECK(s->program.n_args == 3);
	CHECK_STR(s->program.args[1], "3");
	CHECK_STR(s->program.args[2], "--name=a b");
	CHECK_STR(s->program.workdir, "/workspace");
	CHECK(s->program.n_env == 2);
	CHECK_STR(s->program.env[1].key, "OMP_NUM_THREADS");
	CHECK_STR(s->program.env[1].value, "1");
	CHECK_STR(s->program.code, "./src");
	CHECK(s->program.procs_per_worker == 2 && s->program.port == 29400);
	CHECK(s->program.n_restart_codes == 2 && s->program.restart_codes[1] == 2);
	CHECK(s->program.n_fail_codes == 1 && s->program.fail_codes[0] == 3);
	CHECK(s->model.n_layers == 0); /* no model: the program is the workload */
	CHECK(round_trips(s));
	project_free(s);
}

static void test_defaults(void)
{
	struct dlk_project *s = load(DATA_ONLY "program:\n  command: python train.py --lr '0.1 x' \"a\\\"b\"\n");
	CHECK_MSG(s != NULL, "a program with only a command loads: %s", spec_test_err.msg);
	if (!s)
		return;
	CHECK(s->program.framework == DLK_FW_NONE);
	CHECK(s->program.image == NULL && s->program.workdir == NULL && s->program.code == NULL);
	CHECK(s->program.n_command == 5);
	CHECK_STR(s->program.command[3], "0.1 x");
	CHECK_STR(s->program.command[4], "a\"b");
	CHECK(s->program.procs_per_worker == 1 && s->program.port == 29500);
	/* usage error, cannot execute, not found: running again cannot help */
	CHECK(s->program.n_fail_codes == 3 && s->program.fail_codes[0] == 2 && s->program.fail_codes[2] == 127);
	CHECK(s->program.n_restart_codes == 0);
	CHECK(!s->serving.program.present);
	CHECK(round_trips(s));
	project_free(s);

	/* a restart code the user lists is taken out of the default fail codes */
	s = load(DATA_ONLY "program:\n  command: [python, t.py]\n  exit_codes: {restart: [2]}\n");
	CHECK_MSG(s && s->program.n_fail_codes == 2 && s->program.fail_codes[0] == 126, "restart: [2] keeps 126, 127 failing");
	/* a program's codes are classed by its exit_codes, never by dlk's own names (2 is dlk's
	 * "usage", 3 its "config", 75 its "restartable") */
	CHECK_STR(dlk_program_exit_class(&s->program, 2), "restartable");
	CHECK_STR(dlk_program_exit_class(&s->program, 127), "fatal");
	CHECK_STR(dlk_program_exit_class(&s->program, 3), "restartable");
	CHECK(dlk_program_exit_class(&s->program, 0) == NULL);
	project_free(s);
	s = load(DATA_ONLY "program:\n  command: [python, t.py]\n  exit_codes: {fail: [3, 75]}\n");
	CHECK_STR(dlk_program_exit_class(&s->program, 3), "fatal");
	CHECK_STR(dlk_program_exit_class(&s->program, 75), "fatal");
	CHECK_STR(dlk_program_exit_class(&s->program, 2), "restartable");
	project_free(s);
	s = load(DATA_ONLY "program:\n  command: [python, t.py]\n  exit_codes: {fail: []}\n");
	CHECK_MSG(s && s->program.n_fail_codes == 0 && round_trips(s), "fail: [] fails nothing at once");
	project_free(s);
	/* without a program the model is still required, and a model beside a program still loads */
	CHECK_STR(load_msg(DATA_ONLY), "dlk.yaml:1:1: model: missing required key 'model' (or a program: section that runs your own code)");
	s = load(MINIMAL "program:\n  command: [python, t.py]\n");
	CHECK_MSG(s && s->model.n_layers == 1 && round_trips(s), "a model beside a program loads and round trips");
	project_free(s);
	CHECK(dlk_framework_of("jax") == DLK_FW_JAX && dlk_framework_of("paddle") == DLK_FW_PADDLE);
	CHECK(dlk_framework_of("torch") == -1 && dlk_framework_of(NULL) == -1);
	CHECK_STR(dlk_framework_name(DLK_FW_TENSORFLOW), "tensorflow");
}

static void test_server(void)
{
	struct dlk_project *s = load(MINIMAL "serving:\n  port: 9000\n  program:\n    image: my/server:1\n"
	                                     "    command: uvicorn app:app\n    metrics_path: /metrics\n");
	CHECK_MSG(s != NULL, "serving.program loads: %s", spec_test_err.msg);
	if (!s)
		return;
	CHECK(s->serving.program.present && s->serving.program.port == 9000);
	CHECK(s->serving.program.n_command == 2);
	CHECK_STR(s->serving.program.ready_path, "/");
	CHECK_STR(s->serving.program.live_path, "/");
	CHECK_STR(s->serving.program.metrics_path, "/metrics");
	CHECK(round_trips(s));
	project_free(s);
	s = load(MINIMAL "serving:\n  program: {image: a/b, port: 81, ready_path: /ready}\n");
	CHECK_MSG(s && s->serving.program.port == 81 && !strcmp(s->serving.program.live_path, "/ready") &&
	          !s->serving.program.command && round_trips(s), "live_path follows ready_path, no command: the entrypoint");
	project_free(s);
	CHECK_STR(load_msg(MINIMAL "serving:\n  program: {command: [x]}\n"),
	          "dlk.yaml:11:12: serving.program.image: missing required key 'image' (the server's image)");
	CHECK_STR(load_msg(MINIMAL "serving:\n  program: {image: a, ready_path: ready}\n"),
	          "dlk.yaml:11:35: serving.program.ready_path: 'ready' is not an HTTP path (it starts with '/', no spaces)");
}

static void test_problems(void)
{
	struct dlk_project *s;

	CHECK_STR(load_msg(DATA_ONLY "program:\n  framework: torch\n  command: x\n"),
	          "dlk.yaml:7:14: program.framework: unknown value 'torch' (expected one of none, pytorch, jax, tensorflow, paddle)");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  framework: jax\n"),
	          "dlk.yaml:7:3: program.command: missing required key 'command' (the program to run, like [python, train.py])");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: []\n"), "dlk.yaml:7:12: program.command: is empty: name the program to run");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: \"python 'x\"\n"),
	          "dlk.yaml:7:12: program.command: 'python 'x' has a ' that is never closed");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: [torchrun, t.py]\n"),
	          "dlk.yaml:7:12: program.command: torchrun is PyTorch's launcher: set program.framework: pytorch");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  comand: y\n"),
	          "dlk.yaml:8:3: program.comand: unknown key 'comand' (keys here are framework, image, command, args, "
	          "workdir, env, code, procs_per_worker, port, exit_codes)");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  code: ../elsewhere\n"),
	          "dlk.yaml:8:9: program.code: '../elsewhere' leaves the project ('..'): name a directory inside it");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  code: /abs\n"),
	          "dlk.yaml:8:9: program.code: '/abs' is absolute: name a directory of the project, relative to dlk.yaml");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  workdir: rel\n"),
	          "dlk.yaml:8:12: program.workdir: 'rel' is not an absolute path (the directory in the pod)");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  env: {DLK_RANK: 1}\n"),
	          "dlk.yaml:8:9: program.env.DLK_RANK: DLK_ variables are set by dlk (see docs/program.md); choose another name");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  env: {\"A-B\": 1}\n"),
	          "dlk.yaml:8:9: program.env.A-B: 'A-B' is not a variable name (letters, digits and '_', not first a digit)");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  port: 70000\n"),
	          "dlk.yaml:8:9: program.port: expected an integer from 1 to 65535");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  exit_codes: {restart: [0]}\n"),
	          "dlk.yaml:8:26: program.exit_codes.restart[0]: expected an integer from 1 to 255");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  exit_codes: {restart: [9], fail: [9]}\n"),
	          "dlk.yaml:8:15: program.exit_codes: exit code 9 is both a restart and a fail code: keep it in one list");
	CHECK_STR(load_msg(DATA_ONLY "program:\n  command: x\n  command: y\n"),
	          "dlk.yaml:8:3: program.command: 'command' is given twice (first on line 7)");
	CHECK_STR(load_msg(DATA_ONLY "program: [x]\n"), "dlk.yaml:6:10: program: expected a mapping");
	/* control characters in a value are shown, not printed */
	CHECK_CONTAINS(load_msg(DATA_ONLY "program:\n  command: x\n  framework: \"\\e[31m\"\n"), "unknown value '\\e[31m'");
	/* serving.gate of a program names what the program reports, checked as the protocol checks it */
	CHECK_CONTAINS(load_msg(DATA_ONLY "program:\n  command: x\nserving: {gate: [{metric: \"a b\", min: 1}]}\n"),
	               "serving.gate[0].metric: 'a b' is no metric a program reports: 1 to 64 letters, digits, '_', '.', '-' or '/'");
	s = load(DATA_ONLY "program:\n  command: x\nserving: {gate: [{metric: f1, min: 0.8}, {metric: val/bleu-4, max: 9}]}\n");
	CHECK_MSG(s && s->serving.n_gate == 2 && !strcmp(s->serving.gate[1].metric, "val/bleu-4"),
	          "a program's own metrics in serving.gate: %s", spec_test_err.msg);
	CHECK(round_trips(s));
	project_free(s);
	/* --set reaches the section */
	const char *sets[] = { "program.command=[python, t.py]", "program.framework=jax" };
	s = load_sets(DATA_ONLY, sets, 2);
	CHECK_MSG(s && s->program.present && s->program.framework == DLK_FW_JAX && s->program.n_command == 2,
	          "--set program.command and program.framework: %s", spec_test_err.msg);
	project_free(s);
}

static void test_known_keys(void)
{
	int fw = 0, code = 0, ready = 0;
	for (const char *const *k = project_known_keys(); *k; k++) {
		fw |= !strcmp(*k, "program.framework");
		code |= !strcmp(*k, "program.exit_codes.fail");
		ready |= !strcmp(*k, "serving.program.ready_path");
	}
	CHECK(fw && code && ready);
}

int main(void)
{
	test_full_section();
	test_defaults();
	test_server();
	test_problems();
	test_known_keys();
	return CHECK_DONE();
}
