/* Run documents: built from a bundle's model.json, read from text, checked, made to fit a size. */
#include "lib/report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/train/bundle.h"
#include "lib/util/jsonfield.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#define MAX_COUNT 9007199254740992.0 /* 2^53 */

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

cJSON *report_run_from_meta(const cJSON *meta, const char *kind, const char *path, struct dlk_err *err)
{
	static const char *const parts[] = { "classes", "architecture", "training", "metrics", "history", "provenance" };
	const cJSON *f = get(meta, "format"), *name = get(meta, "name"), *w = get(meta, "weights");
	cJSON *run, *src;
	const cJSON *it;
	struct report_run r = REPORT_RUN_INIT;
	char who[600];

	snprintf(who, sizeof(who), "'%.500s'", path ? path : "model.json");
	if (!cJSON_IsObject(meta) || !cJSON_IsString(f) || strcmp(f->valuestring, "dlk-model"))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: model.json is not a dlk model description", who), NULL;
	run = cJSON_CreateObject();
	cJSON_AddStringToObject(run, "format", REPORT_RUN_FORMAT);
	cJSON_AddNumberToObject(run, "version", REPORT_RUN_VERSION);
	cJSON_AddStringToObject(run, "name", cJSON_IsString(name) ? name->valuestring : "model");
	src = cJSON_AddObjectToObject(run, "source");
	cJSON_AddStringToObject(src, "kind", kind ? kind : "bundle");
	if (path)
		cJSON_AddStringToObject(src, "path", path);
	for (size_t i = 0; i < DLK_ARRAY_SIZE(parts); i++)
		if ((it = get(meta, parts[i])))
			cJSON_AddItemToObject(run, parts[i], cJSON_Duplicate(it, 1));
	if (cJSON_IsObject(w)) {
		cJSON *wj = cJSON_AddObjectToObject(run, "weights");
		if ((it = get(w, "sha256")))
			cJSON_AddItemToObject(wj, "sha256", cJSON_Duplicate(it, 1));
		if ((it = get(w, "bytes")))
			cJSON_AddItemToObject(wj, "bytes", cJSON_Duplicate(it, 1));
	}
	/* what the page cannot draw is refused here, naming the bundle */
	if (report_run_load(run, who, &r, err)) {
		cJSON_Delete(run);
		run = NULL;
	}
	report_run_release(&r);
	return run;
}

cJSON *report_run_from_bundle(const char *path, struct dlk_err *err)
{
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	cJSON *run;

	if (dlk_bundle_read(path, &b, err))
		return NULL;
	run = report_run_from_meta(b.meta, "bundle", path, err);
	dlk_bundle_release(&b);
	return run;
}

cJSON *report_run_parse(const char *text, size_t len, const char *who, struct dlk_err *err)
{
	struct report_run r = REPORT_RUN_INIT;
	cJSON *run = cJSON_ParseWithLength(text, len);

	if (!run) {
		const char *at = cJSON_GetErrorPtr();
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: not valid JSON (near byte %ld)", who,
		         at && at >= text && at <= text + len ? (long)(at - text) : -1L);
		return NULL;
	}
	if (report_run_load(run, who, &r, err)) {
		cJSON_Delete(run);
		run = NULL;
	}
	report_run_release(&r);
	return run;
}

static void replace(cJSON *o, const char *key, cJSON *v)
{
	if (get(o, key))
		cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
	else
		cJSON_AddItemToObject(o, key, v);
}

void report_run_set_source(cJSON *run, cJSON *source)
{
	replace(run, "source", source);
}

void report_run_set_verdict(cJSON *run, const char *decision, const char *reason)
{
	cJSON *v = cJSON_CreateObject();

	cJSON_AddStringToObject(v, "decision", decision ? decision : "");
	if (reason)
		cJSON_AddStringToObject(v, "reason", reason);
	replace(run, "verdict", v);
}

/* ---- fitting a size ---- */

static char *print_if_fits(const cJSON *j, size_t max)
{
	char *s = cJSON_PrintUnformatted(j);

	if (s && strlen(s) <= max)
		return s;
	free(s);
	return NULL;
}

