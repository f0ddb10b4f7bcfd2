/* render_serving_project: the objects of a served model (a stable track on the CPU with its
 * bundle on a claim; one on GPUs with an autoscaler, from a URL; a canary), a template
 * override, and the errors. With DLK_RENDER_JSON_DIR set, the objects are also written there as
 * serve-<case>.json, which tests/shell/t0300-schema.sh validates against the official schemas. */
#include "tests/unit/check.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct dlk_err err;

static const char *base_yaml =
	"name: fashion\n"
	"data: {format: csv, train: {source: a.csv}, test: {source: b.csv}}\n"
	"model: {input: [4], layers: [{dense: {units: 3}}]}\n";

static struct dlk_project *load(const char *extra)
{
	char *text = xasprintf("%s%s", base_yaml, extra);
	struct dlk_project *p = project_load_mem(text, strlen(text), "dlk.yaml", NULL, 0, &err);
	CHECK_MSG(p != NULL, "the spec loads: %s", err.msg);
	free(text);
	return p;
}

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

static const char *jkey(const cJSON *obj, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

static char *kinds(const cJSON *objs)
{
	struct dlk_buf b = DLK_BUF_INIT;
	for (const cJSON *o = objs ? objs->child : NULL; o; o = o->next)
		dlk_buf_addf(&b, "%s%s/%s", b.len ? "," : "", jstr(o, "kind"), jstr(o, "metadata.name"));
	return dlk_buf_detach(&b, NULL);
}

static const cJSON *by_kind(const cJSON *objs, const char *kind)
{
	for (const cJSON *o = objs ? objs->child : NULL; o; o = o->next)
		if (!strcmp(jstr(o, "kind"), kind))
			return o;
	return NULL;
}

/* the command line as one string, words joined by spaces */
static char *command(const cJSON *dep)
{
	struct dlk_buf b = DLK_BUF_INIT;
	const cJSON *w;
	cJSON_ArrayForEach(w, jget(dep, "spec.template.spec.containers.0.command"))
		dlk_buf_addf(&b, "%s%s", b.len ? " " : "", w->valuestring);
	return dlk_buf_detach(&b, NULL);
}

static void save_json(const char *name, const cJSON *objs)
{
	const char *dir = getenv("DLK_RENDER_JSON_DIR");
	if (!dir || !objs)
		return;
	char *path = xasprintf("%s/serve-%s.json", dir, name);
	char *j = cJSON_Print(objs);
	FILE *f = fopen(path, "w");
	CHECK_MSG(f && fputs(j, f) >= 0 && fclose(f) == 0, "wrote serve-%s.json", name);
	free(j);
	free(path);
}

static void test_cpu_claim(void)
{
	struct dlk_project *p = load("serving: {drain_delay_s: 5, drain_timeout_s: 20}\n");
	struct render_serving sv = { .name = "fashion", .canary = 0, .replicas = 1, .canary_percent = 0, .model = { "fashion-checkpoints", "fashion.dlk", NULL, NULL, "job fashion", "ab12", NULL, 0.8731 } };
	cJSON *objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK_MSG(objs != NULL, "a CPU track renders: %s", err.msg);
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap/fashion-serving,Service/fashion-serving,Deployment/fashion-serving");
	free(k);
	const cJSON *d = by_kind(objs, "Deployment"), *svc = by_kind(objs, "Service");
	CHECK_STR(jkey(jget(d, "metadata.labels"), "dlk.dev/serve"), "fashion");
	CHECK_STR(jkey(jget(d, "metadata.labels"), "dlk.dev/track"), "stable");
	CHECK_STR(jkey(jget(d, "metadata.annotations"), "dlk.dev/accuracy"), "0.8731");
	CHECK_STR(jkey(jget(d, "metadata.annotations"), "dlk.dev/model-sha256"), "ab12");
	CHECK_STR(jkey(jget(d, "spec.template.metadata.annotations"), "dlk.dev/model-revision"), "");
	char digest[65];
	project_digest(p, digest);
	CHECK_STR(jkey(jget(d, "spec.template.metadata.annotations"), "dlk.dev/spec-sha256"), digest);
	CHECK(jnum(d, "spec.replicas") == 1);
	CHECK_STR(jkey(jget(d, "spec.selector.matchLabels"), "dlk.dev/track"), "stable");
	CHECK_STR(jkey(jget(svc, "spec.selector"), "dlk.dev/serve"), "fashion");
	CHECK(cJSON_GetArraySize(jget(svc, "spec.selector")) == 1);
	CHECK_STR(jstr(d, "spec.template.spec.containers.0.readinessProbe.httpGet.path"), "/v2/health/ready");
	CHECK_STR(jstr(d, "spec.template.spec.containers.0.livenessProbe.httpGet.path"), "/v2/health/live");
	CHECK_STR(jstr(d, "spec.template.spec.containers.0.startupProbe.httpGet.path"), "/v2/health/live");
	CHECK(jnum(d, "spec.template.spec.containers.0.lifecycle.preStop.sleep.seconds") == 5);
	CHECK(jnum(d, "spec.template.spec.terminationGracePeriodSeconds") == 5 + 20 + RENDER_SERVING_DRAIN_MARGIN_S);
	CHECK_STR(jstr(d, "spec.template.spec.volumes.1.persistentVolumeClaim.claimName"), "fashion-checkpoints");
	CHECK(jget(d, "spec.template.spec.volumes.1.persistentVolumeClaim.readOnly") &&
	      cJSON_IsTrue(jget(d, "spec.template.spec.volumes.1.persistentVolumeClaim.readOnly")));
	CHECK_STR(jstr(d, "spec.template.spec.containers.0.resources.limits.cpu"), "1");
	CHECK(jget(d, "spec.template.spec.tolerations") == NULL && jget(d, "spec.template.spec.nodeSelector") == NULL);
	char *cmd = command(d);
	CHECK_STR(cmd, "dlk serve --worker -f /etc/dlk/dlk.yaml --port 8080 --set serving.drain_delay_s=0 fashion=/models/fashion.dlk");
	free(cmd);
	/* the ConfigMap carries the spec the worker reads */
	CHECK_CONTAINS(jkey(jget(by_kind(objs, "ConfigMap"), "data"), "dlk.yaml"), "drain_timeout_s: 20");
	save_json("cpu", objs);
	cJSON_Delete(objs);
	project_free(p);
}

static void test_gpu_url_hpa(void)
{
	struct dlk_project *p = load("namespace: ml\n"
	                             "labels: {team: vision}\n"
	                             "resources: {gpu_product: NVIDIA-L4, node_selector: {pool: infer},\n"
	                             "  tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]}\n"
	                             "serving: {replicas: 2, max_replicas: 8, target_cpu_percent: 60, gpus: 1, cpu: 4, memory: 8Gi, port: 9000}\n");
	static const char pin[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct render_serving sv = { .name = "fashion", .canary = 0, .replicas = 2, .canary_percent = 0, .model = { NULL, NULL, "https://models.example.com/f.dlk", pin, "https://models.example.com/f.dlk", "", NULL, -1 } };
	cJSON *objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK_MSG(objs != NULL, "a GPU track renders: %s", err.msg);
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap/fashion-serving,Service/fashion-serving,Deployment/fashion-serving,"
	             "HorizontalPodAutoscaler/fashion-serving,PodDisruptionBudget/fashion-serving");
	free(k);
	const cJSON *d = by_kind(objs, "Deployment"), *h = by_kind(objs, "HorizontalPodAutoscaler");
	CHECK_STR(jstr(d, "metadata.namespace"), "ml");
	CHECK_STR(jkey(jget(d, "metadata.labels"), "team"), "vision");
	CHECK(jnum(d, "spec.replicas") == 2); /* a new Deployment: set, the autoscaler takes over */
	CHECK_STR(jkey(jget(d, "spec.template.spec.nodeSelector"), "nvidia.com/gpu.product"), "NVIDIA-L4");
	CHECK_STR(jkey(jget(d, "spec.template.spec.nodeSelector"), "pool"), "infer");
	CHECK_STR(jstr(d, "spec.template.spec.tolerations.0.key"), "nvidia.com/gpu");
	CHECK_STR(jstr(d, "spec.template.spec.tolerations.1.key"), "dedicated");
	CHECK_STR(jkey(jget(d, "spec.template.spec.containers.0.resources.limits"), "nvidia.com/gpu"), "1");
	CHECK_STR(jstr(d, "spec.template.spec.containers.0.resources.limits.memory"), "8Gi");
	CHECK(jget(d, "spec.template.spec.containers.0.lifecycle") == NULL);
	CHECK(jnum(d, "spec.template.spec.containers.0.ports.0.containerPort") == 9000);
	CHECK(jget(d, "spec.template.spec.volumes.1.emptyDir") != NULL);
	char *cmd = command(d);
	CHECK_CONTAINS(cmd, "--port 9000");
	CHECK_CONTAINS(cmd, "--sha256 0123456789abcdef");
	CHECK_CONTAINS(cmd, "fashion=https://models.example.com/f.dlk");
	CHECK_STR(jkey(jget(d, "spec.template.metadata.annotations"), "dlk.dev/model-revision"), pin);
	free(cmd);
	CHECK(jnum(h, "spec.minReplicas") == 2 && jnum(h, "spec.maxReplicas") == 8);
	CHECK(jnum(h, "spec.metrics.0.resource.target.averageUtilization") == 60);
	CHECK_STR(jstr(h, "spec.scaleTargetRef.name"), "fashion-serving");
	CHECK_STR(jkey(jget(by_kind(objs, "PodDisruptionBudget"), "spec.selector.matchLabels"), "dlk.dev/track"), "stable");
	save_json("gpu", objs);
	cJSON_Delete(objs);

	/* the autoscaler has scaled the Deployment to 5: apply keeps 5, the minimum stays 2 */
	sv.replicas = 5;
	objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK(objs && jnum(by_kind(objs, "Deployment"), "spec.replicas") == 5);
	CHECK(objs && jnum(by_kind(objs, "HorizontalPodAutoscaler"), "spec.minReplicas") == 2);
	cJSON_Delete(objs);
	project_free(p);
}

static void test_canary(void)
{
	struct dlk_project *p = load("serving: {replicas: 3, max_replicas: 6}\n");
	struct render_serving sv = { .name = "fashion", .canary = 1, .replicas = 1, .canary_percent = 25, .model = { "fashion-checkpoints", "fashion.dlk", NULL, NULL, "job fashion", "cd34", NULL, 0.9 } };
	cJSON *objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK_MSG(objs != NULL, "a canary renders: %s", err.msg);
	char *k = kinds(objs);
	/* the same Service; no autoscaler nor budget of its own */
	CHECK_STR(k, "ConfigMap/fashion-serving-canary,Service/fashion-serving,Deployment/fashion-serving-canary");
	free(k);
	const cJSON *d = by_kind(objs, "Deployment");
	CHECK(jnum(d, "spec.replicas") == 1);
	CHECK_STR(jkey(jget(d, "spec.selector.matchLabels"), "dlk.dev/track"), "canary");
	CHECK_STR(jkey(jget(d, "metadata.annotations"), "dlk.dev/canary-percent"), "25");
	CHECK_STR(jstr(d, "spec.template.spec.volumes.0.configMap.name"), "fashion-serving-canary");
	save_json("canary", objs);
	cJSON_Delete(objs);
	project_free(p);
}

/* serving.gateway, on a cluster that serves the Gateway API: a Service per track and an
 * HTTPRoute weighing them */
static void test_route(void)
{
	struct dlk_project *p = load("serving: {replicas: 3, gateway: infra/public}\n");
	struct render_serving sv = { .name = "fashion", .canary = 1, .replicas = 1, .canary_percent = 20, .route = 1,
	                             .model = { "fashion-checkpoints", "fashion.dlk", NULL, NULL, "job fashion", "cd34", NULL, 0.9 } };
	cJSON *objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK_MSG(objs != NULL, "a canary with a route renders: %s", err.msg);
	char *k = kinds(objs);
	CHECK_STR(k, "ConfigMap/fashion-serving-canary,Service/fashion-serving,Service/fashion-serving-canary,"
	             "Deployment/fashion-serving-canary,HTTPRoute/fashion-serving");
	free(k);
	const cJSON *r = by_kind(objs, "HTTPRoute");
	CHECK_STR(jstr(r, "apiVersion"), "gateway.networking.k8s.io/v1");
	CHECK_STR(jstr(r, "spec.parentRefs.0.name"), "public");
	CHECK_STR(jstr(r, "spec.parentRefs.0.namespace"), "infra");
	CHECK_STR(jstr(r, "spec.rules.0.backendRefs.0.name"), "fashion-serving-stable");
	CHECK(jnum(r, "spec.rules.0.backendRefs.0.weight") == 80);
	CHECK_STR(jstr(r, "spec.rules.0.backendRefs.1.name"), "fashion-serving-canary");
	CHECK(jnum(r, "spec.rules.0.backendRefs.1.weight") == 20);
	CHECK_STR(jkey(jget(objs->child->next->next, "spec.selector"), "dlk.dev/track"), "canary");
	save_json("route", objs);
	cJSON_Delete(objs);

	/* the stable track: its Service and all the weight; without route (not served), neither */
	sv.canary = 0;
	sv.replicas = 3;
	sv.canary_percent = 0;
	objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	r = by_kind(objs, "HTTPRoute");
	CHECK(r && cJSON_GetArraySize(jget(r, "spec.rules.0.backendRefs")) == 1 && jnum(r, "spec.rules.0.backendRefs.0.weight") == 100);
	CHECK_STR(jstr(r, "spec.parentRefs.0.namespace"), "infra");
	cJSON_Delete(objs);
	sv.route = 0;
	objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK(objs && !by_kind(objs, "HTTPRoute") && cJSON_GetArraySize(objs) == 4);
	cJSON_Delete(objs);
	project_free(p);
}

static void test_override_and_errors(void)
{
	struct dlk_project *p = load("");
	struct render_serving sv = { .name = "fashion", .canary = 0, .replicas = 1, .canary_percent = 0, .model = { "c", "fashion.dlk", NULL, NULL, "job fashion", "", NULL, -1 } };
	char dir[] = "/tmp/dlk-test-render-serving.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char *tdir = xasprintf("%s/templates", dir), *f = xasprintf("%s/serving-service.yaml", tdir);
	char *proj = xasprintf("%s/dlk.yaml", dir);
	mkdir(tdir, 0777);
	FILE *fp = fopen(f, "w");
	fputs("apiVersion: v1\nkind: Service\nmetadata:\n  name: {{service}}\n  namespace: {{namespace}}\n"
	      "spec:\n  type: NodePort\n  selector:\n    dlk.dev/serve: {{name}}\n  ports:\n  - port: {{port}}\n", fp);
	fclose(fp);
	cJSON *objs = render_serving_project(p, proj, NULL, NULL, &sv, &err);
	CHECK_MSG(objs != NULL, "the project's template overrides the built-in: %s", err.msg);
	CHECK_STR(jstr(by_kind(objs, "Service"), "spec.type"), "NodePort");
	cJSON_Delete(objs);
	unlink(f);
	rmdir(tdir);
	rmdir(dir);
	free(f);
	free(tdir);
	free(proj);

	/* a name whose canary Deployment would be too long */
	sv.name = "a-very-long-model-name-that-goes-on-and-on-and-on-x";
	objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK(!objs && err.code == DLK_EXIT_CONFIG);
	CHECK_CONTAINS(err.msg, "too long for a served model's name");
	/* a claim and a URL at once */
	sv.name = "fashion";
	sv.model.url = "https://x/y.dlk";
	objs = render_serving_project(p, "/nonexistent/dlk.yaml", NULL, NULL, &sv, &err);
	CHECK(!objs && err.code == DLK_EXIT_USAGE);
	project_free(p);
}

int main(void)
{
	test_cpu_claim();
	test_gpu_url_hpa();
	test_canary();
	test_route();
	test_override_and_errors();
	return CHECK_DONE();
}
