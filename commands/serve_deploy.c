/* dlk serve NAME: the model of training job NAME (its bundle on the job's claim, its metrics
 * from the run document the job published), or a bundle at a URL pinned by its sha256, goes
 * through the promotion gate, then is rendered (templates/serving-*.yaml) and applied. With
 * --canary it runs beside the served model as a second track behind the same Service, its share
 * of the traffic its share of the replicas; --promote makes it the served model, --rollback
 * removes it. --wait waits for the rollout as `kubectl rollout status` does and names the pod
 * and the reason when it fails. */
#include "commands/serve_deploy.h"
#include "commands/cluster.h"
#include "commands/ui.h"
#include "lib/data/fetch.h"
#include "lib/jobs/jobrun.h"
#include "lib/jobs/promote.h"
#include "lib/jobs/servestate.h"
#include "lib/kube/api.h"
#include "lib/project/project.h"
#include "lib/render/render.h"
#include "lib/report/report.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/duration.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#define ROLLOUT_WAIT_S 600.0 /* --wait without --timeout: the Deployment's progress deadline */
#define MAX_MATRIX_SHOWN 20  /* classes beyond which the gate prints the table without the matrix */

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_sha256(const char *s)
{
	size_t i;
	for (i = 0; s[i]; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return 0;
	return i == 64;
}

/* A DNS-1035 label (a Service's name is NAME-serving); render checks the length. */
static int is_model_name(const char *s)
{
	size_t n = strlen(s);
	if (!n || !islower((unsigned char)s[0]) || !(islower((unsigned char)s[n - 1]) || isdigit((unsigned char)s[n - 1])))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

/* ---- where the model comes from ---- */

struct model_src {
	char *claim, *path;     /* the job's claim and the bundle on it */
	char *url, *pin;        /* or a URL and its pin */
	char *revision;         /* the training Job's uid: a retrained job is a new revision */
	char source[600];       /* what status shows */
	cJSON *run;             /* the run document the gate reads */
};

static void model_src_release(struct model_src *m)
{
	free(m->claim);
	free(m->path);
	free(m->url);
	free(m->pin);
	free(m->revision);
	cJSON_Delete(m->run);
}

/* The claim a training Job keeps its bundle on: the volume its worker mounts as "checkpoints". */
static int job_claim(const cJSON *job, char **claim, struct dlk_err *err, const char *name)
{
	const cJSON *pspec = get(get(get(job, "spec"), "template"), "spec"), *v;

	cJSON_ArrayForEach(v, get(pspec, "volumes")) {
		const char *vn = str(v, "name"), *cn = str(get(v, "persistentVolumeClaim"), "claimName");
		if (vn && cn && !strcmp(vn, "checkpoints")) {
			*claim = xstrdup(cn);
			return 0;
		}
	}
	dlk_errf(err, DLK_EXIT_NOTFOUND, "job '%s' kept its bundle inside its pod: it has no checkpoint claim", name);
	dlk_err_hint(err, "train with storage.size (or storage.claim) set in dlk.yaml so the bundle outlives the pod, "
	             "or deploy a bundle from a URL: --model https://.../%s.dlk --sha256 HEX", name);
	return -1;
}

static int job_succeeded(const cJSON *job)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, get(get(job, "status"), "conditions")) {
		const char *t = str(c, "type"), *s = str(c, "status");
		if (t && s && !strcmp(t, "Complete") && !strcmp(s, "True"))
			return 1;
	}
	return 0;
}

static int model_from_job(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
                          struct model_src *m, struct dlk_err *err)
{
	cJSON *job = NULL;
	int rc = -1;

	if (kube_get(c, "Job", ns, name, &job, err) < 0) {
		if (err->code == DLK_EXIT_NOTFOUND) {
			dlk_errf(err, DLK_EXIT_NOTFOUND, "no training job '%s' in namespace '%s': no bundle to deploy", name, ns);
			dlk_err_hint(err, "train it first ('dlk train --wait'), or deploy a bundle from a URL: "
			             "'dlk serve %s --model https://.../%s.dlk --sha256 HEX'", name, name);
		}
		goto out;
	}
	if (!job_succeeded(job)) {
		dlk_errf(err, DLK_EXIT_NOTFOUND, "job '%s' has not succeeded (yet): its bundle is not written", name);
		dlk_err_hint(err, "see 'dlk status%s %s'; 'dlk train --wait' waits for a job to end", dlk_ns_flag(ctx, c, ns), name);
		goto out;
	}
	if (job_claim(job, &m->claim, err, name))
		goto out;
	m->revision = xstrdup(kube_meta(job, "uid") ? kube_meta(job, "uid") : "");
	/* the worker writes <storage.mount>/<name>.dlk: the claim's root */
	m->path = xasprintf("%s.dlk", name);
	snprintf(m->source, sizeof(m->source), "job %s", name);
	m->run = dlk_job_run_doc(c, ns, name, dlk_ns_flag(ctx, c, ns), err);
	if (!m->run)
		goto out;
	rc = 0;
out:
	cJSON_Delete(job);
	return rc;
}

