/* dlk predict's steps, the library part of the command: the predictions dataset each way of
 * scoring pushes (predictions.csv and provenance.json), and a run of N workers (--workers N):
 * rank r scoring its part and pushing it to the store, rank 0 joining the parts into the bytes
 * one process writes, and the Job of the N pods. lib/serve/predict.h has the scoring, the CSV
 * text and the parts' ranges, key, tag and part.json. Library code: errors come back in struct
 * dlk_err, events through callbacks; nothing is printed. */
#ifndef DLK_SERVE_PREDICT_WORKERS_H
#define DLK_SERVE_PREDICT_WORKERS_H

#include <stddef.h>

#include "lib/serve/predict.h"
#include "lib/store/dataset.h"
#include "lib/util/err.h"

struct dlk_cache;

/* provenance.json of predictions p: what they were made from (the input's id, the tag it was
 * named by or NULL, its store and IDX files; the model's name, bundle and weights digests and
 * training run), the dlk version, samples, classes and correct. No times: the same model on the
 * same data gives the same dataset. A new string. */
char *dlk_predict_provenance(const struct dlk_serve_model *m, const char *bundle_sha, const char *input_id,
                             const char *input_tag, const char *input_store, const char *images, const char *labels,
                             const struct dlk_predictions *p);
/* Pushes the predictions dataset (predictions.csv csv, provenance.json prov) to s tagged name
 * (NAME@TAG, or NAME: NAME@latest); its id in id. */
int dlk_predict_push(struct dlk_store *s, const char *name, const char *csv, size_t csv_len, const char *prov,
                     dlk_store_progress_fn progress, void *progress_ctx, char id[65], struct dlk_err *err);

/* One run of N workers: what every rank scores and where the parts go. Every pointer is
 * borrowed. The same fields on every rank make the same key (dlk_predict_part_key), hence the
 * same parts' tags. */
struct dlk_predict_workers {
	struct dlk_serve_model *model;         /* loaded (dlk_serve_model_load) */
	const struct dlk_dataset *data;        /* the whole input split, loaded */
	const char *input_id, *bundle_sha;     /* 64 hex each */
	const char *images, *labels;           /* the IDX files scored, as the input names them */
	const char *name;                      /* the output's NAME[@TAG] */
	int batch;                             /* as asked: dlk_predict_batch() applies */
	int threads;                           /* as asked (0: every core); part of the key */
	int workers;                           /* N, at least 1 */
	struct dlk_store *store;               /* where the parts are pushed and read */
	struct dlk_cache *cache;               /* a remote store's parts are read through it; NULL: in place */
	dlk_predict_progress_fn progress;      /* scoring; may be NULL */
	dlk_store_progress_fn store_progress;  /* pushing and reading; may be NULL */
	void *progress_ctx;                    /* both's */
};

/* The run's key (16 hex digits and a NUL). */
void dlk_predict_workers_key(const struct dlk_predict_workers *w, char key[17]);
/* rank's part's tag (dlk_predict_part_tag of w->name and key), a new string; NULL with
 * DLK_EXIT_USAGE naming --name when it is not a tag a store takes (a name too long for one). */
char *dlk_predict_workers_tag(const struct dlk_predict_workers *w, const char *key, int rank, struct dlk_err *err);

/* What dlk_predict_rank did. */
struct dlk_predict_rank_result {
	char id[65];        /* the part's dataset id */
	char *tag;          /* its tag, owned */
	size_t first, count; /* its samples: [first, first + count) */
	size_t correct;     /* of them, predicted as labelled (scored = 1 only) */
	int scored;         /* 1: scored and pushed now; 0: the store had the part already */
};
#define DLK_PREDICT_RANK_RESULT_INIT { "", NULL, 0, 0, 0, 0 }
void dlk_predict_rank_result_release(struct dlk_predict_rank_result *r);

/* Rank rank (0 to N - 1) of the run: scores its samples (dlk_predict_part_range, whole batches)
 * and pushes them as its part (part.csv: their rows of predictions.csv, no header; part.json:
 * struct dlk_predict_part) tagged dlk_predict_workers_tag(), unless the store has that tag
 * already (a re-run, a restarted rank: no part is made twice). */
