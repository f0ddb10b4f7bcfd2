/* Declarative options, bound to typed variables (git's parse-options).
 *
 * A command describes each option once, as a row of an OPTION_END-terminated table. The row
 * names the variable the option fills and the value that variable starts with. Dispatch resets
 * every bound variable to its row's default, parses argv against the command's table and the
 * global one, and checks what the rows declare: value types, integer ranges, durations,
 * choices, options that exclude each other, options that go with one mode of the command. The
 * same rows print `-h` and the man pages' OPTIONS and answer shell completion, so the default a
 * user reads is the value the code starts with, and a check written in a row cannot be
 * forgotten by the command.
 *
 * Example: a command that submits by default and runs here with --local, where --timeout only
 * means something when submitting and --workers only when running here:
 *
 *	enum run_mode { RUN_SUBMIT, RUN_LOCAL };    // mode 0: what the command does without a mode flag
 *	static int mode, workers;                   // mode holds an enum run_mode
 *	static double timeout_s;
 *	static const struct dlk_option run_options[] = {
 *		OPT_MODE("local", &mode, RUN_LOCAL, "run here instead of submitting"),
 *		OPT_DURATION(0, "timeout", &timeout_s, "DURATION", "give up after this long",
 *		             .modes = DLK_MODE(RUN_SUBMIT)),
 *		OPT_INT(0, "workers", &workers, "N", 1, "processes to run", .min = 1, .max = 64,
 *		        .modes = DLK_MODE(RUN_LOCAL)),
 *		OPT_END(),
 *	};
 *	const struct dlk_command_def dlk_cmd_run = { .options = run_options, .default_mode = "submitting", ... };
 *
 * `dlk run --local --workers 4` runs the command with mode == RUN_LOCAL, workers == 4 and
 * timeout_s == 0; `dlk run --workers 4` stops before it with "--workers goes with --local"
 * (exit 2); `dlk run -h` shows "--workers N   processes to run [default: 1]".
 *
 * Every usage error exits with DLK_EXIT_USAGE (2) before the command runs. */
#ifndef DLK_COMMANDS_OPTIONS_H
#define DLK_COMMANDS_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "lib/util/err.h"

/* What a row's variable is and how its value is read. */
enum dlk_option_type {
	OPTION_END = 0,
	OPTION_BOOL,     /* int: --x sets 1, --no-x sets 0 */
	OPTION_COUNT,    /* int: each -v adds one */
	OPTION_INT,      /* int: a decimal integer, within [.min, .max] when .min < .max */
	OPTION_STRING,   /* const char *: borrowed from argv */
	OPTION_ENUM,     /* int: the index in .choices of the word given (-o json -> 1) */
	OPTION_DURATION, /* double: seconds from "90s", "30m", "1h30m", "2d" or "45"; more than 0 */
	OPTION_LIST,     /* struct dlk_strlist: each occurrence appends (--set a=1 --set b=2) */
	OPTION_MODE,     /* int: --x selects the mode .def, --no-x goes back to mode 0; every MODE row
	                  * of a table fills the same variable, and two modes exclude each other */
};

/* What the shell should complete for an option's value or a positional argument. */
enum dlk_complete {
	COMPLETE_NONE = 0,
	COMPLETE_FILE,
	COMPLETE_DIR,
	COMPLETE_WORDS,    /* the fixed words: an ENUM's choices, a command's pos_words */
	COMPLETE_SPEC_KEY, /* keys of dlk.yaml, for --set */
	COMPLETE_JOB,      /* names of the dlk jobs in the namespace (asks the cluster, quickly) */
	COMPLETE_BUNDLE,   /* model bundles: *.dlk files (and directories, to look inside) */
	COMPLETE_RUN,      /* what names a run: bundles, run documents (*.json), the ids of the local
	                    * runs and the jobs in the namespace */
};

/* Row flags. */
#define OPT_NONEG        0x1u /* a BOOL without --no-x (shown as --x) */
#define OPT_HIDE_DEFAULT 0x2u /* the starting value means "not given" and is not worth printing */

/* The bit of one mode (a value of the table's MODE variable) in .modes; several are or-ed. */
#define DLK_MODE(m) (1u << (m))

struct dlk_option {
	enum dlk_option_type type;
	char short_name;         /* 0 for none */
	const char *long_name;   /* without dashes */
	void *value;             /* the variable the option fills, of the type's C type */
	const char *arg_name;    /* e.g. "FILE"; NULL for flags */
	const char *help;        /* one line, lowercase, no full stop */
	long long def;           /* BOOL, COUNT, INT, ENUM: the starting value; MODE: the mode selected */
	const char *def_str;     /* STRING: the starting value (NULL: none) */
	const char *def_doc;     /* a default the command computes, described for -h and the man page
	                          * (the variable starts NULL or 0) */
	long long min, max;      /* INT: the accepted range when min < max */
	const char *const *choices; /* ENUM: the words, indexed by value, NULL-terminated */
	unsigned excl;           /* nonzero: given together, rows of the same excl are a usage error */
	unsigned modes;          /* nonzero: the modes it goes with (DLK_MODE bits); elsewhere a usage error */
	const char *hint;        /* what to say when the option is given in a mode it does not go with */
	enum dlk_complete complete; /* STRING, LIST: what completes the value; MODE: what completes the
	                             * positional arguments in that mode (NONE: the command's complete_pos) */
	unsigned flags;          /* OPT_NONEG, OPT_HIDE_DEFAULT */
};

/* The variable of a LIST row: owned array of strings borrowed from argv, freed by
 * dlk_args_release. */
struct dlk_strlist {
	const char **v;
	size_t n;
};

