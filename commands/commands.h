/* The command table: every dlk command is listed here once, with its summary. From this list and
 * each command's definition (commands/NAME.c: options, usage, description, examples) come:
 * dispatch (including `dlk-CMD` symlinks), `dlk -h`, `dlk help CMD`, `dlk CMD -h`, shell
 * completion answers (`dlk __complete`), the man pages' SYNOPSIS/OPTIONS and the list of
 * commands in dlk(1) (`dlk __man-fill`) and the install links (`dlk __commands`).
 *
 * A command may have subcommands (`dlk data push`), listed the same way in DLK_SUBCOMMAND_LIST:
 * each is a command of its own (options, -h, completion, a man page dlk-PARENT-NAME(1)), named
 * "PARENT NAME" in messages; the parent's row lists them (`dlk data -h`, dlk-data(1)). */
#ifndef DLK_COMMANDS_H
#define DLK_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

#include "commands/options.h"

/* X(name, summary) — the order is the order of `dlk -h`. */
#define DLK_COMMAND_LIST(X)                                                                       \
	X(init, "create a project: a commented dlk.yaml, optionally the templates")               \
	X(train, "train a model: submit the job to the cluster, show it, run it here, or be its worker") \
	X(serve, "serve trained models over HTTP (KServe V2, TF Serving REST) or on a Kafka topic") \
	X(status, "show dlk jobs: state, workers, GPUs, progress; or one job in detail")           \
	X(sweep, "search hyperparameters: trials of the project's sweep: section, stopped early by ASHA") \
	X(scale, "resize a running training job: its workers re-form at the new size from a checkpoint") \
	X(top, "show what the runs here are doing: CPU use and memory of their processes, GPUs through NVML") \
	X(logs, "show the logs of a job's workers, merged, each line tagged with its rank")       \
	X(report, "write a run's report: one HTML page with its curves, confusion matrix and provenance") \
	X(delete, "delete jobs and everything dlk created for them")                              \
	X(data, "versioned datasets: push files to a store, list, show and get them by id or tag") \
	X(generate, "generate text from a language-model bundle: greedy, temperature, top-k, top-p, seeded") \
	X(export, "write a model bundle as ONNX, for ONNX Runtime, Triton or a phone")            \
	X(predict, "score every sample of a dataset with a model and push the predictions as a dataset") \
	X(pipeline, "run stages over versioned data in dependency order; a stage runs again only when its inputs change") \
	X(lineage, "show what made a model: its dataset, project file, git commit, image and run") \
	X(impact, "list the runs that used a dataset and the bundles they made, from the run history") \
	X(prune, "remove old runs here with their bundles and checkpoints, and finished runs' checkpoints") \
	X(completion, "print the shell completion script for bash or zsh")                       \
	X(version, "print the version, build options and library versions")                      \
	X(help, "show help for dlk or one of its commands")

/* X(parent, name, summary) — in the order of `dlk PARENT -h`. */
#define DLK_SUBCOMMAND_LIST(X)                                                                    \
	X(data, push, "hash files into a dataset, upload what the store lacks, print its id")     \
	X(data, ls, "list the datasets of a store, with their tags")                             \
	X(data, show, "show a dataset: its files, sizes, digests and tags")                      \
	X(data, get, "download a dataset into a directory, every file verified")                   \
	X(data, serve, "serve a directory store over HTTP: what the pod of a pvc:// store runs") \
	X(pipeline, run, "run the stages, reusing those whose key an earlier run recorded") \
	X(pipeline, status, "show the stages of the last run: state, output, which were reused") \
	X(pipeline, logs, "print the log of a stage's last run")                                  \
	X(pipeline, drive, "drive a pipeline's stages as Jobs: what the pod of 'dlk pipeline run' runs")

#define X(n, s) extern const struct dlk_command_def dlk_cmd_##n;
DLK_COMMAND_LIST(X)
#undef X
#define X(p, n, s) extern const struct dlk_command_def dlk_cmd_##p##_##n;
DLK_SUBCOMMAND_LIST(X)
#undef X

/* The global options (kubectl's spelling), accepted before or after the command name; their
 * variables are the fields of the struct dlk_ctx that dispatch hands to every command. */
extern const struct dlk_option dlk_global_options[];

/* All commands in table order, ended by a row whose name is NULL. */
extern const struct dlk_command dlk_commands[];
/* All subcommands ("data push", ...), ended by a row whose name is NULL. */
extern const struct dlk_command dlk_subcommands[];
const struct dlk_command *dlk_command_find(const char *name);
/* The subcommand `word` of parent, or NULL. */
const struct dlk_command *dlk_subcommand_find(const struct dlk_command *parent, const char *word);
/* Whether cmd has subcommands (and so no run of its own). */
int dlk_command_has_subcommands(const struct dlk_command *cmd);
/* A command or subcommand by its man page's name: "train", "data-push". */
const struct dlk_command *dlk_command_find_dashed(const char *name);
/* "error: unknown command 'NAME'" with the nearest command as a hint; returns DLK_EXIT_USAGE. */
int dlk_report_unknown_command(const char *name);

/* Writes the manual page `page` ("dlk-train.1", "dlk.yaml.5": the name of man/PAGE.in) read
 * from `in` to `out` in man(7) markup, with @SYNOPSIS@, @OPTIONS@ and the other markers filled
 * from the tables. The build runs it (`dlk __man-fill`) and so does `dlk help`. Returns 0, or
 * DLK_EXIT_FAIL after printing why. */
int dlk_man_fill(FILE *in, const char *page, FILE *out);

int dlk_main(int argc, char **argv);

#endif