static int show_fetch(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct dlk_progress *p = vctx;
	if (total)
		dlk_progress_draw(p, 0, "fetching %s: %llu/%llu KiB", what, done >> 10, total >> 10);
	else
		dlk_progress_draw(p, 0, "fetching %s: %llu KiB", what, done >> 10);
	return 0;
}

/* Fetches the bundle here too (into data.cache_dir, verified against the pin): the gate reads
 * its metrics, and a bundle that does not match its pin never reaches the cluster. */
static int model_from_url(const struct dlk_ctx *ctx, const struct dlk_project *spec, const struct dlk_serve_cli *cli,
                          struct model_src *m, struct dlk_err *err)
{
	struct dlk_source src = { (char *)cli->model, (char *)cli->sha256 };
	struct dlk_data_opts o;
	struct dlk_fetched f = DLK_FETCHED_INIT;
	struct dlk_progress p = { ctx, 0, 0 };
	char *dir = dlk_dir_of(ctx->file);
	int rc = -1;

	if (strncmp(cli->model, "https://", 8) && strncmp(cli->model, "http://", 7)) {
		dlk_errf(err, DLK_EXIT_USAGE, "--model '%s': the pods fetch the bundle, so it needs an https:// URL", cli->model);
		goto out;
	}
	if (!cli->sha256) {
		dlk_errf(err, DLK_EXIT_USAGE, "--model needs --sha256: the digest of the bundle file the pods verify");
		dlk_err_hint(err, "sha256sum %s.dlk", spec->name);
		goto out;
	}
	memset(&o, 0, sizeof(o));
	o.base_dir = dir;
	o.progress = show_fetch;
	o.progress_ctx = &p;
	if (dlk_fetch(&src, &spec->data, &o, &f, err)) {
		dlk_progress_clear(&p);
		dlk_err_prefix(err, "--model");
		goto out;
	}
	dlk_progress_clear(&p);
	m->url = xstrdup(cli->model);
	m->pin = xstrdup(cli->sha256);
	snprintf(m->source, sizeof(m->source), "%.590s", cli->model);
	m->run = report_run_from_bundle(f.path, err);
	if (!m->run)
		goto out;
	rc = 0;
out:
	dlk_fetched_release(&f);
	free(dir);
	return rc;
}

/* serving.program: the user's own server, gated on the run of its training job NAME (the program's
 * Job carries the run document its rank 0 published, as a dlk run's does). No such run: with no
 * minimum set, the server deploys ungated; with one, the gate refuses (exit 9), as it refuses an
 * unmeasured bundle, unless --force. Returns 0 with m->run set or left NULL (deploy ungated), -1. */
static int gated(const struct dlk_serving *sv, double min_acc)
{
	return min_acc > 0 || sv->min_class_recall > 0 || sv->n_gate > 0 || sv->max_val_loss > 0;
}

static int model_from_program(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
                              const struct dlk_serving *sv, double min_acc, int force, struct model_src *m,
                              struct dlk_err *err)
{
	cJSON *job = NULL;
	const char *nsf = dlk_ns_flag(ctx, c, ns);
	char *why = NULL;
	int rc = -1;

	if (kube_get(c, "Job", ns, name, &job, err) < 0) {
		if (err->code != DLK_EXIT_NOTFOUND)
			goto out;
		why = xasprintf("there is no training job '%s' in namespace '%s' whose run it could judge", name, ns);
	} else {
		m->run = dlk_job_run_doc(c, ns, name, nsf, err);
		if (!m->run && err->code != DLK_EXIT_NOTFOUND)
			goto out;
		if (!m->run)
			why = xasprintf("training job '%s' has published no run document%s", name,
			                job_succeeded(job) ? "" : " (it has not succeeded yet)");
		else {
			m->revision = xstrdup(kube_meta(job, "uid") ? kube_meta(job, "uid") : "");
			snprintf(m->source, sizeof(m->source), "job %s", name);
		}
	}
	dlk_err_clear(err);
	if (m->run) {
		rc = 0;
		goto out;
	}
	if (!gated(sv, min_acc)) {
		if (!ctx->quiet)
			fprintf(stderr, "server '%s': no gate (serving sets no minimum) and %s\n", dlk_visible(name), why);
		rc = 0;
		goto out;
	}
	if (force) {
		dlk_warn(ctx, "deploying '%s' without its gate although %s (--force)", name, why);
		rc = 0;
		goto out;
	}
	dlk_errf(err, DLK_EXIT_REFUSED, "refusing to deploy '%s': serving sets a gate, but %s", name, why);
	dlk_err_hint(err, "train it first ('dlk train --wait'; the program reports its metrics with DLK-PROGRESS lines, "
	             "docs/program.md), or deploy it without the gate: 'dlk serve%s %s --force'", nsf, name);
out:
	free(why);
	cJSON_Delete(job);
	return rc;
}

