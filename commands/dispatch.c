/* Dispatch: finds the command (by argv[1], or by a `dlk-CMD` program name), parses the global
 * and command options from the tables, and runs it. Also answers the internal helpers that
 * completion scripts and the build use: __complete, __man-fill, __commands. */
#include "commands/cluster.h"
#include "commands/commands.h"
#include "commands/ctx.h"
#include "lib/render/embedded.h"
#include "lib/project/project.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct dlk_command_def *const dlk_commands[] = {
#define X(n, s, f) &dlk_cmd_##n,
	DLK_COMMAND_LIST(X)
#undef X
	NULL,
};

const struct dlk_command_def *dlk_command_find(const char *name)
{
	for (size_t i = 0; dlk_commands[i]; i++)
		if (!strcmp(dlk_commands[i]->name, name))
			return dlk_commands[i];
	return NULL;
}

/* The exit codes, documented once: `man dlk` EXIT STATUS is generated from this table. */
static const struct {
	int code;
	const char *text;
} exit_codes[] = {
	{ DLK_EXIT_OK, "success" },
	{ DLK_EXIT_FAIL, "the thing asked for failed: a job failed, a check failed, a worker crashed" },
	{ DLK_EXIT_USAGE, "usage error: unknown command or option, bad option value" },
	{ DLK_EXIT_CONFIG, "invalid input: the project file, a template, the data or the model is wrong; fix it and re-run" },
	{ DLK_EXIT_CONNECT, "cannot connect: the API server or a data source could not be reached" },
	{ DLK_EXIT_AUTH, "not authenticated or not authorised by the API server" },
	{ DLK_EXIT_NOTFOUND, "the named job or object does not exist" },
	{ DLK_EXIT_TIMEOUT, "the time given with --timeout ran out" },
	{ DLK_EXIT_EXISTS, "the job already exists (see --replace)" },
	{ DLK_EXIT_INTERRUPTED, "waiting or following was stopped with Ctrl-C; the job keeps running" },
	{ DLK_EXIT_RESTARTABLE, "a worker lost a peer or was asked to stop; restarting the gang resumes from the last checkpoint (the Job's podFailurePolicy relies on it)" },
};

static const char *command_names[64];

static size_t list_command_names(void)
{
	size_t n = 0;

	for (; dlk_commands[n] && n < 63; n++)
		command_names[n] = dlk_commands[n]->name;
	return n;
}

int dlk_report_unknown_command(const char *name)
{
	size_t n = list_command_names();
	const char *s = dlk_suggest(name, command_names, n);

	fprintf(stderr, "error: unknown command '%s'\n", name);
	if (s)
		fprintf(stderr, "hint: did you mean 'dlk %s'?\n", s);
	else
		fprintf(stderr, "hint: see 'dlk -h' for the list of commands\n");
	return DLK_EXIT_USAGE;
}

/* ---- completion: `dlk __complete WORD... CUR` prints candidates, one per line. A line ":file"
 * or ":dir" asks the shell script to complete file or directory names instead. ---- */

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

static void complete_kind(enum dlk_complete kind, const char *words, const char *cur)
{
	switch (kind) {
	case COMPLETE_FILE:
		printf(":file\n");
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
		dlk_complete_job_names(0, NULL, cur);
		break;
	case COMPLETE_NONE:
		break;
	}
}

static const struct dlk_option *lookup_any(const struct dlk_command_def *cmd, const char *word)
{
	for (int pass = 0; pass < 2; pass++) {
		const struct dlk_option *o = pass ? dlk_global_options : (cmd ? cmd->options : NULL);
		for (size_t i = 0; o && o[i].type != OPT_END; i++) {
			if (word[1] == '-' && !strcmp(word + 2, o[i].long_name))
				return &o[i];
			if (word[1] != '-' && word[1] == o[i].short_name && !word[2])
				return &o[i];
		}
	}
	return NULL;
}

static int takes_value(const struct dlk_option *o)
{
	return o && (o->type == OPT_STRING || o->type == OPT_INT || o->type == OPT_LIST);
}

