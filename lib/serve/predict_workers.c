/* dlk predict's steps (see predict_workers.h): the predictions dataset, a rank's part, the join of
 * the parts, and the Job of N workers. */
#include "lib/serve/predict_workers.h"
#include "lib/store/cache.h"
#include "lib/store/provenance.h"
#include "lib/store/reader.h"
#include "lib/util/buf.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef DLK_VERSION
#define DLK_VERSION "dev"
#endif

char *dlk_predict_provenance(const struct dlk_serve_model *m, const char *bundle_sha, const char *input_id,
                             const char *input_tag, const char *input_store, const char *images, const char *labels,
                             const struct dlk_predictions *p)
{
	cJSON *o = cJSON_CreateObject(), *in, *mo;
	const cJSON *prov = cJSON_GetObjectItemCaseSensitive(m->bundle.meta, "provenance");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(prov, "run_id");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->bundle.meta, "name");
	char buf[80];
	char *s;

	cJSON_AddStringToObject(o, "kind", "predictions");
	in = cJSON_AddObjectToObject(o, "input");
	snprintf(buf, sizeof(buf), "sha256:%s", input_id);
	cJSON_AddStringToObject(in, "id", buf);
	if (input_tag)
		cJSON_AddStringToObject(in, "tag", input_tag);
	cJSON_AddStringToObject(in, "store", input_store);
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

int dlk_predict_push(struct dlk_store *s, const char *name, const char *csv, size_t csv_len, const char *prov,
                     dlk_store_progress_fn progress, void *progress_ctx, char id[65], struct dlk_err *err)
{
	const char *names[] = { "predictions.csv", DLK_PROVENANCE_FILE }, *data[] = { csv, prov };
	size_t lens[] = { csv_len, strlen(prov) };

	if (dlk_dataset_push_mem(s, names, data, lens, 2, name, 1, progress, progress_ctx, id, err)) {
		dlk_err_prefix(err, "cannot push the predictions to '%s'", dlk_store_url(s));
		return -1;
	}
	return 0;
}

void dlk_predict_workers_key(const struct dlk_predict_workers *w, char key[17])
{
	dlk_predict_part_key(w->input_id, w->bundle_sha, w->images, w->labels, dlk_predict_batch(w->model, w->batch),
	                     w->threads, w->workers, key);
}

char *dlk_predict_workers_tag(const struct dlk_predict_workers *w, const char *key, int rank, struct dlk_err *err)
{
	char *t = dlk_predict_part_tag(w->name, rank, w->workers, key), why[160];

	if (dlk_dataset_tag_check(t, why, sizeof(why))) {
		dlk_errf(err, DLK_EXIT_USAGE, "--name '%s': the parts' tag '%s' is not one: %s", dlk_visible(w->name),
		         dlk_visible(t), why);
		free(t);
		return NULL;
	}
	return t;
}

void dlk_predict_rank_result_release(struct dlk_predict_rank_result *r)
{
	free(r->tag);
	r->tag = NULL;
}

int dlk_predict_rank(const struct dlk_predict_workers *w, int rank, struct dlk_predict_rank_result *res,
                     struct dlk_err *err)
{
	struct dlk_predictions pred = DLK_PREDICTIONS_INIT;
	struct dlk_predict_part part;
	int b = dlk_predict_batch(w->model, w->batch), rc = -1;
	char key[17], *text[2] = { NULL, NULL };
	size_t lens[2], lo, hi;
	const char *names[] = { DLK_PREDICT_PART_CSV, DLK_PREDICT_PART_JSON };

	memset(res, 0, sizeof(*res));
	if (w->workers < 1 || rank < 0 || rank >= w->workers)
		return dlk_errf(err, DLK_EXIT_USAGE, "rank %d is not a rank of %d workers", rank, w->workers);
	dlk_predict_workers_key(w, key);
	if (!(res->tag = dlk_predict_workers_tag(w, key, rank, err)))
		return -1;
	dlk_predict_part_range(w->data->n, b, rank, w->workers, &lo, &hi);
	res->first = lo;
	res->count = hi - lo;
	if (!dlk_dataset_resolve(w->store, res->tag, 0, res->id, err))
		return 0;
	if (err->code != DLK_EXIT_NOTFOUND)
		return -1;
	dlk_err_clear(err);
	if (dlk_predict_run_range(w->model, w->data, lo, hi, b, w->progress, w->progress_ctx, &pred, err))
		goto out;
	memset(&part, 0, sizeof(part));
	memcpy(part.key, key, sizeof(part.key));
	part.rank = rank;
	part.workers = w->workers;
	part.first = lo;
	part.count = hi - lo;
	part.samples = w->data->n;
	part.correct = pred.correct;
	text[0] = dlk_predict_csv_rows(&pred, w->data, w->model->sig.classes, &lens[0]);
	text[1] = dlk_predict_part_json(&part);
	lens[1] = strlen(text[1]);
	if (dlk_dataset_push_mem(w->store, names, (const char *const *)text, lens, 2, res->tag, 1, w->store_progress,
	                         w->progress_ctx, res->id, err)) {
		dlk_err_prefix(err, "cannot push to '%s'", dlk_store_url(w->store));
		goto out;
	}
	res->correct = pred.correct;
	res->scored = 1;
	rc = 0;
out:
	free(text[0]);
	free(text[1]);
	dlk_predictions_release(&pred);
	return rc;
}

