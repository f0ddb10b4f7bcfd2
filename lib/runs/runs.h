/* The run history: one record per training run, kept in a store, for audits, `dlk status NAME
 * --history`, reports (`dlk report RUN`) and the tools that ask which runs used which data.
 *
 * A record is a run document (lib/report/report.h: format "dlk-run", version 1, the project's
 * name, and when the run got that far its architecture, metrics with the confusion matrix,
 * history and provenance) with one more member, "run", that says what happened to it:
 *
 *   "run": {"id", "project",
 *           "outcome": "running" | "succeeded" | "failed" | "interrupted" | "skipped" | "stopped",
 *           "reason": why it was skipped or how it was interrupted (optional),
 *           "started_at", "finished_at" (RFC 3339 UTC with milliseconds; finished_at absent
 *                                        while it runs),
 *           "failure": {"rank", "exit_code", "class", "message"}  (a failed or interrupted run),
 *           "restarts": how often it was started again (a gang restart, a resume, a re-form),
 *           "worlds": [the worker counts it ran at, in order, a change recorded once],
 *           "where": "local" | "cluster", "host", "pid" (local) or
 *           "job": {"name", "namespace", "uid"} (cluster),
 *           "trigger": "manual" | "schedule" | "data-changed",
 *           "data": [{"split", "url", "sha256"}]     (every data source, as fetched),
 *           "spec_sha256", "image", "dlk_version", "git_commit", "git_dirty",
 *           "checkpoint_dir", "bundle": {"path", "sha256"},
 *           "peak_memory_bytes": [per rank, when known],
 *           "usage": {"wall_seconds", "workers", "gpu_seconds", "cpu_seconds", ...} (what it held
 *                     and used: lib/runs/usage.h),
 *           "sweep": {"id", "trial", "params": {KEY: value}, "metric", "goal", "value",
 *                     "curve": [[epoch or step, value]...], "stopped_at"}  (a sweep's trial)}
 *
 * Only id, project, outcome and started_at are required; the rest is there when known. The
 * record converts to the document `dlk report -o json` shows by setting its "source" to
 * {"kind": "run", "id", "store"} (dlk_run_report_doc).
 *
 * Stores: a directory (locally, <project dir>/.dlk/runs/NAME/, a file per run) or a ConfigMap
 * in the cluster (NAME-runs, a key per run, written by the job's rank 0 under a Role that may
 * only get and patch that ConfigMap). Both are bounded: beyond DLK_RUNS_KEEP records (and, for
 * the ConfigMap, DLK_RUNS_CONFIGMAP_BYTES of them), the oldest runs are dropped and counted.
 *
 * The library API that other tools build on (lineage, impact, archived logs) is the store
 * functions below: dlk_runs_list, dlk_runs_get, dlk_runs_find_data. */
#ifndef DLK_RUNS_RUNS_H
#define DLK_RUNS_RUNS_H

#include <stddef.h>

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/util/err.h"

#define DLK_RUNS_ID_MAX 128                  /* bytes of a run id: [A-Za-z0-9._-] */
#define DLK_RUNS_KEEP 1000                   /* records a store keeps */
#define DLK_RUNS_RECORD_BYTES (96u << 10)    /* one record in the ConfigMap, at most */
#define DLK_RUNS_CONFIGMAP_BYTES (800u << 10) /* all of them (a ConfigMap holds 1 MiB) */
#define DLK_RUNS_FILE_BYTES (16u << 20)      /* a record file read back, at most */
#define DLK_RUNS_CONFIGMAP_SUFFIX "-runs"    /* NAME-runs */

enum dlk_run_outcome {
	DLK_RUN_RUNNING,
	DLK_RUN_SUCCEEDED,
	DLK_RUN_FAILED,
	DLK_RUN_INTERRUPTED,
	DLK_RUN_SKIPPED,
	DLK_RUN_STOPPED, /* a sweep stopped it early (ASHA): no failure, not to be resumed */
};
/* "running", "succeeded", ...; and back (-1 for a word that is none of them). */
const char *dlk_run_outcome_name(enum dlk_run_outcome o);
int dlk_run_outcome_parse(const char *s);

