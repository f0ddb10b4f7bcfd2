/* The report page: one HTML file with its style inline, charts as inline SVG, tables for every
 * number, and the report document embedded as JSON. No script runs and nothing is loaded. */
#include "lib/report/chart.h"
#include "lib/report/report.h"
#include "lib/util/duration.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#ifndef DLK_VERSION
#define DLK_VERSION "unknown"
#endif

#define MOVED_MOST 5 /* classes listed as those whose recall moved most */

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = b ? get(get(o, a), b) : get(o, a);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- the report document ---- */

static cJSON *comparison_json(const struct report_run *a, const struct report_run *b, const struct report_compare *c)
{
	cJSON *o = cJSON_CreateObject();
	int k = a->n_classes;

	cJSON_AddBoolToObject(o, "same_classes", c->same_classes);
	cJSON_AddBoolToObject(o, "same_test_set", c->same_support);
	if (a->have_test && b->have_test) {
		cJSON_AddNumberToObject(o, "test_accuracy_delta", a->test_accuracy - b->test_accuracy);
		cJSON_AddNumberToObject(o, "test_loss_delta", a->test_loss - b->test_loss);
	}
	if (c->recall_delta) {
		cJSON_AddItemToObject(o, "recall_delta", cJSON_CreateDoubleArray(c->recall_delta, k));
		cJSON *m = cJSON_AddArrayToObject(o, "moved_most");
		for (int i = 0; i < c->n_moved && i < MOVED_MOST; i++) {
			int x = c->moved[i];
			cJSON *e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "index", x);
			cJSON_AddStringToObject(e, "class", a->classes[x]);
			cJSON_AddNumberToObject(e, "recall", a->recall[x]);
			cJSON_AddNumberToObject(e, "other_recall", b->recall[x]);
			cJSON_AddNumberToObject(e, "delta", c->recall_delta[x]);
			cJSON_AddItemToArray(m, e);
		}
	}
	if (c->confusion_diff) {
		cJSON *d = cJSON_AddObjectToObject(o, "confusion_diff");
		cJSON_AddStringToObject(d, "unit", c->same_support ? "count" : "percentage_points");
		cJSON *rows = cJSON_AddArrayToObject(d, "values");
		for (int i = 0; i < k; i++)
			cJSON_AddItemToArray(rows, cJSON_CreateDoubleArray(c->confusion_diff + (size_t)i * k, k));
	}
	return o;
}

cJSON *report_document(const cJSON *run, const cJSON *other, struct dlk_err *err)
{
	struct report_run a = REPORT_RUN_INIT, b = REPORT_RUN_INIT;
	struct report_compare c = REPORT_COMPARE_INIT;
	cJSON *doc = NULL, *runs;

	if (report_run_load(run, "the run", &a, err) || (other && report_run_load(other, "the other run", &b, err)))
		goto out;
	doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "format", REPORT_FORMAT);
	cJSON_AddNumberToObject(doc, "version", REPORT_VERSION);
	cJSON_AddStringToObject(doc, "generator", "dlk " DLK_VERSION);
	runs = cJSON_AddArrayToObject(doc, "runs");
	cJSON_AddItemToArray(runs, cJSON_Duplicate(run, 1));
	if (other) {
		cJSON_AddItemToArray(runs, cJSON_Duplicate(other, 1));
		report_compare(&a, &b, &c);
		cJSON_AddItemToObject(doc, "comparison", comparison_json(&a, &b, &c));
	}
out:
	report_compare_release(&c);
	report_run_release(&a);
	report_run_release(&b);
	return doc;
}

/* ---- formatting ---- */

static void pct(char *out, size_t n, double v)
{
	snprintf(out, n, "%.2f%%", 100 * v);
}

/* a signed difference with a real minus sign and an arrow, readable without colour;
 * higher_is_better: 1, -1 (lower is better) or 0 (neither) */
static void delta_html(struct dlk_buf *b, double d, const char *fmt, double scale, int higher_is_better)
{
	char t[64];

	if (d == 0 || fabs(d * scale) < 5e-7) {
		dlk_buf_adds(b, "<span class=\"same\">no change</span>");
		return;
	}
	snprintf(t, sizeof(t), fmt, fabs(d * scale));
	dlk_buf_addf(b, "<span class=\"%s %s\">%s%s</span>", d > 0 ? "up" : "down",
	             !higher_is_better ? "neutral" : (d > 0) == (higher_is_better > 0) ? "better" : "worse",
	             d > 0 ? "+" : "\u2212", t);
}

static void mono(struct dlk_buf *b, const char *s)
{
	dlk_buf_adds(b, "<code>");
	html_escape(b, s);
	dlk_buf_adds(b, "</code>");
}

static const char *css =
	":root{color-scheme:light;--fg:#1a1a1a;--muted:#555;--line:#c8c8c8}\n"
	"html{font-family:\"DejaVu Sans\",\"Liberation Sans\",Arial,Helvetica,sans-serif;font-size:100%;color:var(--fg);"
	"background:#fff}\n"
	"body{margin:0 auto;max-width:62rem;padding:1rem 1.5rem 3rem;line-height:1.45}\n"
	"h1{font-size:1.6rem;margin:.5rem 0 .2rem}\n"
	"h2{font-size:1.25rem;margin:2rem 0 .6rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}\n"
	"h3{font-size:1.05rem;margin:1.2rem 0 .4rem}\n"
	"p.sub{color:var(--muted);margin:0}\n"
	"p.note,p.none{color:var(--muted);font-style:italic}\n"
	".verdict{border:3px double var(--fg);padding:.5rem .8rem;margin:1rem 0;font-size:1.1rem}\n"
	"dl.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(12rem,1fr));gap:.5rem;margin:1rem 0}\n"
	"dl.figures div{border:1px solid var(--line);border-radius:4px;padding:.4rem .6rem}\n"
	"dl.figures dt{font-size:.8rem;color:var(--muted)}\n"
	"dl.figures dd{margin:0;font-size:1.3rem;font-variant-numeric:tabular-nums}\n"
	"dl.figures dd small{display:block;font-size:.8rem;color:var(--muted)}\n"
	"figure.chart{margin:1rem 0 1.5rem;break-inside:avoid}\n"
	"figure.chart figcaption{font-weight:bold;margin-bottom:.3rem}\n"
	"svg.chart{max-width:100%;height:auto;display:block}\n"
	"svg.chart text{font-size:.75rem;fill:var(--fg)}\n"
	"svg.chart .grid{stroke:#e6e6e6}\n"
	"svg.chart .frame{fill:none;stroke:#8c8c8c}\n"
	"svg.chart .axisnote{font-style:italic;fill:#555}\n"
	"svg.chart .mark line,ul.legend .markline{stroke:#333;stroke-dasharray:3 3}\n"
	"svg.chart .mark text{font-size:.7rem;fill:#333}\n"
	"ul.legend{list-style:none;padding:0;margin:.3rem 0;display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;font-size:.875rem}\n"
	"ul.legend svg{vertical-align:middle;margin-right:.35rem}\n"
	".scroll{overflow-x:auto;max-width:100%}\n"
	"table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:.5rem 0 1rem}\n"
	"caption{text-align:left;font-weight:bold;padding:.3rem 0}\n"
	"th,td{padding:.2rem .5rem;border:1px solid var(--line);text-align:right;vertical-align:top}\n"
	"th{background:#f2f2f2;font-weight:600}\n"
	"th[scope=row],td.text{text-align:left}\n"
	"table.heat td{min-width:2.8em;text-align:center}\n"
	"table.heat td.diag{font-weight:bold;outline:2px solid #000;outline-offset:-3px}\n"
	"table.heat th.corner{font-weight:normal;font-size:.8rem;color:var(--muted)}\n"
	"code{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",monospace;font-size:.85rem;word-break:break-all}\n"
	".up::before{content:\"\\25B2\\00A0\"}\n"
	".down::before{content:\"\\25BC\\00A0\"}\n"
	".better{color:#1b5e20}.worse{color:#b71c1c}.same,.neutral{color:var(--muted)}\n"
	"td.differs{font-weight:bold}\n"
	"footer{margin-top:3rem;color:var(--muted);font-size:.8rem}\n"
	"@media print{body{max-width:none;padding:0;font-size:10pt}h2,h3{break-after:avoid}"
	"table,figure,dl.figures div{break-inside:avoid}.scroll{overflow:visible}"
	"*{print-color-adjust:exact;-webkit-print-color-adjust:exact}}\n";

