/* render_train of a project with program: (docs/program-cluster.md): the program's image, the
 * supervisor as the command, workingDir, env, the code shipped as a ConfigMap named by its digest
 * and mounted where the program runs, program.port as the rendezvous port, exit_codes as the
 * podFailurePolicy, and a code tree over the ConfigMap limit refused. With DLK_RENDER_JSON_DIR
 * set, the objects are written there as program-*.json, which tests/shell/t1621-render-program.sh
 * validates against the official Kubernetes schemas. */
#include "tests/unit/check.h"
#include "lib/program/supervise.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct dlk_err err;
static char *tmp;

static const cJSON *jget(const cJSON *v, const char *path)
{
	char *copy = xstrdup(path), *save = NULL;
	for (char *seg = strtok_r(copy, ".", &save); seg && v; seg = strtok_r(NULL, ".", &save)) {
		if (cJSON_IsArray(v) && seg[0] >= '0' && seg[0] <= '9')
			v = cJSON_GetArrayItem(v, atoi(seg));
		else
			v = cJSON_GetObjectItemCaseSensitive(v, seg);
	}
	free(copy);
	return v;
}

static char *jprint(const cJSON *v, const char *path)
{
	const cJSON *x = jget(v, path);
	return x ? cJSON_PrintUnformatted(x) : xstrdup("(missing)");
}

#define CHECK_JSON(obj, path, want)           \
	do {                                  \
		char *j_ = jprint(obj, path); \
		CHECK_STR(j_, want);          \
		free(j_);                     \
	} while (0)

static const cJSON *by_kind_name(const cJSON *objs, const char *kind, const char *prefix)
{
	for (const cJSON *o = objs ? objs->child : NULL; o; o = o->next) {
		const cJSON *k = jget(o, "kind"), *n = jget(o, "metadata.name");
		if (!strcmp(k->valuestring, kind) && !strncmp(n->valuestring, prefix, strlen(prefix)))
			return o;
	}
	return NULL;
}

static const cJSON *find_env(const cJSON *ctr, const char *name)
{
	const cJSON *env = jget(ctr, "env");
	for (const cJSON *e = env ? env->child : NULL; e; e = e->next)
		if (!strcmp(jget(e, "name")->valuestring, name))
			return e;
	return NULL;
}

static int count_env(const cJSON *ctr, const char *name)
{
	int n = 0;
	const cJSON *env = jget(ctr, "env");
	for (const cJSON *e = env ? env->child : NULL; e; e = e->next)
		n += !strcmp(jget(e, "name")->valuestring, name);
	return n;
}

static void write_file(const char *rel, const void *data, size_t len, int mode)
{
	char *p = xasprintf("%s/%s", tmp, rel);
	FILE *f = fopen(p, "wb");
	CHECK_MSG(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "wrote %s", rel);
	CHECK(chmod(p, (mode_t)mode) == 0);
	free(p);
}

static void save_json(const char *name, const cJSON *objs)
{
	const char *dir = getenv("DLK_RENDER_JSON_DIR");
	if (!dir || !objs)
		return;
	char *path = xasprintf("%s/%s.json", dir, name), *j = cJSON_Print(objs);
	FILE *f = fopen(path, "w");
	CHECK_MSG(f && fputs(j, f) >= 0 && fclose(f) == 0, "wrote %s.json", name);
	free(j);
	free(path);
}

/* the data every project names (the program finds it through DLK_DATA_DIR) */
#define DATA "data:\n  format: idx\n  train:\n    images: https://example.com/train-images.gz\n" \
	     "    labels: https://example.com/train-labels.gz\n"

static struct dlk_project *load(const char *yaml)
{
	struct dlk_project *s = project_load_mem(yaml, strlen(yaml), "dlk.yaml", NULL, 0, &err);
	CHECK_MSG(s != NULL, "the project loads: %s", err.msg);
	return s;
}

static cJSON *render(const struct dlk_project *s, const char *name)
{
	struct render_opts o = RENDER_OPTS_INIT;
	char *yaml = project_dump_yaml(s);
	cJSON *objs;

	o.project_dir = tmp;
	objs = render_train(s, yaml, &o, &err);
	free(yaml);
	if (objs)
		save_json(name, objs);
	return objs;
}