/* ---- records ---- */

/* A new record {"format": "dlk-run", "version": 1, "name": project, "run": {"id", "project",
 * "outcome": "running", "started_at": now}}; the caller owns it. */
cJSON *dlk_run_record_new(const char *project, const char *id);
/* A fresh run id: 32 random hex digits in the 8-4-4-4-12 layout of a UUID (version 4), the
 * layout a Job's uid has. Returns 0, or -1 with err when no randomness could be had. */
int dlk_run_new_id(char id[37], struct dlk_err *err);
/* RFC 3339 UTC with milliseconds ("2024-05-01T12:00:00.123Z"): what records use, so that runs
 * started within the same second still sort in the order they started. */
void dlk_run_time_now(char buf[32]);

/* The record's "run" object (borrowed; NULL when it has none) and its common fields. */
cJSON *dlk_run_info(const cJSON *rec);
const char *dlk_run_id(const cJSON *rec);
const char *dlk_run_project(const cJSON *rec);
/* -1 when the record has no valid outcome */
int dlk_run_outcome(const cJSON *rec);
const char *dlk_run_started_at(const cJSON *rec);
/* A string member of "run" (NULL when absent or not a string). */
const char *dlk_run_str(const cJSON *rec, const char *key);

/* Sets run.KEY to a string (NULL removes it), a number, or an owned item. */
void dlk_run_set_str(cJSON *rec, const char *key, const char *value);
void dlk_run_set_num(cJSON *rec, const char *key, double value);
void dlk_run_set_item(cJSON *rec, const char *key, cJSON *item);
void dlk_run_set_outcome(cJSON *rec, enum dlk_run_outcome o);
/* run.failure = {rank (-1: unknown), exit_code, class (the exit code's name, or "signal"),
 * message}. */
void dlk_run_set_failure(cJSON *rec, int rank, int exit_code, const char *message);
/* The same with the class given (a user's program's codes mean what its exit_codes say, not
 * dlk's own: lib/project/program.h); cls NULL: as dlk_run_set_failure. */
void dlk_run_set_failure_class(cJSON *rec, int rank, int exit_code, const char *cls, const char *message);
/* Appends world to run.worlds unless it is already the last entry. */
void dlk_run_add_world(cJSON *rec, int world);
/* Adds one to run.restarts. */
void dlk_run_count_restart(cJSON *rec);
/* Replaces the record's run-document parts (classes, architecture, training, metrics, history,
 * provenance, weights) with those of run (a run document, borrowed), keeping "run". */
void dlk_run_set_document(cJSON *rec, const cJSON *run);

/* Checks a record read from outside (a file, a ConfigMap key): the format, the "run" object and
 * every member it has (types, ranges, sizes, the id's characters, a known outcome), and the
 * run-document parts as `dlk report` draws them. Errors name `who` and the field; code
 * DLK_EXIT_CONFIG. */
int dlk_run_record_check(const cJSON *rec, const char *who, struct dlk_err *err);
/* Parses text (len bytes) as a record and checks it; a new tree or NULL with err. */
cJSON *dlk_run_record_parse(const char *text, size_t len, const char *who, struct dlk_err *err);
/* The record as compact JSON of at most max_bytes: the step losses of the history go first,
 * then what report_run_compact gives way. NULL when even that does not fit. Caller frees. */
char *dlk_run_record_compact(const cJSON *rec, size_t max_bytes);
/* The run document of a record, as `dlk report` takes it: a copy whose "source" is
 * {"kind": "run", "id", "store"}. store describes where it came from ("local", "cluster"). */
cJSON *dlk_run_report_doc(const cJSON *rec, const char *store);
/* The sha256 of every data source the record names (run.data, else provenance.data): 1 when
 * sha256 (64 hex digits, or "sha256:" and them) is among them, or is its dataset's id. */
int dlk_run_uses_data(const cJSON *rec, const char *sha256);
/* The data fingerprint: the sha256 of the sorted "split url sha256" lines of a record's data
 * (or of a run document's provenance.data), "" when it names none. What `trigger: data-changed`
 * and --if-data-changed compare, and what the history shows. */