/* ---- sections ---- */

static int n_resumes(const struct report_run *r)
{
	int n = 0;
	for (size_t i = 0; r->have_history && i < r->history.n_events; i++)
		n += r->history.events[i].kind == DLK_HISTORY_RESUME;
	return n;
}

/* "1", or "4 → 2 → 3" when the world size changed */
static void worlds(char *out, size_t n, const struct report_run *r)
{
	size_t at = 0;
	int last = 0;

	out[0] = '\0';
	for (size_t i = 0; r->have_history && i < r->history.n_events && at + 16 < n; i++) {
		int w = r->history.events[i].world;
		if (w == last)
			continue;
		at += (size_t)snprintf(out + at, n - at, "%s%d", last ? " \u2192 " : "", w);
		last = w;
	}
	if (!out[0])
		snprintf(out, n, "-");
}

static const struct dlk_history_epoch *last_epoch(const struct report_run *r)
{
	return r->have_history && r->history.n_epochs ? &r->history.epochs[r->history.n_epochs - 1] : NULL;
}

enum fig_kind { FIG_PCT, FIG_LOSS, FIG_INT, FIG_RATE, FIG_TIME, FIG_TEXT };

struct figure_val {
	int have;
	double v;
	char text[96];
};

static void fig_format(char *out, size_t n, enum fig_kind k, const struct figure_val *f)
{
	if (!f->have) {
		snprintf(out, n, "-");
		return;
	}
	switch (k) {
	case FIG_PCT: pct(out, n, f->v); break;
	case FIG_LOSS: snprintf(out, n, "%.4f", f->v); break;
	case FIG_INT: snprintf(out, n, "%.0f", f->v); break;
	case FIG_RATE: snprintf(out, n, "%.0f", f->v); break;
	case FIG_TIME:
		/* the format of every duration dlk shows (terminal, history, here) */
		dlk_duration_span(f->v, out, n);
		break;
	case FIG_TEXT: snprintf(out, n, "%s", f->text); break;
	}
}

static void figure(struct dlk_buf *b, const char *id, const char *label, enum fig_kind k, const struct figure_val *a,
                   const struct figure_val *o, int higher_is_better)
{
	char t[128];

	dlk_buf_addf(b, "<div id=\"fig-%s\"><dt>", id);
	html_escape(b, label);
	dlk_buf_adds(b, "</dt><dd>");
	fig_format(t, sizeof(t), k, a);
	html_escape(b, t);
	if (o) {
		fig_format(t, sizeof(t), k, o);
		dlk_buf_adds(b, "<small>B: ");
		html_escape(b, t);
		if (a->have && o->have && k != FIG_TEXT) {
			dlk_buf_adds(b, " \u00b7 ");
			if (k == FIG_PCT)
				delta_html(b, a->v - o->v, "%.2f points", 100, higher_is_better);
			else if (k == FIG_LOSS)
				delta_html(b, a->v - o->v, "%.4f", 1, higher_is_better);
			else if (k == FIG_TIME)
				delta_html(b, a->v - o->v, "%.1fs", 1, higher_is_better);
			else
				delta_html(b, a->v - o->v, "%.0f", 1, higher_is_better);
		}
		dlk_buf_adds(b, "</small>");
	}
	dlk_buf_adds(b, "</dd></div>\n");
}

static void figures_of(const struct report_run *r, struct figure_val f[10])
{
	const struct dlk_history_epoch *le = last_epoch(r);
	double v;

	memset(f, 0, sizeof(struct figure_val) * 10);
	f[0] = (struct figure_val){ r->have_test, r->test_accuracy, "" };
	f[1] = (struct figure_val){ r->have_test || r->task_metrics, r->test_loss, "" };
	f[2] = (struct figure_val){ r->have_metrics || le, le ? le->train_loss : r->train_loss, "" };
	f[3] = (struct figure_val){ le != NULL, le ? le->epoch : 0, "" };
	f[4] = (struct figure_val){ r->have_history, (double)r->history.steps, "" };
	f[5] = (struct figure_val){ le != NULL, le ? le->samples_per_sec : 0, "" };
	/* the run's training time (dlk_history_training_sec), as the terminal and the history say it */
	f[6] = (struct figure_val){ le != NULL, dlk_history_training_sec(&r->history), "" };
	f[7] = (struct figure_val){ r->have_history, n_resumes(r), "" };
	f[8].have = r->have_history && r->history.n_events;
	worlds(f[8].text, sizeof(f[8].text), r);
	v = (double)r->parameters;
	f[9] = (struct figure_val){ r->parameters >= 0, v, "" };
}