static const char *const torch_project =
	"name: fm\n"
	"image: dlk:0.1.0\n" DATA
	"program:\n"
	"  framework: pytorch\n"
	"  image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
	"  command: [torchrun, train.py]\n"
	"  code: src\n"
	"  port: 29600\n"
	"  env: {NCCL_DEBUG: INFO, RANK: '7', GREETING: 'hi $(USER) $HOME'}\n"
	"  exit_codes: {restart: [2], fail: [3, 4]}\n"
	"resources:\n"
	"  workers: 2\n"
	"  gpus: 2\n"
	"  cpu: '4'\n"
	"  memory: 8Gi\n";

/* the code ships as one ConfigMap named by the digest, each file back at its path */
static void test_program_with_code(void)
{
	static const unsigned char bin[] = { 0x89, 'P', 'N', 'G', 0, 1, 2, 0xff };
	char digest[65], *dir = xasprintf("%s/src", tmp), *cm_name;
	struct dlk_project *s = load(torch_project);
	const cJSON *cm, *job, *ctr, *svc, *vol;
	cJSON *objs;

	if (!s)
		return;
	write_file("src/train.py", "print('hi')\n", 12, 0644);
	write_file("src/run.sh", "#!/bin/sh\nexec python3 train.py\n", 32, 0755);
	write_file("src/pkg/model.py", "X = \"\\t\"\n", 9, 0644);
	write_file("src/pkg/logo.png", bin, sizeof(bin), 0644);
	/* a local run's outputs and byte-code never ship */
	write_file("src/.dlk/checkpoints/big.pt", "not code", 8, 0644);
	write_file("src/pkg/__pycache__/model.cpython-312.pyc", "x", 1, 0644);
	CHECK(dlk_program_code_digest(dir, digest, &err) == 0);

	objs = render(s, "program-torch");
	CHECK_MSG(objs != NULL, "a program with code renders: %s", err.msg);
	if (!objs)
		goto out;
	cm_name = xasprintf("fm-code-%.12s", digest);
	cm = by_kind_name(objs, "ConfigMap", "fm-code-");
	CHECK(cm && !strcmp(jget(cm, "metadata.name")->valuestring, cm_name));
	CHECK_STR(cJSON_GetObjectItemCaseSensitive(jget(cm, "metadata.annotations"), "dlk.dev/code-sha256")->valuestring,
	          digest);
	CHECK_JSON(cm, "immutable", "true");
	/* sorted by path: pkg/logo.png, pkg/model.py, run.sh, train.py */
	CHECK_JSON(cm, "data", "{\"1-model.py\":\"X = \\\"\\\\t\\\"\\n\",\"2-run.sh\":\"#!/bin/sh\\nexec python3 "
	                       "train.py\\n\",\"3-train.py\":\"print('hi')\\n\"}");
	CHECK_JSON(cm, "binaryData", "{\"0-logo.png\":\"iVBORwABAv8=\"}");

	job = by_kind_name(objs, "Job", "fm");
	ctr = jget(job, "spec.template.spec.containers.0");
	CHECK_JSON(ctr, "image", "\"pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\"");
	/* the PyTorch image holds no dlk: dlk's image places one in an emptyDir, which the worker runs */
	CHECK_JSON(ctr, "command", "[\"/dlk/dlk\",\"train\",\"--worker\",\"-f\",\"/etc/dlk/dlk.yaml\"]");
	CHECK_JSON(job, "spec.template.spec.initContainers.0.image", "\"dlk:0.1.0\"");
	CHECK_JSON(job, "spec.template.spec.initContainers.0.command",
	           "[\"dlk\",\"train\",\"--worker\",\"--place-supervisor\",\"/dlk\"]");
	CHECK_JSON(job, "spec.template.spec.initContainers.0.volumeMounts",
	           "[{\"name\":\"dlk-supervisor\",\"mountPath\":\"/dlk\"}]");
	/* requests equal to limits, as the worker's: the pod stays in the Guaranteed class */
	CHECK_JSON(job, "spec.template.spec.initContainers.0.resources",
	           "{\"requests\":{\"cpu\":\"4\",\"memory\":\"8Gi\"},\"limits\":{\"cpu\":\"4\",\"memory\":\"8Gi\"}}");
	CHECK_JSON(ctr, "volumeMounts.1", "{\"name\":\"dlk-supervisor\",\"mountPath\":\"/dlk\",\"readOnly\":true}");
	CHECK_JSON(job, "spec.template.spec.volumes.1", "{\"name\":\"dlk-supervisor\",\"emptyDir\":{}}");
	CHECK_JSON(ctr, "workingDir", "\"/workspace\"");
	CHECK_JSON(find_env(ctr, "DLK_IMAGE"), "value", "\"pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\"");
	CHECK_STR(jget(find_env(ctr, "DLK_CODE_SHA256"), "value")->valuestring, digest);
	CHECK_JSON(find_env(ctr, "DLK_PROCS_PER_NODE"), "value", "\"1\"");
	CHECK_JSON(find_env(ctr, "NCCL_DEBUG"), "value", "\"INFO\"");
	/* Kubernetes would expand $(USER); the program gets it literally from the supervisor */
	CHECK_JSON(find_env(ctr, "GREETING"), "value", "\"hi $$(USER) $HOME\"");
	/* RANK is the pod's index, which the supervisor reads: program.env does not replace it */
	CHECK(count_env(ctr, "RANK") == 1);
	CHECK_JSON(find_env(ctr, "RANK"), "valueFrom.fieldRef.fieldPath",
	           "\"metadata.annotations['batch.kubernetes.io/job-completion-index']\"");
	CHECK_JSON(find_env(ctr, "MASTER_PORT"), "value", "\"29600\"");
	CHECK_JSON(ctr, "ports.0", "{\"name\":\"rendezvous\",\"containerPort\":29600,\"protocol\":\"TCP\"}");
	CHECK_JSON(ctr, "resources.limits", "{\"cpu\":\"4\",\"memory\":\"8Gi\",\"nvidia.com/gpu\":\"2\"}");
	CHECK_JSON(ctr, "volumeMounts.2", "{\"name\":\"code\",\"mountPath\":\"/workspace\",\"readOnly\":true}");
	vol = jget(job, "spec.template.spec.volumes.2");
	CHECK_JSON(vol, "name", "\"code\"");
	CHECK_STR(jget(vol, "configMap.name")->valuestring, cm_name);
	CHECK_JSON(vol, "configMap.items",
	           "[{\"key\":\"0-logo.png\",\"path\":\"pkg/logo.png\",\"mode\":420},"
	           "{\"key\":\"1-model.py\",\"path\":\"pkg/model.py\",\"mode\":420},"
	           "{\"key\":\"2-run.sh\",\"path\":\"run.sh\",\"mode\":493},"
	           "{\"key\":\"3-train.py\",\"path\":\"train.py\",\"mode\":420}]");
	/* fail codes fail the job, restart codes count; dlk's own engine codes are not the program's */
	CHECK_JSON(job, "spec.podFailurePolicy.rules",
	           "[{\"action\":\"Ignore\",\"onPodConditions\":[{\"type\":\"DisruptionTarget\",\"status\":\"True\"}]},"
	           "{\"action\":\"FailJob\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[3,4]}},"
	           "{\"action\":\"Count\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[2]}}]");
	svc = by_kind_name(objs, "Service", "fm");
	CHECK_JSON(svc, "spec.clusterIP", "\"None\"");
	CHECK_JSON(svc, "spec.publishNotReadyAddresses", "true");
	CHECK_JSON(svc, "spec.ports.0.port", "29600");
	CHECK_JSON(job, "spec.template.spec.subdomain", "\"fm\"");
	free(cm_name);
	cJSON_Delete(objs);

	/* a changed file is a new ConfigMap; workdir says where the code is mounted and run */
	write_file("src/train.py", "print('hello')\n", 15, 0644);
	free(s->program.workdir);
	s->program.workdir = xstrdup("/opt/app");
	objs = render(s, "program-torch-2");
	CHECK_MSG(objs != NULL, "renders again: %s", err.msg);
	if (objs) {
		char d2[65];
		CHECK(dlk_program_code_digest(dir, d2, &err) == 0 && strcmp(d2, digest));
		cm_name = xasprintf("fm-code-%.12s", d2);
		CHECK_STR(jget(by_kind_name(objs, "ConfigMap", "fm-code-"), "metadata.name")->valuestring, cm_name);
		job = by_kind_name(objs, "Job", "fm");
		CHECK_JSON(job, "spec.template.spec.containers.0.workingDir", "\"/opt/app\"");
		CHECK_JSON(job, "spec.template.spec.containers.0.volumeMounts.2.mountPath", "\"/opt/app\"");
		free(cm_name);
		cJSON_Delete(objs);
	}
out:
	free(dir);
	project_free(s);
}

