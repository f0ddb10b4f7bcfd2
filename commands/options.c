#include "commands/options.h"
#include "commands/commands.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const struct dlk_option dlk_global_options[] = {
	{ OPT_STRING, 'f', "file", "FILE", "the project file", COMPLETE_FILE, NULL, "dlk.yaml" },
	{ OPT_LIST, 0, "set", "KEY=VALUE", "override a project-file field, e.g. training.epochs=3 (repeatable)",
	  COMPLETE_SPEC_KEY, NULL, NULL },
	{ OPT_STRING, 'n', "namespace", "NS", "the Kubernetes namespace", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 0, "kubeconfig", "FILE", "the kubeconfig file to use (no merging of KUBECONFIG)",
	  COMPLETE_FILE, NULL, NULL },
	{ OPT_STRING, 0, "context", "NAME", "the kubeconfig context to use", COMPLETE_NONE, NULL, NULL },
	{ OPT_STRING, 'o', "output", "FORMAT", "output format", COMPLETE_WORDS, "text json yaml wide", "text" },
	{ OPT_COUNT, 'v', "verbose", NULL, "say more; -vv also shows each API request", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 'q', "quiet", NULL, "print only results and errors", COMPLETE_NONE, NULL, NULL },
	{ OPT_BOOL, 'h', "help", NULL, "show this help", COMPLETE_NONE, NULL, NULL },
	{ OPT_END, 0, NULL, NULL, NULL, 0, NULL, NULL },
};

static size_t opt_count(const struct dlk_option *o)
{
	size_t n = 0;

	while (o && o[n].type != OPT_END)
		n++;
	return n;
}

static const struct dlk_option *find_long(const struct dlk_option *o, const char *name, size_t len, size_t *idx)
{
	for (size_t i = 0; o && o[i].type != OPT_END; i++)
		if (strlen(o[i].long_name) == len && !strncmp(o[i].long_name, name, len)) {
			*idx = i;
			return &o[i];
		}
	return NULL;
}

static const struct dlk_option *find_short(const struct dlk_option *o, char c, size_t *idx)
{
	for (size_t i = 0; o && o[i].type != OPT_END; i++)
		if (o[i].short_name && o[i].short_name == c) {
			*idx = i;
			return &o[i];
		}
	return NULL;
}

static int suggest_option(const struct dlk_command_def *cmd, const char *word, struct dlk_err *err)
{
	const char *names[128];
	char *dashed[128];
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++) {
		const struct dlk_option *o = pass ? dlk_global_options : (cmd ? cmd->options : NULL);
		for (size_t i = 0; o && o[i].type != OPT_END && n < 128; i++) {
			dashed[n] = xasprintf("--%s", o[i].long_name);
			names[n] = dashed[n];
			n++;
		}
	}
	const char *s = dlk_suggest(word, names, n);
	if (cmd)
		dlk_errf(err, DLK_EXIT_USAGE, "unknown option '%s' for 'dlk %s'", word, cmd->name);
	else
		dlk_errf(err, DLK_EXIT_USAGE, "unknown option '%s'", word);
	if (s)
		dlk_err_hint(err, "did you mean '%s'? see 'dlk %s%s-h'", s, cmd ? cmd->name : "", cmd ? " " : "");
	else
		dlk_err_hint(err, "see 'dlk %s%s-h'", cmd ? cmd->name : "", cmd ? " " : "");
	for (size_t i = 0; i < n; i++)
		free(dashed[i]);
	return -1;
}

