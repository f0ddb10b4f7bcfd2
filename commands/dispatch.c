/* Dispatch: finds the command (by argv[1], or by a `dlk-CMD` program name), parses the global
 * and command options from the tables, and runs it. Also answers the internal helpers that
 * completion scripts and the build use: __complete, __man-fill, __commands. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/render/embedded.h"
#include "lib/project/project.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct dlk_command dlk_commands[] = {
#define X(n, s) { #n, s, &dlk_cmd_##n, NULL, #n },
	DLK_COMMAND_LIST(X)
#undef X
	{ NULL, NULL, NULL, NULL, NULL },
};

const struct dlk_command dlk_subcommands[] = {
#define X(p, n, s) { #p " " #n, s, &dlk_cmd_##p##_##n, #p, #n },
	DLK_SUBCOMMAND_LIST(X)
#undef X
	{ NULL, NULL, NULL, NULL, NULL },
};

const struct dlk_command *dlk_command_find(const char *name)
{
	for (size_t i = 0; dlk_commands[i].name; i++)
		if (!strcmp(dlk_commands[i].name, name))
			return &dlk_commands[i];
	return NULL;
}

const struct dlk_command *dlk_subcommand_find(const struct dlk_command *parent, const char *word)
{
	for (size_t i = 0; parent && dlk_subcommands[i].name; i++)
		if (!strcmp(dlk_subcommands[i].parent, parent->name) && !strcmp(dlk_subcommands[i].word, word))
			return &dlk_subcommands[i];
	return NULL;
}

int dlk_command_has_subcommands(const struct dlk_command *cmd)
{
	for (size_t i = 0; cmd && !cmd->parent && dlk_subcommands[i].name; i++)
		if (!strcmp(dlk_subcommands[i].parent, cmd->name))
			return 1;
	return 0;
}

const struct dlk_command *dlk_command_find_dashed(const char *name)
{
	const char *dash = strchr(name, '-');
	const struct dlk_command *parent;
	char *p;

	if (!dash)
		return dlk_command_find(name);
	p = xstrndup(name, (size_t)(dash - name));
	parent = dlk_command_find(p);
	free(p);
	return dlk_subcommand_find(parent, dash + 1);
}

/* What every command receives; the global options fill it. */
static struct dlk_ctx ctx;

const struct dlk_option dlk_global_options[] = {
	OPT_STRING('f', "file", &ctx.file, "FILE", "dlk.yaml", "the project file", .complete = COMPLETE_FILE),
	OPT_LIST(0, "set", &ctx.sets, "KEY=VALUE", "override a project-file field, e.g. training.epochs=3 (repeatable)",
	         .complete = COMPLETE_SPEC_KEY),
	OPT_STRING('n', "namespace", &ctx.namespace_, "NS", NULL, "the Kubernetes namespace"),
	OPT_STRING(0, "kubeconfig", &ctx.kubeconfig, "FILE", NULL, "the kubeconfig file to use (no merging of KUBECONFIG)",
	           .complete = COMPLETE_FILE),
	OPT_STRING(0, "context", &ctx.context, "NAME", NULL, "the kubeconfig context to use"),
	OPT_ENUM('o', "output", &ctx.output, "FORMAT", dlk_output_names, DLK_OUTPUT_TEXT, "output format"),
	OPT_COUNT('v', "verbose", &ctx.verbose, "say more; -vv also shows each API request"),
	OPT_BOOL('q', "quiet", &ctx.quiet, "print only results and errors"),
	OPT_BOOL('h', "help", &ctx.help, "show this help", .flags = OPT_NONEG),
	/* git's habit: one line a script can read; 'dlk version' has the backends and libraries.
	 * No -V: neither git nor kubectl has one, and -v is --verbose here. */
	OPT_BOOL(0, "version", &ctx.version, "print dlk's version and exit ('dlk version' says more)",
	         .flags = OPT_NONEG),
	OPT_END(),
};

static const char *command_names[64];

static size_t list_command_names(void)
{
	size_t n = 0;

	for (; dlk_commands[n].name && n < 63; n++)
		command_names[n] = dlk_commands[n].name;
	return n;
}

