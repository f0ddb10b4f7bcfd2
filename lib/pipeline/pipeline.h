/* Pipelines over versioned data: a file of stages (dlk-pipeline.yaml beside dlk.yaml), each
 * reading datasets (NAME@TAG, sha256:ID) or other stages' outputs and writing one dataset, that
 * form a DAG. A stage's key is the sha256 of its kind, its inputs' ids, its parameters, its
 * output's name and its program (argv, the bytes of the code files it names, the image; for
 * dlk's own steps the project file, dlk's version and the binary's sha256); a stage whose key an
 * earlier successful run recorded (the store's tag OUTPUT@key-KEY) is reused, not run again.
 *
 * spec.c reads and checks the file (every message names FILE:LINE:COL); run.c runs the stages
 * here, in dependency order, and keeps the state under <dir>/.dlk/pipelines/NAME/. Library
 * code: nothing is printed, notes go through a callback. */
#ifndef DLK_PIPELINE_PIPELINE_H
#define DLK_PIPELINE_PIPELINE_H

#include <stddef.h>

#include "lib/util/err.h"

#define DLK_PIPELINE_FILE "dlk-pipeline.yaml"
#define DLK_PIPELINE_MAX_STAGES 256
#define DLK_PIPELINE_MAX_INPUTS 64

enum dlk_stage_kind {
	DLK_STAGE_PROGRAM, /* run: [ARGV...] the user's program: reads $DLK_INPUT_<NAME>, writes $DLK_OUTPUT */
	DLK_STAGE_TRAIN,   /* train: PROJECT.yaml, dlk train --local on its one dataset input */
	DLK_STAGE_PREDICT, /* predict: dlk predict with inputs model (a train stage) and data */
};

/* What flows along an edge: a dataset, or a model (a train stage's output). */
enum dlk_value_kind { DLK_VALUE_DATASET, DLK_VALUE_MODEL };

struct dlk_stage_input {
	char *name;      /* the input's name in the stage ([a-z][a-z0-9_]*) */
	char *ref;       /* as written: NAME@TAG, sha256:ID, or a stage's name */
	int stage;       /* index of the stage it comes from, or -1 for a dataset in the store */
	int line, col;
};

struct dlk_param {
	char *key, *value; /* a project key and its value (train: --set KEY=VALUE); for a program,
	                      an environment variable DLK_PARAM_<KEY> */
};

struct dlk_stage {
	char *name;
	enum dlk_stage_kind kind;
	struct dlk_stage_input *inputs;
	int n_inputs;
	char **argv;            /* DLK_STAGE_PROGRAM: the program and its arguments, NULL-terminated */
	char **code;            /* files whose bytes are in the key (default: argv words that are files) */
	int n_code;
	char *image;            /* optional: the image a cluster would run it in (part of the key) */
	char *project;          /* DLK_STAGE_TRAIN: the project file, relative to the pipeline file */
	struct dlk_param *params;
	int n_params;
	char *output;           /* the output dataset's name (default PIPELINE-STAGE) */
	int workers;            /* DLK_STAGE_PREDICT: predict: {workers: N}, its pods on a cluster (an
	                           Indexed Job whose ranks run dlk predict --workers N --rank R); 0: one */
	struct dlk_param *resources; /* resources: cpu, memory, gpus of the stage's pod on a cluster */
	int n_resources;
	int line, col;
};

struct dlk_pipeline {
	char *file;             /* the file it was read from */
	char *dir;              /* its directory: programs run there, relative paths start there */
	char *name;             /* a DNS label */
	char *store;            /* where inputs are read and outputs pushed (relative to dir) */
	struct dlk_stage *stages;
	int n_stages;
	int *order;             /* a topological order of the stages (inputs first) */
	/* on a cluster (lib/pipeline/cluster.c) */
	char *store_secret;     /* a Secret whose keys (AWS_*) the pods get as environment; NULL: none */
	char *log_claim;        /* a PersistentVolumeClaim the stage pods archive their logs on; NULL: none */
	char *image;            /* dlk's image for the driver and the stages; NULL: the projects' default */
	char *schedule;         /* a cron line: the driver runs from a CronJob; NULL: once */
	int data_changed;       /* trigger: data-changed (a CronJob that finds nothing new ends quickly) */
	char *state_root;       /* where .dlk/pipelines/NAME is kept; NULL: dir (set by the caller) */
};

#define DLK_PIPELINE_INIT { 0 }

/* Reads and checks the pipeline file: unknown keys, stages with no program or two, inputs that
 * name no stage or no valid dataset reference, a model where a dataset is expected (or the
 * reverse), cycles. Every error is DLK_EXIT_CONFIG naming FILE:LINE:COL. */
