/* render_train: the objects of a training run for several specs, template overrides, and the
 * built-ins copied out. With DLK_RENDER_JSON_DIR set, the rendered objects of each spec are also
 * written there as <spec>.json (a JSON array), which tests/shell/t0300-schema.sh validates against
 * the official Kubernetes schemas. */
#include "tests/unit/check.h"
#include "lib/jobs/podenv.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/yamljson.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct dlk_err err;

/* A spec with the defaults project_load() applies, filled by hand (borrowed strings only). */
static void spec_defaults(struct dlk_project *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	s->path = "dlk.yaml";
	s->name = (char *)name;
	s->image = "dlk:0.1.0";
	s->resources.workers = 1;
	s->resources.cpu = "2";
	s->resources.memory = "4Gi";
	s->resources.shm_size = "1Gi";
	s->resources.backoff_limit_per_index = 3;
	s->resources.master_port = 29500;
	s->storage.mount = "/checkpoints";
}

static struct dlk_kv gpu_labels[] = { { "team", "vision" } };
static struct dlk_kv gpu_selector[] = { { "pool", "gpu-a" } };
static struct dlk_toleration gpu_tolerations[] = {
	{ "dedicated", "Equal", "ml", "NoSchedule" },
	{ NULL, "Exists", NULL, NULL },
};

static void spec_gpu(struct dlk_project *s)
{
	spec_defaults(s, "big-train");
	s->namespace_ = "ml";
	s->labels = gpu_labels;
	s->n_labels = 1;
	s->resources.workers = 4;
	s->resources.gpus = 8;
	s->resources.gpu_product = "NVIDIA-H100-80GB-HBM3";
	s->resources.cpu = "32";
	s->resources.memory = "256Gi";
	s->resources.shm_size = "16Gi";
	s->resources.node_selector = gpu_selector;
	s->resources.n_node_selector = 1;
	s->resources.tolerations = gpu_tolerations;
	s->resources.n_tolerations = 2;
	s->resources.priority_class = "high";
	s->resources.queue = "team-a";
	s->resources.backoff_limit_per_index = 5;
	s->data.netrc_secret = "data-auth";
	s->storage.size = "100Gi";
	s->storage.storage_class = "fast";
}

static const char *spec_text = "name: x\nresources:\n  workers: 1\n";

/* a dotted path with numeric indexes into arrays: "spec.template.spec.containers.0.image" */
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

