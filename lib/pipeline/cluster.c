/* A pipeline on a cluster: the objects `dlk pipeline run` sends. A stage's Job is not written
 * here: it is the program Job lib/render makes for a project made from the stage (the one
 * template of a Job), whose program runs the stage with `dlk pipeline run --local`. */
#include "lib/pipeline/cluster.h"
#include "lib/kube/api.h"
#include "lib/project/project.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *dlk_pipeline_driver_name(const struct dlk_pipeline *p)
{
	return xasprintf("%s-pipeline", p->name);
}

char *dlk_pipeline_jobs_config_map(const struct dlk_pipeline *p)
{
	return xasprintf("%s-pipeline-jobs", p->name);
}

char *dlk_pipeline_stage_job(const struct dlk_pipeline *p, const struct dlk_stage *s)
{
	return xasprintf("%s-%s", p->name, s->name);
}

int dlk_pipeline_owns(const cJSON *job, const char *name)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(job, "metadata"), "labels"),
		DLK_PIPELINE_LABEL);
	return cJSON_IsString(l) && !strcmp(l->valuestring, name);
}

/* a YAML scalar that no value can reshape: a JSON string is a YAML double-quoted one */
static void add_quoted(struct dlk_buf *b, const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *t = cJSON_PrintUnformatted(j);
	dlk_buf_addf(b, "%s", t);
	free(t);
	cJSON_Delete(j);
}

/* The project of one Job of the pipeline: a program of one worker, the pipeline's directory as
 * its code, that copies the (read-only) code to a directory it may write (the stage's state and
 * work directories are kept beside the pipeline file) and runs dlk there. */
static struct dlk_project *job_project(const struct dlk_pipeline *p, const char *stage, const char *name, const char *image,
                                       const char *dlk_args, const struct dlk_param *res, int n_res,
                                       const char *schedule, int workers, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT, script = DLK_BUF_INIT;
	const char *base = strrchr(p->file, '/') ? strrchr(p->file, '/') + 1 : p->file;
	struct dlk_project *spec;
	int has_cpu = 0, has_mem = 0;

	/* with an image of its own the program finds dlk where the init container put it */
	dlk_buf_addf(&script, "d=\"${TMPDIR:-/tmp}/dlk-pipeline\" && mkdir -p \"$d\" && cp -RL . \"$d\" && cd \"$d\" && ");
	if (stage)
		/* the stage's own output into the pod's log, where `dlk pipeline logs NAME STAGE` reads it */
		dlk_buf_addf(&script, "{ %s%s %s --pipeline '%s'; rc=$?; cat '.dlk/pipelines/%s/logs/%s.log' 2>/dev/null; exit $rc; }",
		             /* N pods of a predict stage: each its rank's part (lib/pipeline/run.c) */
		             workers > 1 ? "DLK_PIPELINE_RANK=\"$DLK_RANK\" " : "", image ? "/dlk/dlk" : "dlk", dlk_args, base,
		             p->name, stage);
	else
		dlk_buf_addf(&script, "exec %s %s --pipeline '%s'", image ? "/dlk/dlk" : "dlk", dlk_args, base);
	dlk_buf_addf(&b, "name: ");
	add_quoted(&b, name);
	dlk_buf_addf(&b, "\n");
	if (p->image) {
		dlk_buf_addf(&b, "image: ");
		add_quoted(&b, p->image);
		dlk_buf_addf(&b, "\n");
	}
	/* a program needs no data of dlk's: the stage fetches its inputs from the store itself */
	dlk_buf_addf(&b, "data:\n  format: idx\n  train: {images: file:///dev/null, labels: file:///dev/null}\n");
	if (p->store_secret) {
		dlk_buf_addf(&b, "  store_secret: ");
		add_quoted(&b, p->store_secret);
		dlk_buf_addf(&b, "\n");
	}
	dlk_buf_addf(&b, "program:\n  code: .\n  exit_codes: {fail: [1, 2, 126, 127]}\n  command: [sh, -c, ");
	add_quoted(&b, script.data);
	dlk_buf_addf(&b, "]\n");
	if (image) {
		dlk_buf_addf(&b, "  image: ");
		add_quoted(&b, image);
		dlk_buf_addf(&b, "\n");
	}
	dlk_buf_addf(&b, "resources:\n  workers: %d\n", workers > 1 ? workers : 1);
	if (stage)
		/* no metrics of the pod's own: a train stage's dlk train serves its own on the port the
		 * pod would take (the stage's process would find it taken) */
		dlk_buf_addf(&b, "  metrics_port: 0\n");
	for (int i = 0; i < n_res; i++) {
		dlk_buf_addf(&b, "  %s: ", res[i].key);
		if (!strcmp(res[i].key, "gpus"))
			dlk_buf_addf(&b, "%s", res[i].value);
		else
			add_quoted(&b, res[i].value);
		dlk_buf_addf(&b, "\n");
		has_cpu |= !strcmp(res[i].key, "cpu");
		has_mem |= !strcmp(res[i].key, "memory");
	}
	if (!has_cpu)
		dlk_buf_addf(&b, "  cpu: \"1\"\n");
	if (!has_mem)
		dlk_buf_addf(&b, "  memory: 1Gi\n");
	if (stage && p->log_claim) {
		/* the stage's worker archives its log (the stage's, printed after it) on the claim:
		   dlk-logs/NAME-STAGE/, for `dlk pipeline logs NAME STAGE` once its pods are gone */
		dlk_buf_addf(&b, "storage:\n  claim: ");
		add_quoted(&b, p->log_claim);
		dlk_buf_addf(&b, "\n");
	}
	if (schedule) {
		dlk_buf_addf(&b, "schedule: ");
		add_quoted(&b, schedule);
		dlk_buf_addf(&b, "\n");
	}
	spec = project_load_mem(b.data, b.len, name, NULL, 0, err);
	dlk_buf_release(&b);
	dlk_buf_release(&script);
	return spec;
}