int dlk_predict_rank(const struct dlk_predict_workers *w, int rank, struct dlk_predict_rank_result *res,
                     struct dlk_err *err);

/* Told, while parts are missing, after each look at the store, that have of the workers' parts
 * are there. 0: look again DLK_PREDICT_POLL_S later; non-zero (err set): stop the join with
 * err (interrupted; a rank the caller knows failed: dlk_predict_rank_failed). */
typedef int (*dlk_predict_wait_fn)(void *ctx, int have, int workers, struct dlk_err *err);
#define DLK_PREDICT_POLL_S 0.5

/* Rank 0 (or whoever joins): finds every part of the run in the store (with wait NULL, a part
 * missing is DLK_EXIT_NOTFOUND naming its tag; else wait is asked whether to wait for it), reads
 * their part.json and checks that they are this run's parts, rank i of N each, covering the
 * input's samples once in order (dlk_predict_parts_check), and each part.csv against its
 * part.json (dlk_predict_part_rows_check), then makes predictions.csv of them: the header and
 * the parts' rows in rank order, the bytes dlk_predict_csv makes of one process's predictions.
 * *csv (caller frees) and *csv_len; totals: n, k and correct (cls and probs NULL) for
 * dlk_predict_provenance. Any failure (DLK_EXIT_CONFIG for a part that is not right, naming it
 * by rank and dataset id) leaves *csv NULL and totals empty. */
int dlk_predict_join(const struct dlk_predict_workers *w, dlk_predict_wait_fn wait, void *wait_ctx,
                     struct dlk_predictions *totals, char **csv, size_t *csv_len, struct dlk_err *err);

/* Whether csv (a part.csv) holds exactly the rows of part p: p->count lines, each ending with a
 * newline, line i starting with its sample's index (p->first + i) and a comma. Else
 * DLK_EXIT_CONFIG saying what is wrong (a part cut short, another range's rows). */
int dlk_predict_part_rows_check(const char *csv, size_t len, const struct dlk_predict_part *p, struct dlk_err *err);

/* The message of a rank that failed, "rank R of N failed: CAUSE", into err with code (the
 * line a failing rank ends with, which its Job's status shows); returns -1. */
int dlk_predict_rank_failed(struct dlk_err *err, int code, int rank, int workers, const char *cause);

/* The Job of a run of N workers on a cluster: an Indexed Job of N pods (the program Job
 * lib/render makes of a project) whose pod r gets the bundle (a dataset of the store) and runs
 * `dlk predict --workers N --rank r` with the same options. */
struct dlk_predict_job {
	const char *job;           /* the Job's name (dlk_predict_job_name) */
	const char *bundle_id;     /* the bundle's dataset id in store (64 hex) */
	const char *store;         /* URL of the store the parts and the output go to */
	const char *from;          /* URL of the input's store; NULL: store */
	const char *data;          /* the input: NAME@TAG, NAME or sha256:ID */
	const char *tag;           /* the output's NAME@TAG */
	const char *images, *labels; /* NULL: the ranks pick them (dlk_predict_pick_idx) */
	int batch, threads, workers;
	const char *secret;        /* the store's credentials Secret; NULL: none */
	const char *cpu, *memory;  /* of each pod */
};
/* --job's default: NAME-predict of the output's NAME[@TAG], a DNS label. A new string. */
char *dlk_predict_job_name(const char *name);
/* Whether the pods of a cluster can reach the store url: a directory (or file://) is
 * DLK_EXIT_USAGE naming what (the option) with the way out. */
int dlk_predict_store_reachable(const char *url, const char *what, struct dlk_err *err);
/* The project (dlk.yaml text) of the Job, for project_load_mem and render_train_project; every
 * value quoted so that none can reshape it, every word of the pods' command quoted for sh. A
 * rank that fails fails the Job at once: dlk's exit codes and death by SIGINT, SIGABRT, SIGKILL,
 * SIGSEGV and SIGTERM. A new string; *len set when len is not NULL. */
char *dlk_predict_job_yaml(const struct dlk_predict_job *j, size_t *len);

#endif
