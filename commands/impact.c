/* dlk impact: which runs used a dataset, and the bundles they made, from the run history (the
 * reverse of dlk lineage). The dataset is resolved as `dlk data show` resolves it (a tag or an
 * id prefix through the store; a whole id needs none); the runs are those lib/runs finds with
 * its sha256: every project's local history here with --local (next to the project file and in
 * the directories below this one), else the
 * cluster's history of the project that -f names. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/cluster.h"
#include "commands/ui.h"
#include "lib/project/project.h"
#include "lib/runs/runs.h"
#include "lib/runs/usage.h"
#include "lib/store/manifest.h"
#include "lib/store/dataset.h"
#include "lib/jobs/servestate.h"
#include "lib/store/graph.h"
#include "lib/util/buf.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *impact_from;
static int impact_local, impact_downstream;

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str_of(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ref to a dataset id: a whole id as it is, anything else through the store */
static int resolve(const struct dlk_ctx *ctx, const char *ref, char id[65], struct dlk_err *err)
{
	struct dlk_dataset_ref r;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	char why[256];
	int rc;

	if (dlk_dataset_ref_parse(ref, 1, &r, why, sizeof(why))) {
		dlk_errf(err, DLK_EXIT_USAGE, "'%s' names no dataset: %s", ref, why);
		return dlk_err_hint(err, "give sha256:ID, a prefix of an id, NAME@TAG or NAME");
	}
	if (r.kind == DLK_REF_ID || (r.kind == DLK_REF_ID_PREFIX && strlen(r.id) == 64)) {
		for (int i = 0; i < 64; i++)
			id[i] = (char)(r.id[i] >= 'A' && r.id[i] <= 'F' ? r.id[i] - 'A' + 'a' : r.id[i]);
		id[64] = '\0';
		return 0;
	}
	rc = dlk_data_maybe_project(ctx, impact_from, &spec, err) || dlk_data_store_open(ctx, impact_from, spec, &ds, err) ||
	     dlk_dataset_resolve(ds.store, ref, 1, id, err) ? -1 : 0;
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

/* every local history next to the project file: the runs in them that used id, into recs */
struct local_find {
	const char *id;
	cJSON *recs;
	struct dlk_err *err;
};

static int find_in(const char *dir, const char *project, void *ud)
{
	struct local_find *f = ud;
	struct dlk_run_store *s = dlk_runs_open_dir(dir, project);
	cJSON *found = NULL, *it;
	int rc = dlk_runs_find_data(s, f->id, &found, f->err);

	while (!rc && found && (it = cJSON_DetachItemFromArray(found, 0)))
		cJSON_AddItemToArray(f->recs, it);
	cJSON_Delete(found);
	dlk_runs_close(s);
	return rc;
}

/* every project trained here: the one beside -f and those in the directories below this one */
static int find_local(const struct dlk_ctx *ctx, const char *id, cJSON *recs, char *at, size_t n, struct dlk_err *err)
{
	struct local_find f = { id, recs, err };

	snprintf(at, n, "the local histories here (.dlk/runs beside '%s' and in the directories below this one)",
	         ctx->file);
	return dlk_runs_local_each(ctx->file, find_in, &f);
}

static int find_cluster(const struct dlk_ctx *ctx, const char *id, cJSON *recs, char *at, size_t n, struct dlk_err *err)
{
	struct dlk_project *spec = dlk_ctx_load_spec(ctx, err);
	struct kube_client *kc = NULL;
	struct dlk_run_store *s = NULL;
	cJSON *found = NULL, *it;
	int rc = -1;

	if (!spec) {
		dlk_err_prefix(err, "the cluster's history is the project's, and the project cannot be read");
		return dlk_err_hint(err, "the runs trained on this machine need no project: add --local");
	}
	kc = dlk_kube_client(ctx, err);
	if (!kc && err->code == DLK_EXIT_CONFIG)
		dlk_err_hint(err, "the runs trained on this machine need no cluster: add --local");
	s = kc ? dlk_runs_open_configmap(kc, NULL, spec->name) : NULL;
	if (s) {
		snprintf(at, n, "ConfigMap '%s%s' of namespace '%s'", spec->name, DLK_RUNS_CONFIGMAP_SUFFIX,
		         kube_client_namespace(kc));
		rc = dlk_runs_find_data(s, id, &found, err);
	}
	while (!rc && found && (it = cJSON_DetachItemFromArray(found, 0)))
		cJSON_AddItemToArray(recs, it);
	cJSON_Delete(found);
	dlk_runs_close(s);
	dlk_kube_close(ctx, kc);
	project_free(spec);
	return rc;
}

/* newest first, by started_at (RFC 3339 UTC, so by its text), then id */
static int newest_first(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	int c = strcmp(dlk_run_started_at(y), dlk_run_started_at(x));

	return c ? c : strcmp(dlk_run_id(y), dlk_run_id(x));
}

static cJSON *sorted(cJSON *recs)
{
	int n = cJSON_GetArraySize(recs);
	cJSON **v = xcalloc((size_t)n + 1, sizeof(*v)), *out = cJSON_CreateArray();

	for (int i = 0; i < n; i++)
		v[i] = cJSON_DetachItemFromArray(recs, 0);
	qsort(v, (size_t)n, sizeof(*v), newest_first);
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(out, v[i]);
	free(v);
	cJSON_Delete(recs);
	return out;
}

/* what -o json|yaml shows of a run */
static cJSON *run_json(const cJSON *rec)
{
	const cJSON *info = dlk_run_info(rec), *acc = get(get(rec, "metrics"), "test_accuracy");
	const cJSON *job = get(info, "job"), *bundle = get(info, "bundle"), *ds = get(get(rec, "provenance"), "dataset");
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "id", dlk_run_id(rec));
	cJSON_AddStringToObject(o, "project", dlk_run_project(rec));
	if (str_of(job, "name"))
		cJSON_AddStringToObject(o, "job", str_of(job, "name"));
	cJSON_AddStringToObject(o, "outcome", dlk_run_outcome_name(dlk_run_outcome(rec)));
	cJSON_AddStringToObject(o, "started_at", dlk_run_started_at(rec));
	if (str_of(info, "finished_at"))
		cJSON_AddStringToObject(o, "finished_at", str_of(info, "finished_at"));
	if (cJSON_IsNumber(acc))
		cJSON_AddNumberToObject(o, "test_accuracy", acc->valuedouble);
	if (str_of(info, "trigger"))
		cJSON_AddStringToObject(o, "trigger", str_of(info, "trigger"));
	if (str_of(info, "where"))
		cJSON_AddStringToObject(o, "where", str_of(info, "where"));
	if (str_of(ds, "tag"))
		cJSON_AddStringToObject(o, "tag", str_of(ds, "tag"));
	if (cJSON_IsObject(bundle))
		cJSON_AddItemToObject(o, "bundle", cJSON_Duplicate(bundle, 1));
	return o;
}