static void section_summary(struct dlk_buf *b, const struct report_run *a, const struct report_run *o)
{
	static const struct {
		const char *id, *label;
		enum fig_kind kind;
		int better;
	} figs[10] = {
		{ "test-accuracy", "test accuracy", FIG_PCT, 1 },     { "test-loss", "test loss", FIG_LOSS, -1 },
		{ "train-loss", "train loss (last epoch)", FIG_LOSS, -1 }, { "epochs", "epochs", FIG_INT, 0 },
		{ "steps", "steps", FIG_INT, 0 },                     { "throughput", "samples/s (last epoch)", FIG_RATE, 1 },
		{ "time", "training time", FIG_TIME, -1 },            { "restarts", "resumes from a checkpoint", FIG_INT, -1 },
		{ "workers", "workers", FIG_TEXT, 0 },                { "parameters", "parameters", FIG_INT, 0 },
	};
	struct figure_val fa[10], fo[10];

	figures_of(a, fa);
	if (o)
		figures_of(o, fo);
	dlk_buf_adds(b, "<section id=\"summary\">\n<h2>Summary</h2>\n<dl class=\"figures\">\n");
	/* another task's run: its headline metric in the accuracy's place */
	const cJSON *head = a->task_metrics ? a->task_metrics->child : NULL;
	char hlabel[64];
	if (head && cJSON_IsNumber(head) && head->string) {
		const cJSON *ob = o && o->task_metrics ? cJSON_GetObjectItemCaseSensitive(o->task_metrics, head->string) : NULL;
		snprintf(hlabel, sizeof(hlabel), "test %.40s", head->string);
		fa[0] = (struct figure_val){ 1, head->valuedouble, "" };
		if (o)
			fo[0] = (struct figure_val){ cJSON_IsNumber(ob), cJSON_IsNumber(ob) ? ob->valuedouble : 0, "" };
	}
	for (int i = 0; i < 10; i++) {
		if (i == 0 && head && cJSON_IsNumber(head) && head->string) {
			int lower = !strcmp(head->string, "rmse") || !strcmp(head->string, "mae");
			figure(b, figs[0].id, hlabel, FIG_LOSS, &fa[0], o ? &fo[0] : NULL, lower ? -1 : 1);
			continue;
		}
		figure(b, figs[i].id, figs[i].label, figs[i].kind, &fa[i], o ? &fo[i] : NULL, figs[i].better);
	}
	dlk_buf_adds(b, "</dl>\n");
	if (o)
		dlk_buf_adds(b, "<p class=\"note\">Large figures are this run (A); B is the run it is compared with; the "
		                "difference is A minus B, marked \u25B2 up or \u25BC down.</p>\n");
	dlk_buf_adds(b, "</section>\n");
}

/* the series of one run for the three charts */
struct run_series {
	double *ep_x, *train, *test_loss_x, *test_loss, *acc_x, *acc, *step_x, *step_y, *time_x, *rate;
	size_t n_ep, n_test, n_step;
	struct chart_mark *marks_epoch, *marks_time;
	size_t n_marks;
	char (*mark_text)[64];
};

static void series_of(const struct report_run *r, int run, struct run_series *s)
{
	const struct dlk_history *h = &r->history;
	double spe = r->steps_per_epoch > 0 ? (double)r->steps_per_epoch : 0;

	memset(s, 0, sizeof(*s));
	if (!r->have_history)
		return;
	size_t n = h->n_epochs ? h->n_epochs : 1;
	s->ep_x = xcalloc(n, sizeof(double));
	s->train = xcalloc(n, sizeof(double));
	s->test_loss_x = xcalloc(n, sizeof(double));
	s->test_loss = xcalloc(n, sizeof(double));
	s->acc = xcalloc(n, sizeof(double));
	s->time_x = xcalloc(n, sizeof(double));
	s->rate = xcalloc(n, sizeof(double));
	for (size_t i = 0; i < h->n_epochs; i++) {
		const struct dlk_history_epoch *e = &h->epochs[i];
		s->ep_x[i] = e->epoch;
		s->train[i] = e->train_loss;
		s->time_x[i] = e->elapsed_sec;
		s->rate[i] = e->samples_per_sec;
		if (e->have_test) {
			s->test_loss_x[s->n_test] = e->epoch;
			s->test_loss[s->n_test] = e->test_loss;
			s->acc[s->n_test++] = e->test_metric[0] ? e->test_metric_value : e->test_accuracy;
		}
	}
	s->n_ep = h->n_epochs;
	s->acc_x = s->test_loss_x;
	/* step losses at the middle of their buckets, in epochs when an epoch's length is known */
	s->n_step = h->n_step_loss;
	s->step_x = xcalloc(s->n_step ? s->n_step : 1, sizeof(double));
	s->step_y = xcalloc(s->n_step ? s->n_step : 1, sizeof(double));
	for (size_t i = 0; i < s->n_step; i++) {
		double step = ((double)i + 0.5) * (double)h->every;
		s->step_x[i] = spe ? step / spe : step;
		s->step_y[i] = h->step_loss[i];
	}
	/* every resume, and a start at another world size than the run began with */
	s->marks_epoch = xcalloc(h->n_events + 1, sizeof(struct chart_mark));
	s->marks_time = xcalloc(h->n_events + 1, sizeof(struct chart_mark));
	s->mark_text = xcalloc(h->n_events + 1, sizeof(*s->mark_text));
	int world = h->n_events ? h->events[0].world : 0;
	for (size_t i = 1; i < h->n_events; i++) {
		const struct dlk_history_event *e = &h->events[i];
		if (e->world != world)
			snprintf(s->mark_text[s->n_marks], 64, "resumed: %d \u2192 %d workers", world, e->world);
		else
			snprintf(s->mark_text[s->n_marks], 64, "resumed at step %ld", e->step);
		world = e->world;
		s->marks_epoch[s->n_marks] = (struct chart_mark){ spe ? (double)e->step / spe : (double)e->step, run,
		                                                  s->mark_text[s->n_marks] };
		s->marks_time[s->n_marks] = (struct chart_mark){ e->elapsed_sec, run, s->mark_text[s->n_marks] };
		s->n_marks++;
	}
}

static void series_release(struct run_series *s)
{
	free(s->ep_x);
	free(s->train);
	free(s->test_loss_x);
	free(s->test_loss);
	free(s->acc);
	free(s->step_x);
	free(s->step_y);
	free(s->time_x);
	free(s->rate);
	free(s->marks_epoch);
	free(s->marks_time);
	free(s->mark_text);
}

