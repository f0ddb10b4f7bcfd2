/* dlk predict --workers N submitting its Job (lib/jobs/submit.h) against the test API server: the
 * objects rendered from dlk_predict_job_yaml applied in order, the run-history ConfigMap created
 * once and never replaced, a submission again replacing the earlier Job, and a refused object
 * named. */
#include "tests/unit/check.h"
#include "tests/unit/test_kube_server.h"
#include "lib/jobs/submit.h"
#include "lib/kube/api.h"
#include "lib/kube/client_impl.h"
#include "lib/project/project.h"
#include "lib/render/render.h"
#include "lib/serve/predict_workers.h"

static struct kt_server srv;

static struct kube_client *client(struct dlk_err *err)
{
	struct kube_config cfg = KUBE_CONFIG_INIT;
	struct kube_config_opts o = KUBE_CONFIG_OPTS_INIT;
	struct kube_client *c;

	kt_write(kt_path("kc"), "clusters:\n- name: c\n  cluster: {server: '%s', certificate-authority: certs/ca.crt}\n"
	         "users:\n- name: u\n  user: {token: test-token}\n"
	         "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", srv.url);
	o.kubeconfig = kt_path("kc");
	if (kube_config_load(&o, &cfg, err) < 0)
		return NULL;
	c = kube_client_new(&cfg, NULL, err);
	if (c)
		c->o.backoff_ms = 20;
	return c;
}

/* the objects of predict's Job of 2 workers, as the command renders them */
static cJSON *render_job(struct dlk_err *err)
{
	struct dlk_predict_job j = { .job = "preds-predict", .bundle_id = "1111111111111111111111111111111111111111111111111111111111111111",
		                     .store = "s3://b/p", .data = "in@v1", .tag = "preds@v1", .batch = 256, .threads = 1,
		                     .workers = 2, .cpu = "1", .memory = "1Gi" };
	size_t len;
	char *y = dlk_predict_job_yaml(&j, &len);
	struct dlk_project *p = project_load_mem(y, len, j.job, NULL, 0, err);
	cJSON *objs = p ? render_train_project(p, kt_path("dlk.yaml"), NULL, "ml", err) : NULL;

	project_free(p);
	free(y);
	return objs;
}

/* counts the objects deleted */
static void on_deleted(void *ud, const char *kind, const char *name)
{
	(void)kind;
	(void)name;
	++*(int *)ud;
}

/* the object of kind named name*suffix in objs */
static cJSON *find(cJSON *objs, const char *kind, const char *suffix)
{
	cJSON *o;

	cJSON_ArrayForEach(o, objs) {
		const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind")), *n = kube_meta(o, "name");
		size_t nl = n ? strlen(n) : 0, sl = strlen(suffix);
		if (k && !strcmp(k, kind) && nl >= sl && !strcmp(n + nl - sl, suffix))
			return o;
	}
	return NULL;
}

int main(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *c;
	cJSON *objs, *applied, *got = NULL, *runs;
	int n = 0, told = 0, rc;

	kt_certs();
	if (kt_server_start(&srv, NULL) < 0) {
		printf("not ok - the test API server starts (node tests/apiserver/server.js)\n");
		return 1;
	}
	c = client(&err);
	CHECK_MSG(c != NULL, "a client (%s)", err.msg);
	objs = render_job(&err);
	CHECK_MSG(objs != NULL, "the Job's objects render (%s)", err.msg);
	if (!c || !objs)
		return CHECK_DONE();
	runs = find(objs, "ConfigMap", "-runs");
	CHECK(runs != NULL && find(objs, "Job", "preds-predict") != NULL);

	/* nothing there yet: nothing replaced */
	CHECK(dlk_job_replace(c, "ml", "preds-predict", 30, on_deleted, &told, &n, &err) == 0 && n == 0);
	applied = cJSON_CreateArray();
	CHECK_MSG(dlk_submit_objects(c, objs, applied, &err) == 0, "submitted (%s)", err.msg);
	/* every object but the run history applied, in order; the run history created */
	CHECK(cJSON_GetArraySize(applied) == cJSON_GetArraySize(objs) - 1);
	CHECK(kube_get(c, "Job", "ml", "preds-predict", &got, &err) == 0);
	cJSON_Delete(got);
	got = NULL;
	CHECK(kube_get(c, "ConfigMap", "ml", kube_meta(runs, "name"), &got, &err) == 0);
	cJSON_Delete(got);
	got = NULL;
	cJSON_Delete(applied);

	/* the run history holds what the runs wrote: submitting again does not replace it */
	{
		cJSON *cm = cJSON_Duplicate(runs, 1), *data = cJSON_CreateObject();
		cJSON_AddStringToObject(data, "runs.jsonl", "{\"run\": 1}\n");
		cJSON_DeleteItemFromObject(cm, "data");
		cJSON_AddItemToObject(cm, "data", data);
		cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(cm, "metadata"), "annotations");
		CHECK(kube_apply(c, cm, NULL, &err) == 0);
		cJSON_Delete(cm);
	}
	/* the earlier Job goes first, then the objects again */
	rc = dlk_job_replace(c, "ml", "preds-predict", 30, on_deleted, &told, &n, &err);
	CHECK_MSG(rc == 1 && n >= 1 && told == n, "the earlier job replaced (%d, %d objects: %s)", rc, n, err.msg);
	CHECK(kube_get(c, "Job", "ml", "preds-predict", &got, &err) < 0 && err.code == DLK_EXIT_NOTFOUND);
	dlk_err_clear(&err);
	CHECK_MSG(dlk_submit_objects(c, objs, NULL, &err) == 0, "submitted again (%s)", err.msg);
	CHECK(kube_get(c, "ConfigMap", "ml", kube_meta(runs, "name"), &got, &err) == 0);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(got, "data"),
	                                                                  "runs.jsonl")),
	          "{\"run\": 1}\n");
	cJSON_Delete(got);
	got = NULL;

	/* an object the server refuses is named, kind and name */
	{
		cJSON *bad = cJSON_Parse("[{\"apiVersion\":\"v1\",\"kind\":\"NoSuchKind\",\"metadata\":{\"name\":\"x\",\"namespace\":\"ml\"}}]");
		CHECK(dlk_submit_objects(c, bad, NULL, &err) < 0);
		CHECK_CONTAINS(err.msg, "cannot submit NoSuchKind 'x'");
		cJSON_Delete(bad);
	}
	cJSON_Delete(objs);
	kube_client_free(c);
	kt_server_stop(&srv);
	return CHECK_DONE();
}