/* halves the step-loss resolution: pairs of buckets become one, the odd one out waits */
int report_run_halve_step_loss(cJSON *history)
{
	cJSON *sl = cJSON_GetObjectItemCaseSensitive(history, "step_loss");
	cJSON *vals = cJSON_GetObjectItemCaseSensitive(sl, "values"), *every = cJSON_GetObjectItemCaseSensitive(sl, "every");
	int n = cJSON_GetArraySize(vals);

	if (!cJSON_IsArray(vals) || !cJSON_IsNumber(every) || n < 2)
		return 0;
	cJSON *half = cJSON_CreateArray();
	for (int i = 0; i + 1 < n; i += 2)
		cJSON_AddItemToArray(half, cJSON_CreateNumber(0.5 * (cJSON_GetArrayItem(vals, i)->valuedouble +
		                                                       cJSON_GetArrayItem(vals, i + 1)->valuedouble)));
	cJSON_ReplaceItemInObjectCaseSensitive(sl, "values", half);
	cJSON_SetNumberValue(every, every->valuedouble * 2);
	return 1;
}

/* drops every other epoch entry, keeping the first and the last */
static int thin_epochs(cJSON *history)
{
	cJSON *ep = cJSON_GetObjectItemCaseSensitive(history, "epochs");
	int n = cJSON_GetArraySize(ep);

	if (!cJSON_IsArray(ep) || n < 3)
		return 0;
	for (int i = n - 2; i >= 1; i--)
		if (i % 2)
			cJSON_DeleteItemFromArray(ep, i);
	return 1;
}

char *report_run_compact(const cJSON *run, size_t max_bytes)
{
	char *s = print_if_fits(run, max_bytes);
	cJSON *c, *h;

	if (s)
		return s;
	c = cJSON_Duplicate(run, 1);
	/* an image model's sample images go first: the bundle keeps them */
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metrics"), "samples");
	if ((s = print_if_fits(c, max_bytes))) {
		cJSON_Delete(c);
		return s;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metrics"), "confusion_matrix");
	/* without the matrix, per-class numbers need the class list to be read back */
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(c, "classes"))) {
		cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metrics"), "precision");
		cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metrics"), "recall");
	}
	h = cJSON_GetObjectItemCaseSensitive(c, "history");
	while (!(s = print_if_fits(c, max_bytes)) && report_run_halve_step_loss(h))
		;
	while (!s && thin_epochs(h))
		s = print_if_fits(c, max_bytes);
	if (!s) {
		cJSON_DeleteItemFromObjectCaseSensitive(c, "history");
		s = print_if_fits(c, max_bytes);
	}
	cJSON_Delete(c);
	return s;
}

/* ---- checking ---- */


/* an array of k numbers in [lo, hi] into a new array */
static int num_array(const cJSON *a, int k, double lo, double hi, double **out, const char *who, const char *what,
                     struct dlk_err *err)
{
	const cJSON *it;
	int i = 0;

	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != k)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.%s must list %d numbers, one per class", who, what, k);
	*out = xcalloc((size_t)k, sizeof(double));
	cJSON_ArrayForEach(it, a) {
		if (!cJSON_IsNumber(it) || !(it->valuedouble >= lo && it->valuedouble <= hi))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.%s[%d] is not a number in [%g, %g]", who, what, i, lo,
			                hi);
		(*out)[i++] = it->valuedouble;
	}
	return 0;
}