int dlk_report_unknown_command(const char *name)
{
	size_t n = list_command_names();
	const char *s = dlk_suggest(name, command_names, n);

	fprintf(stderr, "error: unknown command '%s'\n", name);
	if (s) {
		fprintf(stderr, "hint: did you mean 'dlk %s'?\n", s);
	} else {
		/* nothing near: the commands there are, as an unknown layer or key gets */
		fprintf(stderr, "hint: the commands are");
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, "%s %s", i ? "," : "", command_names[i]);
		fprintf(stderr, " (see 'dlk -h')\n");
	}
	return DLK_EXIT_USAGE;
}

/* "error: 'dlk data' has no command 'pus'", with the nearest one. */
static int report_unknown_subcommand(const struct dlk_command *parent, const char *word)
{
	const char *names[32];
	size_t n = 0;
	const char *s;

	for (size_t i = 0; dlk_subcommands[i].name && n < 32; i++)
		if (!strcmp(dlk_subcommands[i].parent, parent->name))
			names[n++] = dlk_subcommands[i].word;
	s = dlk_suggest(word, names, n);
	fprintf(stderr, "error: 'dlk %s' has no command '%s'\n", parent->name, word);
	if (s) {
		fprintf(stderr, "hint: did you mean 'dlk %s %s'?\n", parent->name, s);
	} else {
		fprintf(stderr, "hint: its commands are");
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, "%s %s", i ? "," : "", names[i]);
		fprintf(stderr, " (see 'dlk %s -h')\n", parent->name);
	}
	return DLK_EXIT_USAGE;
}

/* ---- completion: `dlk __complete WORD... CUR` prints candidates, one per line. A line ":file"
 * or ":dir" asks the shell script to complete file or directory names as well; ":file .dlk .json"
 * only the files with those endings (and directories, to look inside). ---- */

static void print_if_prefix(const char *cand, const char *cur)
{
	if (!strncmp(cand, cur, strlen(cur)))
		printf("%s\n", cand);
}

static void complete_words(const char *words, const char *cur)
{
	char *copy = xstrdup(words), *save = NULL;

	for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
		print_if_prefix(w, cur);
	free(copy);
}

/* argc/argv: the completion line before cur, for the options that say where to look (-f,
 * --kubeconfig, --context, -n) */
static void complete_kind(enum dlk_complete kind, const char *words, int argc, char **argv, const char *cur)
{
	switch (kind) {
	case COMPLETE_FILE:
		printf(":file\n");
		break;
	case COMPLETE_BUNDLE:
		printf(":file .dlk\n");
		break;
	case COMPLETE_RUN:
		/* the files first: asking the cluster may take its second, and a file needs none */
		printf(":file .dlk .json\n");
		fflush(stdout);
		dlk_complete_run_ids(argc, argv, cur);
		dlk_complete_job_names(argc, argv, cur);
		break;
	case COMPLETE_DIR:
		printf(":dir\n");
		break;
	case COMPLETE_WORDS:
		if (words)
			complete_words(words, cur);
		break;
	case COMPLETE_SPEC_KEY: {
		/* the loader's key paths, in --set's spelling: list items by index ("model.layers.0.dense"),
		 * and nothing for free-form map keys (labels.KEY: the user names those) */
		const char *const *keys = project_known_keys();
		for (size_t i = 0; keys && keys[i]; i++) {
			struct dlk_buf b = DLK_BUF_INIT;
			if (strstr(keys[i], ".KEY"))
				continue;
			for (const char *p = keys[i]; *p; p++) {
				if (!strncmp(p, "[]", 2)) {
					dlk_buf_adds(&b, ".0");
					p++;
				} else {
					dlk_buf_addc(&b, *p);
				}
			}
			dlk_buf_addc(&b, '=');
			print_if_prefix(b.data, cur);
			dlk_buf_release(&b);
		}
		break;
	}
	case COMPLETE_JOB:
		dlk_complete_job_names(argc, argv, cur);
		break;
	case COMPLETE_NONE:
		break;
	}
}