/* A file of dataset id, read whole (a remote store's through the cache). */
static char *read_part_file(const struct dlk_predict_workers *w, const char *id, const char *path, size_t *len,
                            struct dlk_err *err)
{
	struct dlk_dataset_reader r;
	struct dlk_buf b = DLK_BUF_INIT;
	char *local = NULL, sha[65], msg[512], *text = NULL;

	if (dlk_dataset_reader_open(&r, w->store, id, w->cache, err))
		return NULL;
	if (dlk_dataset_reader_resolve(&r, path, &local, sha, err))
		goto out;
	if (dlk_buf_read_file(&b, local, 0, msg, sizeof(msg)))
		dlk_errf(err, DLK_EXIT_FAIL, "%s", msg);
	else
		text = dlk_buf_detach(&b, len);
out:
	dlk_buf_release(&b);
	free(local);
	dlk_dataset_reader_release(&r);
	return text;
}

int dlk_predict_part_rows_check(const char *csv, size_t len, const struct dlk_predict_part *p, struct dlk_err *err)
{
	size_t row = 0, at = 0;

	while (at < len) {
		const char *nl = memchr(csv + at, '\n', len - at);
		char want[32];
		int wl;
		if (!nl)
			return dlk_errf(err, DLK_EXIT_CONFIG, "part.csv is cut short: its row %zu has no end (a part of %zu rows)",
			                row + 1, p->count);
		if (row == p->count)
			return dlk_errf(err, DLK_EXIT_CONFIG, "part.csv has more than the %zu rows of part.json", p->count);
		wl = snprintf(want, sizeof(want), "%zu,", p->first + row);
		if ((size_t)(nl - (csv + at)) < (size_t)wl || memcmp(csv + at, want, (size_t)wl))
			return dlk_errf(err, DLK_EXIT_CONFIG, "part.csv: row %zu is not sample %zu's (part.json: samples [%zu, %zu))",
			                row + 1, p->first + row, p->first, p->first + p->count);
		at = (size_t)(nl - csv) + 1;
		row++;
	}
	if (row != p->count)
		return dlk_errf(err, DLK_EXIT_CONFIG, "part.csv is cut short: %zu of the %zu rows of part.json", row, p->count);
	return 0;
}

int dlk_predict_rank_failed(struct dlk_err *err, int code, int rank, int workers, const char *cause)
{
	return dlk_errf(err, code, "rank %d of %d failed: %s", rank, workers, cause);
}

/* Looks each missing part's tag up: ids[r] set for those there; how many are. */
static int find_parts(const struct dlk_predict_workers *w, const char *key, char (*ids)[65], int *have,
                      struct dlk_err *err)
{
	*have = 0;
	for (int r = 0; r < w->workers; r++) {
		char *tag;
		if (ids[r][0]) {
			(*have)++;
			continue;
		}
		if (!(tag = dlk_predict_workers_tag(w, key, r, err)))
			return -1;
		if (!dlk_dataset_resolve(w->store, tag, 0, ids[r], err)) {
			(*have)++;
		} else {
			ids[r][0] = '\0';
			if (err->code != DLK_EXIT_NOTFOUND) {
				free(tag);
				return -1;
			}
			dlk_err_clear(err);
		}
		free(tag);
	}
	return 0;
}

int dlk_predict_join(const struct dlk_predict_workers *w, dlk_predict_wait_fn wait, void *wait_ctx,
                     struct dlk_predictions *totals, char **csv, size_t *csv_len, struct dlk_err *err)
{
	struct dlk_predict_part *parts = xcalloc((size_t)(w->workers > 0 ? w->workers : 1), sizeof(*parts));
	char (*ids)[65] = xcalloc((size_t)(w->workers > 0 ? w->workers : 1), 65);
	struct dlk_buf b = DLK_BUF_INIT;
	struct dlk_predictions t = DLK_PREDICTIONS_INIT;
	char key[17], *h;
	int have = 0, rc = -1;
	size_t hl;

