/* Promoting a served model (lib/jobs/promote.c): the promotion gate's policy against a run's test
 * metrics, the verdict it records, and the canary's objects rewritten as the stable track's. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/jobs/promote.h"
#include "lib/jobs/servestate.h"

static const char *verdict(const cJSON *doc, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "verdict"), key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_gate(void)
{
	char *classes[] = { "shirt", "boot", "bag" };
	double recall[] = { 0.70, 0.95, 0.99 };
	struct report_run r = REPORT_RUN_INIT;
	cJSON *doc = cJSON_CreateObject();
	char *why = (char *)"unset";

	r.have_test = 1;
	r.test_accuracy = 0.88;
	r.n_classes = 3;
	r.classes = classes;
	r.recall = recall;

	/* no minimums: anything passes, and the page says which minimums it passed */
	CHECK(dlk_gate_judge(doc, &r, 0, 0, 0, &why) == DLK_GATE_PASSED && !why);
	CHECK_STR(verdict(doc, "decision"), "promoted");
	CHECK(dlk_gate_judge(doc, &r, 0.85, 0.5, 0, &why) == DLK_GATE_PASSED && !why);
	CHECK_STR(verdict(doc, "reason"), "passed the gate: minimum test accuracy 85.00%, minimum class recall 50.00%");

	/* below the accuracy: refused, the numbers said */
	CHECK(dlk_gate_judge(doc, &r, 0.9, 0, 0, &why) == DLK_GATE_REFUSED);
	CHECK_STR(why, "its test accuracy 88.00% is below the minimum 90.00%");
	CHECK_STR(verdict(doc, "decision"), "refused");
	free(why);
	/* each class below the recall is named, after the accuracy */
	CHECK(dlk_gate_judge(doc, &r, 0.9, 0.96, 0, &why) == DLK_GATE_REFUSED);
	CHECK_STR(why, "its test accuracy 88.00% is below the minimum 90.00%; class recall below the minimum 96.00%: "
	               "shirt 70.00%, boot 95.00%");
	free(why);
	/* --force deploys it, and the record says so */
	CHECK(dlk_gate_judge(doc, &r, 0, 0.8, 1, &why) == DLK_GATE_FORCED);
	CHECK_STR(why, "class recall below the minimum 80.00%: shirt 70.00%");
	CHECK_STR(verdict(doc, "decision"), "promoted (forced)");
	CHECK_STR(verdict(doc, "reason"), "deployed with --force although class recall below the minimum 80.00%: shirt 70.00%");
	free(why);

	/* a minimum the run cannot be measured against fails it */
	r.recall = NULL;
	CHECK(dlk_gate_judge(doc, &r, 0, 0.5, 0, &why) == DLK_GATE_REFUSED);
	CHECK_STR(why, "it has no per-class recall");
	free(why);
	r.have_test = 0;
	CHECK(dlk_gate_judge(NULL, &r, 0.5, 0, 0, &why) == DLK_GATE_REFUSED);
	CHECK_STR(why, "it has no recorded test metrics");
	free(why);
	CHECK(dlk_gate_judge(NULL, &r, 0, 0, 0, &why) == DLK_GATE_PASSED && !why);
	cJSON_Delete(doc);
}

static const char *path_str(const cJSON *o, const char *const *keys)
{
	for (; *keys; keys++)
		o = cJSON_GetObjectItemCaseSensitive(o, *keys);
	return cJSON_IsString(o) ? o->valuestring : NULL;
}

static void test_as_stable(void)
{
	cJSON *canary = cJSON_Parse(
		"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"status\":{\"replicas\":1},"
		"\"metadata\":{\"name\":\"m-serving-canary\",\"namespace\":\"ml\",\"uid\":\"u1\",\"resourceVersion\":\"7\","
		"\"labels\":{\"dlk.dev/serve\":\"m\",\"dlk.dev/track\":\"canary\"},"
		"\"annotations\":{\"dlk.dev/canary-percent\":\"20\",\"dlk.dev/model-sha256\":\"abc\"}},"
		"\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels\":{\"dlk.dev/track\":\"canary\"}},"
		"\"template\":{\"metadata\":{\"labels\":{\"dlk.dev/track\":\"canary\"}},"
		"\"spec\":{\"volumes\":[{\"name\":\"spec\",\"configMap\":{\"name\":\"m-serving-canary\"}},{\"name\":\"tmp\",\"emptyDir\":{}}]}}}}");
	cJSON *stable = cJSON_Parse("{\"spec\":{\"replicas\":3}}");
	cJSON *o = dlk_serve_as_stable(canary, "m-serving", stable);

	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "name", NULL }), "m-serving");
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "namespace", NULL }), "ml");
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "labels", DLK_LABEL_TRACK, NULL }), "stable");
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "labels", DLK_LABEL_SERVE, NULL }), "m");
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "annotations", DLK_ANN_CANARY_PERCENT, NULL }), "0");
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "annotations", DLK_ANN_MODEL_SHA256, NULL }), "abc");
	CHECK_STR(path_str(o, (const char *const[]){ "spec", "selector", "matchLabels", DLK_LABEL_TRACK, NULL }), "stable");
	CHECK_STR(path_str(o, (const char *const[]){ "spec", "template", "metadata", "labels", DLK_LABEL_TRACK, NULL }),
	          "stable");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(spec, "replicas")) == 3);
	const cJSON *vols = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec, "template"), "spec"), "volumes");
	CHECK_STR(path_str(cJSON_GetArrayItem(vols, 0), (const char *const[]){ "configMap", "name", NULL }), "m-serving");
	CHECK(!cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(vols, 1), "configMap"));
	/* what the server owns does not go back to it */
	CHECK(!cJSON_GetObjectItemCaseSensitive(o, "status"));
	CHECK(!path_str(o, (const char *const[]){ "metadata", "uid", NULL }));
	CHECK(!path_str(o, (const char *const[]){ "metadata", "resourceVersion", NULL }));
	cJSON_Delete(o);

	/* a stable track without a replica count (an autoscaler's): the count is left to it */
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(stable, "spec"), "replicas");
	o = dlk_serve_as_stable(canary, "m-serving", stable);
	CHECK(!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "spec"), "replicas"));
	cJSON_Delete(o);
	/* the ConfigMap: renamed and relabelled, its data kept */
	cJSON *cm = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"m-serving-canary\","
	                        "\"labels\":{\"dlk.dev/track\":\"canary\"}},\"data\":{\"dlk.yaml\":\"name: m\\n\"}}");
	o = dlk_serve_as_stable(cm, "m-serving", NULL);
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "name", NULL }), "m-serving");
	CHECK_STR(path_str(o, (const char *const[]){ "metadata", "labels", DLK_LABEL_TRACK, NULL }), "stable");
	CHECK_STR(path_str(o, (const char *const[]){ "data", "dlk.yaml", NULL }), "name: m\n");
	cJSON_Delete(o);
	cJSON_Delete(cm);
	cJSON_Delete(canary);
	cJSON_Delete(stable);
}

int main(void)
{
	test_gate();
	test_as_stable();
	return CHECK_DONE();
}
