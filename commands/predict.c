/* dlk predict: score every sample of a versioned dataset with a model bundle and push the
 * predictions as a new dataset (predictions.csv and provenance.json, lib/serve/predict.h), whose
 * provenance names the input dataset and the model so that `dlk lineage` follows it back. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/train_submit.h"
#include "commands/ui.h"
#include "lib/jobs/jobdelete.h"
#include "lib/kube/api.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
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
#include <time.h>
#include <unistd.h>

#ifndef DLK_VERSION
#define DLK_VERSION "dev"
#endif

static const char *pr_data, *pr_from, *pr_to, *pr_name, *pr_images, *pr_labels;
static const char *pr_job, *pr_secret, *pr_cpu = "1", *pr_memory = "1Gi";
static int pr_batch = 256, pr_threads, pr_workers, pr_rank = -1, pr_wait, pr_dry_run;
static double pr_timeout;

#define PART_POLL_S 0.5 /* how often rank 0 looks for the other ranks' parts */

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


static char *read_local(const char *path, size_t *len, struct dlk_err *err)
{
	FILE *f = fopen(path, "rb");
	struct dlk_buf b = DLK_BUF_INIT;
	char chunk[65536];
	size_t n;

	if (!f) {
		dlk_errf(err, DLK_EXIT_FAIL, "cannot read '%s'", path);
		return NULL;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dlk_buf_add(&b, chunk, n);
	fclose(f);
	return dlk_buf_detach(&b, len);
}

/* A file of dataset id in store s, read whole (through the node cache for a remote store). */
static char *read_dataset_file(struct dlk_store *s, struct dlk_cache *cache, const char *id, const char *path, size_t *len,
                               struct dlk_err *err)
{
	struct dlk_dataset_reader r;
	char *local = NULL, *text = NULL, sha[65];

	if (dlk_dataset_reader_open(&r, s, id, cache, err))
		return NULL;
	if (!dlk_dataset_reader_resolve(&r, path, &local, sha, err))
		text = read_local(local, len, err);
	free(local);
	dlk_dataset_reader_release(&r);
	return text;
}

/* A new directory under $TMPDIR, or NULL with err. */
static char *temp_dir(struct dlk_err *err)
{
	return dlk_mkdtemp("dlk-predict", err);
}

/* Pushes the files names[i] with contents data[i] as one dataset tagged tag (NULL: none); its id
 * in id. push 0: the id only. */
static int push_files(struct dlk_store *s, const char *const *names, char *const *data, const size_t *lens, int n,
                      const char *tag, int push, struct dlk_progress *bar, char id[65], struct dlk_err *err)
{
	struct dlk_manifest m = DLK_MANIFEST_INIT;
	struct dlk_push_stats st = { 0 };
	char *dir = temp_dir(err), **paths = xcalloc((size_t)n, sizeof(char *));
	int rc = -1;

	if (!dir)
		goto out;
	for (int i = 0; i < n; i++) {
		paths[i] = xasprintf("%s/%s", dir, names[i]);
		if (dlk_write_file_atomic(paths[i], data[i], lens[i], 0644, err))
			goto out;
	}
	{
		const char *roots[] = { dir };
		if (dlk_manifest_build(roots, 1, NULL, NULL, &m, err))
			goto out;
	}
	if (push && dlk_dataset_push(s, &m, &tag, tag ? 1 : 0, on_store, bar, &st, err)) {
		dlk_err_prefix(err, "cannot push to '%s'", dlk_store_url(s));
		goto out;
	}
	memcpy(id, m.id, 65);
	rc = 0;
out:
	for (int i = 0; i < n; i++) {
		if (paths[i])
			unlink(paths[i]);
		free(paths[i]);
	}
	free(paths);
	if (dir)
		rmdir(dir);
	free(dir);
	dlk_manifest_release(&m);
	return rc;
}

static int write_out(const char *dir, const char *name, const char *data, size_t len, char **path, struct dlk_err *err)
{
	*path = xasprintf("%s/%s", dir, name);
	return dlk_write_file_atomic(*path, data, len, 0644, err);
}


/* The tag of rank's part of this run (NULL with err when the name is too long for one). */
static char *part_tag(const char *key, int rank, struct dlk_err *err)
{
	char *t = dlk_predict_part_tag(pr_name, rank, pr_workers, key), why[160];

	if (dlk_dataset_tag_check(t, why, sizeof(why))) {
		dlk_errf(err, DLK_EXIT_USAGE, "--name '%s': the parts' tag '%s' is not one: %s", dlk_visible(pr_name), dlk_visible(t),
		         why);
		free(t);
		return NULL;
	}
	return t;
}

/* --rank R of --workers N: scores rank R's part of the samples and pushes it (part.csv and
 * part.json), unless the store has it already (a re-run, a restarted rank). */
static int score_part(struct dlk_ctx *ctx, struct dlk_serve_model *m, const struct dlk_dataset *data, const char *bundle_sha,
                      const char *in_id, const char *images, const char *labels, struct dlk_store *out,
                      struct dlk_progress *bar, struct dlk_err *err)
{
	struct dlk_predictions pred = DLK_PREDICTIONS_INIT;
	struct dlk_predict_part part;
	int b = dlk_predict_batch(m, pr_batch), rc = -1;
	char key[17], id[65], *tag, *text[2] = { NULL, NULL };
	size_t lens[2], lo, hi;
	const char *names[] = { DLK_PREDICT_PART_CSV, DLK_PREDICT_PART_JSON };

	dlk_predict_part_key(in_id, bundle_sha, images, labels, b, pr_threads, pr_workers, key);
	if (!(tag = part_tag(key, pr_rank, err)))
		return -1;
	dlk_predict_part_range(data->n, b, pr_rank, pr_workers, &lo, &hi);
	if (!dlk_dataset_resolve(out, tag, 0, id, err)) {
		dlk_info(ctx, "rank %d of %d: its part (samples %zu to %zu) is in the store already: %s (sha256:%.12s)", pr_rank,
		         pr_workers, lo, hi, dlk_visible(tag), id);
		rc = 0;
		goto out;
	}
	if (err->code != DLK_EXIT_NOTFOUND)
		goto out;
	dlk_err_clear(err);
	if (dlk_predict_run_range(m, data, lo, hi, b, on_score, bar, &pred, err))
		goto out;
	dlk_progress_clear(bar);
	memset(&part, 0, sizeof(part));
	memcpy(part.key, key, sizeof(part.key));
	part.rank = pr_rank;
	part.workers = pr_workers;
	part.first = lo;
	part.count = hi - lo;
	part.samples = data->n;
	part.correct = pred.correct;
	text[0] = dlk_predict_csv_rows(&pred, data, m->sig.classes, &lens[0]);
	text[1] = dlk_predict_part_json(&part);
	lens[1] = strlen(text[1]);
	if (push_files(out, names, text, lens, 2, tag, 1, bar, id, err))
		goto out;
	dlk_progress_clear(bar);
	dlk_info(ctx, "rank %d of %d: scored samples %zu to %zu (%zu predicted as labelled); pushed as %s (sha256:%.12s)",
	         pr_rank, pr_workers, lo, hi, pred.correct, dlk_visible(tag), id);
	rc = 0;
out:
	if (rc == 0 && pr_rank > 0 && ctx->output == DLK_OUTPUT_JSON) {
		cJSON *j = cJSON_CreateObject();
		char buf[80], *js;
		snprintf(buf, sizeof(buf), "sha256:%s", id);
		cJSON_AddStringToObject(j, "part", buf);
		cJSON_AddStringToObject(j, "tag", tag);
		cJSON_AddNumberToObject(j, "rank", pr_rank);
		cJSON_AddNumberToObject(j, "workers", pr_workers);
		cJSON_AddNumberToObject(j, "first", (double)lo);
		cJSON_AddNumberToObject(j, "count", (double)(hi - lo));
		js = dlk_json_print(j);
		cJSON_Delete(j);
		printf("%s\n", js);
		free(js);
	} else if (rc == 0 && pr_rank > 0) {
		printf("sha256:%s\n", id);
	}
	free(text[0]);
	free(text[1]);
	free(tag);
	dlk_predictions_release(&pred);
	return rc;
}

/* Rank 0: waits until every rank's part is in the store, reads them, checks that they are the
 * parts of this run covering every sample once, and makes the whole predictions.csv of them: the
 * header and the parts' rows in rank order, the bytes one process writes. *pred: the totals
 * (n, k, correct) for provenance.json. */
static int join_parts(struct dlk_ctx *ctx, struct dlk_serve_model *m, const struct dlk_dataset *data, const char *bundle_sha,
                      const char *in_id, const char *images, const char *labels, struct dlk_store *out,
                      struct dlk_cache *cache, struct dlk_progress *bar, struct dlk_predictions *pred, char **csv,
                      size_t *csv_len, struct dlk_err *err)
{
	struct dlk_predict_part *parts = xcalloc((size_t)pr_workers, sizeof(*parts));
	char (*ids)[65] = xcalloc((size_t)pr_workers, 65);
	struct dlk_buf b = DLK_BUF_INIT;
	char key[17], *h;
	int have = 0, rc = -1, batch = dlk_predict_batch(m, pr_batch);
	size_t hl;
	double t0 = dlk_now(), told = t0;

	dlk_predict_part_key(in_id, bundle_sha, images, labels, batch, pr_threads, pr_workers, key);
	while (have < pr_workers) {
		have = 0;
		for (int r = 0; r < pr_workers; r++) {
			char *tag;
			if (ids[r][0]) {
				have++;
				continue;
			}
			if (!(tag = part_tag(key, r, err)))
				goto out;
			if (!dlk_dataset_resolve(out, tag, 0, ids[r], err)) {
				have++;
			} else {
				ids[r][0] = '\0';
				if (err->code != DLK_EXIT_NOTFOUND) {
					free(tag);
					goto out;
				}
				dlk_err_clear(err);
			}
			free(tag);
		}
		if (have == pr_workers)
			break;
		dlk_progress_draw(bar, 0, "rank 0: waiting for the other ranks' parts: %d of %d in the store", have, pr_workers);
		if (!ctx->tty_err && dlk_now() - told >= 60) {
			dlk_info(ctx, "rank 0: waiting for the other ranks' parts: %d of %d in the store", have, pr_workers);
			told = dlk_now();
		}
		if (dlk_interrupted()) {
			dlk_errf(err, DLK_EXIT_INTERRUPTED, "interrupted waiting for the parts: %d of %d in the store", have, pr_workers);
			goto out;
		}
		{
			struct timespec ts = { 0, (long)(PART_POLL_S * 1e9) };
			nanosleep(&ts, NULL);
		}
	}
	dlk_progress_clear(bar);
	memset(pred, 0, sizeof(*pred));
	pred->k = m->sig.n_classes;
	h = dlk_predict_csv_header(pred, m->sig.classes, &hl);
	dlk_buf_add(&b, h, hl);
	free(h);
	for (int r = 0; r < pr_workers; r++) {
		size_t len;
		char *t = read_dataset_file(out, cache, ids[r], DLK_PREDICT_PART_JSON, &len, err);
		if (!t || dlk_predict_part_parse(t, len, &parts[r], err)) {
			free(t);
			dlk_err_prefix(err, "part %d of %d (sha256:%.12s)", r, pr_workers, ids[r]);
			goto out;
		}
		free(t);
	}
	if (dlk_predict_parts_check(parts, pr_workers, key, err))
		goto out;
	if (parts[0].samples != data->n) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the parts cover %zu samples, the input has %zu", parts[0].samples, data->n);
		goto out;
	}
	for (int r = 0; r < pr_workers; r++) {
		size_t len;
		char *t = read_dataset_file(out, cache, ids[r], DLK_PREDICT_PART_CSV, &len, err);
		if (!t) {
			dlk_err_prefix(err, "part %d of %d (sha256:%.12s)", r, pr_workers, ids[r]);
			goto out;
		}
		dlk_buf_add(&b, t, len);
		free(t);
		pred->correct += parts[r].correct;
	}
	pred->n = data->n;
	*csv = dlk_buf_detach(&b, csv_len);
	dlk_info(ctx, "rank 0: joined the %d parts (%.1f s waiting for them)", pr_workers, dlk_now() - t0);
	rc = 0;
out:
	dlk_buf_release(&b);
	free(parts);
	free(ids);
	return rc;
}