static void section_curves(struct dlk_buf *b, const struct report_run *a, const struct report_run *o)
{
	struct run_series s[2];
	struct chart_series loss[6], acc[2], rate[2];
	struct chart_mark *marks_e, *marks_t;
	size_t nl = 0, na = 0, nr = 0, nm = 0;
	int runs = o ? 2 : 1, in_epochs = 1;

	dlk_buf_adds(b, "<section id=\"curves\">\n<h2>Training</h2>\n");
	if (!a->have_history && (!o || !o->have_history)) {
		dlk_buf_adds(b, "<p class=\"none\">No history: the bundle was written by a dlk that did not record "
		                "per-epoch metrics.</p>\n</section>\n");
		return;
	}
	series_of(a, 0, &s[0]);
	if (o)
		series_of(o, 1, &s[1]);
	for (int r = 0; r < runs; r++)
		if ((r == 0 ? a : o)->have_history && !(r == 0 ? a : o)->steps_per_epoch)
			in_epochs = 0;
	marks_e = xcalloc(2 * (DLK_HISTORY_MAX_EVENTS + 1), sizeof(*marks_e));
	marks_t = xcalloc(2 * (DLK_HISTORY_MAX_EVENTS + 1), sizeof(*marks_t));
	for (int r = 0; r < runs; r++) {
		static const char *const ids[2][5] = { { "step-loss", "train-loss", "test-loss", "test-accuracy", "throughput" },
			                                { "b-step-loss", "b-train-loss", "b-test-loss", "b-test-accuracy",
			                                  "b-throughput" } };
		static const char *const labels[2][5] = {
			{ "train loss per step", "train loss per epoch", "test loss", "test accuracy", "samples/s" },
			{ "B: train loss per step", "B: train loss per epoch", "B: test loss", "B: test accuracy", "B: samples/s" } };
		struct run_series *x = &s[r];
		if (x->n_step)
			loss[nl++] = (struct chart_series){ ids[r][0], labels[r][0], r, 0, 0, 1, x->n_step, x->step_x, x->step_y };
		if (x->n_ep)
			loss[nl++] = (struct chart_series){ ids[r][1], labels[r][1], r, 0, 1, 0, x->n_ep, x->ep_x, x->train };
		if (x->n_test)
			loss[nl++] = (struct chart_series){ ids[r][2], labels[r][2], r, 1, 1, 0, x->n_test, x->test_loss_x,
				                            x->test_loss };
		if (x->n_test)
			acc[na++] = (struct chart_series){ ids[r][3], labels[r][3], r, 2, 1, 0, x->n_test, x->acc_x, x->acc };
		if (x->n_ep)
			rate[nr++] = (struct chart_series){ ids[r][4], labels[r][4], r, 3, 1, 0, x->n_ep, x->time_x, x->rate };
		for (size_t i = 0; i < x->n_marks; i++) {
			marks_e[nm] = x->marks_epoch[i];
			marks_t[nm++] = x->marks_time[i];
		}
	}
	struct chart c = { 0 };
	c.id = "chart-loss";
	c.title = "Loss";
	c.desc = "Training loss per step (averaged over buckets of steps) and per epoch, and test loss after each "
	         "evaluated epoch; dotted vertical lines mark resumes from a checkpoint.";
	c.xaxis = in_epochs ? AXIS_EPOCH : AXIS_NUMBER;
	c.yaxis = AXIS_NUMBER;
	c.xlabel = in_epochs ? "epoch" : "step";
	c.ylabel = "loss";
	c.y_from_zero = 1;
	c.series = loss;
	c.n_series = nl;
	c.marks = marks_e;
	c.n_marks = nm;
	chart_figure(b, &c);

	/* another task than classification charts its headline metric (history's test_metric) */
	const char *metric = NULL;
	for (size_t i = 0; i < a->history.n_epochs && !metric; i++)
		if (a->history.epochs[i].have_test && a->history.epochs[i].test_metric[0])
			metric = a->history.epochs[i].test_metric;
	char mtitle[64], mdesc[128];
	snprintf(mtitle, sizeof(mtitle), "Test %s", metric ? metric : "accuracy");
	snprintf(mdesc, sizeof(mdesc), "The test set's %s after each evaluated epoch.", metric ? metric : "accuracy");
	c.id = "chart-accuracy";
	c.title = mtitle;
	c.desc = mdesc;
	c.xaxis = AXIS_EPOCH;
	c.yaxis = metric ? AXIS_NUMBER : AXIS_PERCENT;
	c.xlabel = "epoch";
	c.ylabel = metric ? metric : "test accuracy";
	c.y_from_zero = 0;
	c.series = acc;
	c.n_series = na;
	c.marks = NULL;
	c.n_marks = 0;
	chart_figure(b, &c);

	c.id = "chart-throughput";
	c.title = "Throughput";
	c.desc = "Training samples per second of the whole job in each epoch, against training time; dotted vertical "
	         "lines mark resumes and changes in the number of workers.";
	c.xaxis = AXIS_SECONDS;
	c.yaxis = AXIS_NUMBER;
	c.xlabel = "training time";
	c.ylabel = "samples/s";
	c.y_from_zero = 1;
	c.series = rate;
	c.n_series = nr;
	c.marks = marks_t;
	c.n_marks = nm;
	chart_figure(b, &c);
	free(marks_e);
	free(marks_t);
	series_release(&s[0]);
	if (o)
		series_release(&s[1]);
	dlk_buf_adds(b, "</section>\n");
}

static void epochs_table(struct dlk_buf *b, const struct report_run *r, const char *id, const char *caption)
{
	const struct dlk_history *h = &r->history;

	dlk_buf_addf(b, "<div class=\"scroll\"><table id=\"%s\">\n<caption>", id);
	html_escape(b, caption);
	dlk_buf_adds(b, "</caption>\n<thead><tr><th scope=\"col\">epoch</th><th scope=\"col\">step</th>"
	                "<th scope=\"col\">train loss</th><th scope=\"col\">test loss</th><th scope=\"col\">test accuracy</th>"
	                "<th scope=\"col\">samples/s</th><th scope=\"col\">time (s)</th><th scope=\"col\">learning rate</th>"
	                "<th scope=\"col\">workers</th></tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < h->n_epochs; i++) {
		const struct dlk_history_epoch *e = &h->epochs[i];
		char acc[32] = "-", tl[32] = "-";
		if (e->have_test) {
			if (e->test_metric[0])
				snprintf(acc, sizeof(acc), "%s %.4f", e->test_metric, e->test_metric_value);
			else
				pct(acc, sizeof(acc), e->test_accuracy);
			snprintf(tl, sizeof(tl), "%.4f", e->test_loss);
		}
		dlk_buf_addf(b, "<tr><th scope=\"row\">%d</th><td>%ld</td><td>%.4f</td><td>%s</td><td>%s</td><td>%.0f</td>"
		                "<td>%.1f</td><td>%.3g</td><td>%d</td></tr>\n",
		             e->epoch, e->step, e->train_loss, tl, acc, e->samples_per_sec, e->elapsed_sec, e->lr, e->world);
	}
	dlk_buf_adds(b, "</tbody></table></div>\n");
}

/* image i of metrics.samples[which] when it holds c*h*w numbers, else NULL */
static const cJSON *sample_image(const cJSON *samples, const char *which, int i, int n)
{
	const cJSON *img = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(samples, which), i), *v;
	if (!cJSON_IsArray(img) || cJSON_GetArraySize(img) != n)
		return NULL;
	cJSON_ArrayForEach(v, img)
		if (!cJSON_IsNumber(v))
			return NULL;
	return img;
}

/* An image-to-image model's test images as inline SVG: a row per sample, its input, output and
 * target side by side, a grey square per pixel (the channels' mean, 0 black to 1 white). */
