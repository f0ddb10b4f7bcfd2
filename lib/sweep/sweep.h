/* Hyperparameter sweeps: the `sweep:` section of a project file, the samplers that choose each
 * trial's parameters (random, grid, TPE), early stopping by ASHA, and the local driver that runs
 * the trials as ordinary `dlk train --local` runs.
 *
 *   sweep:
 *     name: fashion-sweep        # the sweep's id (default: PROJECT-sweep); trials are runs of
 *                                # the projects ID-0, ID-1, ... with run.sweep in their records
 *     method: tpe                # random | grid | tpe
 *     metric: accuracy           # accuracy (test) | loss (test loss, else training loss)
 *     goal: maximize             # maximize | minimize (default: by the metric)
 *     trials: 12                 # budget in trials (grid: at most the grid's size)
 *     gpu_hours: 0               # budget in GPU-hours (0: none); no new trial once spent
 *     parallel: 2                # trials at once
 *     seed: 1
 *     parameters:                # any project key, spelled as for --set
 *       training.optimizer.lr: {loguniform: [0.0005, 0.05]}
 *       model.layers.1.dense.units: {values: [16, 32, 64]}
 *       training.batch_size: {int: [32, 256]}
 *       training.optimizer.momentum: {uniform: [0.5, 0.99]}
 *     early_stopping:            # ASHA: rungs at min, min*factor, ... below the trial's length
 *       method: asha
 *       at: epochs               # epochs | steps
 *       min: 1
 *       reduction_factor: 3
 *
 * Why TPE rather than a Gaussian process: the space mixes lists, integers and log-scaled ranges
 * (a GP needs a kernel for each and a matrix inversion per suggestion, cubic in the trials),
 * trials are few and noisy, and a trial stopped early still says which region is bad; TPE
 * models each parameter by two kernel densities (good and bad trials), is linear in the trials,
 * handles lists natively, and is what Optuna and Hyperopt default to. */
#ifndef DLK_SWEEP_SWEEP_H
#define DLK_SWEEP_SWEEP_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/util/err.h"

#define DLK_SWEEP_MAX_PARAMS 32
#define DLK_SWEEP_MAX_VALUES 256
#define DLK_SWEEP_MAX_TRIALS 10000
#define DLK_SWEEP_ANNOTATION "dlk.dev/sweep" /* a trial's Job: its run.sweep (JSON) */

enum dlk_sweep_kind { DLK_SWEEP_VALUES, DLK_SWEEP_UNIFORM, DLK_SWEEP_LOGUNIFORM, DLK_SWEEP_INT };
enum dlk_sweep_method { DLK_SWEEP_RANDOM, DLK_SWEEP_GRID, DLK_SWEEP_TPE };

struct dlk_sweep_param {
	char *key;            /* a --set path */
	enum dlk_sweep_kind kind;
	double lo, hi;        /* UNIFORM, LOGUNIFORM, INT */
	char **values;        /* VALUES: each as YAML scalar text */
	int n_values;
	int line, col;
};

struct dlk_sweep_spec {
	char *file;           /* for messages */
	char *name;           /* the sweep's id */
	enum dlk_sweep_method method;
	char *metric;         /* "accuracy" | "loss" */
	int maximize;
	int trials, parallel;
	double gpu_hours;
	unsigned long long seed;
	struct dlk_sweep_param *params;
	int n_params;
	int asha;             /* early stopping on */
	int asha_steps;       /* rungs at steps rather than epochs */
	long asha_min;
	int asha_factor;
	int line;             /* where sweep: is */
};
#define DLK_SWEEP_SPEC_INIT { 0 }

/* The sweep: section of the project file text (len bytes; file names it in messages) for the
 * project called project (the default sweep name is PROJECT-sweep). Returns 0 and fills s, 1
 * when the file has no sweep: section, or -1 with err "FILE:LINE:COL: sweep.KEY: what is wrong"
 * (DLK_EXIT_CONFIG). */
int dlk_sweep_spec_parse(const char *text, size_t len, const char *file, const char *project,
                         struct dlk_sweep_spec *s, struct dlk_err *err);
/* The same, reading the file at path. */
int dlk_sweep_spec_load(const char *path, const char *project, struct dlk_sweep_spec *s, struct dlk_err *err);
void dlk_sweep_spec_release(struct dlk_sweep_spec *s);
/* How many points the grid has (the product of the list lengths; ranges are not allowed with
 * grid). */
long dlk_sweep_grid_size(const struct dlk_sweep_spec *s);

/* ---- samplers ---- */

/* A point: one double per parameter (VALUES: the index of the value; INT: a whole number). */
struct dlk_sweep_obs {
	const double *x;
	double value;        /* the metric, as recorded (the trial's last, or at the rung it stopped at) */
};

/* Trial `index`'s point into x (n_params doubles). Random: a function of (seed, index) alone;
 * grid: the index-th point of the grid, in order; TPE: random for the first startup trials,
 * then the candidate (of 24 drawn from the good trials' densities) that maximises l(x)/g(x)
 * over the observations done (the best quarter is "good"). Deterministic in its inputs. */