static int table_row(const cJSON *rec, int wide, struct dlk_table_row *r)
{
	const cJSON *info = dlk_run_info(rec), *acc = get(get(rec, "metrics"), "test_accuracy");
	const cJSON *job = get(info, "job"), *bundle = get(info, "bundle"), *ds = get(get(rec, "provenance"), "dataset");
	const char *t = dlk_run_started_at(rec), *bsha = str_of(bundle, "sha256"), *bpath = str_of(bundle, "path");
	int c = 0;

	snprintf(r->c[c++], 200, wide ? "%s" : "%.8s", dlk_run_id(rec));
	snprintf(r->c[c++], 200, "%.190s", str_of(job, "name") ? str_of(job, "name") : dlk_run_project(rec));
	snprintf(r->c[c++], 200, "%s", dlk_run_outcome_name(dlk_run_outcome(rec)));
	if (strlen(t) >= 19)
		snprintf(r->c[c++], 200, "%.10s %.8s", t, t + 11);
	else
		snprintf(r->c[c++], 200, "%.190s", t);
	if (cJSON_IsNumber(acc))
		snprintf(r->c[c++], 200, "%.2f%%", acc->valuedouble * 100);
	else
		snprintf(r->c[c++], 200, "-");
	snprintf(r->c[c++], 200, "%.190s", str_of(info, "trigger") ? str_of(info, "trigger") : "-");
	if (wide)
		snprintf(r->c[c++], 200, "%.190s", str_of(ds, "tag") ? str_of(ds, "tag") : "-");
	if (bsha)
		snprintf(r->c[c++], 200, wide ? "sha256:%.64s" : "sha256:%.12s", bsha);
	else
		snprintf(r->c[c++], 200, "-");
	/* the path is the local machine's: a cluster's bundle path is inside its pod */
	snprintf(r->c[c++], 200, "%.190s", bpath && !job ? bpath : "");
	return c;
}