/* ---- the promotion gate ---- */

/* Prints the metrics and the confusion matrix (on stderr: stdout is for objects and names), then
 * says what the gate (lib/jobs/promote.h) decided. Returns 0 to deploy, -1 with err (DLK_EXIT_REFUSED) to refuse. */
static int gate(const struct dlk_ctx *ctx, const char *name, struct model_src *m, double min_acc,
                double min_recall, const struct dlk_serving *sv, int force, double *accuracy, struct dlk_err *err)
{
	struct report_run r = REPORT_RUN_INIT;
	char who[700];
	int rc = -1, k, quiet = ctx->quiet;
	char *why = NULL;

	*accuracy = -1;
	snprintf(who, sizeof(who), "the run document of %s", m->source);
	if (report_run_load(m->run, who, &r, err))
		return -1;
	k = r.n_classes;
	if (!quiet) {
		fprintf(stderr, "model '%s' from %s\n", dlk_visible(name), dlk_visible(m->source));
		if (r.have_test) {
			fprintf(stderr, "  test accuracy %.2f%% on %lld samples, test loss %.4f\n", 100 * r.test_accuracy,
			        r.test_samples, r.test_loss);
		} else if (r.task_metrics) {
			char line[512];
			report_metrics_line(get(m->run, "metrics"), line, sizeof(line));
			fprintf(stderr, "  test %s on %lld samples, test loss %.4f\n", line, r.test_samples, r.test_loss);
		} else
			fprintf(stderr, "  no test metrics recorded\n");
		const char *w = str(get(m->run, "weights"), "sha256");
		if (w)
			fprintf(stderr, "  weights sha256 %.12s\n", dlk_visible(w));
		if (r.recall && k > 0) {
			int wname = 5;
			for (int i = 0; i < k; i++)
				if ((int)strlen(r.classes[i]) > wname)
					wname = (int)strlen(r.classes[i]) > 24 ? 24 : (int)strlen(r.classes[i]);
			fprintf(stderr, "  %-*s %9s %9s", wname, "class", "precision", "recall");
			if (r.confusion && k <= MAX_MATRIX_SHOWN) {
				fprintf(stderr, "   predicted:");
				for (int j = 0; j < k; j++)
					fprintf(stderr, " %6d", j);
			}
			fprintf(stderr, "\n");
			for (int i = 0; i < k; i++) {
				/* a label from the bundle: shown, not obeyed, cut at a character's end */
				const char *label = dlk_visible(r.classes[i]);
				fprintf(stderr, "  %-*.*s %8.2f%% %8.2f%%", wname, (int)dlk_utf8_cut(label, strlen(label), (size_t)wname),
				        label,
				        r.precision ? 100 * r.precision[i] : NAN, 100 * r.recall[i]);
				if (r.confusion && k <= MAX_MATRIX_SHOWN) {
					fprintf(stderr, "   %9d:", i);
					for (int j = 0; j < k; j++)
						fprintf(stderr, " %6lld", r.confusion[(size_t)i * (size_t)k + (size_t)j]);
				}
				fprintf(stderr, "%s\n", r.recall[i] < min_recall ? "  < min_class_recall" : "");
			}
		}
	}
	if (r.have_test)
		*accuracy = r.test_accuracy;
	/* serving.max_val_loss (task lm) is one more rule: the validation loss at most it */
	int n_rules = sv ? sv->n_gate : 0;
	struct dlk_gate_rule *rules = xcalloc((size_t)n_rules + 1, sizeof(*rules));
	if (n_rules)
		memcpy(rules, sv->gate, sizeof(*rules) * (size_t)n_rules);
	if (sv && sv->max_val_loss > 0)
		rules[n_rules++] = (struct dlk_gate_rule){ .metric = "loss", .max = sv->max_val_loss, .has_max = 1 };
	enum dlk_gate_verdict verdict = dlk_gate_judge_rules(m->run, &r, min_acc, min_recall, rules, n_rules, force, &why);
	free(rules);
	switch (verdict) {
	case DLK_GATE_REFUSED:
		dlk_errf(err, DLK_EXIT_REFUSED, "refusing to deploy '%s': %s", name, why);
		dlk_err_hint(err, "the minimums are serving.min_accuracy, serving.min_class_recall, serving.max_val_loss and "
		             "serving.gate (or --min-accuracy); "
		             "--force deploys it anyway");
		goto out;
	case DLK_GATE_FORCED:
		dlk_warn(ctx, "deploying '%s' although %s (--force)", name, why);
		break;
	case DLK_GATE_PASSED:
		if (!quiet && (min_acc > 0 || min_recall > 0))
			fprintf(stderr, "  passes the gate (minimum accuracy %.2f%%, minimum class recall %.2f%%)\n", 100 * min_acc,
			        100 * min_recall);
		if (!quiet && sv && sv->n_gate)
			fprintf(stderr, "  passes serving.gate's %d rule%s\n", sv->n_gate, sv->n_gate > 1 ? "s" : "");
		if (!quiet && sv && sv->max_val_loss > 0)
			fprintf(stderr, "  passes serving.max_val_loss %g\n", sv->max_val_loss);
		break;
	}
	rc = 0;
out:
	free(why);
	report_run_release(&r);
	return rc;
}

