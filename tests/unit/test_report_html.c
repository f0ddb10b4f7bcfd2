/* The report page and the run documents it draws: a page that loads nothing and escapes every
 * string it was given; its embedded data read back equal to the run documents; one chart point
 * per recorded value; the heat map's counts in its cells; what a comparison computes (counts on
 * the same test set, percentage points on another, nothing across other classes); run documents
 * refused with the field named; a document made to fit an annotation; the page written atomically. */
#include "tests/unit/check.h"

#include <cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/report/chart.h"
#include "lib/report/report.h"
#include "lib/util/mem.h"

#define EVIL "</script><b x=\"1\">&'"

/* a bundle's model.json with k classes and a history of n_epochs epochs, 7 step losses */
static cJSON *meta(const long long *cm, int k, int n_epochs, int world2)
{
	cJSON *j = cJSON_CreateObject(), *m, *arr, *p, *d;
	long long total = 0, diag = 0;

	cJSON_AddStringToObject(j, "format", "dlk-model");
	cJSON_AddNumberToObject(j, "format_version", 1);
	cJSON_AddStringToObject(j, "name", "pets");
	cJSON *a = cJSON_AddObjectToObject(j, "architecture");
	cJSON_AddNumberToObject(a, "n_classes", k);
	cJSON_AddNumberToObject(a, "parameters", 1234);
	arr = cJSON_AddArrayToObject(a, "layers");
	cJSON *l = cJSON_CreateObject();
	cJSON_AddStringToObject(l, "kind", "dense");
	cJSON_AddNumberToObject(l, "units", k);
	cJSON_AddItemToArray(arr, l);
	arr = cJSON_AddArrayToObject(j, "classes");
	for (int i = 0; i < k; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(i == 0 ? "cat" : i == 1 ? "dog" : i == 2 ? EVIL : "other"));
	m = cJSON_AddObjectToObject(j, "metrics");
	cJSON_AddNumberToObject(m, "train_loss", 0.25);
	cJSON *rows = cJSON_CreateArray(), *prec = cJSON_CreateArray(), *rec = cJSON_CreateArray();
	for (int r = 0; r < k; r++) {
		long long rs = 0, cs = 0;
		cJSON *row = cJSON_CreateArray();
		for (int c = 0; c < k; c++) {
			cJSON_AddItemToArray(row, cJSON_CreateNumber((double)cm[r * k + c]));
			rs += cm[r * k + c];
			cs += cm[c * k + r];
		}
		total += rs;
		diag += cm[r * k + r];
		cJSON_AddItemToArray(rows, row);
		cJSON_AddItemToArray(rec, cJSON_CreateNumber(rs ? (double)cm[r * k + r] / (double)rs : 0));
		cJSON_AddItemToArray(prec, cJSON_CreateNumber(cs ? (double)cm[r * k + r] / (double)cs : 0));
	}
	cJSON_AddNumberToObject(m, "test_samples", (double)total);
	cJSON_AddNumberToObject(m, "test_loss", 0.5);
	cJSON_AddNumberToObject(m, "test_accuracy", (double)diag / (double)total);
	cJSON_AddItemToObject(m, "precision", prec);
	cJSON_AddItemToObject(m, "recall", rec);
	cJSON_AddItemToObject(m, "confusion_matrix", rows);
	cJSON *t = cJSON_AddObjectToObject(j, "training");
	cJSON_AddNumberToObject(t, "epochs", n_epochs);
	cJSON_AddNumberToObject(t, "batch_size", 32);
	p = cJSON_AddObjectToObject(j, "provenance");
	arr = cJSON_AddArrayToObject(p, "data");
	d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "split", "train");
	cJSON_AddStringToObject(d, "url", "https://example.com/pets.tar");
	cJSON_AddStringToObject(d, "sha256", "ab12");
	cJSON_AddItemToArray(arr, d);
	cJSON_AddStringToObject(p, "spec_sha256", "cd34");
	cJSON_AddStringToObject(p, "dlk_version", "0.1.0");
	cJSON_AddStringToObject(p, "git_commit", "0123abc");
	cJSON_AddBoolToObject(p, "git_dirty", 1);
	if (n_epochs) {
		struct dlk_history hist = DLK_HISTORY_INIT;
		struct dlk_history_event ev = { DLK_HISTORY_START, 0, 0, 0, 4, "2026-01-01T00:00:00Z" };
		dlk_history_add_event(&hist, &ev);
		for (int e = 1; e <= n_epochs; e++) {
			struct dlk_history_epoch ep = { e, 10L * e, 1.0 / e, e != 2, 0.6 / e, 0.5 + 0.1 * e, 1000, 2.0 * e, 0.01, 4, "", "", 0 };
			dlk_history_add_epoch(&hist, &ep);
		}
		for (int s = 0; s < 7; s++)
			dlk_history_add_step(&hist, 2.0 - 0.2 * s);
		if (world2) {
			ev = (struct dlk_history_event){ DLK_HISTORY_RESUME, 1, 15, 3.0, 2, "2026-01-01T00:10:00Z" };
			dlk_history_add_event(&hist, &ev);
		}
		cJSON_AddItemToObject(j, "history", dlk_history_json(&hist, 0));
		dlk_history_release(&hist);
	}
	cJSON *w = cJSON_AddObjectToObject(j, "weights");
	cJSON_AddStringToObject(w, "file", "weights.safetensors");
	cJSON_AddStringToObject(w, "sha256", "ef56");
	return j;
}

