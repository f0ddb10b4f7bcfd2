/* Pruning a project's local runs (`dlk prune`): which runs go with their record, their own
 * bundle and their checkpoints, and which finished runs keep their record and bundle but lose
 * checkpoints nothing will resume from. What resume needs always stays: the newest run (the
 * next `dlk train` may continue it; its checkpoints go once it succeeded) and every run still
 * running. NAME.dlk, the newest run's
 * bundle, is never removed; a run's own bundle (RUNS/ID.dlk) goes only with its record. */
#ifndef DLK_RUNS_PRUNE_H
#define DLK_RUNS_PRUNE_H

#include "lib/util/err.h"

struct dlk_prune_opts {
	const char *runs_dir;  /* the project's local history (dlk_runs_local_dir) */
	const char *project;   /* its name */
	const char *ckpt_base; /* where the runs' checkpoint folders are (BASE/ID); NULL: none */
	int keep;              /* keep the newest this many runs; -1: no bound by count */
	double older_than;     /* remove runs started more than this many seconds before now; < 0: no bound */
	double now;            /* seconds since the epoch */
	int dry_run;           /* say what would go, remove nothing */
};
#define DLK_PRUNE_OPTS_INIT { NULL, NULL, NULL, -1, -1, 0, 0 }

struct dlk_prune_item {
	char *id;          /* the run (owned) */
	int whole;         /* 1: the run (record, own bundle, checkpoints); 0: its checkpoints only */
	char *record;      /* the paths that go (NULL: none), owned */
	char *bundle;
	char *checkpoints;
	unsigned long long bytes; /* what they hold */
};

struct dlk_prune {
	struct dlk_prune_item *items; /* owned, newest run first */
	size_t n;
	unsigned long long bytes;     /* all of them */
	int failed;                   /* paths that could not be removed (err says the first) */
};
#define DLK_PRUNE_INIT { NULL, 0, 0, 0 }

/* Decides what goes (see above) and, unless o->dry_run, removes it: a record first, so that a
 * prune stopped half-way leaves no record naming a bundle that is gone. Returns 0, or -1 with
 * err when the history cannot be read, or when a path could not be removed (out says what was). */
int dlk_runs_prune(const struct dlk_prune_opts *o, struct dlk_prune *out, struct dlk_err *err);
void dlk_prune_release(struct dlk_prune *p);

#endif
