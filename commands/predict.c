/* dlk predict: score every sample of a versioned dataset with a model bundle and push the
 * predictions as a new dataset (predictions.csv and provenance.json, lib/serve/predict.h), whose
 * provenance names the input dataset and the model so that `dlk lineage` follows it back. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/train_submit.h"
#include "commands/ui.h"
#include "lib/jobs/submit.h"
#include "lib/kube/api.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/data/dataset.h"
#include "lib/nn/backend.h"
#include "lib/project/project.h"
#include "lib/serve/predict.h"
#include "lib/serve/predict_workers.h"
#include "lib/store/cache.h"
#include "lib/store/dataset.h"
#include "lib/store/reader.h"
#include "lib/util/clock.h"
#include "lib/util/hash.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *pr_data, *pr_from, *pr_to, *pr_name, *pr_images, *pr_labels;
static const char *pr_job, *pr_secret, *pr_cpu = "1", *pr_memory = "1Gi";
static int pr_batch = 256, pr_threads, pr_workers, pr_rank = -1, pr_wait, pr_dry_run;
static double pr_timeout;

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

/* --rank R of --workers N: scores rank R's part and pushes it, unless the store has it already;
 * rank R > 0 prints the part's id (or, with -o json, what it holds) */
static int score_part(struct dlk_ctx *ctx, const struct dlk_predict_workers *w, struct dlk_progress *bar,
                      struct dlk_err *err)
{
	struct dlk_predict_rank_result res = DLK_PREDICT_RANK_RESULT_INIT;
	size_t lo, hi;

	if (dlk_predict_rank(w, pr_rank, &res, err)) {
		dlk_predict_rank_result_release(&res);
		return -1;
	}
	dlk_progress_clear(bar);
	lo = res.first;
	hi = res.first + res.count;
	if (res.scored)
		dlk_info(ctx, "rank %d of %d: scored samples %zu to %zu (%zu predicted as labelled); pushed as %s (sha256:%.12s)",
		         pr_rank, pr_workers, lo, hi, res.correct, dlk_visible(res.tag), res.id);
	else
		dlk_info(ctx, "rank %d of %d: its part (samples %zu to %zu) is in the store already: %s (sha256:%.12s)", pr_rank,
		         pr_workers, lo, hi, dlk_visible(res.tag), res.id);
	if (pr_rank > 0 && ctx->output == DLK_OUTPUT_JSON) {
		cJSON *j = cJSON_CreateObject();
		char buf[80], *js;
		snprintf(buf, sizeof(buf), "sha256:%s", res.id);
		cJSON_AddStringToObject(j, "part", buf);
		cJSON_AddStringToObject(j, "tag", res.tag);
		cJSON_AddNumberToObject(j, "rank", pr_rank);
		cJSON_AddNumberToObject(j, "workers", pr_workers);
		cJSON_AddNumberToObject(j, "first", (double)lo);
		cJSON_AddNumberToObject(j, "count", (double)(hi - lo));
		js = dlk_json_print(j);
		cJSON_Delete(j);
		printf("%s\n", js);
		free(js);
	} else if (pr_rank > 0) {
		printf("sha256:%s\n", res.id);
	}
	dlk_predict_rank_result_release(&res);
	return 0;
}

struct join_wait {
	struct dlk_ctx *ctx;
	struct dlk_progress *bar;
	double told;
};

/* rank 0 waiting for the other ranks' parts: progress on a terminal, a line a minute in a log */
static int on_join_wait(void *vctx, int have, int workers, struct dlk_err *err)
{
	struct join_wait *jw = vctx;

	dlk_progress_draw(jw->bar, 0, "rank 0: waiting for the other ranks' parts: %d of %d in the store", have, workers);
	if (!jw->ctx->tty_err && dlk_now() - jw->told >= 60) {
		dlk_info(jw->ctx, "rank 0: waiting for the other ranks' parts: %d of %d in the store", have, workers);
		jw->told = dlk_now();
	}
	if (dlk_interrupted())
		return dlk_errf(err, DLK_EXIT_INTERRUPTED, "interrupted waiting for the parts: %d of %d in the store", have,
		                workers);
	return 0;
}

/* --workers N (no --rank): an Indexed Job of N pods (the program Job lib/render makes) whose rank
 * r runs `dlk predict --rank r --workers N` on the bundle, pushed to the store as a dataset of its
 * own; rank 0 joins the parts into NAME@TAG. */