static int cmd_complete(const struct dlk_command_def *fixed, int argc, char **argv)
{
	const struct dlk_command_def *cmd = fixed;
	const char *cur = argc ? argv[argc - 1] : "";
	int npos = 0;

	for (int i = 0; i < argc - 1; i++) {
		const char *w = argv[i];
		if (w[0] == '-' && w[1]) {
			if (!strchr(w, '=') && takes_value(lookup_any(cmd, w)))
				i++; /* skip the option's value */
			continue;
		}
		if (!cmd) {
			cmd = dlk_command_find(w);
			if (!cmd)
				return 0;
			if (cmd == &dlk_cmd_help) {
				/* `dlk help <TAB>` completes command names */
				continue;
			}
		} else {
			npos++;
		}
	}
	if (argc >= 2) {
		const char *prev = argv[argc - 2];
		if (prev[0] == '-' && !strchr(prev, '=')) {
			const struct dlk_option *o = lookup_any(cmd, prev);
			if (takes_value(o)) {
				complete_kind(o->complete, o->words, cur);
				return 0;
			}
		}
	}
	if (cur[0] == '-') {
		const char *eq = strchr(cur, '=');
		if (eq && cur[1] == '-') {
			char name[128];
			snprintf(name, sizeof(name), "%.*s", (int)(eq - cur), cur);
			const struct dlk_option *o = lookup_any(cmd, name);
			if (takes_value(o) && o->complete == COMPLETE_WORDS && o->words) {
				char *copy = xstrdup(o->words), *save = NULL;
				for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
					char *full = xasprintf("%s=%s", name, w);
					print_if_prefix(full, cur);
					free(full);
				}
				free(copy);
			}
			return 0;
		}
		for (int pass = 0; pass < 2; pass++) {
			const struct dlk_option *o = pass ? dlk_global_options : (cmd ? cmd->options : NULL);
			for (size_t i = 0; o && o[i].type != OPT_END; i++) {
				char *l = xasprintf("--%s", o[i].long_name);
				if (pass && cmd && lookup_any(cmd, l) != &o[i]) {
					free(l); /* the command's own option of that name replaces the global one */
					continue;
				}
				print_if_prefix(l, cur);
				free(l);
				if (o[i].type == OPT_BOOL && strcmp(o[i].long_name, "help")) {
					l = xasprintf("--no-%s", o[i].long_name);
					if (strlen(cur) > 2)
						print_if_prefix(l, cur);
					free(l);
				}
			}
		}
		return 0;
	}
	if (!cmd || cmd == &dlk_cmd_help) {
		if (cmd == &dlk_cmd_help && npos > 0)
			return 0;
		for (size_t i = 0; dlk_commands[i]; i++)
			print_if_prefix(dlk_commands[i]->name, cur);
		return 0;
	}
	if (cmd->complete_pos == COMPLETE_JOB && (cmd->max_pos < 0 || npos < cmd->max_pos))
		dlk_complete_job_names(argc - 1, argv, cur); /* honours --kubeconfig, --context, -n on the line */
	else if (cmd->max_pos < 0 || npos < cmd->max_pos)
		complete_kind(cmd->complete_pos, cmd->pos_words, cur);
	return 0;
}

/* ---- man pages: fill @SYNOPSIS@, @OPTIONS@, @GLOBAL_OPTIONS@, @COMMANDS@, @EXIT_STATUS@,
 * @VERSION@ in man/NAME.in from the tables ---- */

/* The resolved form of the example project `dlk init` writes: the defaults as the loader applies
 * them, so the manual cannot drift from the code. */
static int man_defaults(void)
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
		if (*p == '.' || *p == '\'')
			fputs("\\&", stdout);
		for (size_t i = 0; i < len; i++) {
			if (p[i] == '\\')
				fputs("\\e", stdout);
			else if (p[i] == '-')
				fputs("\\-", stdout);
			else
				fputc(p[i], stdout);
		}
		fputc('\n', stdout);
		p += len + (eol ? 1 : 0);
	}
	free(yaml);
	project_free(spec);
	return 0;
}

static int cmd_man_fill(const char *path)
{
	char line[4096], *base, *copy = xstrdup(path);
	const struct dlk_command_def *cmd = NULL;
	FILE *f = fopen(path, "r");

	if (!f) {
		perror(path);
		free(copy);
		return DLK_EXIT_FAIL;
	}
	base = basename(copy);
	if (!strncmp(base, "dlk-", 4)) {
		char name[64];
		snprintf(name, sizeof(name), "%s", base + 4);
		char *dot = strchr(name, '.');
		if (dot)
			*dot = '\0';
		cmd = dlk_command_find(name);
		if (!cmd) {
			fprintf(stderr, "error: '%s' documents no command in the command table\n", path);
			fclose(f);
			free(copy);
			return DLK_EXIT_FAIL;
		}
	}
	while (fgets(line, sizeof(line), f)) {
		char *v = strstr(line, "@VERSION@");
		if (v) {
			*v = '\0';
			printf("%s%s%s", line, DLK_VERSION, v + 9);
		} else if (!strcmp(line, "@SYNOPSIS@\n")) {
			dlk_man_synopsis(stdout, cmd);
		} else if (!strcmp(line, "@OPTIONS@\n")) {
			if (cmd)
				dlk_man_options(stdout, cmd->options, NULL);
		} else if (!strcmp(line, "@GLOBAL_OPTIONS@\n")) {
			dlk_man_options(stdout, dlk_global_options, cmd ? cmd->options : NULL);
		} else if (!strcmp(line, "@COMMANDS@\n")) {
			for (size_t i = 0; dlk_commands[i]; i++)
				printf(".TP\n.BR dlk\\-%s (1)\n%s.\n", dlk_commands[i]->name, dlk_commands[i]->summary);
		} else if (!strcmp(line, "@DEFAULTS@\n")) {
			if (man_defaults())
				goto fail;
		} else if (!strcmp(line, "@EXIT_STATUS@\n")) {
			for (size_t i = 0; i < DLK_ARRAY_SIZE(exit_codes); i++)
				printf(".TP\n.B %d\n%s.\n", exit_codes[i].code, exit_codes[i].text);
		} else {
			fputs(line, stdout);
		}
	}
	fclose(f);
	free(copy);
	return 0;
fail:
	fclose(f);
	free(copy);
	return DLK_EXIT_FAIL;
}

