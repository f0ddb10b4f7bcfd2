/* dlk predict: score every sample of a versioned dataset with a model bundle and push the
 * predictions as a new dataset (predictions.csv and provenance.json, lib/serve/predict.h), whose
 * provenance names the input dataset and the model so that `dlk lineage` follows it back. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/data/dataset.h"
#include "lib/nn/backend.h"
#include "lib/project/project.h"
#include "lib/serve/predict.h"
#include "lib/store/cache.h"
#include "lib/store/dataset.h"
#include "lib/store/provenance.h"
#include "lib/store/reader.h"
#include "lib/util/clock.h"
#include "lib/util/fsutil.h"
#include "lib/util/hash.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DLK_VERSION
#define DLK_VERSION "dev"
#endif

static const char *pr_data, *pr_from, *pr_to, *pr_name, *pr_images, *pr_labels;
static int pr_batch = 256, pr_threads;

static int on_data(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	struct dlk_progress *p = vctx;

	if (total)
		dlk_progress_draw(p, 0, "reading %s: %llu%%", what, done * 100 / total);
	return dlk_interrupted();
}

static int on_score(void *vctx, size_t done, size_t total)
{
	struct dlk_progress *p = vctx;

	dlk_progress_draw(p, 0, "scoring: %zu of %zu samples", done, total);
	return dlk_interrupted();
}

static int on_store(void *vctx, const char *what, unsigned long long done, unsigned long long total)
{
	return on_data(vctx, what, done, total);
}

/* provenance.json: what the predictions were made from; no times, so that the same model on the
 * same data gives the same dataset */
static char *provenance(const struct dlk_serve_model *m, const char *bundle_sha, const char *in_id, const char *in_tag,
                        const char *in_store, const char *images, const char *labels, const struct dlk_predictions *p)
{
	cJSON *o = cJSON_CreateObject(), *in, *mo;
	const cJSON *prov = cJSON_GetObjectItemCaseSensitive(m->bundle.meta, "provenance");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(prov, "run_id");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->bundle.meta, "name");
	char buf[80];
	char *s;

	cJSON_AddStringToObject(o, "kind", "predictions");
	in = cJSON_AddObjectToObject(o, "input");
	snprintf(buf, sizeof(buf), "sha256:%s", in_id);
	cJSON_AddStringToObject(in, "id", buf);
	if (in_tag)
		cJSON_AddStringToObject(in, "tag", in_tag);
	cJSON_AddStringToObject(in, "store", in_store);
	cJSON_AddStringToObject(in, "images", images);
	cJSON_AddStringToObject(in, "labels", labels);
	mo = cJSON_AddObjectToObject(o, "model");
	if (cJSON_IsString(name))
		cJSON_AddStringToObject(mo, "name", name->valuestring);
	snprintf(buf, sizeof(buf), "sha256:%s", bundle_sha);
	cJSON_AddStringToObject(mo, "bundle_sha256", buf);
	cJSON_AddStringToObject(mo, "weights_sha256", m->bundle.weights_sha256);
	if (cJSON_IsString(run))
		cJSON_AddStringToObject(mo, "run_id", run->valuestring);
	cJSON_AddStringToObject(o, "dlk_version", DLK_VERSION);
	cJSON_AddNumberToObject(o, "samples", (double)p->n);
	cJSON_AddNumberToObject(o, "classes", p->k);
	cJSON_AddNumberToObject(o, "correct", (double)p->correct);
	s = dlk_json_print(o);
	cJSON_Delete(o);
	return s;
}

static int write_out(const char *dir, const char *name, const char *data, size_t len, char **path, struct dlk_err *err)
{
	*path = xasprintf("%s/%s", dir, name);
	return dlk_write_file_atomic(*path, data, len, 0644, err);
}