static void samples_grid(struct dlk_buf *b, const cJSON *samples)
{
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(samples, "shape"), *out;
	static const char *const cols[3] = { "input", "output", "target" };
	int s[3], cell = 4, gap = 8;

	if (!samples || !cJSON_IsArray(shape) || cJSON_GetArraySize(shape) != 3)
		return;
	for (int d = 0; d < 3; d++) {
		const cJSON *v = cJSON_GetArrayItem(shape, d);
		if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 4096)
			return;
		s[d] = v->valueint;
	}
	int n = s[0] * s[1] * s[2], hw = s[1] * s[2];
	if (n > 4096 || s[1] > 256 || s[2] > 256)
		return;
	out = cJSON_GetObjectItemCaseSensitive(samples, "output");
	int rows = cJSON_IsArray(out) ? cJSON_GetArraySize(out) : 0;
	rows = rows > 8 ? 8 : rows;
	if (rows <= 0)
		return;
	int W = 3 * (s[2] * cell + gap), H = rows * (s[1] * cell + gap) + 16;
	dlk_buf_addf(b, "<figure id=\"samples\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	                "role=\"img\" aria-label=\"test images: input, output and target\">\n", W, H);
	for (int c = 0; c < 3; c++)
		dlk_buf_addf(b, "<text x=\"%d\" y=\"12\" font-size=\"11\">%s</text>\n", c * (s[2] * cell + gap), cols[c]);
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < 3; c++) {
			const cJSON *img = sample_image(samples, cols[c], r, n);
			int x0 = c * (s[2] * cell + gap), y0 = 16 + r * (s[1] * cell + gap);
			if (!img)
				continue;
			/* the channels' mean of each pixel, in one walk of the array */
			double mean[4096] = { 0 };
			const cJSON *e;
			int j = 0;
			cJSON_ArrayForEach(e, img)
				mean[j++ % hw] += e->valuedouble / s[0];
			for (int p = 0; p < hw; p++) {
				double v = mean[p];
				int g = (int)lround(255 * (v < 0 ? 0 : v > 1 ? 1 : v));
				dlk_buf_addf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\"/>", x0 + (p % s[2]) * cell,
				             y0 + (p / s[2]) * cell, cell, cell, g, g, g);
			}
			dlk_buf_addc(b, '\n');
		}
	dlk_buf_adds(b, "</svg><figcaption>The first test images: what the model was given, what it made, and "
	                "what it should have made.</figcaption></figure>\n");
}

/* The test metrics of a task other than classification (metrics.test), A beside B, and a
 * multi-label model's F1 per class: such a run has no classes to draw a matrix of. */
static void section_task(struct dlk_buf *b, const struct report_run *a, const struct report_run *o)
{
	const cJSON *v;

	if (!a->task_metrics)
		return;
	dlk_buf_adds(b, "<section id=\"task-metrics\">\n<h2>Test metrics</h2>\n<div class=\"scroll\"><table id=\"metrics-a\">\n"
	                "<caption>");
	dlk_buf_addf(b, "%s on %lld test samples", o && o->task_metrics ? "A and B" : "The model", a->test_samples);
	dlk_buf_adds(b, "</caption>\n<thead><tr><th scope=\"col\">metric</th><th scope=\"col\">");
	dlk_buf_adds(b, o && o->task_metrics ? "A</th><th scope=\"col\">B</th>" : "value</th>");
	dlk_buf_adds(b, "</tr></thead>\n<tbody>\n");
	cJSON_ArrayForEach(v, a->task_metrics) {
		if (!cJSON_IsNumber(v) || !v->string)
			continue;
		dlk_buf_adds(b, "<tr><th scope=\"row\">");
		html_escape(b, v->string);
		dlk_buf_addf(b, "</th><td>%.4f</td>", v->valuedouble);
		if (o && o->task_metrics) {
			const cJSON *w = cJSON_GetObjectItemCaseSensitive(o->task_metrics, v->string);
			if (cJSON_IsNumber(w))
				dlk_buf_addf(b, "<td>%.4f</td>", w->valuedouble);
			else
				dlk_buf_adds(b, "<td>-</td>");
		}
		dlk_buf_adds(b, "</tr>\n");
	}
	dlk_buf_adds(b, "</tbody></table></div>\n");
	if (a->f1 && cJSON_GetArraySize(a->f1) > 0) {
		int i = 0;
		dlk_buf_adds(b, "<div class=\"scroll\"><table id=\"f1-a\">\n<caption>F1 of each class (the threshold "
		                "on its sigmoid as model.threshold says)</caption>\n<thead><tr><th scope=\"col\">class</th>"
		                "<th scope=\"col\">F1</th></tr></thead>\n<tbody>\n");
		cJSON_ArrayForEach(v, a->f1)
			if (cJSON_IsNumber(v))
				dlk_buf_addf(b, "<tr><th scope=\"row\">%d</th><td>%.4f</td></tr>\n", i++, v->valuedouble);
		dlk_buf_adds(b, "</tbody></table></div>\n");
	}
	samples_grid(b, a->samples);
	dlk_buf_adds(b, "</section>\n");
}

static void section_epochs(struct dlk_buf *b, const struct report_run *a, const struct report_run *o)
{
	if (!(a->have_history && a->history.n_epochs) && !(o && o->have_history && o->history.n_epochs))
		return;
	dlk_buf_adds(b, "<section id=\"epochs\">\n<h2>Per epoch</h2>\n");
	if (a->have_history && a->history.n_epochs)
		epochs_table(b, a, "epochs-a", o ? "A: every epoch" : "Every epoch");
	if (o && o->have_history && o->history.n_epochs)
		epochs_table(b, o, "epochs-b", "B: every epoch");
	dlk_buf_adds(b, "</section>\n");
}

/* sequential blues, white to dark, for shares in [0, 1] */
static void blue(double t, char out[8], int *dark)
{
	static const double stops[3][3] = { { 247, 251, 255 }, { 107, 174, 214 }, { 8, 48, 107 } };
	int seg = t < 0.5 ? 0 : 1;
	double u = seg ? (t - 0.5) * 2 : t * 2;
	int c[3];

	t = t < 0 ? 0 : t > 1 ? 1 : t;
	for (int i = 0; i < 3; i++)
		c[i] = (int)lround(stops[seg][i] + (stops[seg + 1][i] - stops[seg][i]) * (u < 0 ? 0 : u > 1 ? 1 : u));
	snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
	*dark = t > 0.55;
}

/* diverging purple (more) and orange (fewer), white at zero; t in [-1, 1] */
static void diverging(double t, char out[8], int *dark)
{
	static const double mid[3] = { 247, 247, 247 }, pos[3] = { 84, 39, 136 }, neg[3] = { 179, 88, 6 };
	const double *end = t >= 0 ? pos : neg;
	double u = fabs(t) > 1 ? 1 : fabs(t);
	int c[3];

	for (int i = 0; i < 3; i++)
		c[i] = (int)lround(mid[i] + (end[i] - mid[i]) * u);
	snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
	*dark = u > 0.6;
}

static void matrix_head(struct dlk_buf *b, const struct report_run *r, const char *id, const char *caption,
                        const char *last)
{
	dlk_buf_addf(b, "<div class=\"scroll\"><table class=\"heat\" id=\"%s\">\n<caption>", id);
	html_escape(b, caption);
	dlk_buf_adds(b, "</caption>\n<thead><tr><th scope=\"col\" class=\"corner\">true \\ predicted</th>");
	for (int j = 0; j < r->n_classes; j++) {
		dlk_buf_addf(b, "<th scope=\"col\" title=\"");
		html_escape(b, r->classes[j]);
		dlk_buf_addf(b, "\">%d</th>", j);
	}
	if (last)
		dlk_buf_addf(b, "<th scope=\"col\">%s</th>", last);
	dlk_buf_adds(b, "</tr></thead>\n<tbody>\n");
}

static void row_head(struct dlk_buf *b, const struct report_run *r, int i)
{
	dlk_buf_addf(b, "<tr><th scope=\"row\">%d ", i);
	html_escape(b, r->classes[i]);
	dlk_buf_adds(b, "</th>");
}