	memset(totals, 0, sizeof(*totals));
	*csv = NULL;
	*csv_len = 0;
	if (w->workers < 1) {
		dlk_errf(err, DLK_EXIT_USAGE, "%d workers: nothing to join", w->workers);
		goto out;
	}
	dlk_predict_workers_key(w, key);
	for (;;) {
		if (find_parts(w, key, ids, &have, err))
			goto out;
		if (have == w->workers)
			break;
		if (!wait) {
			for (int r = 0; r < w->workers; r++)
				if (!ids[r][0]) {
					char *tag = dlk_predict_part_tag(w->name, r, w->workers, key);
					dlk_errf(err, DLK_EXIT_NOTFOUND, "part %d of %d is not in '%s' (no tag '%s'): %d of %d parts there", r,
					         w->workers, dlk_store_url(w->store), dlk_visible(tag), have, w->workers);
					free(tag);
					break;
				}
			goto out;
		}
		if (wait(wait_ctx, have, w->workers, err)) {
			if (!err->code)
				dlk_errf(err, DLK_EXIT_FAIL, "stopped waiting for the parts: %d of %d in the store", have, w->workers);
			goto out;
		}
		{
			struct timespec ts = { 0, (long)(DLK_PREDICT_POLL_S * 1e9) };
			nanosleep(&ts, NULL);
		}
	}
	for (int r = 0; r < w->workers; r++) {
		size_t len;
		char *s = read_part_file(w, ids[r], DLK_PREDICT_PART_JSON, &len, err);
		if (!s || dlk_predict_part_parse(s, len, &parts[r], err)) {
			free(s);
			dlk_err_prefix(err, "part %d of %d (sha256:%.12s)", r, w->workers, ids[r]);
			goto out;
		}
		free(s);
	}
	if (dlk_predict_parts_check(parts, w->workers, key, err))
		goto out;
	if (parts[0].samples != w->data->n) {
		dlk_errf(err, DLK_EXIT_CONFIG, "the parts cover %zu samples, the input has %zu", parts[0].samples, w->data->n);
		goto out;
	}
	t.k = w->model->sig.n_classes;
	h = dlk_predict_csv_header(&t, w->model->sig.classes, &hl);
	dlk_buf_add(&b, h, hl);
	free(h);
	for (int r = 0; r < w->workers; r++) {
		size_t len;
		char *s = read_part_file(w, ids[r], DLK_PREDICT_PART_CSV, &len, err);
		if (!s || dlk_predict_part_rows_check(s, len, &parts[r], err)) {
			free(s);
			dlk_err_prefix(err, "part %d of %d (sha256:%.12s)", r, w->workers, ids[r]);
			goto out;
		}
		dlk_buf_add(&b, s, len);
		free(s);
		t.correct += parts[r].correct;
	}
	t.n = w->data->n;
	*totals = t;
	*csv = dlk_buf_detach(&b, csv_len);
	rc = 0;
out:
	dlk_buf_release(&b);
	free(parts);
	free(ids);
	return rc;
}

char *dlk_predict_job_name(const char *name)
{
	struct dlk_buf b = DLK_BUF_INIT;

	for (const char *p = name; *p && *p != '@' && b.len < 40; p++) {
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

int dlk_predict_store_reachable(const char *url, const char *what, struct dlk_err *err)
{
	if (strstr(url, "://") && strncmp(url, "file://", 7))
		return 0;
	dlk_errf(err, DLK_EXIT_USAGE, "%s '%s' is a directory here: the pods of a cluster cannot reach it", what,
	         dlk_visible(url));
	return dlk_err_hint(err, "give a store the cluster reaches (s3://BUCKET/PREFIX with --store-secret, or "
	                         "pvc://CLAIM/PATH), or score here without --workers");
}

/* s as one shell word, and a space */
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

char *dlk_predict_job_yaml(const struct dlk_predict_job *j, size_t *len)
{
	struct dlk_buf script = DLK_BUF_INIT, y = DLK_BUF_INIT;

	dlk_buf_adds(&script, "set -e; d=$(mktemp -d); cd \"$d\"; dlk data get -q ");
	dlk_buf_addf(&script, "sha256:%s --from ", j->bundle_id);
	add_word(&script, j->store);
	dlk_buf_adds(&script, "model; exec dlk predict model/model.dlk --data ");
	add_word(&script, j->data);
	if (j->from) {
		dlk_buf_adds(&script, "--from ");
		add_word(&script, j->from);
	}
	dlk_buf_adds(&script, "--to ");
	add_word(&script, j->store);
	dlk_buf_adds(&script, "--name ");
	add_word(&script, j->tag);
	if (j->images) {
		dlk_buf_adds(&script, "--images ");
		add_word(&script, j->images);
		dlk_buf_adds(&script, "--labels ");
		add_word(&script, j->labels);
	}
	dlk_buf_addf(&script, "--batch %d --threads %d --workers %d --rank \"$DLK_RANK\"", j->batch, j->threads, j->workers);

	dlk_buf_adds(&y, "name: ");
	add_quoted(&y, j->job);
	dlk_buf_adds(&y, "\ndata:\n  format: idx\n  train: {images: file:///dev/null, labels: file:///dev/null}\n");
	if (j->secret) {
		dlk_buf_adds(&y, "  store_secret: ");
		add_quoted(&y, j->secret);
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
	dlk_buf_addf(&y, "]\nresources:\n  workers: %d\n  cpu: ", j->workers);
	add_quoted(&y, j->cpu);
	dlk_buf_adds(&y, "\n  memory: ");
	add_quoted(&y, j->memory);
	dlk_buf_adds(&y, "\n");
	dlk_buf_release(&script);
	return dlk_buf_detach(&y, len);
}
