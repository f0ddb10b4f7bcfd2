/* What every command receives: the global options, resolved once by dispatch, and the terminal
 * (ui.h prints on it). */
#ifndef DLK_COMMANDS_CTX_H
#define DLK_COMMANDS_CTX_H

#include <stddef.h>
#include <stdio.h>

#include "commands/options.h"
#include "lib/util/err.h"

struct dlk_project;

/* -o: what a command prints. */
enum dlk_output { DLK_OUTPUT_TEXT, DLK_OUTPUT_JSON, DLK_OUTPUT_YAML, DLK_OUTPUT_WIDE };
/* The words of -o, indexed by enum dlk_output, NULL-terminated. */
extern const char *const dlk_output_names[];

/* The fields up to `help` are the variables of the global options (dlk_global_options). */
struct dlk_ctx {
	const struct dlk_command *cmd;
	const char *file;            /* -f, default "dlk.yaml" */
	struct dlk_strlist sets;     /* --set */
	const char *namespace_;      /* -n, NULL when not given */
	const char *kubeconfig;      /* --kubeconfig */
	const char *context;         /* --context */
	int output;                  /* -o: an enum dlk_output */
	int verbose;                 /* -v count */
	int quiet;                   /* -q */
	int help;                    /* -h */
	int version;                 /* --version */
	int tty_out, tty_err;        /* stdout / stderr are terminals */
	int color;                   /* colour allowed on stderr (a terminal, and no NO_COLOR) */
	int color_out;               /* colour allowed on stdout (a terminal, and no NO_COLOR) */
	struct dlk_err *last_err;    /* when not NULL, dlk_report keeps the error it prints here */
	int log_json;                /* --log-format json: stderr's lines are JSON objects (ui.h) */
};

/* Loads the project file named by -f with the --set overrides. NULL with err on failure. */
struct dlk_project *dlk_ctx_load_spec(const struct dlk_ctx *ctx, struct dlk_err *err);
/* The name of the project -f names (default ./dlk.yaml): what a command about "the project"
 * takes when it is given no NAME, so that within a project's directory none is needed. A new
 * string, the caller's; NULL with err when there is no project file (DLK_EXIT_USAGE, naming
 * what to give instead: what) or it cannot be read. */
char *dlk_ctx_project_name(const struct dlk_ctx *ctx, const char *what, struct dlk_err *err);

#endif
