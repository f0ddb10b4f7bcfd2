/* The report page of a sweep (`dlk report SWEEP`): the metric against each parameter, every
 * trial's learning curve with the stopped ones marked, and the trials in parallel coordinates.
 * Inline SVG, no script: the same Content-Security-Policy as a run's page. The data it draws,
 * dlk_sweep_status's document, is embedded as JSON as the run page embeds its own. */
#include "lib/report/chart.h"
#include "lib/report/report.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 760
#define H 300
#define L 70
#define R 20
#define T 20
#define B 50

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int stopped(const cJSON *t) { return !strcmp(get(t, "outcome")->valuestring, "stopped"); }

/* a parameter's values across the trials as numbers: the value, or a listed string's rank among
 * the distinct strings */
static double num_of(const cJSON *v, const cJSON *trials, const char *key)
{
	const cJSON *t;
	int rank = 0;
	if (cJSON_IsNumber(v))
		return v->valuedouble;
	if (!cJSON_IsString(v))
		return NAN;
	cJSON_ArrayForEach(t, trials) {
		const cJSON *o = get(get(t, "params"), key);
		if (cJSON_IsString(o) && strcmp(o->valuestring, v->valuestring) < 0)
			rank++;
	}
	return rank;
}

struct axis {
	double lo, hi;
	int log;
};

static void axis_fit(struct axis *a, const double *v, int n)
{
	a->lo = INFINITY;
	a->hi = -INFINITY;
	for (int i = 0; i < n; i++)
		if (isfinite(v[i])) {
			a->lo = fmin(a->lo, v[i]);
			a->hi = fmax(a->hi, v[i]);
		}
	if (!isfinite(a->lo)) {
		a->lo = 0;
		a->hi = 1;
	}
	/* a range over two decades or more is drawn on a log scale (a learning rate) */
	a->log = a->lo > 0 && a->hi / a->lo >= 100;
	if (a->hi == a->lo) {
		a->lo -= a->log ? a->lo / 2 : 0.5;
		a->hi += a->log ? a->hi : 0.5;
	}
}

static double axis_pos(const struct axis *a, double v)
{
	if (a->log)
		return (log(v) - log(a->lo)) / (log(a->hi) - log(a->lo));
	return (v - a->lo) / (a->hi - a->lo);
}

static void ticks(struct dlk_buf *b, const struct axis *a, int horizontal, double x0, double y0, double len)
{
	if (a->log) {
		for (double d = pow(10, floor(log10(a->lo))); d <= a->hi * 1.0001; d *= 10) {
			double p = axis_pos(a, d);
			if (p < -1e-9 || p > 1 + 1e-9)
				continue;
			if (horizontal)
				dlk_buf_addf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x0 + p * len, y0 + 16, d);
			else
				dlk_buf_addf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y0 - p * len + 4, d);
		}
		return;
	}
	double first, step;
	int n;
	chart_ticks(a->lo, a->hi, 5, &first, &step, &n);
	for (int i = 0; i < n; i++) {
		double v = first + i * step, p = axis_pos(a, v);
		if (p < -1e-9 || p > 1 + 1e-9)
			continue;
		if (horizontal)
			dlk_buf_addf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x0 + p * len, y0 + 16, v);
		else
			dlk_buf_addf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y0 - p * len + 4, v);
	}
}