/* doc as -o json or yaml, on stdout */
/* The models served from the downstream datasets' models (their weights' digests), read from
 * the cluster when one is configured: NULL with why empty when none is (or no model is
 * downstream), NULL with why when it cannot be read (said, not fatal: the datasets are the
 * store's answer). */
static cJSON *served_models(const struct dlk_ctx *ctx, const cJSON *list, char *why, size_t n)
{
	const char **w = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*w));
	struct dlk_err err = DLK_ERR_INIT;
	struct kube_client *kc = NULL;
	cJSON *out = NULL;
	const cJSON *d;
	size_t k = 0;

	cJSON_ArrayForEach(d, list)
	{
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(d, "weights_sha256");
		if (cJSON_IsString(s))
			w[k++] = s->valuestring;
	}
	if (k && (kc = dlk_kube_client(ctx, &err)) != NULL)
		out = dlk_served_with_weights(kc, NULL, w, k, &err);
	if (k && !out && err.code != DLK_EXIT_CONFIG)
		snprintf(why, n, "%.590s", err.msg);
	dlk_kube_close(ctx, kc);
	free(w);
	return out;
}

/* --downstream: the datasets of the store made from ref, from their provenance (lib/store/graph) */
static int downstream(struct dlk_ctx *ctx, const char *ref)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store ds = { 0 };
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_table_row *rows = NULL;
	cJSON *list = NULL, *doc = NULL, *served = NULL;
	const cJSON *d;
	char id[65], full[72], served_why[600] = "";
	int rc = 0, n = 1;

	if (dlk_data_maybe_project(ctx, impact_from, &spec, &err) || dlk_data_store_open(ctx, impact_from, spec, &ds, &err) ||
	    dlk_dataset_resolve(ds.store, ref, 1, id, &err) || dlk_dataset_downstream(ds.store, id, &list, &err))
		goto fail;
	snprintf(full, sizeof(full), "sha256:%s", id);
	served = served_models(ctx, list, served_why, sizeof(served_why));
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		doc = cJSON_CreateObject();
		cJSON_AddStringToObject(doc, "dataset", full);
		cJSON_AddStringToObject(doc, "store", dlk_store_url(ds.store));
		cJSON_AddItemToObject(doc, "downstream", list);
		list = NULL;
		if (served) {
			cJSON_AddItemToObject(doc, "served", served);
			served = NULL;
		} else if (served_why[0])
			cJSON_AddStringToObject(doc, "served_error", served_why);
		if (dlk_doc_print(stdout, doc, ctx->output == DLK_OUTPUT_JSON, &err))
			goto fail;
		goto out;
	}
	if (!cJSON_GetArraySize(list)) {
		dlk_info(ctx, "no dataset in %s was made from %s", dlk_store_url(ds.store), full);
		goto out;
	}
	rows = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*rows));
	snprintf(rows[0].c[0], 200, "DATASET");
	snprintf(rows[0].c[1], 200, "TAGS");
	snprintf(rows[0].c[2], 200, "MADE BY");
	snprintf(rows[0].c[3], 200, "FROM");
	cJSON_ArrayForEach(d, list)
	{
		struct dlk_buf t = DLK_BUF_INIT;
		const cJSON *tag;
		cJSON_ArrayForEach(tag, cJSON_GetObjectItemCaseSensitive(d, "tags"))
			dlk_buf_addf(&t, "%s%s", t.len ? "," : "", tag->valuestring);
		snprintf(rows[n].c[0], 200, ctx->output == DLK_OUTPUT_WIDE ? "%s" : "%.19s", str_of(d, "id"));
		snprintf(rows[n].c[1], 200, "%.190s", t.len ? t.data : "-");
		snprintf(rows[n].c[2], 200, "%.190s", str_of(d, "made_by"));
		snprintf(rows[n].c[3], 200, ctx->output == DLK_OUTPUT_WIDE ? "%s" : "%.19s", str_of(d, "from"));
		dlk_buf_release(&t);
		n++;
	}
	dlk_table_print(ctx, &b, rows, n, 4);
	fwrite(b.data, 1, b.len, stdout);
	if (served && cJSON_GetArraySize(served)) {
		/* the models served from these, as `dlk status` names them */
		free(rows);
		rows = xcalloc((size_t)cJSON_GetArraySize(served) + 1, sizeof(*rows));
		n = 1;
		snprintf(rows[0].c[0], 200, "SERVED");
		snprintf(rows[0].c[1], 200, "TRACK");
		snprintf(rows[0].c[2], 200, "READY");
		snprintf(rows[0].c[3], 200, "WEIGHTS");
		cJSON_ArrayForEach(d, served)
		{
			snprintf(rows[n].c[0], 200, "%.190s", str_of(d, "name"));
			snprintf(rows[n].c[1], 200, "%.190s", str_of(d, "track"));
			snprintf(rows[n].c[2], 200, "%d/%d", cJSON_GetObjectItemCaseSensitive(d, "ready")->valueint,
			         cJSON_GetObjectItemCaseSensitive(d, "desired")->valueint);
			snprintf(rows[n].c[3], 200, ctx->output == DLK_OUTPUT_WIDE ? "%s" : "%.12s", str_of(d, "weights_sha256"));
			n++;
		}
		dlk_buf_reset(&b);
		putchar('\n');
		dlk_table_print(ctx, &b, rows, n, 4);
		fwrite(b.data, 1, b.len, stdout);
	} else if (served_why[0])
		dlk_warn(ctx, "served models: %s", served_why);
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	free(rows);
	dlk_buf_release(&b);
	cJSON_Delete(doc);
	cJSON_Delete(list);
	cJSON_Delete(served);
	dlk_data_store_release(&ds);
	project_free(spec);
	return rc;
}

