/* The run a training is (lib/runs): its id, the checkpoints that are its own, whether it
 * continues a run that was interrupted, and its record in the run history, kept current from
 * its start to its end.
 *
 * Who keeps the record: `dlk train --local` (the process itself, or the parent of a local gang
 * of workers) in the project's .dlk/runs/NAME/; in a cluster the Job's rank 0, in the ConfigMap
 * NAME-runs. Writing a record never stops training: a failure is one warning. */
#ifndef DLK_TRAINER_RUN_H
#define DLK_TRAINER_RUN_H

#include <cJSON.h>

#include "lib/kube/client.h"
#include "lib/project/project.h"
#include "lib/runs/lock.h"
#include "lib/runs/runs.h"
#include "lib/trainer/trainer.h"

struct dlk_train_run {
	const struct dlk_trainer_sink *sink; /* where its notes go (borrowed) */
	struct dlk_run_store *store; /* NULL: this process keeps no record */
	struct kube_client *kc;      /* the client of a cluster store (owned) */
	struct dlk_run_lock lock;    /* a local run's: held from its open to its release */
	cJSON *rec;                  /* the record, when kept */
	char id[DLK_RUNS_ID_MAX + 1]; /* "" when the run has no id (a bare --worker) */
	int resumed;                 /* it continues a run started before */
	int warned;
	/* a user's program (set by the opens from the project): its exit codes mean what its
	 * exit_codes say, and a failure is recorded with that class */
	const struct dlk_program *program;
	/* run.usage (lib/runs/usage.h): when this session began (monotonic seconds), the devices
	 * and reserved CPUs per worker, and each rank's CPU seconds when a gang measured them */
	double session_start, gpus, cpus;
	double *cpu_s;
	int n_cpu;
};
#define DLK_TRAIN_RUN_INIT { NULL, NULL, NULL, DLK_RUN_LOCK_INIT, NULL, "", 0, 0, NULL, 0, 0, 0, NULL, 0 }

/* `dlk train --local --if-data-changed`: fetches and hashes the data sources of the project
 * (spec_file); when their fingerprint equals that of the newest successful run in the local
 * history, records a run "skipped" with the reason, says so and returns DLK_EXIT_UNCHANGED; 0
 * when the data changed (or no run succeeded yet): train. -1 with err when the data cannot be
 * hashed or the history read. */
int dlk_train_skip_unchanged(const struct dlk_trainer_sink *sink, const char *spec_file, const struct dlk_project *spec,
                             struct dlk_err *err);

/* `trigger: data-changed`, rank 0 in a pod, its data loaded (data: [{"split", "url", "sha256"}]):
 * 1 when that is the data the newest successful run of the history trained on, the run then
 * recorded "skipped" with the reason (the caller stops without training, exit 0: rank 0's
 * success completes the Job); 0 to train. */
int dlk_train_run_skip_if_unchanged(struct dlk_train_run *r, const cJSON *data);

/* `dlk train --local` (a single process, or the parent of a gang of `world` workers): takes the
 * project's run lock (lib/runs/lock.h) for the life of the run, kept in r until
 * dlk_train_run_release; when another run holds it, -1 with err (DLK_EXIT_FAIL) naming that run,
 * with or without opts->fresh, and nothing written. Under the lock, the newest run of the
 * project in its local history (next to opts->spec_file) is continued when it was interrupted
 * (a signal, a crash, a lost worker, a process killed before it wrote its end: a record that
 * still says running while nobody holds the lock), its project file resolves to the same spec
 * (digest) and opts->fresh is not set; otherwise a new run begins. A run interrupted at
 * another worker count is refused (-1 with err, its record unchanged) when its newest
 * checkpoint's global batch does not split into `world` equal batches. Writes the record
 * (outcome running). */
int dlk_train_run_open_local(struct dlk_train_run *r, const struct dlk_trainer_sink *sink,
                             const struct dlk_trainer_opts *opts, const struct dlk_project *spec,
                             const char *spec_digest, int world, struct dlk_err *err);
/* Rank 0 in a pod: the run is the Job's (DLK_RUN_ID, its uid); its record in the ConfigMap is
 * made or, after a restart or a re-form, counted as restarted at `world` workers. A history
 * that cannot be reached is warned about; training goes on without a record. */
void dlk_train_run_open_cluster(struct dlk_train_run *r, const struct dlk_trainer_sink *sink,
                                const struct dlk_project *spec, const char *spec_digest, int world);
/* Any other worker: the id from DLK_RUN_ID, no record. */
void dlk_train_run_open_worker(struct dlk_train_run *r, const struct dlk_trainer_sink *sink);

/* The checkpoints of this run: base/<id>, or base itself for a run without an id. Caller frees. */
char *dlk_train_run_ckpt_dir(const struct dlk_train_run *r, const char *base);

/* The CPU seconds each rank used (n ranks; copied), measured by the gang that ran them: what
 * dlk_train_run_finish records in run.usage. Without it the finish counts this process and its
 * children as one rank. */
void dlk_train_run_set_cpu(struct dlk_train_run *r, const double *cpu_s, int n);

/* Writes the record as it is now (a failure: one warning). */
void dlk_train_run_save(struct dlk_train_run *r);
/* The end of the run: its outcome, the time, the failure (rank -1: unknown; message may be
 * NULL) for a failed or interrupted one; then saved. */
void dlk_train_run_finish(struct dlk_train_run *r, enum dlk_run_outcome o, int rank, int exit_code,
                          const char *message);
/* The run document of what the run made (doc, borrowed: metrics, history, provenance) into the
 * record, with its data sources, spec digest, image and commit; and the bundle (path and the
 * sha256 of the file), when bundle is not NULL. */
void dlk_train_run_set_result(struct dlk_train_run *r, const cJSON *doc, const char *bundle);
/* A run that succeeded: the run document of its bundle (written, at path bundle) into the
 * record (a bundle that cannot be read leaves it without metrics, with a warning), then
 * finished as succeeded. */
void dlk_train_run_succeeded(struct dlk_train_run *r, const char *bundle);
void dlk_train_run_release(struct dlk_train_run *r);

#endif