static int load_classes(const cJSON *doc, const char *who, struct report_run *r, struct dlk_err *err)
{
	const cJSON *names = get(doc, "classes"), *m = get(doc, "metrics");
	const cJSON *nc = get(get(doc, "architecture"), "n_classes"), *cm = get(m, "confusion_matrix");
	const cJSON *rec = get(m, "recall");
	int k = 0;

	/* how many classes: the architecture says it, else the names, else the metrics */
	if (nc) {
		double v;
		if (dlk_json_number(get(doc, "architecture"), "n_classes", 1, REPORT_MAX_CLASSES, 1, &v, who, "architecture", err))
			return -1;
		k = (int)v;
	} else if (cJSON_IsArray(names)) {
		k = cJSON_GetArraySize(names);
	} else if (cJSON_IsArray(cm)) {
		k = cJSON_GetArraySize(cm);
	} else if (cJSON_IsArray(rec)) {
		k = cJSON_GetArraySize(rec);
	}
	if (k > REPORT_MAX_CLASSES)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: %d classes, more than the %d a report shows", who, k,
		                REPORT_MAX_CLASSES);
	if (names) {
		const cJSON *it;
		int i = 0;
		if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) != k)
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: classes must list %d names (the model's classes)", who, k);
		cJSON_ArrayForEach(it, names)
			if (!cJSON_IsString(it))
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: classes[%d] is not a string", who, i);
			else
				i++;
	}
	r->n_classes = k;
	r->classes = k ? xcalloc((size_t)k, sizeof(char *)) : NULL;
	for (int i = 0; i < k; i++) {
		const cJSON *n = cJSON_GetArrayItem(names, i);
		r->classes[i] = n && n->valuestring[0] ? xstrdup(n->valuestring) : xasprintf("%d", i);
	}
	return 0;
}

static int load_metrics(const cJSON *m, const char *who, struct report_run *r, struct dlk_err *err)
{
	int k = r->n_classes;
	double v;

	if (!m)
		return 0;
	if (!cJSON_IsObject(m))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics is not an object", who);
	r->have_metrics = 1;
	r->program_metrics = cJSON_IsObject(get(m, "program")) ? get(m, "program") : NULL;
	if (get(m, "train_loss") && dlk_json_number(m, "train_loss", -HUGE_VAL, HUGE_VAL, 0, &r->train_loss, who, "metrics", err))
		return -1;
	if (!get(m, "test_accuracy") && cJSON_IsObject(get(m, "test")) && get(m, "test_loss")) {
		const cJSON *t;
		cJSON_ArrayForEach(t, get(m, "test"))
			if (!cJSON_IsNumber(t) || !isfinite(t->valuedouble))
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.test.%s is not a number", who,
				                t->string ? t->string : "?");
		if (get(m, "f1") && !cJSON_IsArray(get(m, "f1")))
			return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.f1 is not an array", who);
		if (dlk_json_number(m, "test_loss", -HUGE_VAL, HUGE_VAL, 0, &r->test_loss, who, "metrics", err) ||
		    dlk_json_number(m, "test_samples", 0, MAX_COUNT, 1, &v, who, "metrics", err))
			return -1;
		r->test_samples = (long long)v;
		r->task_metrics = get(m, "test");
		r->f1 = get(m, "f1");
		r->samples = cJSON_IsObject(get(m, "samples")) ? get(m, "samples") : NULL;
		return 0;
	}
	if (!get(m, "test_accuracy"))
		return 0;
	r->have_test = 1;
	if (dlk_json_number(m, "test_accuracy", 0, 1, 0, &r->test_accuracy, who, "metrics", err) ||
	    dlk_json_number(m, "test_loss", -HUGE_VAL, HUGE_VAL, 0, &r->test_loss, who, "metrics", err) ||
	    dlk_json_number(m, "test_samples", 0, MAX_COUNT, 1, &v, who, "metrics", err))
		return -1;
	r->test_samples = (long long)v;
	if (!k && (get(m, "precision") || get(m, "recall") || get(m, "confusion_matrix")))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics has per-class numbers but the document names no classes",
		                who);
	if (get(m, "precision") && num_array(get(m, "precision"), k, 0, 1, &r->precision, who, "precision", err))
		return -1;
	if (get(m, "recall") && num_array(get(m, "recall"), k, 0, 1, &r->recall, who, "recall", err))
		return -1;
	const cJSON *cm = get(m, "confusion_matrix"), *row;
	if (!cm)
		return 0;
	if (!cJSON_IsArray(cm) || cJSON_GetArraySize(cm) != k)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.confusion_matrix must have %d rows, one per class", who, k);
	/* every row's length first: k rows of nothing must not allocate k*k counts */
	cJSON_ArrayForEach(row, cm)
		if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != k)
			break;
	if (row)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.confusion_matrix: every row must have %d entries", who, k);
	r->confusion = xcalloc((size_t)k * (size_t)k, sizeof(long long));
	int i = 0;
	long long total = 0;
	cJSON_ArrayForEach(row, cm) {
		const cJSON *c;
		int j = 0;
		cJSON_ArrayForEach(c, row) {
			if (!cJSON_IsNumber(c) || !(c->valuedouble >= 0 && c->valuedouble <= MAX_COUNT) ||
			    c->valuedouble != floor(c->valuedouble))
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.confusion_matrix[%d][%d] is not a count", who, i,
				                j);
			r->confusion[(size_t)i * (size_t)k + (size_t)j] = (long long)c->valuedouble;
			total += (long long)c->valuedouble;
			if (total > (long long)MAX_COUNT)
				return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.confusion_matrix counts more than 2^53 samples",
				                who);
			j++;
		}
		i++;
	}
	if (total != r->test_samples)
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: metrics.confusion_matrix counts %lld samples, test_samples says %lld",
		                who, total, r->test_samples);
	return 0;
}