static int word_allowed(const char *words, const char *v)
{
	size_t vl = strlen(v);
	const char *p = words;

	while (*p) {
		const char *e = strchr(p, ' ');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == vl && !strncmp(p, v, l))
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static int store(const struct dlk_option *o, struct dlk_optval *v, const char *display, const char *arg,
                 int negated, struct dlk_err *err)
{
	char *end;

	v->set = 1;
	switch (o->type) {
	case OPT_BOOL:
		v->num = !negated;
		return 0;
	case OPT_COUNT:
		v->num++;
		return 0;
	case OPT_STRING:
		if (o->complete == COMPLETE_WORDS && o->words && !word_allowed(o->words, arg)) {
			dlk_errf(err, DLK_EXIT_USAGE, "option '%s': invalid value '%s'", display, arg);
			return dlk_err_hint(err, "choose one of: %s", o->words);
		}
		v->str = arg;
		return 0;
	case OPT_INT:
		errno = 0;
		v->num = strtoll(arg, &end, 10);
		if (errno || end == arg || *end)
			return dlk_errf(err, DLK_EXIT_USAGE, "option '%s' expects an integer, got '%s'", display, arg);
		return 0;
	case OPT_LIST:
		v->list = xrealloc(v->list, (v->n_list + 1) * sizeof(*v->list));
		v->list[v->n_list++] = arg;
		return 0;
	case OPT_END:
		break;
	}
	return dlk_errf(err, DLK_EXIT_USAGE, "internal: bad option type");
}

static int takes_arg(const struct dlk_option *o)
{
	return o->type == OPT_STRING || o->type == OPT_INT || o->type == OPT_LIST;
}

int dlk_args_parse(const struct dlk_command_def *cmd, int argc, char **argv, int globals_only,
                   struct dlk_args *args, struct dlk_err *err)
{
	const struct dlk_option *copts = cmd ? cmd->options : NULL;
	int only_pos = 0;

	memset(args, 0, sizeof(*args));
	args->opts = copts;
	args->vals = xcalloc(opt_count(copts) + 1, sizeof(*args->vals));
	args->gvals = xcalloc(opt_count(dlk_global_options) + 1, sizeof(*args->gvals));
	args->pos = xcalloc((size_t)argc + 1, sizeof(*args->pos));

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const struct dlk_option *o = NULL;
		struct dlk_optval *v = NULL;
		size_t idx = 0;

		if (only_pos || a[0] != '-' || !a[1]) {
			if (globals_only) {
				/* stop at the command name: the rest belongs to the command */
				args->pos[args->n_pos++] = a;
				for (i++; i < argc; i++)
					args->pos[args->n_pos++] = argv[i];
				break;
			}
			args->pos[args->n_pos++] = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			only_pos = 1;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			int negated = 0;

			if ((o = find_long(copts, name, len, &idx)))
				v = &args->vals[idx];
			else if ((o = find_long(dlk_global_options, name, len, &idx)))
				v = &args->gvals[idx];
			else if (len > 3 && !strncmp(name, "no-", 3)) {
				if ((o = find_long(copts, name + 3, len - 3, &idx)))
					v = &args->vals[idx];
				else if ((o = find_long(dlk_global_options, name + 3, len - 3, &idx)))
					v = &args->gvals[idx];
				if (o && o->type != OPT_BOOL)
					o = NULL;
				negated = 1;
			}
			if (!o) {
				char word[256];
				snprintf(word, sizeof(word), "--%.*s", (int)len, name);
				return suggest_option(globals_only ? NULL : cmd, word, err);
			}
			if (takes_arg(o)) {
				const char *val = eq ? eq + 1 : NULL;
				if (!val) {
					if (i + 1 >= argc)
						return dlk_errf(err, DLK_EXIT_USAGE, "option '--%s' needs a value (%s)",
						                o->long_name, o->arg_name);
					val = argv[++i];
				}
				if (store(o, v, a, val, 0, err))
					return -1;
			} else {
				if (eq)
					return dlk_errf(err, DLK_EXIT_USAGE, "option '--%s' takes no value", o->long_name);
				if (store(o, v, a, NULL, negated, err))
					return -1;
			}
			continue;
		}
		/* short options, possibly bundled: -qv, -ojson, -o json */
		for (const char *p = a + 1; *p; p++) {
			char disp[3] = { '-', *p, 0 };
			if ((o = find_short(copts, *p, &idx)))
				v = &args->vals[idx];
			else if ((o = find_short(dlk_global_options, *p, &idx)))
				v = &args->gvals[idx];
			else
				return suggest_option(globals_only ? NULL : cmd, disp, err);
			if (takes_arg(o)) {
				const char *val = p[1] ? p + 1 : NULL;
				if (!val) {
					if (i + 1 >= argc)
						return dlk_errf(err, DLK_EXIT_USAGE, "option '%s' needs a value (%s)", disp,
						                o->arg_name);
					val = argv[++i];
				}
				if (store(o, v, disp, val, 0, err))
					return -1;
				break;
			}
			if (store(o, v, disp, NULL, 0, err))
				return -1;
		}
	}
	return 0;
}

void dlk_args_release(struct dlk_args *args)
{
	size_t n = opt_count(args->opts), g = opt_count(dlk_global_options);

	for (size_t i = 0; args->vals && i < n; i++)
		free(args->vals[i].list);
	for (size_t i = 0; args->gvals && i < g; i++)
		free(args->gvals[i].list);
	free(args->vals);
	free(args->gvals);
	free(args->pos);
	memset(args, 0, sizeof(*args));
}

const struct dlk_optval *dlk_opt(const struct dlk_args *args, const char *long_name)
{
	size_t idx;

	if (find_long(args->opts, long_name, strlen(long_name), &idx))
		return &args->vals[idx];
	if (find_long(dlk_global_options, long_name, strlen(long_name), &idx))
		return &args->gvals[idx];
	fprintf(stderr, "BUG: no option '--%s' in the table\n", long_name);
	abort();
}

const char *dlk_opt_str(const struct dlk_args *args, const char *long_name)
{
	return dlk_opt(args, long_name)->str;
}

long long dlk_opt_num(const struct dlk_args *args, const char *long_name)
{
	return dlk_opt(args, long_name)->num;
}

int dlk_opt_isset(const struct dlk_args *args, const char *long_name)
{
	return dlk_opt(args, long_name)->set;
}

/* ---- help ---- */

