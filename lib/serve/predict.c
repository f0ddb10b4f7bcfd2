/* Batch scoring over a dataset (see predict.h). */
#include "lib/serve/predict.h"
#include "lib/serve/tensor.h"
#include "lib/store/manifest.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <stdlib.h>
#include <string.h>

int dlk_predict_batch(const struct dlk_serve_model *m, int batch)
{
	if (batch < 1)
		batch = 1;
	if (m->max_batch > 0 && batch > m->max_batch)
		batch = m->max_batch;
	return batch;
}

void dlk_predict_part_range(size_t n, int batch, int rank, int workers, size_t *lo, size_t *hi)
{
	size_t b = batch > 0 ? (size_t)batch : 1, nb = (n + b - 1) / b, first, end;

	if (workers < 1 || rank < 0 || rank >= workers) {
		*lo = *hi = 0;
		return;
	}
	/* whole batches: rank r has batches [nb * r / w, nb * (r + 1) / w) */
	first = nb * (size_t)rank / (size_t)workers;
	end = nb * ((size_t)rank + 1) / (size_t)workers;
	*lo = first * b < n ? first * b : n;
	*hi = end * b < n ? end * b : n;
}

int dlk_predict_run(struct dlk_serve_model *m, const struct dlk_dataset *ds, int batch, dlk_predict_progress_fn progress,
                    void *progress_ctx, struct dlk_predictions *out, struct dlk_err *err)
{
	return dlk_predict_run_range(m, ds, 0, ds->n, batch, progress, progress_ctx, out, err);
}

int dlk_predict_run_range(struct dlk_serve_model *m, const struct dlk_dataset *ds, size_t lo, size_t hi, int batch,
                          dlk_predict_progress_fn progress, void *progress_ctx, struct dlk_predictions *out,
                          struct dlk_err *err)
{
	struct dlk_engine e = dlk_serve_model_engine(m);
	int k = m->sig.n_classes;
	void *rep;
	float *x, *logits;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (ds->sample_size != m->sig.in_size) {
		char want[64];
		dlk_serve_shape_str(&m->sig, 0, want, sizeof(want));
		return dlk_errf(err, DLK_EXIT_CONFIG, "the data's samples are [%d,%d,%d] (%zu values), the model '%s' takes %s",
		                ds->shape[0], ds->shape[1], ds->shape[2], ds->sample_size, m->name, want);
	}
	if (hi > ds->n)
		hi = ds->n;
	if (lo > hi)
		lo = hi;
	batch = dlk_predict_batch(m, batch);
	rep = e.replica_new(e.ctx, batch, err);
	if (!rep)
		return -1;
	out->n = hi - lo;
	out->base = lo;
	out->k = k;
	out->cls = xcalloc(out->n ? out->n : 1, sizeof(*out->cls));
	out->probs = xcalloc((out->n ? out->n : 1) * (size_t)k, sizeof(float));
	x = xmalloc((size_t)batch * ds->sample_size * sizeof(float));
	logits = xmalloc((size_t)batch * (size_t)k * sizeof(float));
	/* start: the position in the part; the batches start where they do scoring the whole split
	 * when lo is a multiple of batch (dlk_predict_part_range) */
	for (size_t start = 0; start < out->n; start += (size_t)batch) {
		size_t rows = out->n - start < (size_t)batch ? out->n - start : (size_t)batch;
		long bad;

		dlk_dataset_gather_range(ds, lo + start, rows, x);
		if (dlk_dataset_failed(ds, err)) {
			rc = -1;
			break;
		}
		if (e.run(rep, x, (int)rows, logits, err)) {
			rc = -1;
			break;
		}
		bad = dlk_serve_nonfinite_row(logits, rows, (size_t)k);
		if (bad >= 0) {
			rc = dlk_errf(err, DLK_EXIT_FAIL, "sample %zu: the model '%s' gave a logit that is not a finite number",
			              lo + start + (size_t)bad, m->name);
			break;
		}
		dlk_serve_softmax(logits, (int)rows, k, out->probs + start * (size_t)k);
		for (size_t i = 0; i < rows; i++) {
			const float *l = logits + i * (size_t)k;
			int best = 0;
			for (int c = 1; c < k; c++)
				if (l[c] > l[best])
					best = c;
			out->cls[start + i] = best;
			if (ds->y && !ds->t && ds->y[lo + start + i] == best)
				out->correct++;
		}
		if (progress && progress(progress_ctx, start + rows, out->n)) {
			rc = dlk_errf(err, DLK_EXIT_INTERRUPTED, "interrupted after %zu of %zu samples", start + rows, out->n);
			break;
		}
	}
	e.replica_free(rep);
	free(x);
	free(logits);
	if (rc)
		dlk_predictions_release(out);
	return rc;
}

