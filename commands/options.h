/* Declarative options: each command describes its options once, in a table; parsing, `-h`,
 * completion answers and the man pages' OPTIONS sections are all produced from it. */
#ifndef DLK_COMMANDS_OPTIONS_H
#define DLK_COMMANDS_OPTIONS_H

#include <stdio.h>

#include "lib/util/err.h"

enum dlk_opt_type {
	OPT_END = 0,
	OPT_BOOL,    /* --x / --no-x */
	OPT_COUNT,   /* -v -v -v */
	OPT_STRING,
	OPT_INT,
	OPT_LIST,    /* repeatable string: --set a=b --set c=d */
};

/* What the shell should complete for an option's value or a positional argument. */
enum dlk_complete {
	COMPLETE_NONE = 0,
	COMPLETE_FILE,
	COMPLETE_DIR,
	COMPLETE_WORDS, /* the fixed words in `words` */
	COMPLETE_SPEC_KEY, /* keys of dlk.yaml, for --set */
	COMPLETE_JOB,      /* names of the dlk jobs in the namespace (asks the cluster, quickly) */
};

struct dlk_option {
	enum dlk_opt_type type;
	char short_name;         /* 0 for none */
	const char *long_name;   /* without dashes */
	const char *arg_name;    /* e.g. "FILE"; NULL for flags */
	const char *help;        /* one line, lowercase, no full stop */
	enum dlk_complete complete;
	const char *words;       /* space-separated choices; also validated for OPT_STRING */
	const char *def;         /* default shown in help (documentation only) */
};

struct dlk_optval {
	int set;                 /* given on the command line */
	long long num;           /* OPT_BOOL (0/1), OPT_COUNT, OPT_INT */
	const char *str;         /* OPT_STRING: borrowed from argv */
	const char **list;       /* OPT_LIST: owned array of borrowed strings */
	size_t n_list;
};

struct dlk_args {
	const struct dlk_option *opts;     /* the command's table */
	struct dlk_optval *vals;           /* one per entry of opts */
	struct dlk_optval *gvals;          /* one per entry of dlk_global_options */
	const char **pos;                  /* positional arguments (borrowed) */
	int n_pos;
};

struct dlk_ctx;
struct dlk_command_def {
	const char *name;
	const char *summary;
	const char *usage;             /* positional part of the synopsis, e.g. "[DIR]" */
	const char *description;       /* a few lines for `-h` (the man page has the long form) */
	const struct dlk_option *options; /* OPT_END-terminated */
	int min_pos, max_pos;          /* positional argument count bounds (-1 = unbounded) */
	enum dlk_complete complete_pos;
	const char *pos_words;
	int (*run)(struct dlk_ctx *ctx, struct dlk_args *args);
	const char *examples;          /* lines for -h and the man page, "$ dlk ..." */
};

/* Global options, accepted before or after the command name (kubectl's spelling). */
extern const struct dlk_option dlk_global_options[];

/* Parses argv (after the command name) against cmd->options and the globals. On a usage error
 * returns -1 with err (code DLK_EXIT_USAGE) naming the option and suggesting the nearest one. */
int dlk_args_parse(const struct dlk_command_def *cmd, int argc, char **argv, int parse_globals_only,
                   struct dlk_args *args, struct dlk_err *err);
void dlk_args_release(struct dlk_args *args);

/* Lookups by long name; abort() on a name not in the table (a programming error). */
const struct dlk_optval *dlk_opt(const struct dlk_args *args, const char *long_name);
const char *dlk_opt_str(const struct dlk_args *args, const char *long_name);
long long dlk_opt_num(const struct dlk_args *args, const char *long_name);
int dlk_opt_isset(const struct dlk_args *args, const char *long_name);

/* `-h` text for a command (or the top-level help when cmd is NULL). */
void dlk_usage_print(FILE *out, const struct dlk_command_def *cmd);
/* Synopsis line(s) and options list in man(7) markup, for __man-fill. */
void dlk_man_synopsis(FILE *out, const struct dlk_command_def *cmd);
/* Options in man markup; those whose long name is also in shadow (a command's own table, for the
 * globals it replaces) are left out. */
void dlk_man_options(FILE *out, const struct dlk_option *opts, const struct dlk_option *shadow);

#endif