/* ---- applying ---- */

static int apply_all(const struct dlk_ctx *ctx, struct kube_client *c, const cJSON *objects, cJSON *applied,
                     struct dlk_err *err)
{
	const cJSON *o;

	cJSON_ArrayForEach(o, objects) {
		cJSON *out = NULL;
		if (kube_apply(c, o, &out, err) < 0)
			return dlk_err_prefix(err, "cannot apply %s '%s'", str(o, "kind"), kube_meta(o, "name"));
		if (ctx->verbose)
			dlk_info(ctx, "applied %s/%s", str(o, "kind"), kube_meta(o, "name"));
		if (applied)
			cJSON_AddItemToArray(applied, out);
		else
			cJSON_Delete(out);
	}
	return 0;
}

/* Deletes the canary track's objects (Deployment, ConfigMap); *n counts what went. */
static int delete_canary(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, int *n,
                         struct dlk_err *err)
{
	static const char *const kinds[] = { "Deployment", "ConfigMap", "Service" };
	char *obj = xasprintf("%s%s", name, RENDER_CANARY_SUFFIX);
	int rc = 0;

	for (size_t i = 0; i < DLK_ARRAY_SIZE(kinds); i++) {
		if (kube_delete(c, kinds[i], ns, obj, err) == 0) {
			(*n)++;
			dlk_print_deleted((void *)ctx, kinds[i], obj);
		} else if (err->code == DLK_EXIT_NOTFOUND) {
			dlk_err_clear(err);
		} else {
			rc = -1;
			break;
		}
	}
	free(obj);
	return rc;
}

/* ---- waiting ---- */