static void complete_choices(const char *prefix, const char *const *choices, const char *cur)
{
	for (size_t i = 0; choices[i]; i++) {
		char *full = xasprintf("%s%s", prefix, choices[i]);
		print_if_prefix(full, cur);
		free(full);
	}
}

static int takes_value(const struct dlk_option *o)
{
	return o && dlk_option_takes_arg(o);
}

static int cmd_complete(const struct dlk_command *fixed, int argc, char **argv)
{
	const struct dlk_command *cmd = fixed, *help_parent = NULL;
	const char *cur = argc ? argv[argc - 1] : "";
	enum dlk_complete mode_pos = COMPLETE_NONE;
	int npos = 0;

	for (int i = 0; i < argc - 1; i++) {
		const char *w = argv[i];
		if (w[0] == '-' && w[1]) {
			const struct dlk_option *o = strchr(w, '=') ? NULL : dlk_option_find(cmd, w);
			if (takes_value(o))
				i++; /* skip the option's value */
			else if (o && o->type == OPTION_MODE && strncmp(w, "--no-", 5))
				mode_pos = o->complete; /* serve --local takes bundles, serve NAME a job */
			continue;
		}
		if (!cmd) {
			cmd = dlk_command_find(w);
			if (!cmd)
				return 0;
			if (cmd->def == &dlk_cmd_help) {
				/* `dlk help <TAB>` completes command names */
				continue;
			}
		} else if (dlk_command_has_subcommands(cmd)) {
			cmd = dlk_subcommand_find(cmd, w);
			if (!cmd)
				return 0;
		} else {
			if (cmd->def == &dlk_cmd_help && npos == 0 && dlk_command_has_subcommands(dlk_command_find(w)))
				help_parent = dlk_command_find(w);
			npos++;
		}
	}
	if (argc >= 2) {
		const char *prev = argv[argc - 2];
		if (prev[0] == '-' && !strchr(prev, '=')) {
			const struct dlk_option *o = dlk_option_find(cmd, prev);
			if (takes_value(o)) {
				if (o->type == OPTION_ENUM)
					complete_choices("", o->choices, cur);
				else
					complete_kind(o->complete, NULL, argc - 1, argv, cur);
				return 0;
			}
		}
	}
	if (cur[0] == '-') {
		const char *eq = strchr(cur, '=');
		if (eq && cur[1] == '-') {
			char name[128];
			snprintf(name, sizeof(name), "%.*s", (int)(eq - cur), cur);
			const struct dlk_option *o = dlk_option_find(cmd, name);
			if (takes_value(o) && o->type == OPTION_ENUM) {
				char *prefix = xasprintf("%s=", name);
				complete_choices(prefix, o->choices, cur);
				free(prefix);
			}
			return 0;
		}
		for (int pass = 0; pass < 2; pass++) {
			const struct dlk_option *o = pass ? dlk_global_options : (cmd ? cmd->def->options : NULL);
			for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
				char *l = xasprintf("--%s", o[i].long_name);
				if (pass && dlk_option_find(cmd, l) != &o[i]) {
					free(l); /* the command's own row of that name replaces the global one */
					continue;
				}
				print_if_prefix(l, cur);
				free(l);
				if (dlk_option_negatable(&o[i])) {
					l = xasprintf("--no-%s", o[i].long_name);
					if (strlen(cur) > 2)
						print_if_prefix(l, cur);
					free(l);
				}
			}
		}
		return 0;
	}
	if (cmd && dlk_command_has_subcommands(cmd)) {
		for (size_t i = 0; dlk_subcommands[i].name; i++)
			if (!strcmp(dlk_subcommands[i].parent, cmd->name))
				print_if_prefix(dlk_subcommands[i].word, cur);
		return 0;
	}
	if (!cmd || cmd->def == &dlk_cmd_help) {
		if (cmd && npos == 1 && help_parent) {
			/* `dlk help data <TAB>` completes data's commands */
			for (size_t i = 0; dlk_subcommands[i].name; i++)
				if (!strcmp(dlk_subcommands[i].parent, help_parent->name))
					print_if_prefix(dlk_subcommands[i].word, cur);
			return 0;
		}
		if (cmd && npos > 0)
			return 0;
		for (size_t i = 0; dlk_commands[i].name; i++)
			print_if_prefix(dlk_commands[i].name, cur);
		if (cmd) { /* `dlk help <TAB>`: the pages that are not a command's */
			print_if_prefix("dlk", cur);
			print_if_prefix("dlk.yaml", cur);
		}
		return 0;
	}
	/* the job names honour --kubeconfig, --context, -n on the line; run ids -f */
	if (cmd->def->max_pos < 0 || npos < cmd->def->max_pos)
		complete_kind(mode_pos != COMPLETE_NONE ? mode_pos : cmd->def->complete_pos, cmd->def->pos_words, argc - 1,
		              argv, cur);
	return 0;
}