static cJSON *run_of(const long long *cm, int k, int n_epochs, int world2, const char *path)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *m = meta(cm, k, n_epochs, world2), *r = report_run_from_meta(m, "bundle", path, &err);

	if (!r)
		printf("# %s\n", err.msg);
	cJSON_Delete(m);
	return r;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* the page's embedded report document */
static cJSON *embedded(const char *page)
{
	const char *tag = "<script type=\"application/json\" id=\"dlk-report-data\">";
	const char *a = strstr(page, tag), *b;

	if (!a)
		return NULL;
	a += strlen(tag);
	b = strstr(a, "</script>");
	return b ? cJSON_ParseWithLength(a, (size_t)(b - a)) : NULL;
}

static const long long CM_A[9] = { 8, 1, 1, 2, 7, 1, 0, 0, 10 };
static const long long CM_B[9] = { 6, 3, 1, 2, 8, 0, 0, 1, 9 };

static void test_page(void)
{
	struct dlk_buf page = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *a = run_of(CM_A, 3, 3, 1, "pets.dlk");

	CHECK(a != NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(a, "format")), "dlk-run");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "source"), "path")), "pets.dlk");
	CHECK(!cJSON_GetObjectItem(cJSON_GetObjectItem(a, "weights"), "file"));
	CHECK(report_html(a, NULL, &page, &err) == 0);
	const char *s = page.data;
	/* nothing to load, nothing to run */
	CHECK_CONTAINS(s, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">");
	CHECK(count(s, "<script") == 1 && count(s, "<script type=\"application/json\"") == 1);
	CHECK(!strstr(s, " src=") && !strstr(s, " href=") && !strstr(s, "url(") && !strstr(s, "@import") &&
	      !strstr(s, "<link") && !strstr(s, "<img") && !strstr(s, "<iframe") && !strstr(s, "<object"));
	/* every string escaped: the class name never closes the script or opens a tag */
	CHECK(count(s, "</script>") == 1 && !strstr(s, "<b x="));
	CHECK_CONTAINS(s, "&lt;/script&gt;&lt;b x=&quot;1&quot;&gt;&amp;&#39;");
	/* the embedded data is the run document */
	cJSON *doc = embedded(s);
	CHECK(doc != NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "format")), "dlk-report");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "runs")) == 1);
	CHECK(cJSON_Compare(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "runs"), 0), a, 1));
	CHECK(!cJSON_GetObjectItem(doc, "comparison"));
	cJSON_Delete(doc);
	/* one chart point per value: 3 epochs, 2 of them evaluated, 7 step losses */
	CHECK_CONTAINS(s, "data-series=\"train-loss\" data-run=\"0\" data-points=\"3\"");
	CHECK_CONTAINS(s, "data-series=\"test-loss\" data-run=\"0\" data-points=\"2\"");
	CHECK_CONTAINS(s, "data-series=\"step-loss\" data-run=\"0\" data-points=\"7\"");
	CHECK_CONTAINS(s, "data-series=\"test-accuracy\" data-run=\"0\" data-points=\"2\"");
	CHECK_CONTAINS(s, "data-series=\"throughput\" data-run=\"0\" data-points=\"3\"");
	CHECK(count(s, "class=\"pt\"") == 3 + 2 + 2 + 3);
	/* the resume, on the loss chart (in epochs: step 15 of 10 a epoch) and the time chart */
	CHECK(count(s, "<g class=\"mark\"") == 2);
	CHECK_CONTAINS(s, "resumed: 4 \u2192 2 workers");
	/* the heat map prints its counts; the diagonal is marked */
	CHECK_CONTAINS(s, "<table class=\"heat\" id=\"confusion-a\">");
	CHECK_CONTAINS(s, ": 8 of 10 (80.0%)\">8</td>");
	CHECK(count(s, "<td class=\"diag\"") == 3);
	CHECK_CONTAINS(s, "<td>80.00%</td>"); /* cat's recall */
	CHECK_CONTAINS(s, "0123abc (with uncommitted changes)");
	CHECK_CONTAINS(s, "@media print");
	dlk_buf_release(&page);
	cJSON_Delete(a);
}