static int submit_workers(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *proj = NULL, *spec = NULL;
	struct dlk_data_store out_ds = { 0 };
	struct kube_client *c = NULL;
	struct dlk_progress bar = { ctx, 0, 0 };
	struct dlk_buf bundle = DLK_BUF_INIT;
	cJSON *objects = NULL;
	char mid[65], id[65], *yaml = NULL, *job = pr_job ? xstrdup(pr_job) : dlk_predict_job_name(pr_name), *store_url;
	char *tag = strchr(pr_name, '@') ? xstrdup(pr_name) : xasprintf("%s@latest", pr_name);
	const char *ns = ctx->namespace_, *secret = pr_secret;
	size_t ylen = 0;
	int rc = 0;

	if (!pr_dry_run && ctx->output != DLK_OUTPUT_TEXT && ctx->output != DLK_OUTPUT_JSON) {
		dlk_errf(&err, DLK_EXIT_USAGE, "submitting prints text or json, not '%s'", dlk_output_names[ctx->output]);
		goto fail;
	}
	if (pr_wait && pr_dry_run) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--dry-run prints the objects and submits nothing: there is nothing to --wait for");
		goto fail;
	}
	if (dlk_data_maybe_project(ctx, pr_to, &proj, &err) || dlk_data_store_open(ctx, pr_to, proj, &out_ds, &err))
		goto fail;
	store_url = (char *)dlk_store_url(out_ds.store);
	if (dlk_predict_store_reachable(store_url, "--to", &err) ||
	    (pr_from && dlk_predict_store_reachable(pr_from, "--from", &err)))
		goto fail;
	if (!secret && proj)
		secret = proj->data.store_secret;
	{
		char msg[512];
		if (dlk_buf_read_file(&bundle, args->pos[0], 0, msg, sizeof(msg))) {
			dlk_errf(&err, DLK_EXIT_CONFIG, "cannot read the model bundle '%s'", dlk_visible(args->pos[0]));
			goto fail;
		}
	}
	{
		/* the bundle as a dataset of the store, which every rank gets; --dry-run: its id only */
		const char *names[] = { "model.dlk" }, *data[] = { bundle.data ? bundle.data : "" };
		if (dlk_dataset_push_mem(out_ds.store, names, data, &bundle.len, 1, NULL, !pr_dry_run, on_store, &bar, mid,
		                         &err)) {
			dlk_err_prefix(&err, "cannot push to '%s'", store_url);
			goto fail;
		}
		dlk_progress_clear(&bar);
	}
	{
		struct dlk_predict_job pj = { .job = job, .bundle_id = mid, .store = store_url, .from = pr_from, .data = pr_data,
			                      .tag = tag, .images = pr_images, .labels = pr_labels, .batch = pr_batch,
			                      .threads = pr_threads, .workers = pr_workers, .secret = secret, .cpu = pr_cpu,
			                      .memory = pr_memory };
		yaml = dlk_predict_job_yaml(&pj, &ylen);
	}
	if (!(spec = project_load_mem(yaml, ylen, job, NULL, 0, &err))) {
		dlk_err_prefix(&err, "the Job of the workers");
		goto fail;
	}
	if (!pr_dry_run) {
		if (!(c = dlk_kube_client(ctx, &err)))
			goto fail;
		if (!ns)
			ns = kube_client_namespace(c);
	}
	if (!(objects = render_train_project(spec, ctx->file, NULL, ns, &err)))
		goto fail;
	if (pr_dry_run) {
		if (dlk_print_objects(ctx, objects, &err))
			goto fail;
		goto out;
	}
	/* a Job of that name from an earlier run goes first (its parts stay in the store) */
	{
		int n = 0, replaced;
		dlk_interrupt_catch();
		if ((replaced = dlk_job_replace(c, ns, job, 300, dlk_print_deleted, ctx, &n, &err)) < 0)
			goto fail;
		if (replaced)
			dlk_info(ctx, "deleted the earlier job '%s' (%d objects)", job, n);
	}
	if (dlk_submit_objects(c, objects, NULL, &err) < 0)
		goto fail;
	dlk_kube_warnings(ctx, c);
	dlk_info(ctx, "job '%s' submitted to namespace '%s' (%d worker%s): the predictions will be %s in %s", job, ns,
	         pr_workers, pr_workers == 1 ? "" : "s", dlk_visible(tag), store_url);
	if (!pr_wait) {
		if (ctx->output == DLK_OUTPUT_JSON) {
			cJSON *j = cJSON_CreateObject();
			char *s;
			cJSON_AddStringToObject(j, "job", job);
			cJSON_AddStringToObject(j, "namespace", ns);
			cJSON_AddNumberToObject(j, "workers", pr_workers);
			cJSON_AddStringToObject(j, "tag", tag);
			cJSON_AddStringToObject(j, "store", store_url);
			s = dlk_json_print(j);
			cJSON_Delete(j);
			printf("%s\n", s);
			free(s);
		} else {
			printf("job '%s' submitted (%d workers)\nnext:\n  dlk status%s %s\n  dlk logs%s %s\n", job, pr_workers,
			       dlk_ns_flag(ctx, c, ns), job, dlk_ns_flag(ctx, c, ns), job);
		}
		goto out;
	}
	if ((rc = dlk_train_wait_job(ctx, c, ns, job, pr_timeout)))
		goto out;
	if (dlk_dataset_resolve(out_ds.store, tag, 0, id, &err)) {
		dlk_err_prefix(&err, "job '%s' succeeded, but the predictions", job);
		goto fail;
	}
	if (ctx->output == DLK_OUTPUT_JSON) {
		cJSON *j = cJSON_CreateObject();
		char buf[80], *s;
		snprintf(buf, sizeof(buf), "sha256:%s", id);
		cJSON_AddStringToObject(j, "id", buf);
		cJSON_AddStringToObject(j, "tag", tag);
		cJSON_AddStringToObject(j, "store", store_url);
		cJSON_AddStringToObject(j, "job", job);
		cJSON_AddStringToObject(j, "namespace", ns);
		cJSON_AddNumberToObject(j, "workers", pr_workers);
		s = dlk_json_print(j);
		cJSON_Delete(j);
		printf("%s\n", s);
		free(s);
	} else {
		printf("sha256:%s\n", id);
	}
	goto out;