/* ---- man pages: fill @SYNOPSIS@, @OPTIONS@, @GLOBAL_OPTIONS@, @COMMANDS@, @EXIT_STATUS@,
 * @VERSION@ in man/NAME.in from the tables ---- */

/* The resolved form of the example project `dlk init` writes: the defaults as the loader applies
 * them, so the manual cannot drift from the code. */
static int man_defaults(FILE *out)
{
	const struct dlk_embedded *ex = dlk_embedded_find(dlk_builtin_files, "examples/mlp/dlk.yaml");
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec;
	char *yaml;

	if (!ex || !(spec = project_load_mem(ex->data, ex->len, "dlk.yaml", NULL, 0, &err))) {
		fprintf(stderr, "error: cannot load the built-in example: %s\n", err.msg);
		return -1;
	}
	yaml = project_dump_yaml(spec);
	for (const char *p = yaml; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char *line = xstrndup(p, len);
		/* a line of text must not start like a roff request */
		if (*p == '.' || *p == '\'')
			fputs("\\&", out);
		dlk_man_escape(out, line);
		fputc('\n', out);
		free(line);
		p += len + (eol ? 1 : 0);
	}
	free(yaml);
	project_free(spec);
	return 0;
}

int dlk_man_fill(FILE *in, const char *page, FILE *out)
{
	char line[4096];
	const struct dlk_command *cmd = NULL;

	if (!strncmp(page, "dlk-", 4)) {
		char name[64];
		snprintf(name, sizeof(name), "%s", page + 4);
		char *dot = strchr(name, '.');
		if (dot)
			*dot = '\0';
		cmd = dlk_command_find_dashed(name);
		if (!cmd) {
			fprintf(stderr, "error: '%s' documents no command in the command table\n", page);
			return DLK_EXIT_FAIL;
		}
	}
	while (fgets(line, sizeof(line), in)) {
		char *v = strstr(line, "@VERSION@");
		if (v) {
			*v = '\0';
			fprintf(out, "%s%s%s", line, DLK_VERSION, v + 9);
		} else if (!strcmp(line, "@SYNOPSIS@\n")) {
			dlk_man_synopsis(out, cmd);
		} else if (!strcmp(line, "@OPTIONS@\n")) {
			if (cmd)
				dlk_man_options(out, cmd->def->options, NULL);
		} else if (!strcmp(line, "@GLOBAL_OPTIONS@\n")) {
			dlk_man_options(out, dlk_global_options, cmd ? cmd->def->options : NULL);
		} else if (!strcmp(line, "@COMMANDS@\n")) {
			for (size_t i = 0; dlk_commands[i].name; i++)
				fprintf(out, ".TP\n.BR dlk\\-%s (1)\n%s.\n", dlk_commands[i].name, dlk_commands[i].summary);
		} else if (!strcmp(line, "@SUBCOMMANDS@\n")) {
			for (size_t i = 0; cmd && dlk_subcommands[i].name; i++)
				if (!strcmp(dlk_subcommands[i].parent, cmd->name))
					fprintf(out, ".TP\n.BR dlk\\-%s\\-%s (1)\n%s.\n", cmd->name, dlk_subcommands[i].word,
					        dlk_subcommands[i].summary);
		} else if (!strcmp(line, "@DEFAULTS@\n")) {
			if (man_defaults(out))
				return DLK_EXIT_FAIL;
		} else if (!strcmp(line, "@EXIT_STATUS@\n")) {
#define X(name, code, text) fprintf(out, ".TP\n.B %d\n%s.\n", code, text);
			DLK_EXIT_CODES(X)
#undef X
		} else {
			fputs(line, out);
		}
	}
	return 0;
}

