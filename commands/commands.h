/* The command table: every dlk command is listed here once. From this list and each command's
 * option table come: dispatch (including `dlk-CMD` symlinks), `dlk -h`, `dlk help CMD`, `dlk CMD -h`,
 * shell completion answers (`dlk __complete`), the man pages' SYNOPSIS/OPTIONS (`dlk __man-fill`)
 * and the install links (`dlk __commands`). */
#ifndef DLK_COMMANDS_H
#define DLK_COMMANDS_H

#include <stddef.h>

#include "commands/options.h"

/* X(name, summary, flags) — the order is the order of `dlk -h`. */
#define DLK_COMMAND_LIST(X)                                                                       \
	X(init, "create a project: a commented dlk.yaml, optionally the templates", 0)            \
	X(train, "train a model: submit the job to the cluster, show it, run it here, or be its worker", 0) \
	X(status, "show dlk jobs: state, workers, GPUs, progress; or one job in detail", 0)        \
	X(logs, "show the logs of a job's workers, merged, each line tagged with its rank", 0)    \
	X(report, "write a run's report: one HTML page with its curves, confusion matrix and provenance", 0) \
	X(delete, "delete jobs and everything dlk created for them", 0)                           \
	X(completion, "print the shell completion script for bash or zsh", 0)                     \
	X(version, "print the version, build options and library versions", 0)                   \
	X(help, "show help for dlk or one of its commands", 0)

#define X(n, s, f) extern const struct dlk_command_def dlk_cmd_##n;
DLK_COMMAND_LIST(X)
#undef X

/* All commands in table order, NULL-terminated. */
extern const struct dlk_command_def *const dlk_commands[];
const struct dlk_command_def *dlk_command_find(const char *name);

int dlk_main(int argc, char **argv);

#endif