/* The rows. A row's variable is checked against the type at compile time; more fields follow as
 * designated initializers: OPT_STRING(0, "templates", &dir, "DIR", NULL, "...", .complete = COMPLETE_DIR). */
#define DLK_OPT_PTR_(T, p) ((void *)(1 ? (p) : (T *)0))
#define OPT_BOOL(s, l, v, h, ...)                                                                     \
	{ .type = OPTION_BOOL, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(int, v), .help = (h), __VA_ARGS__ }
#define OPT_COUNT(s, l, v, h, ...)                                                                    \
	{ .type = OPTION_COUNT, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(int, v), .help = (h), __VA_ARGS__ }
#define OPT_INT(s, l, v, a, d, h, ...)                                                                \
	{ .type = OPTION_INT, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(int, v), .arg_name = (a), \
	  .def = (d), .help = (h), __VA_ARGS__ }
#define OPT_STRING(s, l, v, a, d, h, ...)                                                             \
	{ .type = OPTION_STRING, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(const char *, v), \
	  .arg_name = (a), .def_str = (d), .help = (h), __VA_ARGS__ }
#define OPT_ENUM(s, l, v, a, c, d, h, ...)                                                            \
	{ .type = OPTION_ENUM, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(int, v), .arg_name = (a), \
	  .choices = (c), .def = (d), .help = (h), __VA_ARGS__ }
#define OPT_DURATION(s, l, v, a, h, ...)                                                              \
	{ .type = OPTION_DURATION, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(double, v),  \
	  .arg_name = (a), .help = (h), __VA_ARGS__ }
#define OPT_LIST(s, l, v, a, h, ...)                                                                  \
	{ .type = OPTION_LIST, .short_name = (s), .long_name = (l), .value = DLK_OPT_PTR_(struct dlk_strlist, v), \
	  .arg_name = (a), .help = (h), __VA_ARGS__ }
#define OPT_MODE(l, v, m, h, ...)                                                                     \
	{ .type = OPTION_MODE, .long_name = (l), .value = DLK_OPT_PTR_(int, v), .def = (m), .help = (h), __VA_ARGS__ }
#define OPT_END() { .type = OPTION_END }

/* What a command file defines (its name and summary are in the command table, commands.h). */
struct dlk_ctx;
struct dlk_args;
struct dlk_command_def {
	const char *usage;             /* positional part of the synopsis, e.g. "[DIR]" */
	const char *description;       /* a few lines for `-h` (the man page has the long form) */
	const struct dlk_option *options; /* OPTION_END-terminated */
	const char *default_mode;      /* with MODE rows: what mode 0 is called in messages ("submitting") */
	int min_pos, max_pos;          /* positional argument count bounds (-1 = unbounded) */
	enum dlk_complete complete_pos;
	const char *pos_words;         /* COMPLETE_WORDS: space-separated */
	int (*run)(struct dlk_ctx *ctx, struct dlk_args *args);
	const char *examples;          /* lines for -h, "  $ dlk ..." */
};

/* A row of the command table. */
struct dlk_command {
	const char *name;              /* "train"; a subcommand's is "data push" */
	const char *summary;
	const struct dlk_command_def *def;
	const char *parent;            /* a subcommand's parent ("data"), else NULL */
	const char *word;              /* a subcommand's own name ("push"), else name */
};

/* What is left of argv once the options are read. */
struct dlk_args {
	const char **pos;              /* positional arguments (borrowed from argv) */
	int n_pos;
	/* private to the parser */
	const struct dlk_command *cmd;
	unsigned char *on;             /* per row (the command's, then the globals): given and not negated */
	struct dlk_err later;          /* a value error reported by dlk_args_check, after -h had its chance */
};

/* Resets every variable of cmd's table (none when cmd is NULL) and of the globals to its default,
 * then reads argv (after the command name). With globals_only, stops at the first positional
 * argument and keeps it and the rest in pos. Returns 0, or -1 with err (DLK_EXIT_USAGE): an
 * unknown option (suggesting the nearest one), a missing value, a value of the wrong type. */
int dlk_args_parse(const struct dlk_command *cmd, int argc, char **argv, int globals_only, struct dlk_args *args,
                   struct dlk_err *err);
/* What the rows declare beyond types: ranges, durations, exclusive options, options given in a
 * mode they do not go with (which also sets the MODE variable). Returns 0 or -1 with err. */
int dlk_args_check(struct dlk_args *args, struct dlk_err *err);
/* Frees the LIST variables' arrays and what the parser kept. */
void dlk_args_release(struct dlk_args *args);

/* The row of cmd's table (or the globals) that "--name" or "-c" names; NULL when none does. */
const struct dlk_option *dlk_option_find(const struct dlk_command *cmd, const char *word);
/* The option reads a value (--name VALUE, --name=VALUE, -cVALUE). */
int dlk_option_takes_arg(const struct dlk_option *o);
/* The option has a --no-name form. */
int dlk_option_negatable(const struct dlk_option *o);

/* `-h` text for a command (or the top-level help when cmd is NULL). */
void dlk_usage_print(FILE *out, const struct dlk_command *cmd);
/* Synopsis line(s) and options list in man(7) markup, for __man-fill. */
void dlk_man_synopsis(FILE *out, const struct dlk_command *cmd);
/* Rows in man markup; those whose long name is also in shadow (a command's own table, for the
 * globals it replaces) are left out. */
void dlk_man_options(FILE *out, const struct dlk_option *opts, const struct dlk_option *shadow);
/* Writes s escaped for roff: '-' as "\-", '\' as "\e". */
void dlk_man_escape(FILE *out, const char *s);

#endif