static void test_compare(void)
{
	struct dlk_buf page = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *a = run_of(CM_A, 3, 3, 0, "a.dlk"), *b = run_of(CM_B, 3, 2, 0, "b.dlk");
	static const long long CM_C[9] = { 16, 2, 2, 2, 7, 1, 0, 0, 10 }; /* cat has twice the samples */

	CHECK(report_html(a, b, &page, &err) == 0);
	cJSON *doc = embedded(page.data), *c = cJSON_GetObjectItem(doc, "comparison");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "runs")) == 2);
	CHECK(cJSON_Compare(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "runs"), 1), b, 1));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(c, "same_classes")) && cJSON_IsTrue(cJSON_GetObjectItem(c, "same_test_set")));
	cJSON *d = cJSON_GetObjectItem(c, "confusion_diff");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(d, "unit")), "count");
	cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "values"), 0);
	CHECK(cJSON_GetArrayItem(r0, 0)->valuedouble == 2 && cJSON_GetArrayItem(r0, 1)->valuedouble == -2);
	/* recall: cat 0.8 vs 0.6, dog 0.7 vs 0.8, the third 1.0 vs 0.9 */
	cJSON *mm = cJSON_GetObjectItem(c, "moved_most");
	CHECK(cJSON_GetArraySize(mm) == 3);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(mm, 0), "class")), "cat");
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(mm, 0), "delta")), 0.2, 1e-12);
	CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(c, "test_accuracy_delta")), 25.0 / 30 - 23.0 / 30, 1e-12);
	/* the page: both runs' series, the difference signed and shaded, B dashed */
	CHECK_CONTAINS(page.data, "data-series=\"b-train-loss\" data-run=\"1\" data-points=\"2\"");
	CHECK_CONTAINS(page.data, "<table class=\"heat\" id=\"confusion-diff\">");
	CHECK_CONTAINS(page.data, ">+2</td>");
	CHECK_CONTAINS(page.data, ">\u22122</td>");
	CHECK_CONTAINS(page.data, "stroke-dasharray=\"6 4\"");
	CHECK_CONTAINS(page.data, "<ol id=\"moved-most\">\n<li data-class=\"0\"><strong>cat</strong>: 60.00% in B, 80.00% in A");
	cJSON_Delete(doc);
	dlk_buf_release(&page);

	/* another test set: each true class's shares, in percentage points */
	cJSON *c2 = run_of(CM_C, 3, 1, 0, "c.dlk");
	doc = report_document(c2, b, &err);
	d = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "comparison"), "confusion_diff");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(d, "unit")), "percentage_points");
	r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "values"), 0);
	CHECK_NEAR(cJSON_GetArrayItem(r0, 0)->valuedouble, 80.0 - 60.0, 1e-9);
	cJSON_Delete(doc);

	/* other classes: nothing per class is set side by side */
	static const long long CM_4[16] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 };
	cJSON *four = run_of(CM_4, 4, 1, 0, "four.dlk");
	doc = report_document(a, four, &err);
	c = cJSON_GetObjectItem(doc, "comparison");
	CHECK(cJSON_IsFalse(cJSON_GetObjectItem(c, "same_classes")) && !cJSON_GetObjectItem(c, "confusion_diff") &&
	      !cJSON_GetObjectItem(c, "moved_most"));
	cJSON_Delete(doc);
	CHECK(report_html(a, four, &page, &err) == 0 && !strstr(page.data, "id=\"confusion-diff\"") &&
	      strstr(page.data, "not compared"));
	dlk_buf_release(&page);
	cJSON_Delete(four);
	cJSON_Delete(c2);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