static void matrix_table(struct dlk_buf *b, const struct report_run *r, const char *id, const char *caption)
{
	int k = r->n_classes;

	matrix_head(b, r, id, caption, "recall");
	for (int i = 0; i < k; i++) {
		long long support = 0;
		for (int j = 0; j < k; j++)
			support += r->confusion[(size_t)i * k + j];
		row_head(b, r, i);
		for (int j = 0; j < k; j++) {
			long long v = r->confusion[(size_t)i * k + j];
			double share = support ? (double)v / (double)support : 0;
			char col[8];
			int dark;
			blue(share, col, &dark);
			dlk_buf_addf(b, "<td%s style=\"background:%s;color:%s\" title=\"true ", i == j ? " class=\"diag\"" : "",
			             col, dark ? "#fff" : "#000");
			html_escape(b, r->classes[i]);
			dlk_buf_adds(b, ", predicted ");
			html_escape(b, r->classes[j]);
			dlk_buf_addf(b, ": %lld of %lld (%.1f%%)\">%lld</td>", v, support, 100 * share, v);
		}
		if (r->recall) {
			char t[32];
			pct(t, sizeof(t), r->recall[i]);
			dlk_buf_addf(b, "<td>%s</td>", t);
		} else {
			dlk_buf_adds(b, "<td>-</td>");
		}
		dlk_buf_adds(b, "</tr>\n");
	}
	if (r->precision) {
		dlk_buf_adds(b, "<tr><th scope=\"row\">precision</th>");
		for (int j = 0; j < k; j++) {
			char t[32];
			pct(t, sizeof(t), r->precision[j]);
			dlk_buf_addf(b, "<td>%s</td>", t);
		}
		dlk_buf_adds(b, "<td></td></tr>\n");
	}
	dlk_buf_adds(b, "</tbody></table></div>\n");
}

static void diff_table(struct dlk_buf *b, const struct report_run *r, const struct report_compare *c)
{
	int k = r->n_classes;
	double max = 0;

	for (size_t i = 0; i < (size_t)k * k; i++)
		max = fabs(c->confusion_diff[i]) > max ? fabs(c->confusion_diff[i]) : max;
	matrix_head(b, r, "confusion-diff",
	            c->same_support ? "A minus B, in samples (the same test set)"
	                            : "A minus B, in percentage points of each true class (the test sets differ)",
	            NULL);
	for (int i = 0; i < k; i++) {
		row_head(b, r, i);
		for (int j = 0; j < k; j++) {
			double d = c->confusion_diff[(size_t)i * k + j];
			char col[8], t[32];
			int dark;
			diverging(max > 0 ? d / max : 0, col, &dark);
			if (c->same_support)
				snprintf(t, sizeof(t), "%s%.0f", d > 0 ? "+" : d < 0 ? "\u2212" : "", fabs(d));
			else
				snprintf(t, sizeof(t), "%s%.1f", d > 0 ? "+" : d < 0 ? "\u2212" : "", fabs(d));
			dlk_buf_addf(b, "<td%s style=\"background:%s;color:%s\" title=\"true ", i == j ? " class=\"diag\"" : "",
			             col, dark ? "#fff" : "#000");
			html_escape(b, r->classes[i]);
			dlk_buf_adds(b, ", predicted ");
			html_escape(b, r->classes[j]);
			dlk_buf_addf(b, ": %s\">%s</td>", t, t);
		}
		dlk_buf_adds(b, "</tr>\n");
	}
	dlk_buf_adds(b, "</tbody></table></div>\n<p class=\"note\">Purple: A has more there than B; orange: fewer. On "
	                "the outlined diagonal more is better, elsewhere fewer is better.</p>\n");
}

static void section_confusion(struct dlk_buf *b, const struct report_run *a, const struct report_run *o,
                              const struct report_compare *c)
{
	if (!a->confusion && !(o && o->confusion))
		return;
	dlk_buf_adds(b, "<section id=\"confusion\">\n<h2>Confusion matrix</h2>\n");
	if (a->n_classes > REPORT_MAX_MATRIX || (o && o->n_classes > REPORT_MAX_MATRIX)) {
		dlk_buf_addf(b, "<p class=\"note\">%d classes: too many to draw the matrix; the per-class table below has "
		                "their precision and recall, and the embedded data the whole matrix.</p>\n</section>\n",
		             a->n_classes > REPORT_MAX_MATRIX ? a->n_classes : o->n_classes);
		return;
	}
	dlk_buf_adds(b, "<p class=\"note\">Rows are the true classes, columns the predicted ones (by number; the rows "
	                "name them). A cell's shade is its share of the row: how the class's test samples were "
	                "classified.</p>\n");
	if (a->confusion)
		matrix_table(b, a, "confusion-a", o ? "A: test samples by true and predicted class" : "Test samples by true and predicted class");
	if (o && o->confusion)
		matrix_table(b, o, "confusion-b", "B: test samples by true and predicted class");
	if (o && c->confusion_diff) {
		dlk_buf_adds(b, "<h3>Difference</h3>\n");
		diff_table(b, a, c);
	} else if (o && a->confusion && o->confusion) {
		dlk_buf_adds(b, "<p class=\"note\">The two runs have different classes: their matrices are not compared.</p>\n");
	}
	dlk_buf_adds(b, "</section>\n");
}

static void cell_pct(struct dlk_buf *b, const double *v, int i)
{
	char t[32];

	if (!v) {
		dlk_buf_adds(b, "<td>-</td>");
		return;
	}
	pct(t, sizeof(t), v[i]);
	dlk_buf_addf(b, "<td>%s</td>", t);
}

static void section_classes(struct dlk_buf *b, const struct report_run *a, const struct report_run *o,
                            const struct report_compare *c)
{
	int k = a->n_classes;

	if (!a->precision && !a->recall)
		return;
	dlk_buf_adds(b, "<section id=\"classes\">\n<h2>Classes</h2>\n");
	if (o && c->recall_delta) {
		dlk_buf_adds(b, "<h3>Recall moved most</h3>\n");
		if (!c->n_moved) {
			dlk_buf_adds(b, "<p class=\"note\">No class's recall changed.</p>\n");
		} else {
			dlk_buf_adds(b, "<ol id=\"moved-most\">\n");
			for (int i = 0; i < c->n_moved && i < MOVED_MOST; i++) {
				int x = c->moved[i];
				char ra[32], rb[32];
				pct(ra, sizeof(ra), a->recall[x]);
				pct(rb, sizeof(rb), o->recall[x]);
				dlk_buf_addf(b, "<li data-class=\"%d\"><strong>", x);
				html_escape(b, a->classes[x]);
				dlk_buf_addf(b, "</strong>: %s in B, %s in A (", rb, ra);
				delta_html(b, c->recall_delta[x], "%.2f points", 100, 1);
				dlk_buf_adds(b, ")</li>\n");
			}
			dlk_buf_adds(b, "</ol>\n");
		}
	}
	dlk_buf_adds(b, "<div class=\"scroll\"><table id=\"per-class\">\n<caption>Per class</caption>\n<thead><tr>"
	                "<th scope=\"col\">class</th><th scope=\"col\">test samples</th><th scope=\"col\">precision</th>"
	                "<th scope=\"col\">recall</th>");
	int both = o && c->recall_delta;
	if (both)
		dlk_buf_adds(b, "<th scope=\"col\">B: precision</th><th scope=\"col\">B: recall</th>"
		                "<th scope=\"col\">recall, A minus B</th>");
	dlk_buf_adds(b, "</tr></thead>\n<tbody>\n");
	for (int i = 0; i < k; i++) {
		row_head(b, a, i);
		if (a->confusion) {
			long long s = 0;
			for (int j = 0; j < k; j++)
				s += a->confusion[(size_t)i * k + j];
			dlk_buf_addf(b, "<td>%lld</td>", s);
		} else {
			dlk_buf_adds(b, "<td>-</td>");
		}
		cell_pct(b, a->precision, i);
		cell_pct(b, a->recall, i);
		if (both) {
			cell_pct(b, o->precision, i);
			cell_pct(b, o->recall, i);
			dlk_buf_adds(b, "<td>");
			delta_html(b, c->recall_delta[i], "%.2f", 100, 1);
			dlk_buf_adds(b, "</td>");
		}
		dlk_buf_adds(b, "</tr>\n");
	}
	dlk_buf_adds(b, "</tbody></table></div>\n");
	if (o && !c->same_classes)
		dlk_buf_adds(b, "<p class=\"note\">B has other classes: its per-class numbers are not set beside A's.</p>\n");
	dlk_buf_adds(b, "</section>\n");
}