static int wait_rollout(struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name, const char *track,
                        double timeout_s)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_progress p = { ctx, 0, 0 };
	struct kube_list_opts lo = KUBE_LIST_OPTS_INIT;
	char *sel = dlk_serve_selector(name, track);
	char *dep = xasprintf("%s%s", name, strcmp(track, "canary") ? RENDER_SERVING_SUFFIX : RENDER_CANARY_SUFFIX);
	const char *nsf = dlk_ns_flag(ctx, c, ns);
	char nsflag[96], el[32], last[700] = "";
	double start = dlk_now();
	int rc = -1;

	snprintf(nsflag, sizeof(nsflag), "%s", nsf);
	lo.label_selector = sel;
	dlk_interrupt_catch();
	for (;;) {
		cJSON *d = NULL, *pods = NULL;
		struct dlk_serve_track t;
		char line[700];

		if (kube_get(c, "Deployment", ns, dep, &d, &err) < 0 ||
		    kube_list(c, "Pod", ns, &lo, &pods, &err) < 0) {
			cJSON_Delete(d);
			dlk_progress_clear(&p);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		dlk_serve_track_summarize(d, get(pods, "items"), &t);
		cJSON_Delete(d);
		cJSON_Delete(pods);
		dlk_duration_text(dlk_now() - start, el, sizeof(el));
		snprintf(line, sizeof(line), "%d/%d replicas ready, %d/%d updated%s%.200s%s%.300s", t.ready, t.desired, t.updated,
		         t.desired, t.pod[0] ? "; " : "", t.pod, t.reason[0] ? ": " : "", t.reason);
		if (t.rollout == ROLLOUT_DONE) {
			dlk_progress_clear(&p);
			dlk_info(ctx, "'%s' (%s) rolled out: %d/%d replicas ready after %s", name, track, t.ready, t.desired, el);
			rc = 0;
			goto out;
		}
		if (t.rollout == ROLLOUT_FAILED) {
			dlk_progress_clear(&p);
			if (t.pod[0])
				dlk_errf(&err, DLK_EXIT_FAIL, "the rollout of '%s' (%s) failed: pod '%s': %s", name, track, t.pod, t.reason);
			else
				dlk_errf(&err, DLK_EXIT_FAIL, "the rollout of '%s' (%s) failed: %s", name, track, t.reason);
			if (t.pod[0])
				dlk_err_hint(&err, "see what it printed: 'dlk logs%s %s'; 'dlk serve --rollback' or 'dlk delete' undo it",
				             nsflag, name);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (strcmp(line, last)) {
			if (!ctx->tty_err)
				dlk_info(ctx, "'%s' (%s): %s", name, track, line);
			snprintf(last, sizeof(last), "%s", line);
		}
		dlk_progress_draw(&p, 0, "%s: %s (%s)", name, line, el);
		if (timeout_s > 0 && dlk_now() - start >= timeout_s) {
			dlk_progress_clear(&p);
			dlk_duration_text(timeout_s, el, sizeof(el));
			dlk_errf(&err, DLK_EXIT_TIMEOUT, "'%s' (%s) did not roll out within %s (%s)", name, track, el, line);
			dlk_err_hint(&err, "the rollout goes on: 'dlk status%s'", nsflag);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		for (int i = 0; i < 10 && !dlk_interrupted(); i++) {
			struct timespec ts = { 0, 100 * 1000000L };
			nanosleep(&ts, NULL);
		}
		if (dlk_interrupted()) {
			dlk_progress_clear(&p);
			dlk_info(ctx, "stopped waiting; the rollout of '%s' goes on", name);
			rc = DLK_EXIT_INTERRUPTED;
			goto out;
		}
	}
out:
	free(sel);
	free(dep);
	return rc;
}

/* ---- promote, rollback ---- */

/* With an HTTPRoute: all the traffic to the stable track's Service again. No route: nothing to do. */
static int route_to_stable(const struct dlk_ctx *ctx, struct kube_client *c, const char *ns, const char *name,
                           struct dlk_err *err)
{
	char *rname = xasprintf("%s%s", name, RENDER_SERVING_SUFFIX);
	cJSON *route = NULL, *o = NULL, *rule, *refs;
	int served = 0, rc = -1;

	if (kube_serves(c, "HTTPRoute", &served, err) < 0)
		goto out;
	if (!served) {
		rc = 0;
		goto out;
	}
	if (kube_get(c, "HTTPRoute", ns, rname, &route, err) < 0) {
		if (err->code == DLK_EXIT_NOTFOUND) {
			dlk_err_clear(err);
			rc = 0;
		}
		goto out;
	}
	o = dlk_serve_applyable(route);
	cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "spec"), "rules")) {
		refs = cJSON_GetObjectItemCaseSensitive(rule, "backendRefs");
		while (cJSON_GetArraySize(refs) > 1)
			cJSON_DeleteItemFromArray(refs, cJSON_GetArraySize(refs) - 1);
		cJSON *first = cJSON_GetArrayItem(refs, 0);
		if (first)
			cJSON_ReplaceItemInObject(first, "weight", cJSON_CreateNumber(100));
	}
	cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations");
	if (ann)
		cJSON_ReplaceItemInObject(ann, DLK_ANN_CANARY_PERCENT, cJSON_CreateString("0"));
	if (kube_apply(c, o, NULL, err) < 0) {
		dlk_err_prefix(err, "cannot route all the traffic back to '%s'", name);
		goto out;
	}
	if (ctx->verbose)
		dlk_info(ctx, "HTTPRoute/%s sends all the traffic to the stable track", rname);
	rc = 0;
out:
	cJSON_Delete(route);
	cJSON_Delete(o);
	free(rname);
	return rc;
}