static void test_sparse(void)
{
	struct dlk_buf page = DLK_BUF_INIT;
	struct dlk_err err = DLK_ERR_INIT;
	/* an older bundle: no history; and a run without a test set */
	cJSON *m = meta(CM_A, 3, 0, 0), *r;

	r = report_run_from_meta(m, "bundle", "old.dlk", &err);
	CHECK(r && report_html(r, NULL, &page, &err) == 0);
	CHECK_CONTAINS(page.data, "No history");
	CHECK(!strstr(page.data, "<svg class=\"chart\""));
	cJSON_Delete(r);
	dlk_buf_release(&page);
	cJSON *met = cJSON_GetObjectItem(m, "metrics");
	static const char *const test_keys[] = { "test_samples", "test_loss", "test_accuracy", "precision", "recall",
		                                     "confusion_matrix" };
	for (size_t i = 0; i < DLK_ARRAY_SIZE(test_keys); i++)
		cJSON_DeleteItemFromObject(met, test_keys[i]);
	r = report_run_from_meta(m, "bundle", "notest.dlk", &err);
	CHECK(r && report_html(r, NULL, &page, &err) == 0);
	CHECK(!strstr(page.data, "id=\"confusion\"") && !strstr(page.data, "id=\"per-class\""));
	CHECK_CONTAINS(page.data, "<div id=\"fig-test-accuracy\"><dt>test accuracy</dt><dd>-");
	cJSON_Delete(r);
	cJSON_Delete(m);
	dlk_buf_release(&page);
}