static void opt_left(char *buf, size_t n, const struct dlk_option *o)
{
	char s[8] = "    ";

	if (o->short_name)
		snprintf(s, sizeof(s), "-%c, ", o->short_name);
	if (o->type == OPT_BOOL && strcmp(o->long_name, "help"))
		snprintf(buf, n, "%s--[no-]%s", s, o->long_name);
	else if (o->arg_name)
		snprintf(buf, n, "%s--%s %s", s, o->long_name, o->arg_name);
	else
		snprintf(buf, n, "%s--%s", s, o->long_name);
}

/* Whether a command's own option of this long name hides a global one (report's -o is a file). */
static int shadowed(const struct dlk_option *shadow, const char *long_name)
{
	size_t idx;

	return shadow && find_long(shadow, long_name, strlen(long_name), &idx);
}

static void print_options(FILE *out, const struct dlk_option *o, const struct dlk_option *shadow)
{
	for (size_t i = 0; o && o[i].type != OPT_END; i++) {
		char left[96];
		if (shadowed(shadow, o[i].long_name))
			continue;
		opt_left(left, sizeof(left), &o[i]);
		fprintf(out, "  %-30s %s", left, o[i].help);
		if (o[i].complete == COMPLETE_WORDS && o[i].words)
			fprintf(out, " (%s)", o[i].words);
		if (o[i].def)
			fprintf(out, " [default: %s]", o[i].def);
		fputc('\n', out);
	}
}

void dlk_usage_print(FILE *out, const struct dlk_command_def *cmd)
{
	if (!cmd) {
		fprintf(out, "usage: dlk [global options] <command> [options] [args]\n\n");
		fprintf(out, "Train deep learning models on Kubernetes GPU clusters, and on this machine.\n\n");
		fprintf(out, "Commands:\n");
		for (size_t i = 0; dlk_commands[i]; i++)
			fprintf(out, "  %-12s %s\n", dlk_commands[i]->name, dlk_commands[i]->summary);
		fprintf(out, "\nGlobal options:\n");
		print_options(out, dlk_global_options, NULL);
		fprintf(out, "\nRun 'dlk help <command>' or 'dlk <command> -h' for a command's options,\n"
		             "'man dlk' for exit codes and files.\n");
		return;
	}
	fprintf(out, "usage: dlk %s [options]%s%s\n\n", cmd->name, cmd->usage && *cmd->usage ? " " : "",
	        cmd->usage ? cmd->usage : "");
	fprintf(out, "%s\n", cmd->description ? cmd->description : cmd->summary);
	if (cmd->options && cmd->options[0].type != OPT_END) {
		fprintf(out, "\nOptions:\n");
		print_options(out, cmd->options, NULL);
	}
	fprintf(out, "\nGlobal options:\n");
	print_options(out, dlk_global_options, cmd->options);
	if (cmd->examples)
		fprintf(out, "\nExamples:\n%s", cmd->examples);
}

/* ---- man markup ---- */

static void man_escape(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '-')
			fputs("\\-", out);
		else if (*s == '\\')
			fputs("\\e", out);
		else
			fputc(*s, out);
	}
}

void dlk_man_synopsis(FILE *out, const struct dlk_command_def *cmd)
{
	if (!cmd) {
		fputs(".B dlk\n[\\fIglobal options\\fR] \\fIcommand\\fR [\\fIoptions\\fR] [\\fIargs\\fR]\n", out);
		return;
	}
	fprintf(out, ".B dlk %s\n[\\fIoptions\\fR]", cmd->name);
	if (cmd->usage && *cmd->usage) {
		fputc(' ', out);
		man_escape(out, cmd->usage);
	}
	fputs("\n.br\n", out);
	fprintf(out, ".B dlk\\-%s\n[\\fIoptions\\fR]", cmd->name);
	if (cmd->usage && *cmd->usage) {
		fputc(' ', out);
		man_escape(out, cmd->usage);
	}
	fputc('\n', out);
}

void dlk_man_options(FILE *out, const struct dlk_option *o, const struct dlk_option *shadow)
{
	for (size_t i = 0; o && o[i].type != OPT_END; i++) {
		if (shadowed(shadow, o[i].long_name))
			continue;
		fputs(".TP\n", out);
		if (o[i].short_name)
			fprintf(out, "\\fB\\-%c\\fR, ", o[i].short_name);
		fputs("\\fB\\-\\-", out);
		if (o[i].type == OPT_BOOL && strcmp(o[i].long_name, "help"))
			fputs("[no\\-]", out);
		man_escape(out, o[i].long_name);
		fputs("\\fR", out);
		if (o[i].arg_name) {
			fputs(" \\fI", out);
			man_escape(out, o[i].arg_name);
			fputs("\\fR", out);
		}
		fputc('\n', out);
		man_escape(out, o[i].help);
		if (o[i].complete == COMPLETE_WORDS && o[i].words) {
			fputs(" (", out);
			man_escape(out, o[i].words);
			fputs(")", out);
		}
		if (o[i].def) {
			fputs("; default: ", out);
			man_escape(out, o[i].def);
		}
		fputs(".\n", out);
	}
}