static const char *jstr(const cJSON *v, const char *path)
{
	const cJSON *x = jget(v, path);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

static double jnum(const cJSON *v, const char *path)
{
	const cJSON *x = jget(v, path);
	return cJSON_IsNumber(x) ? x->valuedouble : -12345;
}

/* one key that may itself hold dots: "dlk.dev/job" */
static const char *jkey(const cJSON *obj, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

static char *jprint(const cJSON *v, const char *path)
{
	const cJSON *x = jget(v, path);
	return x ? cJSON_PrintUnformatted(x) : xstrdup("(missing)");
}

#define CHECK_JSON(obj, path, want)                  \
	do {                                         \
		char *j_ = jprint(obj, path);        \
		CHECK_STR(j_, want);                 \
		free(j_);                            \
	} while (0)

static const cJSON *find_env(const cJSON *job_spec, const char *name)
{
	const cJSON *env = jget(job_spec, "template.spec.containers.0.env");
	for (const cJSON *e = env ? env->child : NULL; e; e = e->next)
		if (!strcmp(jstr(e, "name") ? jstr(e, "name") : "", name))
			return e;
	return NULL;
}

/* The pod <-> worker contract: the rendered Job sets every variable the worker reads from it. */
static void check_pod_env(const cJSON *job_spec, const char *what)
{
	static const char *const want[] = DLK_POD_ENV_FROM_TEMPLATE;

	for (size_t i = 0; want[i]; i++) {
		const cJSON *e = find_env(job_spec, want[i]);
		CHECK_MSG(e && (jget(e, "value") || jget(e, "valueFrom")), "%s: the Job sets %s", what, want[i]);
	}
}

static char *kinds(const cJSON *objs)
{
	struct dlk_buf b = DLK_BUF_INIT;
	for (const cJSON *o = objs ? objs->child : NULL; o; o = o->next)
		dlk_buf_addf(&b, "%s%s", b.len ? "," : "", jstr(o, "kind"));
	return dlk_buf_detach(&b, NULL);
}

static const cJSON *by_kind(const cJSON *objs, const char *kind)
{
	for (const cJSON *o = objs ? objs->child : NULL; o; o = o->next)
		if (!strcmp(jstr(o, "kind"), kind))
			return o;
	return NULL;
}

static void save_json(const char *name, const cJSON *objs)
{
	const char *dir = getenv("DLK_RENDER_JSON_DIR");
	if (!dir || !objs)
		return;
	char *path = xasprintf("%s/%s.json", dir, name);
	char *j = cJSON_Print(objs);
	FILE *f = fopen(path, "w");
	CHECK_MSG(f && fputs(j, f) >= 0 && fclose(f) == 0, "wrote %s.json", name);
	free(j);
	free(path);
}

static int labels_ok(const cJSON *l, const char *name)
{
	return jkey(l, "dlk.dev/job") && !strcmp(jkey(l, "dlk.dev/job"), name) &&
	       jkey(l, "app.kubernetes.io/managed-by") && !strcmp(jkey(l, "app.kubernetes.io/managed-by"), "dlk") &&
	       jkey(l, "app.kubernetes.io/instance") && !strcmp(jkey(l, "app.kubernetes.io/instance"), name) &&
	       jkey(l, "app.kubernetes.io/version") && !strcmp(jkey(l, "app.kubernetes.io/version"), DLK_VERSION) &&
	       jkey(l, "app.kubernetes.io/name") && jkey(l, "app.kubernetes.io/component");
}

/* every object and the pod template carry the standard labels; the run history's ConfigMap
 * carries dlk.dev/runs instead of dlk.dev/job, so that deleting the job keeps it */
static int labelled(const cJSON *objs, const char *name)
{
	int ok = 1;
	for (const cJSON *o = objs->child; o; o = o->next) {
		const cJSON *l = jget(o, "metadata.labels");
		if (jkey(l, "dlk.dev/runs")) {
			ok &= !jkey(l, "dlk.dev/job") && !strcmp(jkey(l, "dlk.dev/runs"), name) &&
			      jkey(l, "app.kubernetes.io/version") && !strcmp(jkey(l, "app.kubernetes.io/version"), DLK_VERSION);
			continue;
		}
		ok &= labels_ok(l, name);
		if (!strcmp(jstr(o, "kind"), "Job"))
			ok &= labels_ok(jget(o, "spec.template.metadata.labels"), name);
		if (!strcmp(jstr(o, "kind"), "CronJob")) {
			ok &= labels_ok(jget(o, "spec.jobTemplate.metadata.labels"), name);
			ok &= labels_ok(jget(o, "spec.jobTemplate.spec.template.metadata.labels"), name);
		}
	}
	return ok;
}

static void test_cpu_one_worker(void)
{
	struct dlk_project s;
	spec_defaults(&s, "mnist");
	cJSON *objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "1 CPU worker renders: %s", err.msg);
	if (!objs)
		return;
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap,ConfigMap,ServiceAccount,Role,RoleBinding,Service,Job");
	free(k);
	CHECK(labelled(objs, "mnist"));
	save_json("cpu-1", objs);

	const cJSON *cm = by_kind(objs, "ConfigMap");
	CHECK_STR(jstr(cm, "metadata.name"), "mnist-spec");
	CHECK_STR(jstr(cm, "metadata.namespace"), "default");
	CHECK_STR(jkey(jget(cm, "data"), "dlk.yaml"), spec_text);

	const cJSON *role = by_kind(objs, "Role");
	CHECK_JSON(role, "rules", "[{\"apiGroups\":[\"batch\"],\"resources\":[\"jobs\"],\"verbs\":[\"get\",\"patch\"],"
	                          "\"resourceNames\":[\"mnist\"]},{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
	                          "\"verbs\":[\"get\"],\"resourceNames\":[\"mnist-spec\"]},{\"apiGroups\":[\"\"],"
	                          "\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"patch\"],\"resourceNames\":[\"mnist-runs\"]}]");
	const cJSON *rb = by_kind(objs, "RoleBinding");
	CHECK_JSON(rb, "subjects", "[{\"kind\":\"ServiceAccount\",\"name\":\"mnist\",\"namespace\":\"default\"}]");
	CHECK_JSON(rb, "roleRef", "{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"mnist\"}");

	const cJSON *svc = by_kind(objs, "Service");
	CHECK_STR(jstr(svc, "spec.clusterIP"), "None");
	CHECK(cJSON_IsTrue(jget(svc, "spec.publishNotReadyAddresses")));
	CHECK_JSON(svc, "spec.selector", "{\"dlk.dev/job\":\"mnist\"}");
	CHECK(jnum(svc, "spec.ports.0.port") == 29500);

	const cJSON *job = by_kind(objs, "Job");
	const cJSON *js = jget(job, "spec");
	CHECK_STR(jstr(job, "apiVersion"), "batch/v1");
	CHECK_STR(jstr(job, "metadata.name"), "mnist");
	CHECK(jget(js, "suspend") == NULL);
	CHECK_STR(jstr(js, "completionMode"), "Indexed");
	CHECK(jnum(js, "completions") == 1 && jnum(js, "parallelism") == 1);
	CHECK(jnum(js, "backoffLimitPerIndex") == 3);
	CHECK(jnum(js, "maxFailedIndexes") == 0); /* a rank out of retries fails the gang at once */
	CHECK_JSON(js, "podFailurePolicy.rules",
	           "[{\"action\":\"Ignore\",\"onPodConditions\":[{\"type\":\"DisruptionTarget\",\"status\":\"True\"}]},"
	           "{\"action\":\"FailJob\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[2,3]}},"
	           "{\"action\":\"Ignore\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[76]}},"
	           "{\"action\":\"Count\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[75]}}]");
	CHECK_JSON(js, "successPolicy", "{\"rules\":[{\"succeededIndexes\":\"0\"}]}");
	CHECK_STR(jkey(jget(js, "template.metadata.labels"), "dlk.dev/job"), "mnist");
	CHECK_STR(jstr(js, "template.spec.subdomain"), "mnist");
	CHECK_STR(jstr(js, "template.spec.serviceAccountName"), "mnist");
	CHECK_STR(jstr(js, "template.spec.restartPolicy"), "Never");
	CHECK(jnum(js, "template.spec.terminationGracePeriodSeconds") == 60);
	CHECK(jget(js, "template.spec.nodeSelector") == NULL);
	CHECK(jget(js, "template.spec.tolerations") == NULL);
	CHECK(jget(js, "template.spec.priorityClassName") == NULL);
	const cJSON *ctr = jget(js, "template.spec.containers.0");
	CHECK_STR(jstr(ctr, "image"), "dlk:0.1.0");
	CHECK_JSON(ctr, "command", "[\"dlk\",\"train\",\"--worker\",\"-f\",\"/etc/dlk/dlk.yaml\"]");
	CHECK_JSON(ctr, "resources", "{\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}}");
	CHECK_JSON(ctr, "volumeMounts", "[{\"name\":\"spec\",\"mountPath\":\"/etc/dlk\",\"readOnly\":true}]");
	CHECK_JSON(js, "template.spec.volumes",
	           "[{\"name\":\"spec\",\"configMap\":{\"name\":\"mnist-spec\",\"items\":[{\"key\":\"dlk.yaml\",\"path\":\"dlk.yaml\"}]}}]");
	CHECK_JSON(find_env(js, "MASTER_ADDR"), "value", "\"mnist-0.mnist\"");
	CHECK_JSON(find_env(js, "MASTER_PORT"), "value", "\"29500\"");
	CHECK_JSON(find_env(js, "WORLD_SIZE"), "value", "\"1\"");
	CHECK_JSON(find_env(js, "DLK_JOB_NAME"), "value", "\"mnist\"");
	CHECK_JSON(find_env(js, "RANK"), "valueFrom",
	           "{\"fieldRef\":{\"fieldPath\":\"metadata.annotations['batch.kubernetes.io/job-completion-index']\"}}");
	CHECK_JSON(find_env(js, "DLK_NAMESPACE"), "valueFrom", "{\"fieldRef\":{\"fieldPath\":\"metadata.namespace\"}}");
	CHECK_JSON(find_env(js, "POD_NAME"), "valueFrom", "{\"fieldRef\":{\"fieldPath\":\"metadata.name\"}}");
	CHECK(find_env(js, "NETRC") == NULL); /* no data.netrc_secret, no credentials volume */
	check_pod_env(js, "one CPU worker");
	cJSON_Delete(objs);
}

static void test_gpu_four_workers(void)
{
	struct dlk_project s;
	spec_gpu(&s);
	cJSON *objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "4 GPU workers render: %s", err.msg);
	if (!objs)
		return;
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap,ConfigMap,ServiceAccount,Role,RoleBinding,PersistentVolumeClaim,Service,Job");
	free(k);
	CHECK(labelled(objs, "big-train"));
	save_json("gpu-4", objs);
	for (const cJSON *o = objs->child; o; o = o->next) {
		CHECK_STR(jstr(o, "metadata.namespace"), "ml");
		CHECK_STR(jstr(o, "metadata.labels.team"), "vision");
	}
	const cJSON *pvc = by_kind(objs, "PersistentVolumeClaim");
	CHECK_STR(jstr(pvc, "metadata.name"), "big-train-checkpoints");
	CHECK_JSON(pvc, "spec", "{\"accessModes\":[\"ReadWriteMany\"],\"storageClassName\":\"fast\","
	                        "\"resources\":{\"requests\":{\"storage\":\"100Gi\"}}}");
	const cJSON *job = by_kind(objs, "Job");
	const cJSON *js = jget(job, "spec");
	CHECK(jnum(js, "completions") == 4 && jnum(js, "parallelism") == 4);
	CHECK(jnum(js, "backoffLimitPerIndex") == 5);
	CHECK_STR(jkey(jget(job, "metadata.labels"), "kueue.x-k8s.io/queue-name"),
	          "team-a");
	CHECK(jget(js, "suspend") == NULL);
	CHECK_JSON(js, "template.spec.nodeSelector", "{\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"pool\":\"gpu-a\"}");
	CHECK_JSON(js, "template.spec.tolerations",
	           "[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"},"
	           "{\"operator\":\"Equal\",\"key\":\"dedicated\",\"value\":\"ml\",\"effect\":\"NoSchedule\"},"
	           "{\"operator\":\"Exists\"}]");
	CHECK_STR(jstr(js, "template.spec.priorityClassName"), "high");
	const cJSON *ctr = jget(js, "template.spec.containers.0");
	CHECK_JSON(ctr, "resources",
	           "{\"requests\":{\"cpu\":\"32\",\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"8\"},"
	           "\"limits\":{\"cpu\":\"32\",\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"8\"}}");
	CHECK_JSON(ctr, "volumeMounts", "[{\"name\":\"spec\",\"mountPath\":\"/etc/dlk\",\"readOnly\":true},"
	                                "{\"name\":\"shm\",\"mountPath\":\"/dev/shm\"},"
	                                "{\"name\":\"checkpoints\",\"mountPath\":\"/checkpoints\"},"
	                                "{\"name\":\"data-credentials\",\"mountPath\":\"/var/run/secrets/dlk.dev/data\","
	                                "\"readOnly\":true}]");
	CHECK_JSON(js, "template.spec.volumes.1", "{\"name\":\"shm\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"16Gi\"}}");
	CHECK_JSON(js, "template.spec.volumes.2",
	           "{\"name\":\"checkpoints\",\"persistentVolumeClaim\":{\"claimName\":\"big-train-checkpoints\"}}");
	/* data credentials: a Secret mounted as a file the fetcher reads, never a value in the spec */
	CHECK_JSON(js, "template.spec.volumes.3", "{\"name\":\"data-credentials\",\"secret\":{\"secretName\":\"data-auth\","
	                                         "\"items\":[{\"key\":\"netrc\",\"path\":\"netrc\"}]}}");
	CHECK_JSON(find_env(js, DLK_ENV_NETRC), "value", "\"/var/run/secrets/dlk.dev/data/netrc\"");
	check_pod_env(js, "four GPU workers");
	CHECK_JSON(find_env(js, "WORLD_SIZE"), "value", "\"4\"");
	CHECK_JSON(find_env(js, "MASTER_ADDR"), "value", "\"big-train-0.big-train\"");
	cJSON_Delete(objs);

	/* the namespace option wins over the spec's */
	struct render_opts o = RENDER_OPTS_INIT;
	o.namespace_ = "other";
	objs = render_train(&s, spec_text, &o, &err);
	CHECK_STR(objs ? jstr(cJSON_GetArrayItem(objs, 0), "metadata.namespace") : NULL, "other");
	cJSON_Delete(objs);
}