fail:
	dlk_progress_clear(&bar);
	rc = dlk_report(ctx, &err);
out:
	dlk_kube_close(ctx, c);
	cJSON_Delete(objects);
	project_free(spec);
	project_free(proj);
	dlk_data_store_release(&out_ds);
	dlk_buf_release(&bundle);
	free(yaml);
	free(job);
	free(tag);
	return rc;
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
	struct dlk_progress bar = { ctx, 0, 0 };
	char in_id[65], bundle_sha[65];
	char out_id[65], *csv = NULL, *prov = NULL;
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
	if (pr_rank >= 0 && (pr_workers < 1 || pr_rank >= pr_workers)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--rank %d is not a rank of --workers %d", pr_rank, pr_workers);
		dlk_err_hint(&err, "--rank R --workers N scores rank R's part, R from 0 to N - 1");
		goto fail;
	}
	if ((pr_wait || pr_dry_run || pr_job || pr_secret || pr_timeout > 0) && !(pr_workers > 0 && pr_rank < 0)) {
		dlk_errf(&err, DLK_EXIT_USAGE, "--%s goes with --workers N (scoring on a cluster)",
		         pr_wait ? "wait" : pr_dry_run ? "dry-run" : pr_job ? "job" : pr_secret ? "store-secret" : "timeout");
		goto fail;
	}
	if (pr_workers > 0 && pr_rank < 0)
		return submit_workers(ctx, args);
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
	if (pr_rank >= 0) {
		/* one rank of --workers N: its part, pushed; rank 0 then joins the parts */
		struct dlk_predict_workers w = { .model = &model, .data = &data, .input_id = in_id, .bundle_sha = bundle_sha,
			                         .images = images, .labels = labels, .name = pr_name, .batch = pr_batch,
			                         .threads = pr_threads, .workers = pr_workers, .store = out_ds.store,
			                         .progress = on_score, .store_progress = on_store, .progress_ctx = &bar };
		struct join_wait jw = { ctx, &bar, 0 };
		if (!have_cache && !dlk_store_is_local(out_ds.store)) {
			if (dlk_cache_open(".dlk/cache", 20ull << 30, &cache, &err))
				goto fail;
			have_cache = 1;
		}
		w.cache = have_cache ? &cache : NULL;
		if (score_part(ctx, &w, &bar, &err))
			goto fail;
		if (pr_rank > 0)
			goto out;
		jw.told = dlk_now();
		if (dlk_predict_join(&w, on_join_wait, &jw, &pred, &csv, &csv_len, &err))
			goto fail;
		dlk_progress_clear(&bar);
		t_score = dlk_now();
		dlk_info(ctx, "rank 0: joined the %d parts (%.1f s waiting for them)", pr_workers, t_score - jw.told);
	} else {
		if (dlk_predict_run(&model, &data, pr_batch, on_score, &bar, &pred, &err))
			goto fail;
		t_score = dlk_now();
		dlk_progress_clear(&bar);
		csv = dlk_predict_csv(&pred, &data, model.sig.classes, &csv_len);
	}
	prov = dlk_predict_provenance(&model, bundle_sha, in_id, in_tag, dlk_store_url(in_store), images, labels, &pred);
	if (dlk_predict_push(out_ds.store, pr_name, csv, csv_len, prov, on_store, &bar, out_id, &err))
		goto fail;
	dlk_progress_clear(&bar);
	if (ctx->output == DLK_OUTPUT_JSON || ctx->output == DLK_OUTPUT_YAML) {
		cJSON *o = cJSON_CreateObject();
		char id[72], *s;
		snprintf(id, sizeof(id), "sha256:%s", out_id);
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
		if (data.y && !dlk_dataset_has_targets(&data) && pred.n)
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
		s = dlk_doc_text(o, ctx->output == DLK_OUTPUT_JSON, &err);
		cJSON_Delete(o);
		if (!s)
			goto fail;
		fputs(s, stdout);
		free(s);
	} else {
		printf("sha256:%s\n", out_id);
		dlk_info(ctx, "scored %zu samples of sha256:%.12s with %s: %zu predicted as labelled (%.2f%%); pushed to %s as %s",
		         pred.n, in_id, dlk_visible(args->pos[0]), pred.correct,
		         pred.n ? 100.0 * (double)pred.correct / (double)pred.n : 0.0, dlk_store_url(out_ds.store),
		         dlk_visible(pr_name));
	}
	goto out;