/* code baked into the image: no ConfigMap, no workingDir unless workdir; the default exit codes */
static void test_program_in_image(void)
{
	struct dlk_project *s = load("name: jx\nimage: my/jax:1\n" DATA "program:\n  framework: jax\n"
	                             "  command: [python3, /app/main.py]\n  procs_per_worker: 0\n"
	                             "resources:\n  workers: 3\n  gpus: 4\n  cpu: '8'\n  memory: 16Gi\n");
	const cJSON *job, *ctr;
	cJSON *objs;

	if (!s)
		return;
	objs = render(s, "program-image");
	CHECK_MSG(objs != NULL, "a program in its image renders: %s", err.msg);
	if (!objs)
		goto out;
	CHECK(by_kind_name(objs, "ConfigMap", "jx-code-") == NULL);
	job = by_kind_name(objs, "Job", "jx");
	ctr = jget(job, "spec.template.spec.containers.0");
	CHECK_JSON(ctr, "image", "\"my/jax:1\"");
	/* the project's own image (dlk's, with the program baked in): dlk is there, nothing placed */
	CHECK_JSON(ctr, "command", "[\"dlk\",\"train\",\"--worker\",\"-f\",\"/etc/dlk/dlk.yaml\"]");
	CHECK(jget(job, "spec.template.spec.initContainers") == NULL);
	CHECK(jget(ctr, "workingDir") == NULL);
	CHECK(find_env(ctr, "DLK_CODE_SHA256") == NULL);
	/* 0: one process per GPU */
	CHECK_JSON(find_env(ctr, "DLK_PROCS_PER_NODE"), "value", "\"4\"");
	CHECK_JSON(ctr, "ports.0.containerPort", "29500");
	CHECK(cJSON_GetArraySize(jget(job, "spec.template.spec.volumes")) == 2); /* spec, shm */
	CHECK_JSON(job, "spec.podFailurePolicy.rules.1", "{\"action\":\"FailJob\",\"onExitCodes\":{\"operator\":\"In\","
	                                                 "\"values\":[2,126,127]}}");
	CHECK(cJSON_GetArraySize(jget(job, "spec.podFailurePolicy.rules")) == 2);
	CHECK_JSON(job, "spec.completions", "3");
	cJSON_Delete(objs);

	/* fail: [] fails nothing at once: only the disruption rule is left */
	s->program.n_fail_codes = 0;
	objs = render(s, "program-nofail");
	CHECK_MSG(objs != NULL, "renders: %s", err.msg);
	if (objs)
		CHECK(cJSON_GetArraySize(jget(by_kind_name(objs, "Job", "jx"), "spec.podFailurePolicy.rules")) == 1);
	cJSON_Delete(objs);
out:
	project_free(s);
}