/* the metric against one parameter: a point per trial, hollow for a stopped one */
static void scatter(struct dlk_buf *b, const cJSON *doc, const char *key, int idx)
{
	const cJSON *trials = get(doc, "trials"), *t;
	int n = cJSON_GetArraySize(trials), i = 0;
	double *xs = xcalloc((size_t)n, sizeof(double)), *ys = xcalloc((size_t)n, sizeof(double));
	struct axis ax, ay;

	cJSON_ArrayForEach(t, trials) {
		xs[i] = num_of(get(get(t, "params"), key), trials, key);
		ys[i] = cJSON_IsNumber(get(t, "value")) ? get(t, "value")->valuedouble : NAN;
		i++;
	}
	axis_fit(&ax, xs, n);
	axis_fit(&ay, ys, n);
	ay.log = 0;
	dlk_buf_addf(b, "<figure>\n<svg class=\"chart scatter\" id=\"param-%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
	             "data-param=\"", idx, W, H);
	html_escape(b, key);
	dlk_buf_adds(b, "\"><title>");
	html_escape(b, get(doc, "metric")->valuestring);
	dlk_buf_adds(b, " against ");
	html_escape(b, key);
	dlk_buf_addf(b, "</title>\n<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
	             "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n",
	             L, H - B, W - R, H - B, L, T, L, H - B);
	ticks(b, &ax, 1, L, H - B, W - L - R);
	ticks(b, &ay, 0, L, H - B, H - T - B);
	i = 0;
	cJSON_ArrayForEach(t, trials) {
		if (isfinite(xs[i]) && isfinite(ys[i])) {
			double x = L + axis_pos(&ax, xs[i]) * (W - L - R), y = H - B - axis_pos(&ay, ys[i]) * (H - T - B);
			dlk_buf_addf(b, "<circle class=\"dot%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\"><title>trial %d: %g (%s)</title>"
			             "</circle>\n", stopped(t) ? " stopped" : "", x, y, get(t, "trial")->valueint, ys[i],
			             get(t, "outcome")->valuestring);
		}
		i++;
	}
	dlk_buf_addf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (W + L) / 2, H - 12);
	html_escape(b, key);
	dlk_buf_adds(b, ax.log ? " (log scale)" : "");
	dlk_buf_adds(b, "</text>\n</svg>\n<figcaption>");
	html_escape(b, get(doc, "metric")->valuestring);
	dlk_buf_adds(b, " against ");
	html_escape(b, key);
	dlk_buf_adds(b, "; hollow: stopped early (its value at the rung it stopped at)</figcaption>\n</figure>\n");
	free(xs);
	free(ys);
}

/* every trial's curve; the stopped ones dashed and hollow (the chart's "other run" style) */
static void curves(struct dlk_buf *b, const cJSON *doc)
{
	const cJSON *trials = get(doc, "trials"), *t, *p;
	int n = cJSON_GetArraySize(trials), i = 0;
	struct chart_series *s = xcalloc((size_t)n, sizeof(*s));
	double **xs = xcalloc((size_t)n, sizeof(double *)), **ys = xcalloc((size_t)n, sizeof(double *));
	char **ids = xcalloc((size_t)n, sizeof(char *)), **labels = xcalloc((size_t)n, sizeof(char *));
	struct chart c = { 0 };

	cJSON_ArrayForEach(t, trials) {
		const cJSON *curve = get(t, "curve");
		int k = 0, m = cJSON_GetArraySize(curve);
		xs[i] = xcalloc((size_t)m + 1, sizeof(double));
		ys[i] = xcalloc((size_t)m + 1, sizeof(double));
		cJSON_ArrayForEach(p, curve) {
			xs[i][k] = cJSON_GetArrayItem(p, 0)->valuedouble;
			ys[i][k] = cJSON_GetArrayItem(p, 1)->valuedouble;
			k++;
		}
		ids[i] = xasprintf("trial-%d", get(t, "trial")->valueint);
		labels[i] = stopped(t) ? xasprintf("trial %d, stopped at %g", get(t, "trial")->valueint,
		                                   cJSON_IsNumber(get(t, "stopped_at")) ? get(t, "stopped_at")->valuedouble : 0)
		                       : xasprintf("trial %d, %s", get(t, "trial")->valueint, get(t, "outcome")->valuestring);
		s[i] = (struct chart_series){ .id = ids[i], .label = labels[i], .run = stopped(t), .style = i % 4,
			                      .markers = 1, .n = (size_t)k, .x = xs[i], .y = ys[i] };
		i++;
	}
	c.id = "curves";
	c.title = "learning curves";
	c.desc = "the metric after each epoch (or step) of every trial; dashed with hollow markers: stopped early";
	c.xaxis = AXIS_EPOCH;
	c.yaxis = AXIS_NUMBER;
	c.xlabel = "epoch";
	c.ylabel = get(doc, "metric")->valuestring;
	c.series = s;
	c.n_series = (size_t)n;
	chart_figure(b, &c);
	for (i = 0; i < n; i++) {
		free(xs[i]);
		free(ys[i]);
		free(ids[i]);
		free(labels[i]);
	}
	free(xs);
	free(ys);
	free(ids);
	free(labels);
	free(s);
}