static void test_claim_and_schedule(void)
{
	struct dlk_project s;
	spec_defaults(&s, "resume");
	s.resources.workers = 2;
	s.storage.claim = "shared-ckpt";
	s.storage.size = "10Gi"; /* ignored: an existing claim is used as it is */
	s.storage.mount = "/ckpt";
	cJSON *objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "existing claim renders: %s", err.msg);
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap,ConfigMap,ServiceAccount,Role,RoleBinding,Service,Job");
	free(k);
	save_json("claim", objs);
	const cJSON *js = jget(by_kind(objs, "Job"), "spec");
	CHECK_JSON(js, "template.spec.volumes.1", "{\"name\":\"checkpoints\",\"persistentVolumeClaim\":{\"claimName\":\"shared-ckpt\"}}");
	CHECK_JSON(js, "template.spec.containers.0.volumeMounts.1", "{\"name\":\"checkpoints\",\"mountPath\":\"/ckpt\"}");
	cJSON_Delete(objs);

	spec_defaults(&s, "nightly");
	s.resources.workers = 2;
	s.resources.queue = "batch-q";
	s.schedule = "0 3 * * *";
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "schedule renders: %s", err.msg);
	k = kinds(objs);
	CHECK_STR(k, "ConfigMap,ConfigMap,ServiceAccount,Role,RoleBinding,Service,CronJob");
	free(k);
	CHECK(objs && labelled(objs, "nightly"));
	save_json("cron", objs);
	const cJSON *cj = by_kind(objs, "CronJob");
	CHECK_STR(jstr(cj, "apiVersion"), "batch/v1");
	CHECK_STR(jstr(cj, "spec.schedule"), "0 3 * * *");
	CHECK_STR(jstr(cj, "spec.concurrencyPolicy"), "Forbid");
	CHECK_STR(jkey(jget(cj, "spec.jobTemplate.metadata.labels"), "kueue.x-k8s.io/queue-name"),
	          "batch-q");
	js = jget(cj, "spec.jobTemplate.spec");
	CHECK_STR(jstr(js, "completionMode"), "Indexed");
	CHECK(jnum(js, "completions") == 2);
	CHECK_JSON(find_env(js, "DLK_JOB_NAME"), "valueFrom",
	           "{\"fieldRef\":{\"fieldPath\":\"metadata.labels['batch.kubernetes.io/job-name']\"}}");
	CHECK_JSON(find_env(js, "MASTER_ADDR"), "value", "\"$(DLK_JOB_NAME)-0.nightly\"");
	check_pod_env(js, "a CronJob's Job");
	/* the env var MASTER_ADDR refers to must come before it */
	const cJSON *env = jget(js, "template.spec.containers.0.env");
	CHECK_STR(jstr(env, "0.name"), "DLK_JOB_NAME");
	/* a CronJob's Jobs have names only known when they start: the Role cannot list one */
	CHECK(jget(by_kind(objs, "Role"), "rules.0.resourceNames") == NULL);
	cJSON_Delete(objs);
}

