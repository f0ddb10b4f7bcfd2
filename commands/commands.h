/* The command table: every dlk command is listed here once, with its summary. From this list and
 * each command's definition (commands/NAME.c: options, usage, description, examples) come:
 * dispatch (including `dlk-CMD` symlinks), `dlk -h`, `dlk help CMD`, `dlk CMD -h`, shell
 * completion answers (`dlk __complete`), the man pages' SYNOPSIS/OPTIONS and the list of
 * commands in dlk(1) (`dlk __man-fill`) and the install links (`dlk __commands`). */
#ifndef DLK_COMMANDS_H
#define DLK_COMMANDS_H

#include <stddef.h>

#include "commands/options.h"

/* X(name, summary) — the order is the order of `dlk -h`. */
#define DLK_COMMAND_LIST(X)                                                                       \
	X(init, "create a project: a commented dlk.yaml, optionally the templates")               \
	X(train, "train a model: submit the job to the cluster, show it, run it here, or be its worker") \
	X(serve, "serve trained models over HTTP: KServe V2 (binary tensors, classification) and TF Serving REST") \
	X(status, "show dlk jobs: state, workers, GPUs, progress; or one job in detail")           \
	X(logs, "show the logs of a job's workers, merged, each line tagged with its rank")       \
	X(report, "write a run's report: one HTML page with its curves, confusion matrix and provenance") \
	X(delete, "delete jobs and everything dlk created for them")                              \
	X(completion, "print the shell completion script for bash or zsh")                       \
	X(version, "print the version, build options and library versions")                      \
	X(help, "show help for dlk or one of its commands")

#define X(n, s) extern const struct dlk_command_def dlk_cmd_##n;
DLK_COMMAND_LIST(X)
#undef X

/* The global options (kubectl's spelling), accepted before or after the command name; their
 * variables are the fields of the struct dlk_ctx that dispatch hands to every command. */
extern const struct dlk_option dlk_global_options[];

/* All commands in table order, ended by a row whose name is NULL. */
extern const struct dlk_command dlk_commands[];
const struct dlk_command *dlk_command_find(const char *name);
/* "error: unknown command 'NAME'" with the nearest command as a hint; returns DLK_EXIT_USAGE. */
int dlk_report_unknown_command(const char *name);

int dlk_main(int argc, char **argv);

#endif