/* a run document with one substitution in its JSON text, parsed */
static int parse_edited(const char *json, const char *from, const char *to, struct dlk_err *err)
{
	const char *at = strstr(json, from);
	char *t;
	cJSON *r;

	if (!at)
		return 99;
	t = xasprintf("%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
	dlk_err_clear(err);
	r = report_run_parse(t, strlen(t), "'x.json'", err);
	free(t);
	cJSON_Delete(r);
	return r ? 0 : -1;
}

static void test_refused(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *a = run_of(CM_A, 3, 3, 0, "a.dlk");
	char *js = cJSON_PrintUnformatted(a);
	struct {
		const char *from, *to, *msg;
	} bad[] = {
		{ "\"format\":\"dlk-run\"", "\"format\":\"dlk-model\"", "'x.json': not a dlk run document" },
		{ "\"version\":1", "\"version\":2", "'x.json': a run document of version 2; this dlk reads version 1" },
		{ "\"name\":\"pets\"", "\"name\":7", "'x.json': \"name\" is missing" },
		{ "\"test_accuracy\":0.83", "\"test_accuracy\":1.83", "metrics.test_accuracy is out of range" },
		{ "[8,1,1]", "[8,1]", "metrics.confusion_matrix: every row must have 3 entries" },
		{ "[8,1,1]", "[8,1,-1]", "metrics.confusion_matrix[0][2] is not a count" },
		{ "[8,1,1]", "[9,1,1]", "metrics.confusion_matrix counts 31 samples, test_samples says 30" },
		{ "\"cat\",", "", "classes must list 3 names" },
		{ "\"n_classes\":3", "\"n_classes\":200000", "architecture.n_classes is out of range" },
		{ "\"recall\":[0.8,", "\"recall\":[", "metrics.recall must list 3 numbers" },
		{ "\"train_loss\":0.25", "\"train_loss\":1e999", "metrics.train_loss is out of range (expected a finite number)" },
		{ "\"every\":1", "\"every\":3", "history.step_loss: 7 values, each the mean of 3 steps, do not make 7 steps" },
		{ "\"source\":{", "\"source\":[], \"x\":{", "\"source\" is not an object" },
	};
	for (size_t i = 0; i < DLK_ARRAY_SIZE(bad); i++) {
		int rc = parse_edited(js, bad[i].from, bad[i].to, &err);
		CHECK_MSG(rc == -1, "refused: %s", bad[i].msg);
		CHECK_CONTAINS(err.msg, bad[i].msg);
	}
	/* 100000 empty rows claim 10^10 cells: refused before anything that size is allocated */
	struct dlk_buf big = DLK_BUF_INIT;
	dlk_buf_adds(&big, "{\"format\":\"dlk-run\",\"version\":1,\"name\":\"x\",\"architecture\":{\"n_classes\":100000},"
	                   "\"metrics\":{\"test_accuracy\":0.5,\"test_loss\":1,\"test_samples\":0,\"confusion_matrix\":[");
	for (int i = 0; i < 100000; i++)
		dlk_buf_adds(&big, i ? ",[]" : "[]");
	dlk_buf_adds(&big, "]}}");
	CHECK(report_run_parse(big.data, big.len, "'big.json'", &err) == NULL);
	CHECK_CONTAINS(err.msg, "every row must have 100000 entries");
	dlk_buf_release(&big);
	CHECK(report_run_parse("{\"format\":", 10, "'t.json'", &err) == NULL);
	CHECK_CONTAINS(err.msg, "'t.json': not valid JSON");
	cJSON *notmeta = cJSON_Parse("{\"format\":\"dlk-run\"}");
	CHECK(report_run_from_meta(notmeta, "bundle", "x.dlk", &err) == NULL);
	CHECK_CONTAINS(err.msg, "'x.dlk': model.json is not a dlk model description");
	cJSON_Delete(notmeta);
	free(js);
	cJSON_Delete(a);
}

static void test_compact(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *a = run_of(CM_A, 3, 3, 0, "a.dlk"), *h = cJSON_GetObjectItem(a, "history");
	struct dlk_history hist = DLK_HISTORY_INIT;
	char *full, *small;

	/* a long run: 3000 epochs, 1024 buckets of step losses */
	for (int e = 1; e <= 3000; e++) {
		struct dlk_history_epoch ep = { e, 10L * e, 1.0 / e, 1, 0.6 / e, 0.5, 1000.5, 2.0 * e, 0.01, 4, "2026-01-01T00:00:00Z", "", 0 };
		dlk_history_add_epoch(&hist, &ep);
	}
	for (int s = 0; s < 30000; s++)
		dlk_history_add_step(&hist, 1.0 / (s + 1));
	cJSON_ReplaceItemInObject(a, "history", dlk_history_json(&hist, 0));
	(void)h;
	full = cJSON_PrintUnformatted(a);
	CHECK(strlen(full) > 300000);
	small = report_run_compact(a, 64 << 10);
	CHECK(small && strlen(small) <= 64 << 10);
	cJSON *back = small ? report_run_parse(small, strlen(small), "'small'", &err) : NULL;
	CHECK_MSG(back != NULL, "what fits still reads as a run document (%s)", err.msg);
	cJSON *m = cJSON_GetObjectItem(back, "metrics"), *ep = cJSON_GetObjectItem(cJSON_GetObjectItem(back, "history"), "epochs");
	CHECK(!cJSON_GetObjectItem(m, "confusion_matrix") && cJSON_GetObjectItem(m, "recall"));
	CHECK(cJSON_GetArraySize(ep) < 3000 && cJSON_GetArraySize(ep) > 100);
	CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(ep, cJSON_GetArraySize(ep) - 1), "epoch")->valuedouble == 3000);
	CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(ep, 0), "epoch")->valuedouble == 1);
	char *same = report_run_compact(back, 64 << 10);
	CHECK(same && !strcmp(same, small)); /* what fits is left as it is */
	CHECK(report_run_compact(a, 100) == NULL);
	free(same);
	cJSON_Delete(back);
	free(small);
	free(full);
	dlk_history_release(&hist);
	cJSON_Delete(a);
}