static int run_impact(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_table_row *rows = NULL;
	cJSON *recs = cJSON_CreateArray(), *rec, *doc = NULL;
	char id[65], at[600] = "", full[72], total[256];
	int rc = 0, n = 0, ncols = 0, wide = ctx->output == DLK_OUTPUT_WIDE;
	struct dlk_prices pr;

	if (impact_downstream) {
		cJSON_Delete(recs);
		return downstream(ctx, args->pos[0]);
	}
	if (dlk_prices_from_env(&pr, &err))
		goto fail;
	if (resolve(ctx, args->pos[0], id, &err) ||
	    (impact_local ? find_local(ctx, id, recs, at, sizeof(at), &err) : find_cluster(ctx, id, recs, at, sizeof(at), &err)))
		goto fail;
	recs = sorted(recs);
	snprintf(full, sizeof(full), "sha256:%s", id);
	if (!cJSON_GetArraySize(recs)) {
		dlk_errf(&err, DLK_EXIT_NOTFOUND, "no run in %s used dataset %s", at, full);
		if (impact_local)
			dlk_err_hint(&err, "the runs in the cluster are in its history: leave out --local");
		else
			dlk_err_hint(&err, "the runs trained on this machine are in the local history: add --local");
		goto fail;
	}
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *arr;
		doc = cJSON_CreateObject();
		cJSON_AddStringToObject(doc, "dataset", full);
		cJSON_AddStringToObject(doc, "store", impact_local ? "local" : "cluster");
		/* what the runs of every project on the dataset used, in all (and cost, with a price) */
		cJSON_AddItemToObject(doc, "usage", dlk_usage_sum(recs, &pr));
		arr = cJSON_AddArrayToObject(doc, "runs");
		cJSON_ArrayForEach(rec, recs)
			cJSON_AddItemToArray(arr, run_json(rec));
		if (dlk_doc_print(stdout, doc, ctx->output == DLK_OUTPUT_JSON, &err))
			goto fail;
		goto out;
	}
	rows = xcalloc((size_t)cJSON_GetArraySize(recs) + 1, sizeof(*rows));
	{
		static const char *const h[] = { "RUN", "PROJECT", "OUTCOME", "STARTED (UTC)", "ACCURACY", "TRIGGER" };
		for (int i = 0; i < 6; i++)
			snprintf(rows[0].c[ncols++], 200, "%s", h[i]);
		if (wide)
			snprintf(rows[0].c[ncols++], 200, "TAG");
		snprintf(rows[0].c[ncols++], 200, "BUNDLE");
		snprintf(rows[0].c[ncols++], 200, "PATH");
	}
	n = 1;
	cJSON_ArrayForEach(rec, recs)
		table_row(rec, wide, &rows[n++]);
	dlk_table_print(ctx, &b, rows, n, ncols);
	fwrite(b.data, 1, b.len, stdout);
	{
		/* a note after the table, not a row of it: what the runs on the dataset used in all */
		cJSON *sum = dlk_usage_sum(recs, &pr);
		dlk_usage_total_text(sum, &pr, total, sizeof(total));
		cJSON_Delete(sum);
		if (total[0]) {
			fflush(stdout);
			dlk_info(ctx, "%s", total);
		}
	}
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	free(rows);
	dlk_buf_release(&b);
	cJSON_Delete(doc);
	cJSON_Delete(recs);
	return rc;
}