/* Data on claims (pvc://CLAIM/PATH): each claim is mounted once, read-only, where the worker
 * reads it; a data claim that is also the checkpoint claim is still mounted for the data. */
static void test_data_claims(void)
{
	struct dlk_project s;
	spec_defaults(&s, "fromclaims");
	s.data.train.images.url = "pvc://datasets/fmnist/train-images.gz";
	s.data.train.labels.url = "pvc://datasets/fmnist/train-labels.gz";
	s.data.test.images.url = "pvc://holdout.v2/t10k-images.gz";
	s.data.test.labels.url = "file:///data/t10k-labels.gz";
	s.storage.claim = "datasets";
	cJSON *objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "data claims render: %s", err.msg);
	save_json("data-claims", objs);
	const cJSON *pod = jget(by_kind(objs, "Job"), "spec.template.spec");
	CHECK_JSON(pod, "volumes.2", "{\"name\":\"data-0\",\"persistentVolumeClaim\":{\"claimName\":\"datasets\",\"readOnly\":true}}");
	CHECK_JSON(pod, "volumes.3", "{\"name\":\"data-1\",\"persistentVolumeClaim\":{\"claimName\":\"holdout.v2\",\"readOnly\":true}}");
	CHECK(jget(pod, "volumes.4") == NULL);
	CHECK_JSON(pod, "containers.0.volumeMounts.2", "{\"name\":\"data-0\",\"mountPath\":\"/mnt/pvc/datasets\",\"readOnly\":true}");
	CHECK_JSON(pod, "containers.0.volumeMounts.3", "{\"name\":\"data-1\",\"mountPath\":\"/mnt/pvc/holdout.v2\",\"readOnly\":true}");
	cJSON_Delete(objs);

	/* image folders, paired folders and shards on claims are mounted too */
	spec_defaults(&s, "folders");
	s.data.format = DLK_DATA_IMAGES;
	s.data.train.source.url = "pvc://images/train/noisy";
	s.data.train.targets.url = "pvc://targets/train/clean";
	struct dlk_source shards[2] = { { 0 }, { 0 } };
	shards[0].url = "pvc://images/test/0.tar";
	shards[1].url = "pvc://shards-b/test/1.tar";
	s.data.test.shards = shards;
	s.data.test.n_shards = 2;
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "folder claims render: %s", err.msg);
	pod = jget(by_kind(objs, "Job"), "spec.template.spec");
	CHECK_JSON(pod, "containers.0.volumeMounts.1", "{\"name\":\"data-0\",\"mountPath\":\"/mnt/pvc/images\",\"readOnly\":true}");
	CHECK_JSON(pod, "containers.0.volumeMounts.2", "{\"name\":\"data-1\",\"mountPath\":\"/mnt/pvc/targets\",\"readOnly\":true}");
	CHECK_JSON(pod, "containers.0.volumeMounts.3", "{\"name\":\"data-2\",\"mountPath\":\"/mnt/pvc/shards-b\",\"readOnly\":true}");
	CHECK(jget(pod, "containers.0.volumeMounts.4") == NULL);
	cJSON_Delete(objs);

	/* no pvc:// source, no data volume */
	spec_defaults(&s, "plain");
	s.data.train.source.url = "https://example.com/train.csv";
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK(objs != NULL);
	CHECK(jget(by_kind(objs, "Job"), "spec.template.spec.volumes.1") == NULL);
	cJSON_Delete(objs);
}