/* parallel coordinates: an axis per parameter and one for the metric, a line per trial */
static void parallel(struct dlk_buf *b, const cJSON *doc)
{
	const cJSON *trials = get(doc, "trials"), *t, *k;
	const cJSON *params = get(cJSON_GetArrayItem(trials, 0), "params");
	int n = cJSON_GetArraySize(trials), na = cJSON_GetArraySize(params) + 1, a = 0;
	struct axis *ax = xcalloc((size_t)na, sizeof(*ax));
	double *v = xcalloc((size_t)n, sizeof(double));
	double gap = na > 1 ? (double)(W - L - R) / (na - 1) : 0;

	for (k = params ? params->child : NULL; k; k = k->next, a++) {
		int i = 0;
		cJSON_ArrayForEach(t, trials) v[i++] = num_of(get(get(t, "params"), k->string), trials, k->string);
		axis_fit(&ax[a], v, n);
	}
	{
		int i = 0;
		cJSON_ArrayForEach(t, trials) v[i++] = cJSON_IsNumber(get(t, "value")) ? get(t, "value")->valuedouble : NAN;
		axis_fit(&ax[a], v, n);
		ax[a].log = 0;
	}
	dlk_buf_addf(b, "<figure>\n<svg class=\"chart parallel\" id=\"parallel\" viewBox=\"0 0 %d %d\" role=\"img\">"
	             "<title>parallel coordinates</title>\n", W, H);
	for (a = 0; a < na; a++) {
		double x = L + a * gap;
		const char *name = a < na - 1 ? cJSON_GetArrayItem(params, a)->string : get(doc, "metric")->valuestring;
		dlk_buf_addf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x, T, x, H - B);
		dlk_buf_addf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", x, H - 24);
		html_escape(b, name);
		dlk_buf_addf(b, "</text>\n<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.3g</text>"
		             "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.3g</text>\n",
		             x, H - B + 14, ax[a].lo, x, T - 6 > 8 ? T - 6 : 10, ax[a].hi);
	}
	cJSON_ArrayForEach(t, trials) {
		dlk_buf_addf(b, "<polyline class=\"trial%s\" data-trial=\"%d\" points=\"", stopped(t) ? " stopped" : "",
		             get(t, "trial")->valueint);
		a = 0;
		for (k = params ? params->child : NULL; k; k = k->next, a++) {
			double p = axis_pos(&ax[a], num_of(get(get(t, "params"), k->string), trials, k->string));
			if (isfinite(p))
				dlk_buf_addf(b, "%.1f,%.1f ", L + a * gap, H - B - p * (H - T - B));
		}
		if (cJSON_IsNumber(get(t, "value")))
			dlk_buf_addf(b, "%.1f,%.1f", L + a * gap, H - B - axis_pos(&ax[a], get(t, "value")->valuedouble) * (H - T - B));
		dlk_buf_addf(b, "\"><title>trial %d (%s)</title></polyline>\n", get(t, "trial")->valueint,
		             get(t, "outcome")->valuestring);
	}
	dlk_buf_adds(b, "</svg>\n<figcaption>each trial a line through its parameters to its metric; dashed: stopped "
	                "early</figcaption>\n</figure>\n");
	free(ax);
	free(v);
}

static const char css[] =
	"body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:800px;color:#222}"
	"svg{width:100%;height:auto;font-size:12px}.axis{stroke:#444}"
	"circle.dot{fill:#1f5fa8}circle.dot.stopped{fill:none;stroke:#b34;stroke-width:1.5}"
	"polyline.trial{fill:none;stroke:#1f5fa8;stroke-width:1.5}"
	"polyline.trial.stopped{stroke:#b34;stroke-dasharray:5 4;opacity:.6}"
	"table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
	"figcaption{color:#555;font-size:13px}";

