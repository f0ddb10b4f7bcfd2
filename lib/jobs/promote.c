/* The promotion gate's policy and the canary -> stable rewrite (see promote.h). */
#include "lib/jobs/promote.h"
#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

enum dlk_gate_verdict dlk_gate_judge(cJSON *doc, const struct report_run *r, double min_acc, double min_recall,
                                     int force, char **why)
{
	return dlk_gate_judge_rules(doc, r, min_acc, min_recall, NULL, 0, force, why);
}

/* the run's test metric `name`; -1 when it has none */
static int run_metric(const struct report_run *r, const char *name, double *v)
{
	const cJSON *m;

	if (!strcmp(name, "accuracy") && r->have_test) {
		*v = r->test_accuracy;
		return 0;
	}
	if (!strcmp(name, "loss") && (r->have_test || r->task_metrics)) {
		*v = r->test_loss;
		return 0;
	}
	m = r->task_metrics ? cJSON_GetObjectItemCaseSensitive(r->task_metrics, name) : NULL;
	/* a program's own metrics (metrics.program): what serving.gate names of a serving.program's run */
	if (!cJSON_IsNumber(m) && r->program_metrics)
		m = cJSON_GetObjectItemCaseSensitive(r->program_metrics, name);
	if (!cJSON_IsNumber(m))
		return -1;
	*v = m->valuedouble;
	return 0;
}

/* the rules that fail, appended to b */
static void judge_rules(struct dlk_buf *b, const struct report_run *r, const struct dlk_gate_rule *rules, int n)
{
	for (int i = 0; i < n; i++) {
		const struct dlk_gate_rule *g = &rules[i];
		double v;
		if (!g->metric)
			continue;
		if (run_metric(r, g->metric, &v)) {
			dlk_buf_addf(b, "%sit has no recorded test metric '%s'", b->len ? "; " : "", g->metric);
			continue;
		}
		if (g->has_min && !(v >= g->min))
			dlk_buf_addf(b, "%sits test %s %.4f is below the minimum %g", b->len ? "; " : "", g->metric, v, g->min);
		if (g->has_max && !(v <= g->max))
			dlk_buf_addf(b, "%sits test %s %.4f is above the maximum %g", b->len ? "; " : "", g->metric, v, g->max);
	}
}

enum dlk_gate_verdict dlk_gate_judge_rules(cJSON *doc, const struct report_run *r, double min_acc, double min_recall,
                                           const struct dlk_gate_rule *rules, int n_rules, int force, char **why)
{
	struct dlk_buf b = DLK_BUF_INIT;
	enum dlk_gate_verdict v;
	char *reason;

	/* a minimum the run cannot be measured against is failed, not skipped: the gate exists to
	 * keep an unmeasured model out */
	if ((min_acc > 0 || min_recall > 0) && !r->have_test) {
		dlk_buf_addf(&b, "it has no recorded test metrics");
	} else {
		if (r->have_test && r->test_accuracy < min_acc)
			dlk_buf_addf(&b, "its test accuracy %.2f%% is below the minimum %.2f%%", 100 * r->test_accuracy,
			             100 * min_acc);
		if (min_recall > 0 && !r->recall) {
			dlk_buf_addf(&b, "%sit has no per-class recall", b.len ? "; " : "");
		} else if (min_recall > 0) {
			int bad = 0;
			for (int i = 0; i < r->n_classes; i++)
				if (r->recall[i] < min_recall) {
					if (!bad)
						dlk_buf_addf(&b, "%sclass recall below the minimum %.2f%%:", b.len ? "; " : "",
						             100 * min_recall);
					dlk_buf_addf(&b, "%s %.60s %.2f%%", bad ? "," : "", r->classes[i], 100 * r->recall[i]);
					bad++;
				}
		}
	}
	judge_rules(&b, r, rules, n_rules);
	if (b.len) {
		v = force ? DLK_GATE_FORCED : DLK_GATE_REFUSED;
		reason = xasprintf("%s %s", force ? "deployed with --force although" : "refused:", b.data);
		if (doc)
			report_run_set_verdict(doc, force ? "promoted (forced)" : "refused", reason);
		*why = dlk_buf_detach(&b, NULL);
	} else {
		v = DLK_GATE_PASSED;
		reason = xasprintf("passed the gate: minimum test accuracy %.2f%%, minimum class recall %.2f%%%s",
		                   100 * min_acc, 100 * min_recall, n_rules ? ", and serving.gate's rules" : "");
		if (doc)
			report_run_set_verdict(doc, "promoted", reason);
		*why = NULL;
	}
	free(reason);
	dlk_buf_release(&b);
	return v;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

cJSON *dlk_serve_applyable(const cJSON *obj)
{
	cJSON *o = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(o, "metadata");
	const cJSON *m = get(obj, "metadata");

	cJSON_AddStringToObject(o, "apiVersion", str(obj, "apiVersion") ? str(obj, "apiVersion") : "apps/v1");
	cJSON_AddStringToObject(o, "kind", str(obj, "kind") ? str(obj, "kind") : "Deployment");
	cJSON_AddStringToObject(meta, "name", kube_meta(obj, "name") ? kube_meta(obj, "name") : "");
	if (kube_meta(obj, "namespace"))
		cJSON_AddStringToObject(meta, "namespace", kube_meta(obj, "namespace"));
	if (get(m, "labels"))
		cJSON_AddItemToObject(meta, "labels", cJSON_Duplicate(get(m, "labels"), 1));
	if (get(m, "annotations"))
		cJSON_AddItemToObject(meta, "annotations", cJSON_Duplicate(get(m, "annotations"), 1));
	if (get(obj, "spec"))
		cJSON_AddItemToObject(o, "spec", cJSON_Duplicate(get(obj, "spec"), 1));
	if (get(obj, "data"))
		cJSON_AddItemToObject(o, "data", cJSON_Duplicate(get(obj, "data"), 1));
	return o;
}

/* sets key of o to the string v when o has it (a label the template did not set stays unset) */
static void replace_str(cJSON *o, const char *key, const char *v)
{
	if (o && cJSON_GetObjectItemCaseSensitive(o, key))
		cJSON_ReplaceItemInObjectCaseSensitive(o, key, cJSON_CreateString(v));
}

cJSON *dlk_serve_as_stable(const cJSON *canary, const char *stable_name, const cJSON *stable)
{
	cJSON *o = dlk_serve_applyable(canary);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");

	cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateString(stable_name));
	replace_str(cJSON_GetObjectItemCaseSensitive(meta, "labels"), DLK_LABEL_TRACK, "stable");
	replace_str(cJSON_GetObjectItemCaseSensitive(meta, "annotations"), DLK_ANN_CANARY_PERCENT, "0");
	if (spec && stable) {
		const cJSON *sr = get(get(stable, "spec"), "replicas");
		if (cJSON_IsNumber(sr))
			cJSON_ReplaceItemInObjectCaseSensitive(spec, "replicas", cJSON_CreateNumber(sr->valuedouble));
		else
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "replicas");
		replace_str(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec, "selector"), "matchLabels"),
		            DLK_LABEL_TRACK, "stable");
		cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(spec, "template");
		replace_str(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tmpl, "metadata"), "labels"),
		            DLK_LABEL_TRACK, "stable");
		cJSON *v;
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tmpl, "spec"), "volumes")) {
			cJSON *cm = cJSON_GetObjectItemCaseSensitive(v, "configMap");
			replace_str(cm, "name", stable_name);
		}
	}
	return o;
}