int report_run_load(const cJSON *doc, const char *who, struct report_run *r, struct dlk_err *err)
{
	const cJSON *f = get(doc, "format"), *name = get(doc, "name"), *src = get(doc, "source"), *h;
	double v;

	*r = (struct report_run)REPORT_RUN_INIT;
	r->doc = doc;
	if (!cJSON_IsObject(doc) || !cJSON_IsString(f) || strcmp(f->valuestring, REPORT_RUN_FORMAT))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: not a dlk run document (\"format\" is not \"%s\")", who,
		                REPORT_RUN_FORMAT);
	if (dlk_json_number(doc, "version", 1, 1e6, 1, &v, who, "", err))
		return -1;
	if (v > REPORT_RUN_VERSION) {
		dlk_errf(err, DLK_EXIT_CONFIG, "%s: a run document of version %g; this dlk reads version %d", who, v,
		         REPORT_RUN_VERSION);
		return dlk_err_hint(err, "use a dlk at least as new as the one that wrote it");
	}
	if (!cJSON_IsString(name))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: \"name\" is missing", who);
	r->name = name->valuestring;
	if (src && !cJSON_IsObject(src))
		return dlk_errf(err, DLK_EXIT_CONFIG, "%s: \"source\" is not an object", who);
	const cJSON *path = get(src, "path"), *job = get(src, "name"), *id = get(src, "id");
	if (cJSON_IsString(path))
		snprintf(r->label, sizeof(r->label), "%.500s", path->valuestring);
	else if (cJSON_IsString(job))
		snprintf(r->label, sizeof(r->label), "job %.400s", job->valuestring);
	else if (cJSON_IsString(id))
		snprintf(r->label, sizeof(r->label), "run %.400s", id->valuestring);
	else
		snprintf(r->label, sizeof(r->label), "%.500s", r->name);
	dlk_utf8_drop_cut(r->label); /* the cut above may fall inside a character */
	const cJSON *par = get(get(doc, "architecture"), "parameters");
	if (par) {
		if (dlk_json_number(get(doc, "architecture"), "parameters", 0, MAX_COUNT, 1, &v, who, "architecture", err))
			return -1;
		r->parameters = (long long)v;
	}
	if (load_classes(doc, who, r, err) || load_metrics(get(doc, "metrics"), who, r, err))
		goto fail;
	if ((h = get(doc, "history"))) {
		if (dlk_history_from_json(h, who, &r->history, err))
			goto fail;
		r->have_history = 1;
		/* steps per epoch, to draw step losses against epochs */
		const struct dlk_history_epoch *e0 = r->history.n_epochs ? &r->history.epochs[0] : NULL;
		if (e0 && e0->step > 0 && e0->step % e0->epoch == 0)
			r->steps_per_epoch = e0->step / e0->epoch;
	}
	return 0;
fail:
	report_run_release(r);
	r->doc = doc;
	return -1;
}

void report_run_release(struct report_run *r)
{
	for (int i = 0; r->classes && i < r->n_classes; i++)
		free(r->classes[i]);
	free(r->classes);
	free(r->precision);
	free(r->recall);
	free(r->confusion);
	dlk_history_release(&r->history);
	*r = (struct report_run)REPORT_RUN_INIT;
}