int dlk_pipeline_load(const char *file, struct dlk_pipeline *p, struct dlk_err *err);
/* The same from text in memory; file names it in messages; dir is where paths start. */
int dlk_pipeline_parse(const char *text, size_t len, const char *file, const char *dir, struct dlk_pipeline *p,
                       struct dlk_err *err);
void dlk_pipeline_release(struct dlk_pipeline *p);

/* What a stage's output is: a model for a train stage, a dataset otherwise. */
enum dlk_value_kind dlk_stage_output_kind(const struct dlk_stage *s);
const char *dlk_stage_kind_name(enum dlk_stage_kind k);
/* The index of the stage named name, or -1. */
int dlk_pipeline_stage(const struct dlk_pipeline *p, const char *name);
/* Marks in want[] (n_stages entries, set to 0/1) stage i and every stage downstream of it. */
void dlk_pipeline_descendants(const struct dlk_pipeline *p, int i, char *want);
/* Marks stage i and every stage upstream of it. */
void dlk_pipeline_ancestors(const struct dlk_pipeline *p, int i, char *want);

/* ---- running ---- */

struct dlk_store;

/* Each stage's state after a run (and in <dir>/.dlk/pipelines/NAME/status.json). */
enum dlk_stage_state { DLK_STAGE_PENDING, DLK_STAGE_SUCCEEDED, DLK_STAGE_REUSED, DLK_STAGE_FAILED, DLK_STAGE_BLOCKED };
const char *dlk_stage_state_name(enum dlk_stage_state s);

struct dlk_pipeline_sink {
	/* a line for the user: a stage starts, is reused, ends, fails */
	void (*note)(void *ud, int warn, const char *msg);
	void *ud;
};

struct dlk_pipeline_run_opts {
	const char *self;        /* the dlk binary (train and predict stages run it) */
	struct dlk_store *store; /* the pipeline's store, opened by the caller */
	const char *store_url;   /* its URL, for the dlk processes */
	const char *const *only; /* run these stages (and what they need); NULL = all */
	size_t n_only;
	const char *const *force; /* run these again even when their key is known */
	size_t n_force;
	int dry_run;             /* say which stages would run, with their keys; run nothing */
	int parallel;            /* at most this many stages' processes at once; 0 = 1 */
	/* In a pod of a predict stage with workers: N: the pod's rank ("0", "1", ...; the stage Job
	 * gives it as DLK_PIPELINE_RANK). The stage then runs dlk predict --workers N --rank R;
	 * a rank other than 0 pushes its part only (rank 0 joins the parts and pushes the output).
	 * NULL: not such a pod (--local: one process). */
	const char *rank;
	/* When set, a stage that must run is not started here: remote runs it elsewhere (the
	 * driver in a cluster: a stage Job) and returns when it has ended: 0 when it succeeded (its
	 * output is then looked up in the store by its key, as a reused one), a positive exit code
	 * with why in reason when it failed, -1 with err on an error that is not the stage's. The
	 * stages then run one at a time. */
	int (*remote)(void *ud, const struct dlk_stage *s, const char *key, char *reason, size_t reason_len,
	              struct dlk_err *err);
	void *remote_ud;
};

/* Runs the pipeline here: stages in dependency order; each either reused (its key's tag in the
 * store, or this machine's key record with its output still in the store) or run, its output pushed with a
 * provenance.json (stage, key, inputs, program digests, run id) and a run record written to
 * <dir>/.dlk/runs/NAME/. Stages whose inputs are ready run at once, up to o->parallel. A stage
 * that fails blocks its descendants; independent stages go on.
 * Returns 0 when every stage asked for succeeded or was reused, DLK_EXIT_FAIL naming the stages
 * that failed and those they blocked, or another error (the store, the file system). The
 * status is written after each stage. */
int dlk_pipeline_run_local(const struct dlk_pipeline *p, const struct dlk_pipeline_run_opts *o,
                           const struct dlk_pipeline_sink *sink, struct dlk_err *err);

/* <dir>/.dlk/pipelines/NAME; caller frees. */
char *dlk_pipeline_state_dir(const struct dlk_pipeline *p);
/* The path of a stage's log of its last run; caller frees. */
char *dlk_pipeline_log_path(const struct dlk_pipeline *p, const char *stage);
/* The status of the last run here (<state dir>/status.json: {"stages": [...], ...}): a new cJSON
 * object, or NULL with err (DLK_EXIT_NOTFOUND: it has not run here; DLK_EXIT_CONFIG: the file is
 * not a status). */
struct cJSON *dlk_pipeline_read_status(const struct dlk_pipeline *p, struct dlk_err *err);

#endif
