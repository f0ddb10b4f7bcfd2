/* Line charts as inline SVG, for the report page: axes with round ticks, one polyline per
 * series with a marker at each point, vertical marks for events. Each series is told apart by
 * its marker's shape and its dashing as well as its colour, so the chart reads in black and
 * white; each point carries a <title> with its value. The page's tests count the points:
 *   <svg class="chart" id=...>  <g class="series" data-series=ID data-run=R data-points=N>
 *   <polyline points="x,y x,y ..."/>  and a <use>/<circle>... marker per point (class "pt"). */
#ifndef DLK_REPORT_CHART_H
#define DLK_REPORT_CHART_H

#include <stddef.h>

#include "lib/util/buf.h"

#define CHART_W 760
#define CHART_H 300

struct chart_series {
	const char *id;       /* data-series, e.g. "test-loss" */
	const char *label;    /* legend text */
	int run;              /* 0: this run (solid, filled markers), 1: the other (dashed, hollow) */
	int style;            /* 0..3: colour and marker shape */
	int markers;          /* a marker at each point */
	int thin;             /* a thin, light line (many points) */
	size_t n;
	const double *x, *y;
};

struct chart_mark {
	double x;
	int run;
	const char *label;    /* short, e.g. "resumed, 2 workers" */
};

enum chart_axis { AXIS_NUMBER, AXIS_EPOCH, AXIS_SECONDS, AXIS_PERCENT };

struct chart {
	const char *id;       /* the <svg>'s id */
	const char *title;    /* <title>, also the figure's caption */
	const char *desc;     /* <desc>: what it shows, in words */
	enum chart_axis xaxis, yaxis;
	const char *xlabel, *ylabel;
	int y_from_zero;      /* the y axis starts at 0 (when all values are >= 0) */
	const struct chart_series *series;
	size_t n_series;
	const struct chart_mark *marks;
	size_t n_marks;
};

/* Appends the <figure> holding the chart and its legend. A chart with no points at all says
 * so instead of drawing empty axes. */
void chart_figure(struct dlk_buf *b, const struct chart *c);

/* Appends s with &, <, >, " and ' escaped for HTML text and attribute values. */
void html_escape(struct dlk_buf *b, const char *s);

/* Round tick positions covering [lo, hi]: the first tick, the step and how many (2..12). */
void chart_ticks(double lo, double hi, int target, double *first, double *step, int *n);

#endif
