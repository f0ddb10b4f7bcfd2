/* Promoting a served model: the promotion gate's policy (does a trained run's test metrics meet
 * serving.min_accuracy and serving.min_class_recall) and the canary -> stable rewrite that
 * `dlk serve NAME --promote` applies. Judgments only: the command prints and applies. */
#ifndef DLK_JOBS_PROMOTE_H
#define DLK_JOBS_PROMOTE_H

#include <cJSON.h>

#include "lib/project/project.h"
#include "lib/report/report.h"

enum dlk_gate_verdict { DLK_GATE_PASSED, DLK_GATE_FORCED, DLK_GATE_REFUSED };

/* Judges the run r (a loaded run document) against the minimums (0: none): its test accuracy
 * below min_acc, any class's recall below min_recall, or no test metrics (no per-class recall)
 * when a minimum asks for them, refuse it; force turns a refusal into DLK_GATE_FORCED. The
 * verdict and its reason are recorded on doc (report_run_set_verdict; NULL: not recorded). *why
 * is NULL for DLK_GATE_PASSED, else what failed ("its test accuracy 80.00% is below the minimum
 * 90.00%; ..."), the caller's to free. */
enum dlk_gate_verdict dlk_gate_judge(cJSON *doc, const struct report_run *r, double min_acc, double min_recall,
                                     int force, char **why);
/* The same with serving.gate's rules besides: each names a test metric of the run (metrics.test
 * of a run document, "accuracy" and "loss" too) that must be at least min and/or at most max; a
 * metric the run does not have fails its rule ("its test r2 0.7012 is below the minimum 0.8",
 * "it has no recorded test metric 'psnr'"). */
enum dlk_gate_verdict dlk_gate_judge_rules(cJSON *doc, const struct report_run *r, double min_acc, double min_recall,
                                           const struct dlk_gate_rule *rules, int n_rules, int force, char **why);

/* What server-side apply takes back of an object the server returned: identity, labels,
 * annotations, spec and data (no status, uid, resourceVersion or managedFields). A new tree. */
cJSON *dlk_serve_applyable(const cJSON *obj);

/* The canary's Deployment or ConfigMap as the stable track's: named stable_name, labelled (and
 * selecting) track stable, canary percent 0, its ConfigMap volumes pointing at stable_name, and
 * the replica count of stable (the stable track's Deployment as the server has it; NULL: the
 * canary's spec is kept as it is). A new tree. */
cJSON *dlk_serve_as_stable(const cJSON *canary, const char *stable_name, const cJSON *stable);

#endif