/* a tree over the ConfigMap limit is refused naming the limit and what to do; so is a missing one */
static void test_program_code_refused(void)
{
	struct dlk_project *s = load("name: big\nimage: dlk:0.1.0\n" DATA "program:\n  command: [python3, t.py]\n  code: huge\n"
	                             "resources:\n  cpu: '1'\n  memory: 1Gi\n");
	size_t n = RENDER_MAX_CODE_BYTES / 2 + 1;
	char *blob = xcalloc(1, RENDER_MAX_CODE_BYTES);
	cJSON *objs;

	if (!s)
		return;
	memset(blob, 'a', n);
	write_file("huge/a.txt", blob, n, 0644);
	write_file("huge/b.txt", blob, n, 0644);
	objs = render(s, "program-big");
	CHECK(objs == NULL);
	CHECK_MSG(strstr(err.msg, "program.code 'huge' holds ") && strstr(err.msg, "768 KiB") &&
	          strstr(err.msg, "1 MiB") && strstr(err.hint, "program.image") && strstr(err.hint, "smaller directory"),
	          "%s / %s", err.msg, err.hint);
	CHECK(err.code == DLK_EXIT_CONFIG);
	cJSON_Delete(objs);

	/* binary files grow by a third in base64: under the limit in bytes, over it as a ConfigMap */
	memset(blob, 0xff, RENDER_MAX_CODE_BYTES);
	write_file("huge/a.txt", blob, 1, 0644);
	write_file("huge/b.txt", blob, RENDER_MAX_CODE_BYTES - 100, 0644);
	objs = render(s, "program-big");
	CHECK(objs == NULL);
	CHECK_MSG(strstr(err.msg, "takes ") && strstr(err.msg, "base64"), "%s", err.msg);
	cJSON_Delete(objs);

	free(s->program.code);
	s->program.code = xstrdup("missing");
	objs = render(s, "program-missing");
	CHECK(objs == NULL);
	CHECK_MSG(strstr(err.msg, "program.code") && strstr(err.msg, "missing"), "%s", err.msg);
	cJSON_Delete(objs);
	free(blob);
	project_free(s);
}