/* ---- comparing ---- */

static _Thread_local const double *sort_delta;

/* by |delta|, largest first; ties in class order */
static int by_delta(const void *x, const void *y)
{
	int i = *(const int *)x, j = *(const int *)y;
	double a = fabs(sort_delta[i]), b = fabs(sort_delta[j]);

	return a > b ? -1 : a < b ? 1 : (i > j) - (i < j);
}

void report_compare(const struct report_run *a, const struct report_run *b, struct report_compare *c)
{
	int k = a->n_classes;

	*c = (struct report_compare)REPORT_COMPARE_INIT;
	if (!k || k != b->n_classes)
		return;
	for (int i = 0; i < k; i++)
		if (strcmp(a->classes[i], b->classes[i]))
			return;
	c->same_classes = 1;
	if (a->recall && b->recall) {
		c->recall_delta = xcalloc((size_t)k, sizeof(double));
		c->moved = xcalloc((size_t)k, sizeof(int));
		for (int i = 0; i < k; i++) {
			c->recall_delta[i] = a->recall[i] - b->recall[i];
			c->moved[i] = i;
		}
		sort_delta = c->recall_delta;
		qsort(c->moved, (size_t)k, sizeof(int), by_delta);
		while (c->n_moved < k && c->recall_delta[c->moved[c->n_moved]] != 0)
			c->n_moved++;
	}
	if (!a->confusion || !b->confusion)
		return;
	c->same_support = 1;
	for (int i = 0; i < k && c->same_support; i++) {
		long long sa = 0, sb = 0;
		for (int j = 0; j < k; j++) {
			sa += a->confusion[(size_t)i * k + j];
			sb += b->confusion[(size_t)i * k + j];
		}
		c->same_support = sa == sb;
	}
	c->confusion_diff = xcalloc((size_t)k * (size_t)k, sizeof(double));
	for (int i = 0; i < k; i++) {
		long long sa = 0, sb = 0;
		for (int j = 0; j < k; j++) {
			sa += a->confusion[(size_t)i * k + j];
			sb += b->confusion[(size_t)i * k + j];
		}
		for (int j = 0; j < k; j++) {
			double x = (double)a->confusion[(size_t)i * k + j], y = (double)b->confusion[(size_t)i * k + j];
			/* another test set: compare each true class's shares, in percentage points */
			c->confusion_diff[(size_t)i * k + j] =
			        c->same_support ? x - y : (sa ? 100 * x / (double)sa : 0) - (sb ? 100 * y / (double)sb : 0);
		}
	}
}

void report_compare_release(struct report_compare *c)
{
	free(c->confusion_diff);
	free(c->recall_delta);
	free(c->moved);
	*c = (struct report_compare)REPORT_COMPARE_INIT;
}

void report_metric_headline(const cJSON *metrics, char *out, size_t n)
{
	const cJSON *a = get(metrics, "test_accuracy"), *t = get(metrics, "test");

	if (cJSON_IsNumber(a))
		snprintf(out, n, "%.2f%%", 100 * a->valuedouble);
	else if (cJSON_IsObject(t) && t->child && cJSON_IsNumber(t->child) && t->child->string)
		snprintf(out, n, "%.40s %.4f", t->child->string, t->child->valuedouble);
	else
		snprintf(out, n, "-");
}

void report_metrics_line(const cJSON *metrics, char *out, size_t n)
{
	const cJSON *a = get(metrics, "test_accuracy"), *t = get(metrics, "test"), *v;
	size_t at = 0;

	if (n)
		out[0] = 0;
	if (cJSON_IsNumber(a)) {
		snprintf(out, n, "accuracy %.2f%%", 100 * a->valuedouble);
		return;
	}
	if (!cJSON_IsObject(t))
		t = NULL;
	cJSON_ArrayForEach(v, t) {
		if (!cJSON_IsNumber(v) || !v->string || at >= n)
			continue;
		int w = snprintf(out + at, n - at, "%s%.40s %.4f", at ? ", " : "", v->string, v->valuedouble);
		at += w > 0 ? (size_t)w : 0;
	}
	if (!at)
		snprintf(out, n, "-");
}