fail:
	dlk_progress_clear(&bar);
	{
		char why[sizeof(err.msg)];
		snprintf(why, sizeof(why), "%s", err.msg);
		rc = dlk_report(ctx, &err);
		/* a rank's last line is the cause its Job's status shows (the pod's termination message) */
		if (pr_rank >= 0) {
			struct dlk_err line = DLK_ERR_INIT;
			dlk_predict_rank_failed(&line, rc, pr_rank, pr_workers, why);
			fprintf(stderr, "%s\n", dlk_visible(line.msg));
		}
	}
out:
	free(csv);
	free(prov);
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
	OPT_INT(0, "workers", &pr_workers, "N", 0, "score on the cluster with N pods (an Indexed Job), rank 0 joining their parts",
	        .min = 1, .max = 1000, .def_doc = "score here, in this process"),
	OPT_INT(0, "rank", &pr_rank, "R", -1, "with --workers N: be rank R, score its part and push it (rank 0 then waits "
	        "for the others' and joins them); what each pod runs", .min = 0, .max = 999, .flags = OPT_HIDE_DEFAULT),
	OPT_BOOL(0, "wait", &pr_wait, "with --workers: stay until the job ends, then print the predictions' id", .flags = OPT_NONEG),
	OPT_BOOL(0, "dry-run", &pr_dry_run, "with --workers: print the Kubernetes objects, submit nothing (the bundle's "
	         "dataset id is computed, not pushed)", .flags = OPT_NONEG),
	OPT_STRING(0, "job", &pr_job, "NAME", NULL, "with --workers: the Job's name; an earlier Job of that name is replaced",
	           .def_doc = "NAME-predict of --name"),
	OPT_STRING(0, "store-secret", &pr_secret, "SECRET", NULL, "with --workers: the Secret with the store's credentials "
	           "(AWS_*), given to the pods", .def_doc = "data.store_secret of the project file"),
	OPT_STRING(0, "cpu", &pr_cpu, "QUANTITY", "1", "with --workers: the CPU of each pod"),
	OPT_STRING(0, "memory", &pr_memory, "QUANTITY", "1Gi", "with --workers: the memory of each pod"),
	OPT_DURATION(0, "timeout", &pr_timeout, "DURATION", "with --wait: give up waiting after this long", .def_doc = "no limit"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_predict = {
	.usage = "BUNDLE --data DATASET --name NAME@TAG",
	.description = "Score every sample of a dataset with the model in BUNDLE (the serving code's forward pass,\n"
	               "on every core) and push the predictions to the store as a new dataset: predictions.csv\n"
	               "(index, label, predicted class, one probability per class) and provenance.json (the\n"
	               "input dataset's id, the bundle's sha256, the weights' sha256), then tag it NAME@TAG.\n"
	               "Print its id. The same model on the same data, named the same way, with the same --threads\n"
	               "and --batch, gives the same dataset id. With --workers N it scores on the cluster: an Indexed\n"
	               "Job of N pods, rank r scoring its part (whole batches) and pushing it to the store, rank 0\n"
	               "joining the parts into the same dataset one process makes.",
	.options = predict_options,
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_BUNDLE,
	.run = run_predict,
	.examples = "  $ dlk predict fashion.dlk --data fashion@v1 --to ./store --name fashion-preds@v1\n"
	            "  $ dlk predict fashion.dlk --data sha256:1f2e3d --from s3://datasets/dlk --to ./store --name preds -o json\n"
	            "  $ dlk predict fashion.dlk --data fashion@v1 --to s3://datasets/dlk --name preds@v1 --workers 4 --wait\n",
};