static int run_predict(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = NULL;
	struct dlk_data_store out_ds = { 0 }, in_ds = { 0 };
	struct dlk_store *in_store = NULL;
	struct dlk_serve_model model = { 0 };
	int model_loaded = 0, have_cache = 0, have_reader = 0;
	struct dlk_cache cache;
	struct dlk_dataset_reader reader;
	struct dlk_data dspec;
	struct dlk_data_opts dopts;
	struct dlk_dataset data = DLK_DATASET_INIT;
	struct dlk_predictions pred = DLK_PREDICTIONS_INIT;
	struct dlk_manifest outm = DLK_MANIFEST_INIT;
	struct dlk_push_stats st = { 0 };
	struct dlk_progress bar = { ctx, 0, 0 };
	char in_id[65], bundle_sha[65], tmpl[] = "dlk-predict-XXXXXX";
	char *csv = NULL, *prov = NULL, *csv_path = NULL, *prov_path = NULL, *tmpdir = NULL;
	const char *images = pr_images, *labels = pr_labels, *in_tag = NULL;
	size_t csv_len = 0;
	double t0 = dlk_now(), t_read = 0, t_score = 0;
	int rc = 0;

	dlk_interrupt_catch();
	if (!pr_data || !pr_name) {
		dlk_errf(&err, DLK_EXIT_USAGE, "%s is required", !pr_data ? "--data DATASET" : "--name NAME@TAG");
		dlk_err_hint(&err, "dlk predict BUNDLE --data DATASET --name NAME@TAG [--to STORE]");
		goto fail;
	}
	if (!!pr_images != !!pr_labels) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--images and --labels go together");
		goto fail;
	}
	{
		char why[160];
		if (dlk_dataset_tag_check(pr_name, why, sizeof(why))) {
			dlk_errf(&err, DLK_EXIT_USAGE, "--name '%s': %s", dlk_visible(pr_name), why);
			goto fail;
		}
	}
	if (dlk_data_maybe_project(ctx, pr_to, &spec, &err) || dlk_data_store_open(ctx, pr_to, spec, &out_ds, &err))
		goto fail;
	if (pr_from) {
		if (dlk_data_store_open(ctx, pr_from, spec, &in_ds, &err))
			goto fail;
		in_store = in_ds.store;
	} else {
		in_store = out_ds.store;
	}
	if (dlk_sha256_file(args->pos[0], bundle_sha)) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "cannot read the model bundle '%s'", args->pos[0]);
		goto fail;
	}
	if (dlk_serve_model_load(&model, NULL, args->pos[0], dlk_backend_cpu(), &err))
		goto fail;
	model_loaded = 1;
	if (dlk_dataset_resolve(in_store, pr_data, 1, in_id, &err))
		goto fail;
	if (!strchr(pr_data, ':'))
		in_tag = pr_data;
	if (!dlk_store_is_local(in_store)) {
		if (dlk_cache_open(".dlk/cache", 20ull << 30, &cache, &err))
			goto fail;
		have_cache = 1;
	}
	if (dlk_dataset_reader_open(&reader, in_store, in_id, have_cache ? &cache : NULL, &err))
		goto fail;
	have_reader = 1;
	if (!images && dlk_predict_pick_idx(&reader.m, &images, &labels, &err))
		goto fail;

	memset(&dspec, 0, sizeof(dspec));
	dspec.format = DLK_DATA_IDX;
	dspec.test.images.url = (char *)images;
	dspec.test.labels.url = (char *)labels;
	dspec.scale = model.bundle.has_scaling ? model.bundle.scale : (float)(1.0 / 255.0);
	dspec.mean = model.bundle.has_scaling ? model.bundle.mean : 0.0f;
	dspec.std = model.bundle.has_scaling ? model.bundle.std : 1.0f;
	dspec.csv_header = -1;
	dspec.csv_label_column = -1;
	dspec.cache_dir = (char *)".dlk/cache";
	dspec.max_bytes = 8ll << 30;
	memset(&dopts, 0, sizeof(dopts));
	dopts.progress = on_data;
	dopts.progress_ctx = &bar;
	memcpy(dopts.shape, model.sig.dims, sizeof(dopts.shape));
	dopts.resolve = dlk_dataset_reader_resolve;
	dopts.digest = dlk_dataset_reader_digest;
	dopts.resolve_ctx = &reader;
	if (dlk_data_load(&dspec, "test", &dopts, &data, &err))
		goto fail;
	dlk_backend_cpu()->set_threads(pr_threads); /* 0: every online core */
	t_read = dlk_now();
	if (dlk_predict_run(&model, &data, pr_batch, on_score, &bar, &pred, &err))
		goto fail;
	t_score = dlk_now();
	dlk_progress_clear(&bar);

	csv = dlk_predict_csv(&pred, &data, model.sig.classes, &csv_len);
	prov = provenance(&model, bundle_sha, in_id, in_tag, dlk_store_url(in_store), images, labels, &pred);
	{
		const char *t = getenv("TMPDIR");
		char *d = xasprintf("%s/%s", t && *t ? t : "/tmp", tmpl);
		tmpdir = mkdtemp(d);
		if (!tmpdir) {
			free(d);
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot create a temporary directory");
			goto fail;
		}
	}
	if (write_out(tmpdir, "predictions.csv", csv, csv_len, &csv_path, &err) ||
	    write_out(tmpdir, DLK_PROVENANCE_FILE, prov, strlen(prov), &prov_path, &err))
		goto fail;
	{
		const char *paths[] = { tmpdir };
		if (dlk_manifest_build(paths, 1, NULL, NULL, &outm, &err))
			goto fail;
	}
	if (dlk_dataset_push(out_ds.store, &outm, &pr_name, 1, on_store, &bar, &st, &err)) {
		dlk_err_prefix(&err, "cannot push the predictions to '%s'", dlk_store_url(out_ds.store));
		goto fail;
	}
	dlk_progress_clear(&bar);
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *o = cJSON_CreateObject();
		char id[72], *s;
		snprintf(id, sizeof(id), "sha256:%s", outm.id);
		cJSON_AddStringToObject(o, "id", id);
		cJSON_AddStringToObject(o, "tag", strchr(pr_name, '@') ? pr_name : "");
		if (!strchr(pr_name, '@')) {
			char *t = xasprintf("%s@latest", pr_name);
			cJSON_ReplaceItemInObject(o, "tag", cJSON_CreateString(t));
			free(t);
		}
		cJSON_AddStringToObject(o, "store", dlk_store_url(out_ds.store));
		snprintf(id, sizeof(id), "sha256:%s", in_id);
		cJSON_AddStringToObject(o, "input", id);
		snprintf(id, sizeof(id), "sha256:%s", bundle_sha);
		cJSON_AddStringToObject(o, "model", id);
		cJSON_AddNumberToObject(o, "samples", (double)pred.n);
		if (data.y && !data.t && pred.n)
			cJSON_AddNumberToObject(o, "accuracy", (double)pred.correct / (double)pred.n);
		{
			/* where the time went: loading the model and the data, the forward passes, the
			 * predictions' text and the push */
			cJSON *sec = cJSON_AddObjectToObject(o, "seconds");
			double t_end = dlk_now();
			cJSON_AddNumberToObject(sec, "read", t_read - t0);
			cJSON_AddNumberToObject(sec, "score", t_score - t_read);
			cJSON_AddNumberToObject(sec, "write", t_end - t_score);
		}
		s = ctx->output == DLK_OUTPUT_JSON ? dlk_json_print(o) : yamljson_emit(o, &err);
		cJSON_Delete(o);
		if (!s)
			goto fail;
		fputs(s, stdout);
		if (ctx->output == DLK_OUTPUT_JSON)
			fputc('\n', stdout);
		free(s);
	} else {
		printf("sha256:%s\n", outm.id);
		dlk_info(ctx, "scored %zu samples of sha256:%.12s with %s: %zu predicted as labelled (%.2f%%); pushed to %s as %s",
		         pred.n, in_id, dlk_visible(args->pos[0]), pred.correct,
		         pred.n ? 100.0 * (double)pred.correct / (double)pred.n : 0.0, dlk_store_url(out_ds.store),
		         dlk_visible(pr_name));
	}
	goto out;