static const struct dlk_option impact_options[] = {
	OPT_BOOL(0, "local", &impact_local, "the runs trained here (.dlk/runs next to -f and in the directories below this one)"),
	OPT_BOOL(0, "downstream", &impact_downstream,
	         "instead of the runs, the datasets of the store made from DATASET: pipeline stages' outputs and "
	         "predictions, through every stage below it (their provenance)"),
	OPT_STRING(0, "from", &impact_from, "STORE", NULL, "the store that resolves a tag or an id prefix",
	           .def_doc = "data.store of the project file", .complete = COMPLETE_DIR),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_impact = {
	.usage = "DATASET",
	.description = "List the runs that used DATASET, newest first, from the run history: each run's id, project\n"
	               "(or job), outcome, start, test accuracy and trigger, and the bundle it made (its digest,\n"
	               "and its path for a run trained here); then what they used in all (GPU and CPU time, and\n"
	               "the cost with DLK_PRICE_GPU_HOUR/DLK_PRICE_CPU_HOUR set; -o json: usage). DATASET is sha256:ID (a dataset's id, or the\n"
	               "sha256 of a data file), or NAME@TAG, NAME or an id prefix, resolved through the store as\n"
	               "`dlk data show` does. The history is the cluster's (the ConfigMap NAME-runs of the\n"
	               "project -f names), or with --local those of every project trained here: next to -f\n"
	               "and in each directory right below this one.",
	.options = impact_options,
	.min_pos = 1,
	.max_pos = 1,
	.run = run_impact,
	.examples = "  $ dlk impact fashion@v1 --local\n"
	            "  $ dlk impact fashion-raw@v1 --downstream --from s3://team/data\n"
	            "  $ dlk impact sha256:1f2e3d4c --local -o json\n"
	            "  $ dlk impact fashion@v2 -o wide\n",
};