int report_sweep_html(const cJSON *doc, struct dlk_buf *b, struct dlk_err *err)
{
	const cJSON *trials = get(doc, "trials"), *t, *best = get(doc, "best"), *params;
	char *json;
	int i = 0;

	if (!cJSON_IsArray(trials) || !cJSON_GetArraySize(trials) || !cJSON_IsString(get(doc, "metric")))
		return dlk_errf(err, DLK_EXIT_CONFIG, "the sweep has no trials to draw");
	params = get(cJSON_GetArrayItem(trials, 0), "params");
	dlk_buf_adds(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
	                "<meta name=\"generator\" content=\"dlk " DLK_VERSION "\">\n<title>sweep ");
	html_escape(b, get(doc, "sweep")->valuestring);
	dlk_buf_adds(b, " \u2014 dlk report</title>\n<style>");
	dlk_buf_adds(b, css);
	dlk_buf_adds(b, "</style>\n</head>\n<body>\n<header><h1>sweep ");
	html_escape(b, get(doc, "sweep")->valuestring);
	dlk_buf_addf(b, "</h1>\n<p>%d trials, ", cJSON_GetArraySize(trials));
	html_escape(b, get(doc, "metric")->valuestring);
	dlk_buf_adds(b, " ");
	html_escape(b, get(doc, "goal")->valuestring);
	dlk_buf_adds(b, "d");
	if (cJSON_IsObject(best)) {
		dlk_buf_addf(b, "; best: trial %d, %g", get(best, "trial")->valueint, get(best, "value")->valuedouble);
		if (cJSON_IsString(get(best, "bundle"))) {
			dlk_buf_adds(b, ", bundle <code>");
			html_escape(b, get(best, "bundle")->valuestring);
			dlk_buf_adds(b, "</code>");
		}
	}
	dlk_buf_adds(b, "</p>\n</header>\n<main>\n<h2>Metric against each parameter</h2>\n");
	for (const cJSON *k = params ? params->child : NULL; k; k = k->next)
		scatter(b, doc, k->string, i++);
	dlk_buf_adds(b, "<h2>Learning curves</h2>\n");
	curves(b, doc);
	dlk_buf_adds(b, "<h2>Parallel coordinates</h2>\n");
	parallel(b, doc);
	dlk_buf_adds(b, "<h2>Trials</h2>\n<table><tr><th>trial</th><th>outcome</th><th>value</th><th>run</th></tr>\n");
	cJSON_ArrayForEach(t, trials) {
		dlk_buf_addf(b, "<tr><td>%d</td><td>", get(t, "trial")->valueint);
		html_escape(b, get(t, "outcome")->valuestring);
		if (cJSON_IsNumber(get(t, "value")))
			dlk_buf_addf(b, "</td><td>%.4g</td><td>", get(t, "value")->valuedouble);
		else
			dlk_buf_adds(b, "</td><td>-</td><td>");
		html_escape(b, get(t, "run")->valuestring);
		dlk_buf_adds(b, "</td></tr>\n");
	}
	dlk_buf_adds(b, "</table>\n</main>\n<script type=\"application/json\" id=\"dlk-sweep-data\">");
	/* the data as JSON inside <script>: "</" written as "<\/" so that no value can end the element */
	json = cJSON_PrintUnformatted(doc);
	for (const char *p = json; *p; p++) {
		if (p[0] == '<' && p[1] == '/')
			dlk_buf_adds(b, "<\\");
		else
			dlk_buf_addc(b, *p);
	}
	free(json);
	dlk_buf_adds(b, "</script>\n</body>\n</html>\n");
	return 0;
}

int report_sweep_write_html(const char *path, const cJSON *doc, struct dlk_err *err)
{
	struct dlk_buf b = DLK_BUF_INIT;
	int rc = report_sweep_html(doc, &b, err);
	if (!rc)
		rc = dlk_write_file_atomic(path, b.data, b.len, 0644, err);
	dlk_buf_release(&b);
	return rc;
}