/* ---- provenance and settings: one row per fact, a column per run ---- */

/* one line of the text per line of the cell */
static void lines(struct dlk_buf *b, const char *v, int code)
{
	while (v) {
		const char *nl = strchr(v, '\n');
		char *one = nl ? xstrndup(v, (size_t)(nl - v)) : xstrdup(v);
		if (code)
			mono(b, one);
		else
			html_escape(b, one);
		free(one);
		if (nl)
			dlk_buf_adds(b, "<br>");
		v = nl ? nl + 1 : NULL;
	}
}

static void fact_row(struct dlk_buf *b, const char *label, const char *va, const char *vb, int two, int code)
{
	int differs = two && strcmp(va ? va : "", vb ? vb : "");

	dlk_buf_adds(b, "<tr><th scope=\"row\">");
	html_escape(b, label);
	dlk_buf_adds(b, "</th>");
	for (int r = 0; r < (two ? 2 : 1); r++) {
		const char *v = r ? vb : va;
		dlk_buf_adds(b, differs ? "<td class=\"text differs\">" : "<td class=\"text\">");
		if (!v || !*v)
			dlk_buf_adds(b, "<span class=\"same\">not recorded</span>");
		else
			lines(b, v, code);
		dlk_buf_adds(b, "</td>");
	}
	if (two)
		dlk_buf_addf(b, "<td class=\"text\">%s</td>", differs ? "differs" : "same");
	dlk_buf_adds(b, "</tr>\n");
}

static char *data_text(const cJSON *doc, const char *field)
{
	struct dlk_buf t = DLK_BUF_INIT;
	const cJSON *d;

	cJSON_ArrayForEach(d, get(get(doc, "provenance"), "data")) {
		const char *split = str_at(d, "split", NULL), *v = str_at(d, field, NULL);
		if (!v)
			continue;
		dlk_buf_addf(&t, "%s%s: %s", t.len ? "\n" : "", split ? split : "data", v);
	}
	return dlk_buf_detach(&t, NULL);
}

static void num_text(char *out, size_t n, const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = get(get(o, a), b);

	out[0] = '\0';
	if (cJSON_IsNumber(v))
		snprintf(out, n, "%.6g", v->valuedouble);
	else if (cJSON_IsString(v))
		snprintf(out, n, "%.*s", (int)n - 1, v->valuestring);
}

static void git_text(char *out, size_t n, const cJSON *doc)
{
	const char *c = str_at(doc, "provenance", "git_commit");
	const cJSON *dirty = get(get(doc, "provenance"), "git_dirty");

	out[0] = '\0';
	if (c)
		snprintf(out, n, "%.100s%s", c, cJSON_IsTrue(dirty) ? " (with uncommitted changes)" : "");
}

static char *layers_text(const cJSON *doc)
{
	struct dlk_buf t = DLK_BUF_INIT;
	const cJSON *l;

	cJSON_ArrayForEach(l, get(get(doc, "architecture"), "layers")) {
		const char *kind = str_at(l, "kind", NULL);
		const cJSON *p;
		dlk_buf_addf(&t, "%s%s", t.len ? " \u2192 " : "", kind ? kind : "?");
		if ((p = get(l, "units")) && cJSON_IsNumber(p))
			dlk_buf_addf(&t, " %g", p->valuedouble);
		if ((p = get(l, "filters")) && cJSON_IsNumber(p))
			dlk_buf_addf(&t, " %g", p->valuedouble);
		if ((p = get(l, "kernel")) && cJSON_IsNumber(p))
			dlk_buf_addf(&t, "\u00d7%g", p->valuedouble);
		if ((p = get(l, "rate")) && cJSON_IsNumber(p))
			dlk_buf_addf(&t, " %g", p->valuedouble);
	}
	return dlk_buf_detach(&t, NULL);
}