static int cmd_man_fill(const char *path)
{
	char *copy = xstrdup(path);
	FILE *f = fopen(path, "r");
	int rc;

	if (!f) {
		perror(path);
		free(copy);
		return DLK_EXIT_FAIL;
	}
	rc = dlk_man_fill(f, basename(copy), stdout);
	fclose(f);
	free(copy);
	return rc;
}

static int run_command(const struct dlk_command *cmd, int argc, char **argv);

/* argv without its first positional argument (the one globals-only parsing stopped at), for the
 * command that word names: the options before it, then everything after it. The caller frees. */
static char **without_word(int argc, char **argv, const struct dlk_args *g, int *n)
{
	char **rest = xcalloc((size_t)argc + 1, sizeof(*rest));
	int before = argc - g->n_pos, k = 0;

	for (int i = 0; i < before; i++)
		rest[k++] = argv[i];
	for (int i = 1; i < g->n_pos; i++)
		rest[k++] = (char *)g->pos[i];
	*n = k;
	return rest;
}

/* A command with subcommands: the first word names one, and it runs with the rest. */
static int run_parent(const struct dlk_command *cmd, int argc, char **argv)
{
	const struct dlk_command *sub;
	struct dlk_args g;
	struct dlk_err err = DLK_ERR_INIT;
	char **rest;
	int n, rc;

	if (dlk_args_parse(NULL, argc, argv, 1, &g, &err)) {
		dlk_args_release(&g);
		return dlk_report(NULL, &err);
	}
	if (g.n_pos == 0) {
		struct dlk_buf words = DLK_BUF_INIT;
		dlk_args_release(&g);
		if (ctx.help) {
			dlk_usage_print(stdout, cmd);
			return 0;
		}
		if (ctx.version) {
			printf("dlk %s\n", DLK_VERSION);
			return 0;
		}
		for (size_t i = 0; dlk_subcommands[i].name; i++)
			if (!strcmp(dlk_subcommands[i].parent, cmd->name))
				dlk_buf_addf(&words, "%s%s", words.len ? " " : "", dlk_subcommands[i].word);
		dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' needs one of its commands: %s", cmd->name, words.data);
		dlk_err_hint(&err, "see 'dlk %s -h'", cmd->name);
		dlk_buf_release(&words);
		return dlk_report(NULL, &err);
	}
	sub = dlk_subcommand_find(cmd, g.pos[0]);
	if (!sub) {
		rc = report_unknown_subcommand(cmd, g.pos[0]);
		dlk_args_release(&g);
		return rc;
	}
	rest = without_word(argc, argv, &g, &n);
	dlk_args_release(&g);
	rc = run_command(sub, n, rest);
	free(rest);
	return rc;
}