void dlk_run_data_fingerprint(const cJSON *rec_or_doc, char hex[65]);
/* The same of one split's sources ("train": the images and the labels file alike), and how many
 * there are in *n (may be NULL); "" and 0 when it has none. What a comparison calls "train data". */
void dlk_run_split_fingerprint(const cJSON *rec_or_doc, const char *split, char hex[65], int *n);
/* 1 when the two records name the same data (equal fingerprints), and at least one source. */
int dlk_run_same_data(const cJSON *a, const cJSON *b);

/* ---- stores ---- */

struct dlk_run_store;

/* The records of project in the directory dir (<project dir>/.dlk/runs/<project> by
 * convention: dlk_runs_local_dir), created on the first dlk_runs_put. */
struct dlk_run_store *dlk_runs_open_dir(const char *dir, const char *project);
/* <project dir>/.dlk/runs/<name>, where the project file at spec_file keeps its local runs.
 * Caller frees. */
char *dlk_runs_local_dir(const char *spec_file, const char *name);
/* "The runs trained here": the local history of each project kept beside spec_file (its
 * directory's .dlk/runs/), then of each directory right below the current one that keeps one
 * (`dlk init DIR` gives each project a directory of its own), each directory once. Calls fn with
 * the project's store directory and name, in a stable order (sorted); stops at the first
 * non-zero return of fn and returns it, else 0. */
int dlk_runs_local_each(const char *spec_file, int (*fn)(const char *dir, const char *project, void *ud), void *ud);
/* The record of run id (or a prefix of at least 4 characters) among the runs trained here
 * (dlk_runs_local_each), a new tree the caller owns. NULL with err: DLK_EXIT_NOTFOUND when none
 * has it, DLK_EXIT_USAGE when runs of two projects start so. */
cJSON *dlk_runs_local_find(const char *spec_file, const char *id, struct dlk_err *err);
/* The records of project in the ConfigMap <project>-runs of ns, through c (borrowed, must
 * outlive the store). A ConfigMap that does not exist reads as no runs; writing to it fails
 * (the worker may not create it: `dlk train` renders it). */
struct dlk_run_store *dlk_runs_open_configmap(struct kube_client *c, const char *ns, const char *project);
/* "local" or "cluster" */
const char *dlk_runs_store_kind(const struct dlk_run_store *s);
void dlk_runs_close(struct dlk_run_store *s);

/* Every record, newest first (by started_at, then id), as a new array the caller owns; records
 * that do not check are left out and counted in *bad (may be NULL) rather than failing the
 * list. *dropped (may be NULL) is how many older runs the bound dropped. */
int dlk_runs_list(struct dlk_run_store *s, cJSON **records, long *dropped, int *bad, struct dlk_err *err);
/* The record whose id is id, or the only one whose id starts with id (at least 4 characters);
 * a new tree. DLK_EXIT_NOTFOUND when none, DLK_EXIT_USAGE naming the candidates when several. */
int dlk_runs_get(struct dlk_run_store *s, const char *id, cJSON **record, struct dlk_err *err);
/* Writes rec (its run.id names it), replacing the record of that id; then drops the oldest
 * records beyond the store's bounds (the newest, rec, always stays). A record too large for the
 * ConfigMap is shortened (dlk_run_record_compact). Concurrent writers of a ConfigMap are
 * serialised by its resourceVersion (re-read and retried on a conflict). */
int dlk_runs_put(struct dlk_run_store *s, const cJSON *rec, struct dlk_err *err);
/* The records (newest first, a new array) of the runs that used the data whose sha256 (or
 * dataset id) is sha256. */
int dlk_runs_find_data(struct dlk_run_store *s, const char *sha256, cJSON **records, struct dlk_err *err);
/* The newest record whose outcome is o (a new tree, or NULL when none; never an error beyond
 * the list's). */
int dlk_runs_newest(struct dlk_run_store *s, enum dlk_run_outcome o, cJSON **record, struct dlk_err *err);

#endif