void dlk_sweep_suggest(const struct dlk_sweep_spec *s, const struct dlk_sweep_obs *done, size_t n_done, long index,
                       double *x);
/* The --set text of parameter i at x ("0.0031", "64", a listed value as written). Caller frees. */
char *dlk_sweep_value_text(const struct dlk_sweep_spec *s, int i, double x);
/* run.sweep.params of a point: {"KEY": value, ...} (numbers as numbers, listed values as YAML
 * scalars would read). A new tree. */
cJSON *dlk_sweep_params_json(const struct dlk_sweep_spec *s, const double *x);
/* The point of recorded params (inverse of dlk_sweep_params_json); -1 when a key is missing or a
 * value is outside the parameter's space. */
int dlk_sweep_params_point(const struct dlk_sweep_spec *s, const cJSON *params, double *x);

/* ---- ASHA (asynchronous successive halving) ---- */

struct dlk_asha_rung {
	long at;
	double *vals;  /* the values recorded at this rung, as "higher is better" */
	int n, cap;
};
struct dlk_asha {
	struct dlk_asha_rung *rungs;
	int n_rungs;
	int factor;
	int maximize;
};
#define DLK_ASHA_INIT { NULL, 0, 0, 1 }
/* Rungs at min, min*factor, min*factor^2, ... strictly below max (a trial's full length). */
void dlk_asha_init(struct dlk_asha *a, long min, long max, int factor, int maximize);
void dlk_asha_release(struct dlk_asha *a);
/* A trial reached rung k with value v: 1 when it should stop (v is worse than the (1 - 1/factor)
 * quantile of the values other trials recorded there before it: it is not in the top
 * 1/factor), 0 to go on; v is recorded either way. The rule of Li et al. 2020 in its
 * asynchronous "stopping" form, as Ray Tune's ASHA applies it. */
int dlk_asha_report(struct dlk_asha *a, int k, double v);

/* ---- the local driver ---- */

struct dlk_sweep_sink {
	void (*note)(void *ud, int warn, const char *msg);
	void *ud;
};

struct dlk_sweep_opts {
	const char *spec_file;
	const char *self;        /* the dlk binary the trials run (here) */
	int quiet;
	int max_trials;          /* 0: the spec's */
	/* Trials as Jobs in a cluster (dlk_sweep_run_cluster): the client (borrowed), the namespace
	 * (resolved: -n, else the project's, else the client's), the templates directory (NULL: the
	 * project's templates/ or the built-ins) and the project's git commit (NULL: none). */
	struct kube_client *kube;
	const char *namespace_;
	const char *templates;
	const char *git_commit;
	int git_dirty;
};

/* Runs the sweep of spec_file here: trials as `dlk train --local` processes, at most parallel
 * at once, ASHA deciding at each rung from the trials' metrics files; a stopped trial's record
 * says "stopped" and its slot goes to the next trial at once. Resumes a sweep of the same name
 * from the history: finished trials (succeeded, stopped, failed) are not run again; one that
 * was cut off continues from its checkpoint. 0 when every trial ran (failed trials are
 * reported by the note), -1 with err. */
int dlk_sweep_run_local(const struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink, struct dlk_err *err);

/* The same sweep with each trial a Job of the project in the cluster (opts->kube): the Job
 * `dlk train` renders for the project with the trial's values and the name SWEEP-N, with
 * $DLK_RUN_SWEEP (run.sweep in its record) and the annotation dlk.dev/sweep (its trial and
 * parameters). At most parallel Jobs at once; ASHA reads each trial's curve from the epochs the
 * Job publishes (dlk.dev/metrics) and stops a trial by deleting its Job (its pods get SIGTERM and
 * checkpoint), whose record in the cluster (the ConfigMap SWEEP-N-runs) then says "stopped".
 * The driver keeps no state of its own: run again after an interruption, it reads the trials'
 * records, follows the Jobs still there (running or ended while it was away), and starts a Job
 * again for a trial whose Job is gone before it ended. A signal stops the driver, not the Jobs
 * (-1 with DLK_EXIT_INTERRUPTED). */
int dlk_sweep_run_cluster(const struct dlk_sweep_opts *o, const struct dlk_sweep_sink *sink, struct dlk_err *err);

/* The trials of sweep id among the runs here (beside spec_file), best first by their metric
 * (trials without one last): {"sweep", "metric", "goal", "trials": [{"trial", "run", "project",
 * "outcome", "value", "params", "stopped_at", "curve", "bundle"}], "best": {...}|null}. NULL
 * with DLK_EXIT_NOTFOUND when no run belongs to it. */
cJSON *dlk_sweep_status(const char *spec_file, const char *id, struct dlk_err *err);
/* The same from the run histories in namespace ns of the cluster kc (the ConfigMaps of the
 * trials' projects, ID-N-runs) when kc is not NULL. */
cJSON *dlk_sweep_status_in(const char *spec_file, const char *id, struct kube_client *kc, const char *ns,
                           struct dlk_err *err);
/* Where a sweep of this project's directory ran its trials: the namespace a cluster driver
 * noted in .dlk/sweeps/ID/namespace (caller frees), or NULL for a sweep run here. */
char *dlk_sweep_cluster_namespace(const char *spec_file, const char *id);

#endif