static void test_hostile_spec_values(void)
{
	static struct dlk_kv hostile_labels[] = { { "note", "x\nkind: Secret" }, { "q", "\"}}{{name}}" } };
	struct dlk_project s;
	const char *text = "name: evil\n---\napiVersion: v1\nkind: Secret\n";
	spec_defaults(&s, "evil");
	s.labels = hostile_labels;
	s.n_labels = 2;
	s.image = "reg.example/dlk:1 # not a comment";
	cJSON *objs = render_train(&s, text, NULL, &err);
	CHECK_MSG(objs != NULL, "hostile values render: %s", err.msg);
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap,ConfigMap,ServiceAccount,Role,RoleBinding,Service,Job");
	free(k);
	CHECK_STR(jkey(jget(cJSON_GetArrayItem(objs, 0), "data"), "dlk.yaml"), text);
	CHECK_STR(jstr(cJSON_GetArrayItem(objs, 0), "metadata.labels.note"), "x\nkind: Secret");
	CHECK_STR(jstr(cJSON_GetArrayItem(objs, 0), "metadata.labels.q"), "\"}}{{name}}");
	CHECK_STR(jstr(by_kind(objs, "Job"), "spec.template.spec.containers.0.image"), "reg.example/dlk:1 # not a comment");
	cJSON_Delete(objs);

	/* what rendering cannot do without */
	spec_defaults(&s, NULL);
	CHECK(render_train(&s, text, NULL, &err) == NULL);
	CHECK_STR(err.msg, "spec field 'name' is not set: cannot render the job");
	CHECK(err.code == DLK_EXIT_CONFIG);
	spec_defaults(&s, "x");
	s.resources.master_port = 70000;
	CHECK(render_train(&s, text, NULL, &err) == NULL);
	CHECK_STR(err.msg, "resources.master_port 70000 is not a TCP port");
}