static void put_class(struct dlk_buf *b, int c, char *const *classes)
{
	const char *s = classes ? classes[c] : NULL;

	if (!s) {
		dlk_buf_addf(b, "%d", c);
		return;
	}
	/* RFC 4180 quoting when the name needs it */
	if (strpbrk(s, ",\"\r\n")) {
		dlk_buf_addc(b, '"');
		for (; *s; s++) {
			if (*s == '"')
				dlk_buf_addc(b, '"');
			dlk_buf_addc(b, *s);
		}
		dlk_buf_addc(b, '"');
	} else {
		dlk_buf_adds(b, s);
	}
}

static void add_header(struct dlk_buf *b, const struct dlk_predictions *p, char *const *classes)
{
	dlk_buf_adds(b, "index,label,class");
	for (int c = 0; c < p->k; c++) {
		dlk_buf_adds(b, ",p_");
		if (classes && classes[c] && !strpbrk(classes[c], ",\"\r\n"))
			dlk_buf_adds(b, classes[c]);
		else
			dlk_buf_addf(b, "%d", c);
	}
	dlk_buf_addc(b, '\n');
}

static void add_rows(struct dlk_buf *b, const struct dlk_predictions *p, const struct dlk_dataset *ds, char *const *classes)
{
	for (size_t i = 0; i < p->n; i++) {
		size_t g = p->base + i;
		dlk_buf_addf(b, "%zu,", g);
		if (ds->y && !ds->t && g < ds->n && ds->y[g] >= 0 && ds->y[g] < p->k)
			put_class(b, ds->y[g], classes);
		dlk_buf_addc(b, ',');
		put_class(b, p->cls[i], classes);
		for (int c = 0; c < p->k; c++)
			dlk_buf_addf(b, ",%.9g", (double)p->probs[i * (size_t)p->k + (size_t)c]);
		dlk_buf_addc(b, '\n');
	}
}

char *dlk_predict_csv_header(const struct dlk_predictions *p, char *const *classes, size_t *len)
{
	struct dlk_buf b = DLK_BUF_INIT;

	add_header(&b, p, classes);
	return dlk_buf_detach(&b, len);
}

char *dlk_predict_csv_rows(const struct dlk_predictions *p, const struct dlk_dataset *ds, char *const *classes, size_t *len)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_adds(&b, "");
	add_rows(&b, p, ds, classes);
	return dlk_buf_detach(&b, len);
}

char *dlk_predict_csv(const struct dlk_predictions *p, const struct dlk_dataset *ds, char *const *classes, size_t *len)
{
	struct dlk_buf b = DLK_BUF_INIT;

	add_header(&b, p, classes);
	add_rows(&b, p, ds, classes);
	return dlk_buf_detach(&b, len);
}

void dlk_predictions_release(struct dlk_predictions *p)
{
	free(p->cls);
	free(p->probs);
	memset(p, 0, sizeof(*p));
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

int dlk_predict_pick_idx(const struct dlk_manifest *m, const char **images, const char **labels, struct dlk_err *err)
{
	size_t n_img = 0, n_test = 0;
	const char *img = NULL, *test = NULL;

	*images = *labels = NULL;
	for (size_t i = 0; i < m->n; i++) {
		const char *b = base_name(m->e[i].path);
		if (!strstr(b, "images-idx3-ubyte"))
			continue;
		n_img++;
		img = m->e[i].path;
		if (!strncmp(b, "t10k-", 5)) {
			n_test++;
			test = m->e[i].path;
		}
	}
	if (n_img > 1 && n_test == 1)
		img = test;
	else if (n_img != 1) {
		dlk_errf(err, DLK_EXIT_CONFIG, "dataset sha256:%.12s has %s IDX images file (*images-idx3-ubyte*)%s",
		         m->id, n_img ? "more than one" : "no", n_img ? "" : " to score");
		return dlk_err_hint(err, "name the files to score with --images PATH --labels PATH (`dlk data show` lists them)");
	}
	{
		const char *at = strstr(img, "images-idx3-ubyte");
		char *want = xasprintf("%.*slabels-idx1-ubyte%s", (int)(at - img), img, at + strlen("images-idx3-ubyte"));
		const struct dlk_manifest_entry *e = dlk_manifest_find(m, want);
		if (!e) {
			dlk_errf(err, DLK_EXIT_CONFIG, "dataset sha256:%.12s has '%s' but not its labels '%s'", m->id, img, want);
			free(want);
			return dlk_err_hint(err, "name the labels file with --labels PATH");
		}
		free(want);
		*images = img;
		*labels = e->path;
	}
	return 0;
}