static void ctx_from_args(struct dlk_ctx *ctx, const struct dlk_args *args)
{
	const struct dlk_optval *sets = dlk_opt(args, "set");
	const char *nc = getenv("NO_COLOR");

	ctx->file = dlk_opt_str(args, "file") ? dlk_opt_str(args, "file") : "dlk.yaml";
	ctx->sets = sets->list;
	ctx->n_sets = sets->n_list;
	ctx->namespace_ = dlk_opt_str(args, "namespace");
	ctx->kubeconfig = dlk_opt_str(args, "kubeconfig");
	ctx->context = dlk_opt_str(args, "context");
	ctx->output = dlk_opt_str(args, "output") ? dlk_opt_str(args, "output") : "text";
	ctx->verbose = (int)dlk_opt_num(args, "verbose");
	ctx->quiet = (int)dlk_opt_num(args, "quiet");
	ctx->tty_out = isatty(STDOUT_FILENO);
	ctx->tty_err = isatty(STDERR_FILENO);
	ctx->color = ctx->tty_err && !(nc && *nc);
}

static int run_command(const struct dlk_command_def *cmd, int argc, char **argv)
{
	struct dlk_ctx ctx = { 0 };
	struct dlk_args args;
	struct dlk_err err = DLK_ERR_INIT;
	int rc;

	ctx.cmd = cmd;
	if (dlk_args_parse(cmd, argc, argv, 0, &args, &err)) {
		rc = dlk_report(NULL, &err);
		dlk_args_release(&args);
		return rc;
	}
	ctx_from_args(&ctx, &args);
	if (dlk_opt_num(&args, "help")) {
		dlk_usage_print(stdout, cmd);
		dlk_args_release(&args);
		return 0;
	}
	if (args.n_pos < cmd->min_pos || (cmd->max_pos >= 0 && args.n_pos > cmd->max_pos)) {
		if (args.n_pos > cmd->max_pos && cmd->max_pos >= 0)
			dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' takes %s, got unexpected '%s'", cmd->name,
			         cmd->max_pos == 0 ? "no arguments" : cmd->usage, args.pos[cmd->max_pos]);
		else
			dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' needs %s", cmd->name, cmd->usage);
		dlk_err_hint(&err, "see 'dlk %s -h'", cmd->name);
		rc = dlk_report(&ctx, &err);
		dlk_args_release(&args);
		return rc;
	}
	rc = cmd->run(&ctx, &args);
	dlk_args_release(&args);
	return rc;
}

int dlk_main(int argc, char **argv)
{
	const char *prog = argc > 0 ? strrchr(argv[0], '/') : NULL;
	const struct dlk_command_def *cmd = NULL;
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
		const struct dlk_command_def *fixed = NULL;
		if (argc >= 3 && !strncmp(argv[2], "dlk-", 4))
			fixed = dlk_command_find(argv[2] + 4);
		return fixed ? cmd_complete(fixed, argc - 3, argv + 3) : cmd_complete(NULL, argc - 2, argv + 2);
	}
	if (argc == 3 && !strcmp(argv[1], "__man-fill"))
		return cmd_man_fill(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "__commands")) {
		for (size_t i = 0; dlk_commands[i]; i++)
			printf("%s\n", dlk_commands[i]->name);
		return 0;
	}

	/* global options may come before the command name */
	if (dlk_args_parse(NULL, argc - 1, argv + 1, 1, &g, &err)) {
		dlk_args_release(&g);
		return dlk_report(NULL, &err);
	}
	if (g.n_pos == 0) {
		int help = (int)dlk_opt_num(&g, "help");
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
	nrest = argc - 1 - 1;
	rest = xcalloc((size_t)nrest + 1, sizeof(*rest));
	{
		int before = argc - 1 - g.n_pos, k = 0;
		for (int i = 0; i < before; i++)
			rest[k++] = argv[1 + i];
		for (int i = 1; i < g.n_pos; i++)
			rest[k++] = (char *)g.pos[i];
		nrest = k;
	}
	dlk_args_release(&g);
	rc = run_command(cmd, nrest, rest);
	free(rest);
	return rc;
}