static char tmpdir[64];

static void write_file(const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", tmpdir, name);
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	free(p);
}

static void remove_file(const char *name)
{
	char *p = xasprintf("%s/%s", tmpdir, name);
	unlink(p);
	free(p);
}

static void test_overrides(void)
{
	struct dlk_project s;
	struct render_opts o = RENDER_OPTS_INIT;
	spec_defaults(&s, "mnist");
	strcpy(tmpdir, "/tmp/dlk-render-XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL);
	o.templates_dir = tmpdir;

	/* a service override changes only the Service */
	write_file("service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{service}}\n  namespace: {{namespace}}\n"
	                           "  annotations:\n    custom: \"yes\"\nspec:\n  clusterIP: None\n");
	cJSON *objs = render_train(&s, spec_text, &o, &err);
	CHECK_MSG(objs != NULL, "override renders: %s", err.msg);
	CHECK_STR(jstr(by_kind(objs, "Service"), "metadata.annotations.custom"), "yes");
	CHECK(jget(by_kind(objs, "Job"), "spec.completionMode") != NULL);
	cJSON_Delete(objs);

	/* a typo in an override's variable: strict, with the file and line */
	write_file("service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{servce}}\n");
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	char *want = xasprintf("%s/service.yaml:4: unknown name 'servce' (did you mean 'service'?)", tmpdir);
	CHECK_STR(err.msg, want);
	free(want);

	/* ... also in a branch this (CPU-only) spec does not take */
	write_file("service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{service}}\n"
	                           "{{#gpu}}\n  annotations:\n    gpus: {{gpu_quantty}}\n{{/gpu}}\n");
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	want = xasprintf("%s/service.yaml:7: unknown name 'gpu_quantty' (did you mean 'gpu_quantity'?)", tmpdir);
	CHECK_STR(err.msg, want);
	free(want);

	/* a broken override fails at load, with its path */
	write_file("service.yaml", "a: 1\n{{#x}}\n");
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	want = xasprintf("%s/service.yaml:2: section '{{#x}}' is never closed", tmpdir);
	CHECK_STR(err.msg, want);
	free(want);

	/* rendered text that is not YAML: the message shows the rendered line */
	write_file("service.yaml", "apiVersion: v1\nkind: Service\nmetadata: {{name}}: x\n");
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	want = xasprintf("%s/service.yaml (rendered):3:", tmpdir);
	CHECK_CONTAINS(err.msg, want);
	CHECK_CONTAINS(err.msg, "\n    3 | metadata: \"mnist\": x");
	free(want);

	/* a rendered document that is not an object */
	write_file("service.yaml", "- just\n- a list\n");
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	CHECK_CONTAINS(err.msg, "service.yaml: rendered document 1 is not a Kubernetes object");
	remove_file("service.yaml");

	/* an override for a name that is not a template */
	write_file("jobs.yaml", "x: 1\n");
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	want = xasprintf("'%s/jobs.yaml' overrides no built-in template (did you mean 'job.yaml'?)", tmpdir);
	CHECK_STR(err.msg, want);
	free(want);
	CHECK_CONTAINS(err.hint, "configmap.yaml");
	CHECK_CONTAINS(err.hint, "job.yaml");
	remove_file("jobs.yaml");

	/* other files in the directory are not templates */
	write_file("README", "notes\n");
	objs = render_train(&s, spec_text, &o, &err);
	CHECK(objs != NULL);
	cJSON_Delete(objs);
	remove_file("README");

	/* a missing directory: an error unless optional */
	o.templates_dir = "/nonexistent/templates";
	CHECK(render_train(&s, spec_text, &o, &err) == NULL);
	CHECK_CONTAINS(err.msg, "cannot open template directory '/nonexistent/templates'");
	o.templates_dir_optional = 1;
	objs = render_train(&s, spec_text, &o, &err);
	CHECK(objs != NULL);
	cJSON_Delete(objs);
	rmdir(tmpdir);
}

static void test_copy(void)
{
	struct dlk_project s;
	struct render_opts o = RENDER_OPTS_INIT;
	const char *const *names = render_builtin_names();
	size_t n = 0;
	while (names[n])
		n++;
	CHECK(n >= 10);

	strcpy(tmpdir, "/tmp/dlk-render-XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL);
	char *dir = xasprintf("%s/templates", tmpdir);
	CHECK(render_templates_copy(dir, 0, &err) == (int)n);
	CHECK(render_templates_copy(dir, 0, &err) == -1);
	CHECK(err.code == DLK_EXIT_EXISTS);
	CHECK_CONTAINS(err.msg, "already exists");
	CHECK(render_templates_copy(dir, 1, &err) == (int)n);

	/* the copies, used as overrides, render exactly what the built-ins render */
	spec_gpu(&s);
	cJSON *a = render_train(&s, spec_text, NULL, &err);
	o.templates_dir = dir;
	cJSON *b = render_train(&s, spec_text, &o, &err);
	CHECK(a && b && cJSON_Compare(a, b, 1));
	cJSON_Delete(a);
	cJSON_Delete(b);

	for (size_t i = 0; i < n; i++) {
		char *p = xasprintf("%s/%s", dir, names[i]);
		unlink(p);
		free(p);
	}
	rmdir(dir);
	rmdir(tmpdir);
	free(dir);

	CHECK(render_templates_copy("/nonexistent/a/b", 0, &err) == -1);
	CHECK_CONTAINS(err.msg, "cannot create '/nonexistent/a/b'");
}

/* -o yaml of what render_train returns reads back to the same objects */
static void test_yaml_output(void)
{
	struct dlk_project s;
	spec_gpu(&s);
	s.schedule = "*/5 * * * *";
	cJSON *objs = render_train(&s, "name: big-train\nresources:\n  gpus: 8\n", NULL, &err);
	char *y = objs ? yamljson_emit_stream(objs, &err) : NULL;
	cJSON *back = y ? yamljson_parse(y, strlen(y), "out", NULL, &err) : NULL;
	CHECK(back && cJSON_Compare(objs, back, 1));
	CHECK_CONTAINS(y, "  dlk.yaml: |\n    name: big-train\n");
	free(y);
	cJSON_Delete(back);
	cJSON_Delete(objs);
}

/* data.dataset: the node cache volume as the project chooses it, and the store's Secret as env */
static void test_dataset_cache(void)
{
	struct dlk_project s;
	const cJSON *js, *ctr;
	cJSON *objs;

	spec_defaults(&s, "ds");
	s.data.dataset.id = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
	s.data.store = "s3://data/sets";
	s.data.store_secret = "s3-creds";
	s.data.node_cache.volume = DLK_CACHE_EMPTYDIR;
	s.data.node_cache.host_path = "/var/cache/dlk";
	s.data.node_cache.max_bytes = 1 << 30;
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "a dataset project renders: %s", err.msg);
	if (!objs)
		return;
	js = jget(by_kind(objs, "Job"), "spec");
	ctr = jget(js, "template.spec.containers.0");
	CHECK_JSON(js, "template.spec.volumes.1", "{\"name\":\"data-cache\",\"emptyDir\":{}}");
	CHECK_JSON(ctr, "volumeMounts.1", "{\"name\":\"data-cache\",\"mountPath\":\"/var/cache/dlk\"}");
	CHECK_JSON(find_env(js, "DLK_DATA_CACHE"), "value", "\"/var/cache/dlk\"");
	CHECK_JSON(find_env(js, "DLK_DATA_CACHE_MAX_BYTES"), "value", "\"1073741824\"");
	CHECK_JSON(ctr, "envFrom", "[{\"secretRef\":{\"name\":\"s3-creds\"}}]");
	cJSON_Delete(objs);

	/* a hostPath outlives the pod on its node */
	s.data.node_cache.volume = DLK_CACHE_HOSTPATH;
	s.data.node_cache.host_path = "/srv/dlk-cache";
	s.data.store_secret = NULL;
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "hostPath renders: %s", err.msg);
	js = objs ? jget(by_kind(objs, "Job"), "spec") : NULL;
	CHECK_JSON(js, "template.spec.volumes.1",
	           "{\"name\":\"data-cache\",\"hostPath\":{\"path\":\"/srv/dlk-cache\",\"type\":\"DirectoryOrCreate\"}}");
	CHECK(js && jget(js, "template.spec.containers.0.envFrom") == NULL);
	cJSON_Delete(objs);

	/* the checkpoint volume: a subPath of it, no volume of its own */
	s.data.node_cache.volume = DLK_CACHE_CHECKPOINT;
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK(objs == NULL && strstr(err.msg, "no checkpoint volume"));
	s.storage.claim = "ckpt";
	objs = render_train(&s, spec_text, NULL, &err);
	CHECK_MSG(objs != NULL, "checkpoint cache renders: %s", err.msg);
	js = objs ? jget(by_kind(objs, "Job"), "spec") : NULL;
	CHECK_JSON(js, "template.spec.containers.0.volumeMounts.2",
	           "{\"name\":\"checkpoints\",\"mountPath\":\"/var/cache/dlk\",\"subPath\":\"dlk-data-cache\"}");
	CHECK(js && cJSON_GetArraySize(jget(js, "template.spec.volumes")) == 2);
	cJSON_Delete(objs);
}

int main(void)
{
	test_cpu_one_worker();
	test_dataset_cache();
	test_gpu_four_workers();
	test_claim_and_schedule();
	test_data_claims();
	test_hostile_spec_values();
	test_overrides();
	test_copy();
	test_yaml_output();
	return CHECK_DONE();
}
