#include "lib/report/chart.h"
#include "lib/util/utf8.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* plot area inside the CHART_W x CHART_H view box */
#define ML 64.0
#define MR 24.0
#define MT 24.0
#define MB 48.0
#define BIG 1e30 /* values beyond this are drawn at it: a chart has no use for them anyway */
#define MAX_MARKERS 400
/* the least a percent axis spans: 84.0-84.6% drawn edge to edge makes a 0.6-point gain look
 * like a cliff; on ten points it looks like what it is */
#define PERCENT_MIN_SPAN 0.10

/* Okabe & Ito's palette: told apart by people with any common colour-vision deficiency */
static const char *const colour[4] = { "#0072b2", "#d55e00", "#009e73", "#cc79a7" };

void html_escape(struct dlk_buf *b, const char *s)
{
	for (; s && *s; s++) {
		uint32_t cp;
		/* 4: the decoder stops at the first byte that is no continuation, the NUL included */
		size_t n = dlk_utf8_decode((const unsigned char *)s, 4, &cp);
		/* the page declares UTF-8: a byte that is not part of a well-formed sequence (a run
		 * document can hold any) becomes U+FFFD, as a browser would show it */
		if (!n) {
			dlk_buf_adds(b, "\xef\xbf\xbd");
			continue;
		}
		if (n > 1) {
			if (cp <= 0x9f) /* C1 controls */
				dlk_buf_addc(b, ' ');
			else
				dlk_buf_add(b, s, n);
			s += n - 1;
			continue;
		}
		switch (*s) {
		case '&': dlk_buf_adds(b, "&amp;"); break;
		case '<': dlk_buf_adds(b, "&lt;"); break;
		case '>': dlk_buf_adds(b, "&gt;"); break;
		case '"': dlk_buf_adds(b, "&quot;"); break;
		case '\'': dlk_buf_adds(b, "&#39;"); break;
		default:
			/* control characters other than tab and newline have no place in a page */
			if (((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n') || *s == 0x7f)
				dlk_buf_addc(b, ' ');
			else
				dlk_buf_addc(b, *s);
		}
	}
}


/* How many ticks from first by step reach hi; in doubles first, since values from a document
 * may be huge or infinite and converting such a count to an int is undefined. */
static int tick_count(double hi, double first, double step)
{
	double n = ceil((hi - first) / step - 1e-9) + 1;

	return n >= 2 && n <= 1000 ? (int)n : n > 1000 ? 1000 : 2;
}
static double clampv(double v)
{
	return v > BIG ? BIG : v < -BIG ? -BIG : v;
}

void chart_ticks(double lo, double hi, int target, double *first, double *step, int *n)
{
	double range, raw, mag, f;

	if (!(hi > lo)) {
		double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
		lo -= pad;
		hi += pad;
	}
	range = hi - lo;
	raw = range / (target > 1 ? target : 1);
	mag = pow(10, floor(log10(raw)));
	f = raw / mag;
	*step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
	*first = floor(lo / *step) * *step;
	*n = tick_count(hi, *first, *step);
	if (*n < 2)
		*n = 2;
	if (*n > 12) {
		*step *= ceil(*n / 12.0);
		*n = tick_count(hi, *first, *step);
	}
}

static void fmt_tick(char *out, size_t n, double v, double step, enum chart_axis ax)
{
	if (fabs(v) < step * 1e-9)
		v = 0;
	if (ax == AXIS_PERCENT)
		snprintf(out, n, "%g%%", round(v * 1e6) / 1e4);
	else if (v == 0)
		snprintf(out, n, "0");
	else if (step >= 1e6 && fabs(v) < 1e15)
		snprintf(out, n, "%gM", v / 1e6); /* 40M, 2.5M: not 4e+07 */
	else if (step >= 1e3 && fabs(v) < 1e15)
		snprintf(out, n, "%gk", v / 1e3);
	else
		snprintf(out, n, "%.4g", v);
}

static void fmt_value(char *out, size_t n, double v, enum chart_axis ax)
{
	if (ax == AXIS_PERCENT)
		snprintf(out, n, "%.2f%%", 100 * v);
	else if (ax == AXIS_SECONDS)
		snprintf(out, n, "%.1f s", v);
	else if (ax == AXIS_EPOCH)
		snprintf(out, n, "epoch %.4g", v);
	else
		snprintf(out, n, "%.4g", v);
}

/* seconds are shown in the unit that keeps the ticks short */
static double time_unit(double max, const char **name)
{
	if (max > 2 * 3600) {
		*name = "h";
		return 3600;
	}
	if (max > 120) {
		*name = "min";
		return 60;
	}
	*name = "s";
	return 1;
}

static void marker(struct dlk_buf *b, const char *cls, int style, int run, double x, double y, const char *tip)
{
	const char *c = colour[style & 3];
	const char *fill = run ? "#fff" : c;

	switch (style & 3) {
	case 0:
		dlk_buf_addf(b, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\">",
		             cls, x, y, fill, c);
		break;
	case 1:
		dlk_buf_addf(b, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\">",
		             cls, x - 3.5, y - 3.5, fill, c);
		break;
	case 2:
		dlk_buf_addf(b, "<path class=\"%s\" d=\"M%.1f %.1fl4 7h-8z\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\">", cls,
		             x, y - 4.5, fill, c);
		break;
	default:
		dlk_buf_addf(b, "<path class=\"%s\" d=\"M%.1f %.1fl4.5 4.5l-4.5 4.5l-4.5 -4.5z\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\">",
		             cls, x, y - 4.5, fill, c);
	}
	dlk_buf_adds(b, "<title>");
	html_escape(b, tip);
	dlk_buf_adds(b, "</title>");
	dlk_buf_adds(b, (style & 3) == 0 ? "</circle>" : (style & 3) == 1 ? "</rect>" : "</path>");
}

/* a legend entry: the line as drawn, with its marker, then the words */
static void legend_item(struct dlk_buf *b, const struct chart_series *s)
{
	const char *c = colour[s->style & 3];

	dlk_buf_addf(b, "<li><svg width=\"36\" height=\"12\" viewBox=\"0 0 36 12\" aria-hidden=\"true\">"
	                "<line x1=\"2\" y1=\"6\" x2=\"34\" y2=\"6\" stroke=\"%s\" stroke-width=\"%s\"%s%s/>",
	             c, s->thin ? "1" : "2", s->run ? " stroke-dasharray=\"6 4\"" : "", s->thin ? " opacity=\"0.55\"" : "");
	if (s->markers)
		marker(b, "key", s->style, s->run, 18, 6, s->label);
	dlk_buf_adds(b, "</svg>");
	html_escape(b, s->label);
	dlk_buf_adds(b, "</li>");
}

void chart_figure(struct dlk_buf *b, const struct chart *c)
{
	double xmin = HUGE_VAL, xmax = -HUGE_VAL, ymin = HUGE_VAL, ymax = -HUGE_VAL;
	double xf, xs, yf, ys, xunit = 1;
	int xn, yn;
	size_t points = 0;
	const char *uname = NULL;
	char t[64], xl[128];

	for (size_t i = 0; i < c->n_series; i++)
		for (size_t k = 0; k < c->series[i].n; k++) {
			double x = clampv(c->series[i].x[k]), y = clampv(c->series[i].y[k]);
			xmin = x < xmin ? x : xmin;
			xmax = x > xmax ? x : xmax;
			ymin = y < ymin ? y : ymin;
			ymax = y > ymax ? y : ymax;
			points++;
		}
	dlk_buf_addf(b, "<figure class=\"chart\" id=\"fig-%s\">\n<figcaption>", c->id);
	html_escape(b, c->title);
	dlk_buf_adds(b, "</figcaption>\n");
	if (!points) {
		dlk_buf_adds(b, "<p class=\"none\">Nothing to draw: the run recorded no values for this chart.</p>\n</figure>\n");
		return;
	}
	for (size_t i = 0; i < c->n_marks; i++) {
		double x = clampv(c->marks[i].x);
		xmin = x < xmin ? x : xmin;
		xmax = x > xmax ? x : xmax;
	}
	if (c->xaxis == AXIS_SECONDS) {
		xunit = time_unit(xmax, &uname);
		xmin /= xunit;
		xmax /= xunit;
	}
	if (c->xaxis == AXIS_EPOCH || c->xaxis == AXIS_SECONDS)
		xmin = xmin > 0 ? 0 : xmin;
	if (c->y_from_zero && ymin >= 0)
		ymin = 0;
	if (c->yaxis == AXIS_PERCENT && ymax <= 1 && ymax > 0.9)
		ymax = 1;
	if (c->yaxis == AXIS_PERCENT && ymax - ymin < PERCENT_MIN_SPAN)
		ymin = ymin >= 0 && ymax < PERCENT_MIN_SPAN ? 0 : ymax - PERCENT_MIN_SPAN;
	chart_ticks(xmin, xmax, 8, &xf, &xs, &xn);
	chart_ticks(ymin, ymax, 5, &yf, &ys, &yn);
	double x0 = xf, x1 = xf + xs * (xn - 1), y0 = yf, y1 = yf + ys * (yn - 1);
	double pw = CHART_W - ML - MR, ph = CHART_H - MT - MB;
#define PX(v) (ML + ((v) / xunit - x0) / (x1 - x0) * pw)
#define PY(v) (MT + ph - ((v) - y0) / (y1 - y0) * ph)

	dlk_buf_addf(b, "<svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
	                "aria-labelledby=\"%s-t %s-d\">\n<title id=\"%s-t\">",
	             c->id, CHART_W, CHART_H, CHART_W, CHART_H, c->id, c->id, c->id);
	html_escape(b, c->title);
	dlk_buf_addf(b, "</title>\n<desc id=\"%s-d\">", c->id);
	html_escape(b, c->desc);
	dlk_buf_adds(b, "</desc>\n<g class=\"axes\">\n");
	/* grid and ticks */
	for (int i = 0; i < yn; i++) {
		double v = yf + ys * i, y = PY(v);
		fmt_tick(t, sizeof(t), v, ys, c->yaxis);
		dlk_buf_addf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		                "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
		             ML, y, ML + pw, y, ML - 6, y + 4, t);
	}
	for (int i = 0; i < xn; i++) {
		double v = xf + xs * i, x = ML + (v - x0) / (x1 - x0) * pw;
		fmt_tick(t, sizeof(t), v, xs, c->xaxis);
		dlk_buf_addf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		                "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
		             x, MT, x, MT + ph, x, MT + ph + 16, t);
	}
	dlk_buf_addf(b, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", ML, MT, pw, ph);
	if (uname)
		snprintf(xl, sizeof(xl), "%s (%s)", c->xlabel, uname);
	else
		snprintf(xl, sizeof(xl), "%s", c->xlabel);
	dlk_buf_addf(b, "<text class=\"label\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", ML + pw / 2, CHART_H - 8);
	html_escape(b, xl);
	dlk_buf_addf(b, "</text>\n<text class=\"label\" transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">",
	             MT + ph / 2);
	html_escape(b, c->ylabel);
	dlk_buf_adds(b, "</text>\n");
	/* a percent axis that does not start at 0 says so where the eye reads the values */
	if (c->yaxis == AXIS_PERCENT && yf > ys * 1e-9) {
		fmt_tick(t, sizeof(t), yf, ys, c->yaxis);
		dlk_buf_addf(b, "<text class=\"axisnote\" x=\"%.1f\" y=\"%.1f\">the axis starts at %s, not 0</text>\n",
		             ML + 6, MT + ph - 6, t);
	}
	dlk_buf_adds(b, "</g>\n");

	/* events: a dotted vertical line and its words beside it, read upwards and ending at the top
	 * (rotate(-90) turns the text's direction up, so it is anchored at its end) */
	for (size_t i = 0; i < c->n_marks; i++) {
		double x = PX(clampv(c->marks[i].x));
		dlk_buf_addf(b, "<g class=\"mark\" data-run=\"%d\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"%s/>"
		                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" transform=\"rotate(-90 %.1f %.1f)\">",
		             c->marks[i].run, x, MT, x, MT + ph, c->marks[i].run ? " stroke-dasharray=\"1 5\"" : "", x - 4,
		             MT + 4, x - 4, MT + 4);
		dlk_buf_addf(b, "%s", c->marks[i].run ? "B: " : "");
		html_escape(b, c->marks[i].label);
		dlk_buf_adds(b, "</text></g>\n");
	}

	for (size_t i = 0; i < c->n_series; i++) {
		const struct chart_series *s = &c->series[i];
		const char *col = colour[s->style & 3];
		dlk_buf_addf(b, "<g class=\"series\" data-series=\"%s\" data-run=\"%d\" data-points=\"%zu\">\n", s->id, s->run,
		             s->n);
		dlk_buf_addf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" stroke-linejoin=\"round\"%s%s points=\"",
		             col, s->thin ? "1" : "2", s->run ? " stroke-dasharray=\"6 4\"" : "",
		             s->thin ? " opacity=\"0.55\"" : "");
		for (size_t k = 0; k < s->n; k++)
			dlk_buf_addf(b, "%s%.1f,%.1f", k ? " " : "", PX(clampv(s->x[k])), PY(clampv(s->y[k])));
		dlk_buf_adds(b, "\"/>\n");
		if (s->markers && s->n <= MAX_MARKERS)
			for (size_t k = 0; k < s->n; k++) {
				char tip[256], xv[64], yv[64];
				fmt_value(xv, sizeof(xv), s->x[k], c->xaxis);
				fmt_value(yv, sizeof(yv), s->y[k], c->yaxis);
				snprintf(tip, sizeof(tip), "%s%s, %s: %s", s->run ? "B: " : "", s->label, xv, yv);
				marker(b, "pt", s->style, s->run, PX(clampv(s->x[k])), PY(clampv(s->y[k])), tip);
			}
		dlk_buf_adds(b, "</g>\n");
	}
#undef PX
#undef PY
	dlk_buf_adds(b, "</svg>\n<ul class=\"legend\">");
	for (size_t i = 0; i < c->n_series; i++)
		legend_item(b, &c->series[i]);
	if (c->n_marks)
		dlk_buf_adds(b, "<li><svg width=\"36\" height=\"12\" viewBox=\"0 0 36 12\" aria-hidden=\"true\">"
		                "<line class=\"markline\" x1=\"18\" y1=\"0\" x2=\"18\" y2=\"12\"/></svg>a start, resume or "
		                "change of workers</li>");
	dlk_buf_adds(b, "</ul>\n</figure>\n");
}