static int run_command(const struct dlk_command *cmd, int argc, char **argv)
{
	const struct dlk_command_def *def = cmd->def;
	const char *nc = getenv("NO_COLOR");
	struct dlk_args args;
	struct dlk_err err = DLK_ERR_INIT;
	int rc;

	if (dlk_command_has_subcommands(cmd))
		return run_parent(cmd, argc, argv);

	if (dlk_args_parse(cmd, argc, argv, 0, &args, &err)) {
		rc = dlk_report(NULL, &err);
		dlk_args_release(&args);
		return rc;
	}
	ctx.cmd = cmd;
	ctx.tty_out = isatty(STDOUT_FILENO);
	ctx.tty_err = isatty(STDERR_FILENO);
	/* NO_COLOR (no-color.org): set and not empty, no colour anywhere */
	ctx.color = ctx.tty_err && !(nc && *nc);
	ctx.color_out = ctx.tty_out && !(nc && *nc);
	if (ctx.help) {
		dlk_usage_print(stdout, cmd);
		dlk_args_release(&args);
		return 0;
	}
	if (ctx.version) {
		printf("dlk %s\n", DLK_VERSION);
		dlk_args_release(&args);
		return 0;
	}
	if (dlk_args_check(&args, &err)) {
		rc = dlk_report(&ctx, &err);
		dlk_args_release(&args);
		return rc;
	}
	if (args.n_pos < def->min_pos || (def->max_pos >= 0 && args.n_pos > def->max_pos)) {
		if (args.n_pos > def->max_pos && def->max_pos >= 0)
			dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' takes %s, got unexpected '%s'", cmd->name,
			         def->max_pos == 0 ? "no arguments" : def->usage, args.pos[def->max_pos]);
		else
			dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' needs %s", cmd->name, def->usage);
		dlk_err_hint(&err, "see 'dlk %s -h'", cmd->name);
		rc = dlk_report(&ctx, &err);
		dlk_args_release(&args);
		return rc;
	}
	rc = def->run(&ctx, &args);
	dlk_args_release(&args);
	return rc;
}

int dlk_main(int argc, char **argv)
{
	const char *prog = argc > 0 ? strrchr(argv[0], '/') : NULL;
	const struct dlk_command *cmd = NULL;
	struct dlk_args g;
	struct dlk_err err = DLK_ERR_INIT;
	char **rest;
	int nrest, rc;

	prog = prog ? prog + 1 : (argc > 0 ? argv[0] : "dlk");
	/* busybox style: a program named dlk-train is `dlk train` */
	if (!strncmp(prog, "dlk-", 4)) {
		cmd = dlk_command_find(prog + 4);
		if (!cmd)
			return dlk_report_unknown_command(prog + 4);
		if (argc >= 2 && !strcmp(argv[1], "__complete"))
			return cmd_complete(cmd, argc - 2, argv + 2);
		return run_command(cmd, argc - 1, argv + 1);
	}
	if (argc >= 2 && !strcmp(argv[1], "__complete")) {
		const struct dlk_command *fixed = NULL;
		if (argc >= 3 && !strncmp(argv[2], "dlk-", 4))
			fixed = dlk_command_find(argv[2] + 4);
		return fixed ? cmd_complete(fixed, argc - 3, argv + 3) : cmd_complete(NULL, argc - 2, argv + 2);
	}
	if (argc == 3 && !strcmp(argv[1], "__man-fill"))
		return cmd_man_fill(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "__commands")) {
		for (size_t i = 0; dlk_commands[i].name; i++)
			printf("%s\n", dlk_commands[i].name);
		return 0;
	}
	/* every subcommand as its man page names it: data-push */
	if (argc == 2 && !strcmp(argv[1], "__subcommands")) {
		for (size_t i = 0; dlk_subcommands[i].name; i++)
			printf("%s-%s\n", dlk_subcommands[i].parent, dlk_subcommands[i].word);
		return 0;
	}

	/* global options may come before the command name */
	if (dlk_args_parse(NULL, argc - 1, argv + 1, 1, &g, &err)) {
		dlk_args_release(&g);
		return dlk_report(NULL, &err);
	}
	if (g.n_pos == 0 && ctx.version && !ctx.help) {
		printf("dlk %s\n", DLK_VERSION);
		dlk_args_release(&g);
		return 0;
	}
	if (g.n_pos == 0) {
		int help = ctx.help;
		dlk_usage_print(help ? stdout : stderr, NULL);
		dlk_args_release(&g);
		return help ? 0 : DLK_EXIT_USAGE;
	}
	cmd = dlk_command_find(g.pos[0]);
	if (!cmd) {
		rc = dlk_report_unknown_command(g.pos[0]);
		dlk_args_release(&g);
		return rc;
	}
	/* re-parse: the globals before the command name, then everything after it */
	rest = without_word(argc - 1, argv + 1, &g, &nrest);
	dlk_args_release(&g);
	rc = run_command(cmd, nrest, rest);
	free(rest);
	return rc;
}
