/* Reports: one self-contained HTML page that shows a run (its curves, its confusion matrix,
 * its provenance), or two runs side by side.
 *
 * Everything starts from a *run document*, one JSON object per run, built from whatever
 * source holds the run: a bundle's model.json (report_run_from_meta), the annotation a
 * training Job publishes on itself (the same object, written by the worker from the same
 * model.json writer), or a run record. Its shape is model.json's, without the weights file:
 *
 *   {"format": "dlk-run", "version": 1, "name",
 *    "source": {"kind": "bundle"|"job"|"run"|"file", ...where it came from},
 *    "classes", "architecture", "training", "metrics", "history", "provenance",
 *    "weights": {"sha256", "bytes"}, "verdict": {"decision", "reason"}}
 *
 * Only format, version and name are required; a part that is missing is shown as missing.
 * The page embeds the *report document* (report_document) — the run documents as given and
 * what the comparison computed — in <script type="application/json" id="dlk-report-data">,
 * the same JSON `dlk report -o json` prints, so the numbers on the page and the numbers a
 * script reads cannot disagree. The page loads nothing: no scripts, no fonts, no images, a
 * Content-Security-Policy of default-src 'none'. */
#ifndef DLK_REPORT_REPORT_H
#define DLK_REPORT_REPORT_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/train/history.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"

#define REPORT_RUN_FORMAT "dlk-run"
#define REPORT_RUN_VERSION 1
#define REPORT_FORMAT "dlk-report"
#define REPORT_VERSION 1
#define REPORT_MAX_CLASSES 100000   /* a run document with more is refused */
#define REPORT_MAX_MATRIX 64        /* classes beyond which the page shows no matrix, only the table */

/* A run document from a bundle's model.json (a new tree the caller owns); source is
 * {"kind": kind, "path": path}. Fails (DLK_EXIT_CONFIG, naming path) when meta is not a dlk
 * model description. */
cJSON *report_run_from_meta(const cJSON *meta, const char *kind, const char *path, struct dlk_err *err);
/* The run document of the bundle at path (its model.json; source {"kind": "bundle", "path"}),
 * a new tree the caller owns, or NULL with err when the bundle cannot be read. */
cJSON *report_run_from_bundle(const char *path, struct dlk_err *err);
/* Parses text as a run document and checks it (report_run_check); who names it in errors. */
cJSON *report_run_parse(const char *text, size_t len, const char *who, struct dlk_err *err);
/* Replaces the run document's "source" (takes ownership of source). */
void report_run_set_source(cJSON *run, cJSON *source);
/* Records a decision about the run (e.g. "promoted", "refused" by a promotion gate) and why;
 * the page shows it first. */
void report_run_set_verdict(cJSON *run, const char *decision, const char *reason);
/* The run document in at most max_bytes of compact JSON, for places with a size limit (a Job's
 * annotations share 256 KiB): when it does not fit, an image model's sample images go first, then
 * the confusion matrix, then the step losses, then every other epoch of the history (the last
 * one always stays), until it fits; NULL when even the bare document does not. The caller frees
 * the string. */
char *report_run_compact(const cJSON *run, size_t max_bytes);
/* Halves the resolution of history.step_loss (pairs averaged, "every" doubled); 0 when there is
 * nothing left to halve. */
int report_run_halve_step_loss(cJSON *history);

/* From a run document's "metrics" (model.json's): its headline test metric, "84.12%" (the
 * accuracy of a classifier) or "r2 0.9353" (the first of metrics.test), "-" when it has none;
 * and every test metric on a line, "accuracy 84.12%" or "r2 0.9353, rmse 0.0953, mae 0.0676". */
void report_metric_headline(const cJSON *metrics, char *out, size_t n);
void report_metrics_line(const cJSON *metrics, char *out, size_t n);

/* A run document, checked and converted for drawing. Strings and doc are borrowed from the
 * document, which must outlive it. */
struct report_run {
	const cJSON *doc;
	const char *name;
	char label[512];             /* what the page calls it: the source's path or job name */
	int n_classes;               /* 0 when the document says nothing about classes */
	char **classes;              /* n_classes names (owned; "0".."k-1" when it has none) */
	int have_metrics, have_test;
	double train_loss, test_loss, test_accuracy;
	long long test_samples;
	double *precision, *recall;  /* n_classes each, or NULL */
	long long *confusion;        /* n_classes x n_classes (row: true class), or NULL */
	int have_history;
	struct dlk_history history;  /* owned */
	long steps_per_epoch;        /* from the history; 0 when unknown */
	long long parameters;        /* -1 when unknown */
	/* a task other than classification: metrics.test (its named metrics; then test_loss and
	 * test_samples are set too, have_test stays 0) and metrics.f1 (multilabel), borrowed; NULL */
	const cJSON *task_metrics, *f1;
	const cJSON *samples;        /* image: metrics.samples {shape, input, output, target}, or NULL */
	/* a program's run (docs/program.md): metrics.program, every metric it reported, borrowed; NULL */
	const cJSON *program_metrics;
};
#define REPORT_RUN_INIT { NULL, NULL, "", 0, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, DLK_HISTORY_INIT, 0, -1, \
	                  NULL, NULL, NULL, NULL }

/* Checks a run document and fills r: every field the page draws has the right type, range and
 * size (a matrix row of the wrong length, an accuracy of 1.5, a class list that disagrees with
 * the matrix). Errors name who and the field; code DLK_EXIT_CONFIG. */
int report_run_load(const cJSON *doc, const char *who, struct report_run *r, struct dlk_err *err);
void report_run_release(struct report_run *r);

/* What comparing run a with run b (the baseline) finds; a minus b throughout. */
struct report_compare {
	int same_classes;            /* the same number of classes, with the same names */
	int same_support;            /* and each class has as many test samples in both */
	double *confusion_diff;      /* k x k (owned): counts when same_support, else percentage
	                                points of each row (the true class's share), else NULL */
	double *recall_delta;        /* k (owned), or NULL */
	int *moved;                  /* class indices by |recall_delta|, largest first (owned) */
	int n_moved;                 /* how many of them moved at all */
};
#define REPORT_COMPARE_INIT { 0, 0, NULL, NULL, NULL, 0 }
void report_compare(const struct report_run *a, const struct report_run *b, struct report_compare *c);
void report_compare_release(struct report_compare *c);

/* The report document: {"format": "dlk-report", "version", "generator", "runs": [run, other],
 * "comparison": {...}} (comparison only with other). Both runs are checked first. A new tree
 * the caller owns; NULL with err when a run document is bad. */
cJSON *report_document(const cJSON *run, const cJSON *other, struct dlk_err *err);
/* The page for run (other may be NULL), appended to out. */
int report_html(const cJSON *run, const cJSON *other, struct dlk_buf *out, struct dlk_err *err);
/* Writes the page to path atomically (a temporary file in the same directory, then rename). */
int report_write_html(const char *path, const cJSON *run, const cJSON *other, struct dlk_err *err);

/* The page of a sweep (`dlk report SWEEP`) from the document of dlk_sweep_status (lib/sweep):
 * the metric against each parameter, every trial's curve with the stopped ones marked, the
 * trials in parallel coordinates, and the data as JSON (<script type="application/json"
 * id="dlk-sweep-data">). Appended to out; -1 with err when the document has no trials. */
int report_sweep_html(const cJSON *doc, struct dlk_buf *out, struct dlk_err *err);
int report_sweep_write_html(const char *path, const cJSON *doc, struct dlk_err *err);

#endif