fail:
	dlk_progress_clear(&bar);
	rc = dlk_report(ctx, &err);
out:
	if (csv_path)
		unlink(csv_path);
	if (prov_path)
		unlink(prov_path);
	if (tmpdir)
		rmdir(tmpdir);
	free(tmpdir);
	free(csv_path);
	free(prov_path);
	free(csv);
	free(prov);
	dlk_manifest_release(&outm);
	dlk_predictions_release(&pred);
	dlk_dataset_release(&data);
	if (have_reader)
		dlk_dataset_reader_release(&reader);
	if (have_cache)
		dlk_cache_release(&cache);
	if (model_loaded)
		dlk_serve_model_release(&model);
	dlk_data_store_release(&in_ds);
	dlk_data_store_release(&out_ds);
	project_free(spec);
	return rc;
}

static const struct dlk_option predict_options[] = {
	OPT_STRING(0, "data", &pr_data, "DATASET", NULL, "the dataset to score: NAME@TAG, NAME or sha256:ID"),
	OPT_STRING(0, "name", &pr_name, "NAME[@TAG]", NULL, "the tag for the predictions (NAME alone is NAME@latest)"),
	OPT_STRING(0, "to", &pr_to, "STORE", NULL, "the store the predictions go to: a directory, s3://BUCKET/PREFIX or "
	           "pvc://CLAIM/PATH", .def_doc = "data.store of the project file", .complete = COMPLETE_DIR),
	OPT_STRING(0, "from", &pr_from, "STORE", NULL, "the store the input dataset is in", .def_doc = "the --to store",
	           .complete = COMPLETE_DIR),
	OPT_STRING(0, "images", &pr_images, "PATH", NULL, "the IDX images file inside the dataset",
	           .def_doc = "the one *images-idx3-ubyte* file (of several, t10k-*)"),
	OPT_STRING(0, "labels", &pr_labels, "PATH", NULL, "the IDX labels file inside the dataset",
	           .def_doc = "the images file's name with labels-idx1-ubyte"),
	OPT_INT(0, "threads", &pr_threads, "N", 0, "threads of the forward pass", .min = 0, .max = 1024,
	        .def_doc = "the online cores"),
	OPT_INT(0, "batch", &pr_batch, "N", 256, "rows in one forward pass", .min = 1, .max = 65536),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_predict = {
	.usage = "BUNDLE --data DATASET --name NAME@TAG",
	.description = "Score every sample of a dataset with the model in BUNDLE (the serving code's forward pass,\n"
	               "on every core) and push the predictions to the store as a new dataset: predictions.csv\n"
	               "(index, label, predicted class, one probability per class) and provenance.json (the\n"
	               "input dataset's id, the bundle's sha256, the weights' sha256), then tag it NAME@TAG.\n"
	               "Print its id. The same model on the same data, named the same way, with the same --threads\n"
	               "and --batch, gives the same dataset id.",
	.options = predict_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_predict,
	.examples = "  $ dlk predict fashion.dlk --data fashion@v1 --to ./store --name fashion-preds@v1\n"
	            "  $ dlk predict fashion.dlk --data sha256:1f2e3d --from s3://datasets/dlk --to ./store --name preds -o json\n",
};