static int promote_or_rollback(struct dlk_ctx *ctx, const struct dlk_serve_cli *cli, struct kube_client *c,
                               const char *ns, const char *name)
{
	struct dlk_err err = DLK_ERR_INIT;
	char *cname = xasprintf("%s%s", name, RENDER_CANARY_SUFFIX), *sname = xasprintf("%s%s", name, RENDER_SERVING_SUFFIX);
	cJSON *canary = NULL, *stable = NULL, *ccm = NULL, *objs = NULL;
	const char *nsf = dlk_ns_flag(ctx, c, ns);
	int rc = 0, n = 0;

	if (kube_get(c, "Deployment", ns, cname, &canary, &err) < 0) {
		if (err.code == DLK_EXIT_NOTFOUND) {
			dlk_errf(&err, DLK_EXIT_NOTFOUND, "'%s' has no canary in namespace '%s' to %s", name, ns,
			         cli->mode == SERVE_PROMOTE ? "promote" : "roll back");
			dlk_err_hint(&err, "start one with 'dlk serve%s %s --canary PERCENT'; see 'dlk status%s'", nsf, name, nsf);
		}
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (cli->mode == SERVE_ROLLBACK) {
		if (route_to_stable(ctx, c, ns, name, &err) || delete_canary(ctx, c, ns, name, &n, &err)) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (!ctx->quiet)
			printf("rolled back '%s': the canary is gone (%d objects); the stable model serves all the traffic\n", name, n);
		goto out;
	}
	if (kube_get(c, "Deployment", ns, sname, &stable, &err) < 0 && err.code != DLK_EXIT_NOTFOUND) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_err_clear(&err);
	if (kube_get(c, "ConfigMap", ns, cname, &ccm, &err) < 0) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	objs = cJSON_CreateArray();
	cJSON_AddItemToArray(objs, dlk_serve_as_stable(ccm, sname, NULL));
	cJSON_AddItemToArray(objs, dlk_serve_as_stable(canary, sname, stable));
	if (apply_all(ctx, c, objs, NULL, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_kube_warnings(ctx, c);
	dlk_info(ctx, "promoting '%s': the stable track now rolls out the canary's model", name);
	/* the canary serves until the stable track runs its model */
	if (cli->wait || cli->timeout_s > 0) {
		rc = wait_rollout(ctx, c, ns, name, "stable", cli->timeout_s > 0 ? cli->timeout_s : ROLLOUT_WAIT_S);
		if (rc)
			goto out;
	}
	if (route_to_stable(ctx, c, ns, name, &err) || delete_canary(ctx, c, ns, name, &n, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	const char *msha = str(get(get(canary, "metadata"), "annotations"), DLK_ANN_MODEL_SHA256);
	if (!ctx->quiet && msha && *msha)
		printf("promoted '%s': model %.12s serves all the traffic\n", name, msha);
	else if (!ctx->quiet) /* a server of the user's (serving.program) names no bundle */
		printf("promoted '%s': the canary's server serves all the traffic\n", name);
out:
	cJSON_Delete(canary);
	cJSON_Delete(stable);
	cJSON_Delete(ccm);
	cJSON_Delete(objs);
	free(cname);
	free(sname);
	return rc;
}

/* ---- deploying ---- */

static int parse_min_accuracy(const char *s, double *out, struct dlk_err *err)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0 && v <= 1))
		return dlk_errf(err, DLK_EXIT_USAGE, "--min-accuracy '%s': expected a number in [0, 1] (0.9 is 90%%)", s);
	*out = v;
	return 0;
}

int dlk_serve_deploy(struct dlk_ctx *ctx, const struct dlk_serve_cli *cli, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct kube_client *c = NULL;
	struct model_src m;
	struct render_serving sv;
	cJSON *objects = NULL, *applied = NULL, *stable = NULL;
	const char *name, *ns = NULL;
	double min_acc, accuracy = -1;
	int rc = 0;

	memset(&m, 0, sizeof(m));
	memset(&sv, 0, sizeof(sv));
	if (args->n_pos > 1) {
		dlk_errf(&err, DLK_EXIT_USAGE, "deploying takes one model name, not %d", args->n_pos);
		dlk_err_hint(&err, "to serve bundles on this machine: dlk serve --local MODEL.dlk...");
		return dlk_report(ctx, &err);
	}
	if (args->n_pos == 1 && (strchr(args->pos[0], '/') || strchr(args->pos[0], '=') ||
	                         (strlen(args->pos[0]) > 4 && !strcmp(args->pos[0] + strlen(args->pos[0]) - 4, ".dlk")))) {
		dlk_errf(&err, DLK_EXIT_USAGE, "'%s' is not a model name: deploying takes the name of a training job", args->pos[0]);
		dlk_err_hint(&err, "serve bundles on this machine: dlk serve --local %s; deploy a bundle from a URL: "
		             "dlk serve NAME --model https://.../NAME.dlk --sha256 HEX", args->pos[0]);
		return dlk_report(ctx, &err);
	}
	if (cli->sha256 && !is_sha256(cli->sha256)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--sha256 '%s': expected 64 lowercase hex digits", cli->sha256);
		return dlk_report(ctx, &err);
	}
	if (cli->mode == SERVE_DEPLOY && ctx->output != DLK_OUTPUT_TEXT && ctx->output != DLK_OUTPUT_JSON) {
		dlk_errf(&err, DLK_EXIT_USAGE, "deploying prints text or json (the applied objects), not '%s'",
		         dlk_output_names[ctx->output]);
		return dlk_report(ctx, &err);
	}
	/* promote and rollback act on what is deployed: a project is only needed for its name */
	if (cli->mode != SERVE_PROMOTE && cli->mode != SERVE_ROLLBACK) {
		spec = dlk_ctx_load_spec(ctx, &err);
		if (!spec)
			return dlk_report(ctx, &err);
	} else if (!args->n_pos) {
		spec = dlk_ctx_load_spec(ctx, &err);
		if (!spec) {
			dlk_err_prefix(&err, "no model named and no project file to take the name from");
			return dlk_report(ctx, &err);
		}
	}
	name = args->n_pos ? args->pos[0] : spec->name;
	if (!is_model_name(name)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "'%s' cannot name a served model: lowercase letters, digits and '-', "
		         "starting with a letter and ending with a letter or digit (its Service is named after it)", name);
		rc = dlk_report(ctx, &err);
		goto out;
	}
	min_acc = spec ? spec->serving.min_accuracy : 0;
	if (cli->min_accuracy && parse_min_accuracy(cli->min_accuracy, &min_acc, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	/* the cluster is asked even for --dry-run when the model is a job's: its claim, its metrics */
	int own = spec && spec->serving.program.present; /* serving.program: the user's server, no bundle */
	if (cli->mode != SERVE_DRY_RUN || !cli->model || cli->canary) {
		c = dlk_kube_client(ctx, &err);
		if (!c) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
	}
	ns = kube_namespace_pick(ctx->namespace_, spec ? spec->namespace_ : NULL, c ? kube_client_namespace(c) : NULL);
	if (cli->mode == SERVE_PROMOTE || cli->mode == SERVE_ROLLBACK) {
		rc = promote_or_rollback(ctx, cli, c, ns, name);
		goto out;
	}

	if (own && cli->model) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--model names a bundle, but serving.program serves your own server (%s)",
		         dlk_visible(spec->serving.program.image));
		dlk_err_hint(&err, "drop --model, or serving.program to serve a bundle");
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (own ? model_from_program(ctx, c, ns, name, &spec->serving, min_acc, cli->force, &m, &err)
	        : cli->model ? model_from_url(ctx, spec, cli, &m, &err) : model_from_job(ctx, c, ns, name, &m, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	/* a server of the user's is gated on its training program's run, when there is one */
	int refused = m.run ? gate(ctx, name, &m, min_acc, spec->serving.min_class_recall, &spec->serving, cli->force,
	                           &accuracy, &err)
	                    : 0;
	if (cli->report && m.run) {
		/* the page shows the decision first, refused or not */
		struct dlk_err rerr = DLK_ERR_INIT;
		if (report_write_html(cli->report, m.run, NULL, &rerr)) {
			dlk_err_prefix(&rerr, "--report '%s'", cli->report);
			dlk_report(ctx, &rerr);
		} else if (!ctx->quiet) {
			fprintf(stderr, "report: %s\n", cli->report);
		}
	}
	if (refused) {
		rc = dlk_report(ctx, &err);
		goto out;
	}

	sv.name = name;
	sv.replicas = spec->serving.replicas;
	if (spec->serving.gateway) {
		/* without a client (a --dry-run of a URL's model) the route is rendered as if served */
		sv.route = 1;
		if (c && kube_serves(c, "HTTPRoute", &sv.route, &err) < 0) {
			rc = dlk_report(ctx, &err);
			goto out;
		}
		if (!sv.route)
			dlk_warn(ctx, "serving.gateway is '%s' but the cluster does not serve the Gateway API's HTTPRoutes "
			         "(gateway.networking.k8s.io/v1): no route; a canary's share is its share of the replicas",
			         spec->serving.gateway);
	}
	sv.model.claim = m.claim;
	sv.model.path = m.path;
	sv.model.url = m.url;
	sv.model.pin = m.pin;
	sv.model.source = m.source;
	sv.model.sha256 = str(get(m.run, "weights"), "sha256");
	sv.model.revision = m.revision;
	sv.model.accuracy = accuracy;
	if (cli->canary) {
		char *sname = xasprintf("%s%s", name, RENDER_SERVING_SUFFIX);
		int got = kube_get(c, "Deployment", ns, sname, &stable, &err);
		free(sname);
		if (got < 0) {
			if (err.code == DLK_EXIT_NOTFOUND) {
				dlk_errf(&err, DLK_EXIT_NOTFOUND, "no model is served as '%s' in namespace '%s': a canary goes beside one",
				         name, ns);
				dlk_err_hint(&err, "deploy it first without --canary");
			}
			rc = dlk_report(ctx, &err);
			goto out;
		}
		const cJSON *r = get(get(stable, "spec"), "replicas");
		int total = cJSON_IsNumber(r) && r->valuedouble >= 0 && r->valuedouble <= INT_MAX ? (int)r->valuedouble
		                                                                                  : spec->serving.replicas;
		/* behind the one Service, the canary's share of the replicas is its share of the traffic;
		 * with a route, the route's weights decide, and the canary gets its share of the pods */
		int cr = sv.route ? (int)ceil((double)total * cli->canary / 100.0 - 1e-9)
		                  : (int)ceil((double)total * cli->canary / (100.0 - cli->canary) - 1e-9);
		sv.canary = 1;
		sv.replicas = cr < 1 ? 1 : cr;
		sv.canary_percent = cli->canary;
		double real = 100.0 * sv.replicas / (sv.replicas + total);
		if (!ctx->quiet && sv.route)
			fprintf(stderr, "canary: %d replica%s beside %d stable; the HTTPRoute sends it %d%% of the traffic\n",
			        sv.replicas, sv.replicas == 1 ? "" : "s", total, cli->canary);
		else if (!ctx->quiet)
			fprintf(stderr, "canary: %d replica%s beside %d stable: %.0f%% of the traffic (asked %d%%)\n", sv.replicas,
			        sv.replicas == 1 ? "" : "s", total, real, cli->canary);
	}
	if (c && !sv.canary) {
		/* a canary beside it stays as it is: say so, since the new stable model changes what it is compared with */
		char *cname = xasprintf("%s%s", name, RENDER_CANARY_SUFFIX);
		cJSON *cur = NULL;
		if (kube_get(c, "Deployment", ns, cname, &cur, &err) == 0)
			dlk_warn(ctx, "a canary of '%s' runs beside the model deployed now%s; finish it with 'dlk serve %s --promote' "
			         "or '--rollback'", name, sv.route ? " and the route no longer sends it traffic" : "", name);
		dlk_err_clear(&err);
		cJSON_Delete(cur);
		free(cname);
	}
	if (c && render_serving_hpa(spec, &sv)) {
		/* an autoscaler scales the Deployment: apply what it has now, and the autoscaler goes on */
		char *dname = xasprintf("%s%s", name, RENDER_SERVING_SUFFIX);
		cJSON *cur = NULL;
		if (kube_get(c, "Deployment", ns, dname, &cur, &err) == 0) {
			const cJSON *r = get(get(cur, "spec"), "replicas");
			if (cJSON_IsNumber(r) && r->valuedouble >= 1 && r->valuedouble <= INT_MAX)
				sv.replicas = (int)r->valuedouble;
		} else if (err.code != DLK_EXIT_NOTFOUND) {
			free(dname);
			rc = dlk_report(ctx, &err);
			goto out;
		}
		dlk_err_clear(&err);
		cJSON_Delete(cur);
		free(dname);
	}
	objects = render_serving_project(spec, ctx->file, cli->templates, ns, &sv, &err);
	if (!objects) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	if (cli->mode == SERVE_DRY_RUN) {
		if (dlk_print_objects(ctx, objects, &err))
			rc = dlk_report(ctx, &err);
		goto out;
	}
	applied = cJSON_CreateArray();
	if (apply_all(ctx, c, objects, applied, &err)) {
		rc = dlk_report(ctx, &err);
		goto out;
	}
	dlk_kube_warnings(ctx, c);
	if (!dlk_print_applied(ctx, applied, name)) {
		const char *nsf = dlk_ns_flag(ctx, c, ns);
		if (sv.canary)
			printf("canary of '%s' deployed to namespace '%s' (%d replica%s, %d%%)\n", name, ns, sv.replicas,
			       sv.replicas == 1 ? "" : "s", sv.canary_percent);
		else if (own)
			printf("server '%s' deployed to namespace '%s' (%d replica%s): http://%s%s.%s:%d/\n", name, ns,
			       sv.replicas, sv.replicas == 1 ? "" : "s", name, RENDER_SERVING_SUFFIX, ns, spec->serving.port);
		else
			printf("model '%s' deployed to namespace '%s' (%d replica%s): http://%s%s.%s:%d/v2/models/%s\n", name, ns,
			       sv.replicas, sv.replicas == 1 ? "" : "s", name, RENDER_SERVING_SUFFIX, ns, spec->serving.port, name);
		if (!cli->wait && !cli->timeout_s)
			printf("next:\n  dlk status%s\n  dlk logs%s %s\n", nsf, nsf, name);
		if (sv.canary && !ctx->quiet)
			printf("then:\n  dlk serve%s %s --promote\n  dlk serve%s %s --rollback\n", nsf, name, nsf, name);
	}
	fflush(stdout);
	if (cli->wait || cli->timeout_s > 0)
		rc = wait_rollout(ctx, c, ns, name, sv.canary ? "canary" : "stable",
		                  cli->timeout_s > 0 ? cli->timeout_s : ROLLOUT_WAIT_S);
out:
	model_src_release(&m);
	cJSON_Delete(stable);
	cJSON_Delete(objects);
	cJSON_Delete(applied);
	if (c)
		dlk_kube_close(ctx, c);
	project_free(spec);
	return rc;
}