/* s as one shell word */
static void add_word(struct dlk_buf *b, const char *s)
{
	dlk_buf_addc(b, '\'');
	for (; *s; s++)
		if (*s == '\'')
			dlk_buf_adds(b, "'\\''");
		else
			dlk_buf_addc(b, *s);
	dlk_buf_adds(b, "' ");
}

/* a YAML scalar that no value can reshape: a JSON string is a YAML double-quoted one */
static void add_quoted(struct dlk_buf *b, const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *t = cJSON_PrintUnformatted(j);
	dlk_buf_adds(b, t);
	free(t);
	cJSON_Delete(j);
}

/* --job's default: NAME-predict of the output's NAME, as a DNS label */
static char *default_job_name(void)
{
	struct dlk_buf b = DLK_BUF_INIT;

	for (const char *p = pr_name; *p && *p != '@' && b.len < 40; p++) {
		char c = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			dlk_buf_addc(&b, c);
		else if (b.len && b.data[b.len - 1] != '-')
			dlk_buf_addc(&b, '-');
	}
	while (b.len && b.data[b.len - 1] == '-')
		b.len--;
	dlk_buf_adds(&b, b.len ? "-predict" : "predict");
	return dlk_buf_detach(&b, NULL);
}

static int remote_store(const char *url, const char *what, struct dlk_err *err)
{
	if (strstr(url, "://") && strncmp(url, "file://", 7))
		return 0;
	dlk_errf(err, DLK_EXIT_USAGE, "%s '%s' is a directory here: the pods of a cluster cannot reach it", what, dlk_visible(url));
	return dlk_err_hint(err, "give a store the cluster reaches (s3://BUCKET/PREFIX with --store-secret, or pvc://CLAIM/PATH), "
	                         "or score here without --workers");
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
	struct dlk_buf script = DLK_BUF_INIT, y = DLK_BUF_INIT;
	cJSON *objects = NULL, *applied = NULL, *existing = NULL;
	const cJSON *o;
	char mid[65], id[65], *bundle = NULL, *job = pr_job ? xstrdup(pr_job) : default_job_name(), *store_url;
	char *tag = strchr(pr_name, '@') ? xstrdup(pr_name) : xasprintf("%s@latest", pr_name);
	const char *ns = ctx->namespace_, *secret = pr_secret;
	size_t blen = 0;
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
	if (remote_store(store_url, "--to", &err) || (pr_from && remote_store(pr_from, "--from", &err)))
		goto fail;
	if (!secret && proj)
		secret = proj->data.store_secret;
	if (!(bundle = read_local(args->pos[0], &blen, &err))) {
		dlk_errf(&err, DLK_EXIT_CONFIG, "cannot read the model bundle '%s'", dlk_visible(args->pos[0]));
		goto fail;
	}
	{
		/* the bundle as a dataset of the store, which every rank gets; --dry-run: its id only */
		const char *names[] = { "model.dlk" };
		if (push_files(out_ds.store, names, &bundle, &blen, 1, NULL, !pr_dry_run, &bar, mid, &err))
			goto fail;
		dlk_progress_clear(&bar);
	}
	dlk_buf_adds(&script, "set -e; d=$(mktemp -d); cd \"$d\"; dlk data get -q ");
	dlk_buf_addf(&script, "sha256:%s --from ", mid);
	add_word(&script, store_url);
	dlk_buf_adds(&script, "model; exec dlk predict model/model.dlk --data ");
	add_word(&script, pr_data);
	if (pr_from) {
		dlk_buf_adds(&script, "--from ");
		add_word(&script, pr_from);
	}
	dlk_buf_adds(&script, "--to ");
	add_word(&script, store_url);
	dlk_buf_adds(&script, "--name ");
	add_word(&script, tag);
	if (pr_images) {
		dlk_buf_adds(&script, "--images ");
		add_word(&script, pr_images);
		dlk_buf_adds(&script, "--labels ");
		add_word(&script, pr_labels);
	}
	dlk_buf_addf(&script, "--batch %d --threads %d --workers %d --rank \"$DLK_RANK\"", pr_batch, pr_threads, pr_workers);

	dlk_buf_adds(&y, "name: ");
	add_quoted(&y, job);
	dlk_buf_adds(&y, "\ndata:\n  format: idx\n  train: {images: file:///dev/null, labels: file:///dev/null}\n");
	if (secret) {
		dlk_buf_adds(&y, "  store_secret: ");
		add_quoted(&y, secret);
		dlk_buf_adds(&y, "\n");
	}
	/* a rank that fails fails the Job at once, naming it: dlk's own exit codes, a command that
	 * cannot run, and death by SIGINT, SIGABRT, SIGKILL, SIGSEGV, SIGTERM. A rank retried until
	 * its index failed would leave rank 0 waiting for its part (the Job goes on while an index
	 * is running); the same command again takes the parts already pushed. A disruption
	 * (eviction, preemption) is not counted: that pod is made again. */
	dlk_buf_adds(&y, "program:\n  exit_codes: {fail: [1, 2, 3, 4, 5, 6, 7, 126, 127, 130, 134, 137, 139, 143]}\n"
	                 "  command: [sh, -c, ");
	add_quoted(&y, script.data);
	dlk_buf_addf(&y, "]\nresources:\n  workers: %d\n  cpu: ", pr_workers);
	add_quoted(&y, pr_cpu);
	dlk_buf_adds(&y, "\n  memory: ");
	add_quoted(&y, pr_memory);
	dlk_buf_adds(&y, "\n");
	if (!(spec = project_load_mem(y.data, y.len, job, NULL, 0, &err))) {
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
	if (kube_get(c, "Job", ns, job, &existing, &err) == 0) {
		int n = 0;
		dlk_interrupt_catch();
		if (dlk_delete_job_objects(c, ns, job, dlk_print_deleted, ctx, &n, &err) < 0 ||
		    dlk_wait_job_gone(c, ns, job, 300, &err) < 0)
			goto fail;
		dlk_info(ctx, "deleted the earlier job '%s' (%d objects)", job, n);
	} else if (err.code != DLK_EXIT_NOTFOUND) {
		goto fail;
	}
	dlk_err_clear(&err);
	applied = cJSON_CreateArray();
	cJSON_ArrayForEach(o, objects) {
		cJSON *got = NULL;
		const cJSON *once = cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations"),
		        "dlk.dev/create-only");
		const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind"));
		if (cJSON_IsString(once) && !strcmp(once->valuestring, "true")) {
			if (kube_create(c, o, &got, &err) < 0) {
				if (err.code != DLK_EXIT_EXISTS) {
					dlk_err_prefix(&err, "cannot create %s '%s'", kind ? kind : "?", kube_meta(o, "name"));
					goto fail;
				}
				dlk_err_clear(&err);
			}
			cJSON_Delete(got);
			continue;
		}
		if (kube_apply(c, o, &got, &err) < 0) {
			dlk_err_prefix(&err, "cannot submit %s '%s'", kind ? kind : "?", kube_meta(o, "name"));
			goto fail;
		}
		cJSON_AddItemToArray(applied, got);
	}
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
	cJSON_Delete(existing);
	cJSON_Delete(applied);
	cJSON_Delete(objects);
	project_free(spec);
	project_free(proj);
	dlk_data_store_release(&out_ds);
	dlk_buf_release(&script);
	dlk_buf_release(&y);
	free(bundle);
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
	struct dlk_manifest outm = DLK_MANIFEST_INIT;
	struct dlk_push_stats st = { 0 };
	struct dlk_progress bar = { ctx, 0, 0 };
	char in_id[65], bundle_sha[65];
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
		if (!have_cache && !dlk_store_is_local(out_ds.store)) {
			if (dlk_cache_open(".dlk/cache", 20ull << 30, &cache, &err))
				goto fail;
			have_cache = 1;
		}
		if (score_part(ctx, &model, &data, bundle_sha, in_id, images, labels, out_ds.store, &bar, &err))
			goto fail;
		if (pr_rank > 0)
			goto out;
		if (join_parts(ctx, &model, &data, bundle_sha, in_id, images, labels, out_ds.store, have_cache ? &cache : NULL,
		               &bar, &pred, &csv, &csv_len, &err))
			goto fail;
		t_score = dlk_now();
	} else {
		if (dlk_predict_run(&model, &data, pr_batch, on_score, &bar, &pred, &err))
			goto fail;
		t_score = dlk_now();
		dlk_progress_clear(&bar);
		csv = dlk_predict_csv(&pred, &data, model.sig.classes, &csv_len);
	}
	prov = provenance(&model, bundle_sha, in_id, in_tag, dlk_store_url(in_store), images, labels, &pred);
	if (!(tmpdir = temp_dir(&err)))
		goto fail;
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
	{
		char why[sizeof(err.msg)];
		snprintf(why, sizeof(why), "%s", err.msg);
		rc = dlk_report(ctx, &err);
		/* a rank's last line is the cause its Job's status shows (the pod's termination message) */
		if (pr_rank >= 0)
			fprintf(stderr, "rank %d of %d failed: %s\n", pr_rank, pr_workers, dlk_visible(why));
	}
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