/* serving.program: a Deployment of the user's server, on its port and probed on its paths, behind
 * dlk's Service; no bundle, no model volume */
static void test_serving_program(void)
{
	struct dlk_project *s = load("name: echo\nimage: dlk:0.1.0\n" DATA "program:\n  command: [python3, t.py]\n"
	                             "serving:\n  port: 8080\n  program:\n    image: my/echo:1\n"
	                             "    command: [python3, -m, http.server, '9000']\n    env: {MODE: 'a $(B)'}\n"
	                             "    port: 9000\n    ready_path: /healthz\n    metrics_path: /metrics\n");
	struct render_serving sv = { .name = "echo", .replicas = 2 };
	const cJSON *dep, *ctr, *svc;
	cJSON *objs;

	if (!s)
		return;
	objs = render_serving_project(s, "dlk.yaml", NULL, "default", &sv, &err);
	CHECK_MSG(objs != NULL, "a server of the user's renders: %s", err.msg);
	if (!objs)
		goto out;
	save_json("serving-program", objs);
	dep = by_kind_name(objs, "Deployment", "echo");
	ctr = jget(dep, "spec.template.spec.containers.0");
	CHECK_JSON(ctr, "image", "\"my/echo:1\"");
	CHECK_JSON(ctr, "command", "[\"python3\",\"-m\",\"http.server\",\"9000\"]");
	CHECK_JSON(ctr, "ports", "[{\"name\":\"http\",\"containerPort\":9000,\"protocol\":\"TCP\"}]");
	CHECK_JSON(find_env(ctr, "MODE"), "value", "\"a $$(B)\"");
	CHECK(find_env(ctr, "DLK_LOG_FORMAT") == NULL);
	CHECK_JSON(ctr, "readinessProbe.httpGet", "{\"path\":\"/healthz\",\"port\":\"http\"}");
	CHECK_JSON(ctr, "livenessProbe.httpGet.path", "\"/healthz\"");
	CHECK_JSON(ctr, "startupProbe.httpGet.path", "\"/healthz\"");
	CHECK(cJSON_GetArraySize(jget(ctr, "volumeMounts")) == 1);
	CHECK(cJSON_GetArraySize(jget(dep, "spec.template.spec.volumes")) == 1);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(jget(dep, "spec.template.metadata.annotations"),
	                                                                "prometheus.io/port")),
	          "9000");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(jget(dep, "spec.template.metadata.annotations"),
	                                                                "prometheus.io/path")),
	          "/metrics");
	CHECK_JSON(dep, "spec.replicas", "2");
	/* dlk's Service in front: its port, to the container's named port */
	svc = by_kind_name(objs, "Service", "echo");
	CHECK_JSON(svc, "spec.ports", "[{\"name\":\"http\",\"port\":8080,\"targetPort\":\"http\",\"protocol\":\"TCP\"}]");
	cJSON_Delete(objs);

	/* without a command, the image's entrypoint; the port defaults to serving.port */
	project_free(s);
	s = load("name: echo\nimage: dlk:0.1.0\n" DATA "program:\n  command: [python3, t.py]\n"
	         "serving:\n  port: 8080\n  program:\n    image: my/echo:1\n");
	if (!s)
		return;
	objs = render_serving_project(s, "dlk.yaml", NULL, "default", &sv, &err);
	CHECK_MSG(objs != NULL, "renders: %s", err.msg);
	if (objs) {
		ctr = jget(by_kind_name(objs, "Deployment", "echo"), "spec.template.spec.containers.0");
		CHECK(jget(ctr, "command") == NULL);
		CHECK_JSON(ctr, "ports.0.containerPort", "8080");
	}
	cJSON_Delete(objs);
out:
	project_free(s);
}

int main(void)
{
	char *cmd;

	tmp = xasprintf("%s/dlk-test-render-program-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		CHECK_MSG(0, "mkdtemp");
		return CHECK_DONE();
	}
	cmd = xasprintf("mkdir -p %s/src/pkg/__pycache__ %s/src/.dlk/checkpoints %s/huge", tmp, tmp, tmp);
	CHECK(system(cmd) == 0);
	free(cmd);
	test_program_with_code();
	test_program_in_image();
	test_program_code_refused();
	test_serving_program();
	cmd = xasprintf("rm -rf %s", tmp);
	CHECK(system(cmd) == 0);
	free(cmd);
	free(tmp);
	return CHECK_DONE();
}