static void test_write(void)
{
	struct dlk_err err = DLK_ERR_INIT;
	char dir[] = "/tmp/dlk-report-XXXXXX", path[128], cmd[160];
	cJSON *a = run_of(CM_A, 3, 2, 0, "a.dlk");
	struct stat st;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/page.html", dir);
	CHECK(report_write_html(path, a, NULL, &err) == 0);
	CHECK(stat(path, &st) == 0 && st.st_size > 1000 && (st.st_mode & 0777) == 0644);
	snprintf(cmd, sizeof(cmd), "test $(ls %s | wc -l) = 1", dir);
	CHECK(system(cmd) == 0);
	snprintf(path, sizeof(path), "%s/no/such/dir/page.html", dir);
	CHECK(report_write_html(path, a, NULL, &err) == -1 && err.code == DLK_EXIT_FAIL);
	CHECK_CONTAINS(err.msg, "cannot write");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	cJSON_Delete(a);

	/* round ticks */
	double f, s;
	int n;
	chart_ticks(0, 0.93, 5, &f, &s, &n);
	CHECK(f == 0 && s == 0.2 && n == 6);
	chart_ticks(3, 3, 5, &f, &s, &n);
	CHECK(f <= 2.7 && f + s * (n - 1) >= 3.3 && n <= 12);
	chart_ticks(-1e30, 1e30, 5, &f, &s, &n);
	CHECK(n >= 2 && n <= 12);

	/* a percent axis spans ten points at least, and says where it starts when not at 0 */
	{
		static const double ex[] = { 1, 2, 3 }, acc[] = { 0.840, 0.843, 0.846 }, low[] = { 0.02, 0.03, 0.05 };
		struct chart_series se = { "acc", "test accuracy", 0, 0, 1, 0, 3, ex, acc };
		struct chart c = { .id = "c", .title = "t", .desc = "d", .xaxis = AXIS_EPOCH, .yaxis = AXIS_PERCENT,
		                   .xlabel = "epoch", .ylabel = "test accuracy", .series = &se, .n_series = 1 };
		struct dlk_buf b = DLK_BUF_INIT;
		chart_figure(&b, &c);
		CHECK_CONTAINS(b.data, ">74%</text>");
		CHECK_CONTAINS(b.data, ">86%</text>");
		CHECK_CONTAINS(b.data, "class=\"axisnote\"");
		CHECK_CONTAINS(b.data, "the axis starts at 74%, not 0");
		dlk_buf_release(&b);
		se.y = low;
		chart_figure(&b, &c);
		CHECK_CONTAINS(b.data, ">0%</text>");
		CHECK(!strstr(b.data, "axisnote"));
		dlk_buf_release(&b);
	}
}

int main(void)
{
	test_page();
	test_compare();
	test_sparse();
	test_refused();
	test_compact();
	test_write();
	return CHECK_DONE();
}