static cJSON *job_objects(const struct dlk_pipeline *p, const char *stage, const char *name, const char *image, const char *dlk_args,
                          const struct dlk_param *res, int n_res, const char *schedule, int workers, const char *ns,
                          struct dlk_err *err)
{
	struct dlk_project *spec = job_project(p, stage, name, image, dlk_args, res, n_res, schedule, workers, err);
	cJSON *objs;

	if (!spec)
		return NULL;
	objs = render_train_project(spec, p->file, NULL, ns, err);
	project_free(spec);
	return objs;
}

static void label(cJSON *o, const char *key, const char *value)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata"), *l = cJSON_GetObjectItemCaseSensitive(meta, "labels");

	if (!l)
		l = cJSON_AddObjectToObject(meta, "labels");
	cJSON_DeleteItemFromObjectCaseSensitive(l, key);
	cJSON_AddStringToObject(l, key, value);
}

static const char *kind_of(const cJSON *o)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind");
	return cJSON_IsString(k) ? k->valuestring : "";
}

cJSON *dlk_pipeline_render_cluster(const struct dlk_pipeline *p, const char *namespace_, struct dlk_err *err)
{
	const char *ns = namespace_ ? namespace_ : "default";
	cJSON *out = cJSON_CreateArray(), *jobs = cJSON_CreateObject(), *names = cJSON_CreateArray();
	cJSON *driver = NULL, *ctx = NULL, *extra = NULL, *last = NULL;
	char *driver_name = dlk_pipeline_driver_name(p), *cm = dlk_pipeline_jobs_config_map(p), *sa = NULL;
	char *jobs_json = NULL, *tdir = NULL;
	struct render_templates *set = NULL;
	static const char *const pipeline_templates[] = { "pipeline-jobs.yaml", "pipeline-role.yaml",
		                                          "pipeline-rolebinding.yaml", NULL };

	if (!strstr(p->store, "://") || !strncmp(p->store, "file://", 7)) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: store '%s' is a directory here: the pods of a cluster cannot reach it",
		         p->file, dlk_visible(p->store));
		dlk_err_hint(err, "give the pipeline a store the cluster reaches (store: s3://BUCKET/PREFIX with store_secret:, "
		                  "or pvc://CLAIM/PATH), or run it here with --local");
		goto fail;
	}
	for (int k = 0; k < p->n_stages; k++) {
		const struct dlk_stage *s = &p->stages[p->order[k]];
		char *jn = dlk_pipeline_stage_job(p, s), *args = xasprintf("pipeline run --local '%s'", s->name);
		cJSON *objs = job_objects(p, s->name, jn, s->image, args, s->resources, s->n_resources, NULL,
		                          s->kind == DLK_STAGE_PREDICT ? s->workers : 1, ns, err), *o;
		free(args);
		if (!objs) {
			dlk_err_prefix(err, "%s: stage '%s' as a Job", p->file, s->name);
			free(jn);
			goto fail;
		}
		while ((o = cJSON_DetachItemFromArray(objs, 0))) {
			label(o, DLK_PIPELINE_LABEL, p->name);
			if (!strcmp(kind_of(o), "Job")) {
				/* the pod template too, so that `kubectl get pods -l` finds a pipeline's pods */
				cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "spec"), "template");
				if (tmpl)
					label(tmpl, DLK_PIPELINE_LABEL, p->name);
				cJSON_AddItemToObject(jobs, s->name, o);
			} else {
				cJSON_AddItemToArray(out, o);
			}
		}
		cJSON_Delete(objs);
		cJSON_AddItemToArray(names, cJSON_CreateString(jn));
		free(jn);
	}
	{
		const char *sched = p->schedule ? p->schedule : p->data_changed ? DLK_PIPELINE_DATA_CHANGED_SCHEDULE : NULL;
		cJSON *objs = job_objects(p, NULL, driver_name, NULL, "pipeline drive", NULL, 0, sched, 1, ns, err), *o;
		if (!objs) {
			dlk_err_prefix(err, "%s: the driver as a Job", p->file);
			goto fail;
		}
		driver = cJSON_CreateArray();
		while ((o = cJSON_DetachItemFromArray(objs, 0))) {
			label(o, DLK_PIPELINE_LABEL, p->name);
			if (!strcmp(kind_of(o), "ServiceAccount"))
				sa = xstrdup(kube_meta(o, "name"));
			if (!strcmp(kind_of(o), "CronJob")) {
				/* the Jobs it starts (and their pods) carry the label too: status lists its runs */
				cJSON *jt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "spec"), "jobTemplate");
				cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(jt, "spec"), "template");
				if (jt && cJSON_GetObjectItemCaseSensitive(jt, "metadata"))
					label(jt, DLK_PIPELINE_LABEL, p->name);
				if (tmpl && cJSON_GetObjectItemCaseSensitive(tmpl, "metadata"))
					label(tmpl, DLK_PIPELINE_LABEL, p->name);
			}
			if (!strcmp(kind_of(o), "Job") || !strcmp(kind_of(o), "CronJob"))
				last = o;
			else
				cJSON_AddItemToArray(driver, o);
		}
		cJSON_Delete(objs);
	}
	if (!sa || !last) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the templates render the driver without a ServiceAccount or a Job");
		goto fail;
	}
	jobs_json = dlk_json_print(jobs);
	ctx = cJSON_CreateObject();
	cJSON_AddStringToObject(ctx, "pipeline", p->name);
	cJSON_AddStringToObject(ctx, "namespace", ns);
	cJSON_AddStringToObject(ctx, "jobs_config_map", cm);
	cJSON_AddStringToObject(ctx, "jobs_json", jobs_json);
	{
		/* the driver's worker Role (its own Job, its records) is NAME-pipeline already */
		char *role = xasprintf("%s-driver", driver_name);
		cJSON_AddStringToObject(ctx, "role", role);
		free(role);
	}
	cJSON_AddStringToObject(ctx, "service_account", sa);
	cJSON_AddItemToObject(ctx, "stage_jobs", names);
	names = NULL;
	tdir = strcmp(p->dir, ".") ? xasprintf("%s/templates", p->dir) : xstrdup("templates");
	if (!(set = render_templates_load(tdir, 1, err)) || !(extra = render_objects(set, pipeline_templates, ctx, err)))
		goto fail;
	{
		cJSON *o;
		while ((o = cJSON_DetachItemFromArray(driver, 0)))
			cJSON_AddItemToArray(out, o);
		while ((o = cJSON_DetachItemFromArray(extra, 0)))
			cJSON_AddItemToArray(out, o);
	}
	cJSON_AddItemToArray(out, last);
	last = NULL;
	goto out;
fail:
	cJSON_Delete(out);
	out = NULL;
out:
	cJSON_Delete(last);
	cJSON_Delete(driver);
	cJSON_Delete(extra);
	cJSON_Delete(ctx);
	cJSON_Delete(jobs);
	cJSON_Delete(names);
	render_templates_free(set);
	free(tdir);
	free(jobs_json);
	free(sa);
	free(cm);
	free(driver_name);
	return out;
}