static void section_provenance(struct dlk_buf *b, const struct report_run *a, const struct report_run *o)
{
	const cJSON *da = a->doc, *db = o ? o->doc : NULL;
	int two = o != NULL;
	char ta[160], tb[160];
	static const struct {
		const char *label, *key;
		int code;
	} prov[] = {
		{ "project file sha256", "spec_sha256", 1 }, { "image", "image", 1 },      { "dlk version", "dlk_version", 0 },
		{ "build", "build", 0 },                     { "seed", "seed", 1 },        { "started", "started_at", 0 },
		{ "finished", "finished_at", 0 },
	};

	dlk_buf_adds(b, "<section id=\"provenance\">\n<h2>Provenance</h2>\n<div class=\"scroll\"><table id=\"provenance-table\">\n"
	                "<thead><tr><th scope=\"col\"></th>");
	dlk_buf_adds(b, two ? "<th scope=\"col\">A</th><th scope=\"col\">B</th><th scope=\"col\"></th>"
	                    : "<th scope=\"col\">this run</th>");
	dlk_buf_adds(b, "</tr></thead>\n<tbody>\n");
	fact_row(b, "source", a->label, o ? o->label : NULL, two, 1);
	fact_row(b, "name", a->name, o ? o->name : NULL, two, 0);
	/* a job: where it ran and how it went, as the cluster said when the report was made */
	static const struct {
		const char *label, *key;
	} job[] = { { "namespace", "namespace" }, { "job state", "state" }, { "workers", "workers" },
		    { "pod restarts", "pod_restarts" } };
	int jobs = (str_at(da, "source", "kind") && !strcmp(str_at(da, "source", "kind"), "job")) ||
	           (db && str_at(db, "source", "kind") && !strcmp(str_at(db, "source", "kind"), "job"));
	for (size_t i = 0; jobs && i < DLK_ARRAY_SIZE(job); i++) {
		num_text(ta, sizeof(ta), da, "source", job[i].key);
		tb[0] = '\0';
		if (db)
			num_text(tb, sizeof(tb), db, "source", job[i].key);
		fact_row(b, job[i].label, ta, tb, two, 0);
	}
	char *dua = data_text(da, "url"), *dub = db ? data_text(db, "url") : NULL;
	char *dsa = data_text(da, "sha256"), *dsb = db ? data_text(db, "sha256") : NULL;
	fact_row(b, "data", dua, dub, two, 1);
	fact_row(b, "data sha256", dsa, dsb, two, 1);
	free(dua);
	free(dub);
	free(dsa);
	free(dsb);
	for (size_t i = 0; i < DLK_ARRAY_SIZE(prov); i++)
		fact_row(b, prov[i].label, str_at(da, "provenance", prov[i].key),
		         db ? str_at(db, "provenance", prov[i].key) : NULL, two, prov[i].code);
	git_text(ta, sizeof(ta), da);
	git_text(tb, sizeof(tb), db);
	fact_row(b, "git commit", ta, tb, two, 1);
	fact_row(b, "weights sha256", str_at(da, "weights", "sha256"), db ? str_at(db, "weights", "sha256") : NULL, two, 1);
	dlk_buf_adds(b, "</tbody></table></div>\n</section>\n");

	static const struct {
		const char *label, *obj, *key;
	} set[] = {
		{ "epochs", "training", "epochs" },           { "batch size", "training", "batch_size" },
		{ "optimizer", "training", "optimizer" },     { "learning rate", "training", "lr" },
		{ "weight decay", "training", "weight_decay" }, { "parameters", "architecture", "parameters" },
		{ "initialisation", "architecture", "init" },
	};
	dlk_buf_adds(b, "<section id=\"settings\">\n<h2>Model and training settings</h2>\n<div class=\"scroll\">"
	                "<table id=\"settings-table\">\n<tbody>\n");
	char *la = layers_text(da), *lb = db ? layers_text(db) : NULL;
	fact_row(b, "layers", la, lb, two, 0);
	free(la);
	free(lb);
	for (size_t i = 0; i < DLK_ARRAY_SIZE(set); i++) {
		num_text(ta, sizeof(ta), da, set[i].obj, set[i].key);
		tb[0] = '\0';
		if (db)
			num_text(tb, sizeof(tb), db, set[i].obj, set[i].key);
		fact_row(b, set[i].label, ta, tb, two, 0);
	}
	dlk_buf_adds(b, "</tbody></table></div>\n</section>\n");
}

/* the report document, where no byte of it can end the script element early */
static void embed(struct dlk_buf *b, const cJSON *doc)
{
	char *s = cJSON_PrintUnformatted(doc);

	dlk_buf_adds(b, "<script type=\"application/json\" id=\"dlk-report-data\">");
	for (const char *p = s; p && *p; p++) {
		uint32_t cp;
		size_t n;
		if (*p == '<') {
			dlk_buf_adds(b, "\\u003c"); /* only ever inside a JSON string */
		} else if ((unsigned char)*p < 0x80) {
			dlk_buf_addc(b, *p);
		} else if ((n = dlk_utf8_decode((const unsigned char *)p, 4, &cp))) {
			/* 4: the decoder stops at the first byte that is no continuation (the NUL too) */
			dlk_buf_add(b, p, n);
			p += n - 1;
		} else {
			/* a run document may hold any bytes in its strings; the page is UTF-8 */
			dlk_buf_adds(b, "\\ufffd");
		}
	}
	dlk_buf_adds(b, "</script>\n");
	free(s);
}

static void verdict(struct dlk_buf *b, const cJSON *doc)
{
	const char *d = str_at(doc, "verdict", "decision"), *why = str_at(doc, "verdict", "reason");

	if (!d)
		return;
	dlk_buf_adds(b, "<p class=\"verdict\" id=\"verdict\"><strong>");
	html_escape(b, d);
	dlk_buf_adds(b, "</strong>");
	if (why) {
		dlk_buf_adds(b, ": ");
		html_escape(b, why);
	}
	dlk_buf_adds(b, "</p>\n");
}

int report_html(const cJSON *run, const cJSON *other, struct dlk_buf *b, struct dlk_err *err)
{
	struct report_run a = REPORT_RUN_INIT, o = REPORT_RUN_INIT;
	struct report_compare c = REPORT_COMPARE_INIT;
	cJSON *doc = report_document(run, other, err);

	if (!doc)
		return -1;
	/* report_document checked both: loading them again cannot fail */
	if (report_run_load(run, "the run", &a, err) || (other && report_run_load(other, "the other run", &o, err))) {
		cJSON_Delete(doc);
		return -1;
	}
	if (other)
		report_compare(&a, &o, &c);
	dlk_buf_adds(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
	                "<meta name=\"generator\" content=\"dlk " DLK_VERSION "\">\n<title>");
	html_escape(b, a.name);
	if (other) {
		dlk_buf_adds(b, " compared with ");
		html_escape(b, o.name);
	}
	dlk_buf_adds(b, " \u2014 dlk report</title>\n<style>\n");
	dlk_buf_adds(b, css);
	dlk_buf_adds(b, "</style>\n</head>\n<body>\n<header>\n<h1>");
	html_escape(b, a.name);
	dlk_buf_adds(b, "</h1>\n<p class=\"sub\">");
	if (other)
		dlk_buf_adds(b, "A: ");
	html_escape(b, a.label);
	if (other) {
		dlk_buf_adds(b, " \u00b7 compared with B: ");
		html_escape(b, o.label);
		if (strcmp(o.name, a.name)) {
			dlk_buf_adds(b, " (");
			html_escape(b, o.name);
			dlk_buf_adds(b, ")");
		}
	}
	dlk_buf_adds(b, "</p>\n");
	verdict(b, run);
	dlk_buf_adds(b, "</header>\n<main>\n");
	section_summary(b, &a, other ? &o : NULL);
	section_curves(b, &a, other ? &o : NULL);
	section_task(b, &a, other ? &o : NULL);
	section_epochs(b, &a, other ? &o : NULL);
	section_confusion(b, &a, other ? &o : NULL, &c);
	section_classes(b, &a, other ? &o : NULL, &c);
	section_provenance(b, &a, other ? &o : NULL);
	dlk_buf_adds(b, "</main>\n<footer>Written by dlk " DLK_VERSION ". The numbers on this page are embedded in it as "
	                "JSON (the script element dlk-report-data), as <code>dlk report -o json</code> prints them.</footer>\n");
	embed(b, doc);
	dlk_buf_adds(b, "</body>\n</html>\n");
	report_compare_release(&c);
	report_run_release(&a);
	report_run_release(&o);
	cJSON_Delete(doc);
	return 0;
}

int report_write_html(const char *path, const cJSON *run, const cJSON *other, struct dlk_err *err)
{
	struct dlk_buf page = DLK_BUF_INIT;
	int rc = -1;

	if (report_html(run, other, &page, err))
		goto out;
	rc = dlk_write_file_atomic(path, page.data, page.len, 0644, err);
out:
	dlk_buf_release(&page);
	return rc;
}
