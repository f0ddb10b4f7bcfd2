#include "commands/options.h"
#include "commands/commands.h"
#include "lib/util/buf.h"
#include "lib/util/duration.h"
#include "lib/util/mem.h"
#include "lib/util/suggest.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static size_t opt_count(const struct dlk_option *o)
{
	size_t n = 0;

	while (o && o[n].type != OPTION_END)
		n++;
	return n;
}

static const struct dlk_option *cmd_options(const struct dlk_command *cmd)
{
	return cmd ? cmd->def->options : NULL;
}

int dlk_option_takes_arg(const struct dlk_option *o)
{
	return o->type == OPTION_STRING || o->type == OPTION_INT || o->type == OPTION_LIST ||
	       o->type == OPTION_ENUM || o->type == OPTION_DURATION;
}

int dlk_option_negatable(const struct dlk_option *o)
{
	return (o->type == OPTION_BOOL || o->type == OPTION_MODE) && !(o->flags & OPT_NONEG);
}

static const struct dlk_option *find_long(const struct dlk_option *o, const char *name, size_t len, size_t *idx)
{
	for (size_t i = 0; o && o[i].type != OPTION_END; i++)
		if (strlen(o[i].long_name) == len && !strncmp(o[i].long_name, name, len)) {
			*idx = i;
			return &o[i];
		}
	return NULL;
}

static const struct dlk_option *find_short(const struct dlk_option *o, char c, size_t *idx)
{
	for (size_t i = 0; o && o[i].type != OPTION_END; i++)
		if (o[i].short_name && o[i].short_name == c) {
			*idx = i;
			return &o[i];
		}
	return NULL;
}

const struct dlk_option *dlk_option_find(const struct dlk_command *cmd, const char *word)
{
	for (int pass = 0; pass < 2; pass++) {
		const struct dlk_option *o = pass ? dlk_global_options : cmd_options(cmd);
		for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
			if (word[1] == '-' && !strcmp(word + 2, o[i].long_name))
				return &o[i];
			if (word[1] != '-' && word[1] == o[i].short_name && !word[2])
				return &o[i];
		}
	}
	return NULL;
}

static int suggest_option(const struct dlk_command *cmd, const char *word, struct dlk_err *err)
{
	const char *names[128] = {0};
	char *dashed[128];
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++) {
		const struct dlk_option *o = pass ? dlk_global_options : cmd_options(cmd);
		for (size_t i = 0; o && o[i].type != OPTION_END && n < 128; i++) {
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

static void choices_text(struct dlk_buf *b, const char *const *c)
{
	for (size_t i = 0; c && c[i]; i++)
		dlk_buf_addf(b, "%s%s", i ? " " : "", c[i]);
}

static int store(struct dlk_args *args, const struct dlk_option *o, unsigned char *on, const char *display,
                 const char *arg, int negated, struct dlk_err *err)
{
	char *end;
	long long n;

	/* value errors that need no more reading wait for dlk_args_check: `dlk CMD --bad -h` shows help */
	*on = !negated;
	switch (o->type) {
	case OPTION_BOOL:
	case OPTION_MODE:
		/* a MODE row's choice is settled by dlk_args_check, once every row has been read */
		if (o->type == OPTION_BOOL)
			*(int *)o->value = !negated;
		return 0;
	case OPTION_COUNT:
		++*(int *)o->value;
		return 0;
	case OPTION_STRING:
		*(const char **)o->value = arg;
		return 0;
	case OPTION_ENUM:
		for (int i = 0; o->choices[i]; i++)
			if (!strcmp(o->choices[i], arg)) {
				*(int *)o->value = i;
				return 0;
			}
		{
			struct dlk_buf b = DLK_BUF_INIT;
			choices_text(&b, o->choices);
			dlk_errf(err, DLK_EXIT_USAGE, "option '%s': invalid value '%s'", display, arg);
			dlk_err_hint(err, "choose one of: %s", b.data);
			dlk_buf_release(&b);
		}
		return -1;
	case OPTION_INT:
		errno = 0;
		n = strtoll(arg, &end, 10);
		if (errno || end == arg || *end)
			return dlk_errf(err, DLK_EXIT_USAGE, "option '%s' expects an integer, got '%s'", display, arg);
		if (o->min < o->max && n < o->min && o->max == INT_MAX) {
			if (!args->later.code)
				dlk_errf(&args->later, DLK_EXIT_USAGE, "--%s must be %lld or more, not %lld", o->long_name,
				         o->min, n);
		} else if ((o->min < o->max && (n < o->min || n > o->max)) || n < INT_MIN || n > INT_MAX) {
			long long lo = o->min < o->max ? o->min : INT_MIN, hi = o->min < o->max ? o->max : INT_MAX;
			if (!args->later.code)
				dlk_errf(&args->later, DLK_EXIT_USAGE, "--%s: expected %lld to %lld, not %lld", o->long_name,
				         lo, hi, n);
		} else {
			*(int *)o->value = (int)n;
		}
		return 0;
	case OPTION_DURATION: {
		double d = dlk_duration_parse(arg);
		if (d > 0) {
			*(double *)o->value = d;
		} else if (!args->later.code) {
			dlk_errf(&args->later, DLK_EXIT_USAGE, "--%s '%s' is not a duration", o->long_name, arg);
			dlk_err_hint(&args->later, "write it like 90s, 30m or 1h30m");
		}
		return 0;
	}
	case OPTION_LIST: {
		struct dlk_strlist *l = o->value;
		l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
		l->v[l->n++] = arg;
		return 0;
	}
	case OPTION_END:
		break;
	}
	return dlk_errf(err, DLK_EXIT_USAGE, "internal: bad option type");
}

/* Every variable back to the value its row names. */
static void reset(const struct dlk_option *o)
{
	for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
		switch (o[i].type) {
		case OPTION_BOOL:
		case OPTION_COUNT:
		case OPTION_INT:
		case OPTION_ENUM:
			*(int *)o[i].value = (int)o[i].def;
			break;
		case OPTION_MODE:
			*(int *)o[i].value = 0;
			break;
		case OPTION_STRING:
			*(const char **)o[i].value = o[i].def_str;
			break;
		case OPTION_DURATION:
			*(double *)o[i].value = 0;
			break;
		case OPTION_LIST: {
			struct dlk_strlist *l = o[i].value;
			free(l->v);
			l->v = NULL;
			l->n = 0;
			break;
		}
		case OPTION_END:
			break;
		}
	}
}

int dlk_args_parse(const struct dlk_command *cmd, int argc, char **argv, int globals_only,
                   struct dlk_args *args, struct dlk_err *err)
{
	const struct dlk_option *copts = cmd_options(cmd);
	size_t nc = opt_count(copts);
	int only_pos = 0;

	memset(args, 0, sizeof(*args));
	args->cmd = cmd;
	args->on = xcalloc(nc + opt_count(dlk_global_options) + 1, 1);
	args->pos = xcalloc((size_t)argc + 1, sizeof(*args->pos));
	reset(copts);
	reset(dlk_global_options);

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const struct dlk_option *o = NULL;
		unsigned char *on = NULL;
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
				on = &args->on[idx];
			else if ((o = find_long(dlk_global_options, name, len, &idx)))
				on = &args->on[nc + idx];
			else if (len > 3 && !strncmp(name, "no-", 3)) {
				if ((o = find_long(copts, name + 3, len - 3, &idx)))
					on = &args->on[idx];
				else if ((o = find_long(dlk_global_options, name + 3, len - 3, &idx)))
					on = &args->on[nc + idx];
				if (o && !dlk_option_negatable(o))
					o = NULL;
				negated = 1;
			}
			if (!o) {
				char word[256];
				snprintf(word, sizeof(word), "--%.*s", (int)len, name);
				return suggest_option(globals_only ? NULL : cmd, word, err);
			}
			if (dlk_option_takes_arg(o)) {
				const char *val = eq ? eq + 1 : NULL;
				if (!val) {
					if (i + 1 >= argc)
						return dlk_errf(err, DLK_EXIT_USAGE, "option '--%s' needs a value (%s)",
						                o->long_name, o->arg_name);
					val = argv[++i];
				}
				if (store(args, o, on, a, val, 0, err))
					return -1;
			} else {
				if (eq)
					return dlk_errf(err, DLK_EXIT_USAGE, "option '--%s' takes no value", o->long_name);
				if (store(args, o, on, a, NULL, negated, err))
					return -1;
			}
			continue;
		}
		/* short options, possibly bundled: -qv, -ojson, -o json */
		for (const char *p = a + 1; *p; p++) {
			char disp[3] = { '-', *p, 0 };
			if ((o = find_short(copts, *p, &idx)))
				on = &args->on[idx];
			else if ((o = find_short(dlk_global_options, *p, &idx)))
				on = &args->on[nc + idx];
			else
				return suggest_option(globals_only ? NULL : cmd, disp, err);
			if (dlk_option_takes_arg(o)) {
				const char *val = p[1] ? p + 1 : NULL;
				if (!val) {
					if (i + 1 >= argc)
						return dlk_errf(err, DLK_EXIT_USAGE, "option '%s' needs a value (%s)", disp,
						                o->arg_name);
					val = argv[++i];
				}
				if (store(args, o, on, disp, val, 0, err))
					return -1;
				break;
			}
			if (store(args, o, on, disp, NULL, 0, err))
				return -1;
		}
	}
	return 0;
}

static int same_excl(const struct dlk_option *o, const void *key)
{
	const struct dlk_option *k = key;
	return k->type == OPTION_MODE ? o->type == OPTION_MODE : o->excl == k->excl;
}

static int same_modes(const struct dlk_option *o, const void *key)
{
	return o->modes == ((const struct dlk_option *)key)->modes;
}

static int check_table(const struct dlk_command *cmd, const struct dlk_option *o, const unsigned char *on,
                       struct dlk_err *err)
{
	const struct dlk_option *mode_row = NULL;
	struct dlk_buf b = DLK_BUF_INIT;
	int mode = 0;

	/* exclusive rows: MODE rows among themselves, and rows of one nonzero excl */
	for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
		if (!on[i] || (o[i].type != OPTION_MODE && !o[i].excl))
			continue;
		for (size_t j = i + 1; o[j].type != OPTION_END; j++) {
			if (!on[j] || !same_excl(&o[j], &o[i]))
				continue;
			/* the two given, not every row of the group */
			dlk_errf(err, DLK_EXIT_USAGE, "--%s and --%s exclude each other", o[i].long_name, o[j].long_name);
			dlk_buf_release(&b);
			return -1;
		}
		if (o[i].type == OPTION_MODE) {
			mode_row = &o[i];
			mode = (int)o[i].def;
		}
	}
	for (size_t i = 0; o && o[i].type != OPTION_END; i++)
		if (o[i].type == OPTION_MODE)
			*(int *)o[i].value = mode;
	/* rows that go with some modes only */
	for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
		const char *hint = NULL;
		size_t n, k = 0;

		if (!on[i] || !o[i].modes || (o[i].modes & DLK_MODE(mode)))
			continue;
		/* only the rows given: a row's whole group (fifteen of them for serve) hides the one
		 * the user typed */
		n = 0;
		for (size_t j = i; o[j].type != OPTION_END; j++)
			if (on[j] && same_modes(&o[j], &o[i]))
				n++;
		for (size_t j = i; o[j].type != OPTION_END; j++)
			if (on[j] && same_modes(&o[j], &o[i])) {
				dlk_buf_addf(&b, "%s--%s", !k ? "" : k + 1 == n ? " and " : ", ", o[j].long_name);
				k++;
			}
		k = 0;
		dlk_buf_adds(&b, n > 1 ? " go with " : " goes with ");
		for (int m = 0; m < 32; m++) {
			const char *name = NULL;
			if (!(o[i].modes & DLK_MODE(m)))
				continue;
			for (size_t j = 0; o[j].type != OPTION_END && !name; j++)
				if (o[j].type == OPTION_MODE && o[j].def == m)
					name = o[j].long_name;
			if (name)
				dlk_buf_addf(&b, "%s--%s", k++ ? " or " : "", name);
			else
				dlk_buf_addf(&b, "%s%s", k++ ? " or " : "", cmd->def->default_mode);
		}
		if (mode_row)
			dlk_buf_addf(&b, ", not with --%s", mode_row->long_name);
		for (size_t j = 0; o[j].type != OPTION_END && !hint; j++)
			if (same_modes(&o[j], &o[i]))
				hint = o[j].hint;
		dlk_errf(err, DLK_EXIT_USAGE, "%s", b.data);
		if (hint)
			dlk_err_hint(err, "%s", hint);
		else if (cmd)
			dlk_err_hint(err, "see 'dlk %s -h' for what goes with what", cmd->name);
		dlk_buf_release(&b);
		return -1;
	}
	return 0;
}

int dlk_args_check(struct dlk_args *args, struct dlk_err *err)
{
	const struct dlk_option *copts = cmd_options(args->cmd);

	if (args->later.code) {
		*err = args->later;
		return -1;
	}
	if (check_table(args->cmd, copts, args->on, err) ||
	    check_table(NULL, dlk_global_options, args->on + opt_count(copts), err))
		return -1;
	return 0;
}

static void release_lists(const struct dlk_option *o)
{
	for (size_t i = 0; o && o[i].type != OPTION_END; i++)
		if (o[i].type == OPTION_LIST) {
			struct dlk_strlist *l = o[i].value;
			free(l->v);
			l->v = NULL;
			l->n = 0;
		}
}

void dlk_args_release(struct dlk_args *args)
{
	release_lists(cmd_options(args->cmd));
	release_lists(dlk_global_options);
	free(args->on);
	free(args->pos);
	memset(args, 0, sizeof(*args));
}

/* ---- help ---- */

/* What -h and the man page say the default is: the starting value, or the description of a
 * default the command computes. NULL when there is nothing to say. */
static const char *default_text(const struct dlk_option *o, char *buf, size_t n)
{
	if (o->def_doc)
		return o->def_doc;
	if (o->flags & OPT_HIDE_DEFAULT)
		return NULL;
	switch (o->type) {
	case OPTION_INT:
		snprintf(buf, n, "%lld", o->def);
		return buf;
	case OPTION_STRING:
		return o->def_str;
	case OPTION_ENUM:
		return o->choices[o->def];
	default:
		return NULL;
	}
}

static void opt_left(char *buf, size_t n, const struct dlk_option *o)
{
	char s[8] = "    ";

	if (o->short_name)
		snprintf(s, sizeof(s), "-%c, ", o->short_name);
	if (dlk_option_negatable(o))
		snprintf(buf, n, "%s--[no-]%s", s, o->long_name);
	else if (o->arg_name)
		snprintf(buf, n, "%s--%s %s", s, o->long_name, o->arg_name);
	else
		snprintf(buf, n, "%s--%s", s, o->long_name);
}

/* Whether a command's own row of this long name hides the global one (report's -o names a file). */
static int shadowed(const struct dlk_option *shadow, const char *long_name)
{
	size_t idx;

	return shadow && find_long(shadow, long_name, strlen(long_name), &idx);
}

static void print_options(FILE *out, const struct dlk_option *o, const struct dlk_option *shadow)
{
	for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
		char left[96], num[32];
		const char *def = default_text(&o[i], num, sizeof(num));
		if (shadowed(shadow, o[i].long_name))
			continue;
		opt_left(left, sizeof(left), &o[i]);
		fprintf(out, "  %-30s %s", left, o[i].help);
		if (o[i].type == OPTION_ENUM) {
			struct dlk_buf b = DLK_BUF_INIT;
			choices_text(&b, o[i].choices);
			fprintf(out, " (%s)", b.data);
			dlk_buf_release(&b);
		}
		if (def)
			fprintf(out, " [default: %s]", def);
		fputc('\n', out);
	}
}

void dlk_usage_print(FILE *out, const struct dlk_command *cmd)
{
	if (!cmd) {
		fprintf(out, "usage: dlk [global options] <command> [options] [args]\n\n");
		fprintf(out, "Train deep learning models on Kubernetes GPU clusters, and on this machine.\n\n");
		fprintf(out, "Commands:\n");
		for (size_t i = 0; dlk_commands[i].name; i++)
			fprintf(out, "  %-12s %s\n", dlk_commands[i].name, dlk_commands[i].summary);
		fprintf(out, "\nGlobal options:\n");
		print_options(out, dlk_global_options, NULL);
		fprintf(out, "\nRun 'dlk help <command>' or 'dlk <command> -h' for a command's options,\n"
		             "'dlk help dlk' for exit codes and files.\n");
		return;
	}
	if (dlk_command_has_subcommands(cmd)) {
		fprintf(out, "usage: dlk %s <command> [options] [args]\n\n", cmd->name);
		fprintf(out, "%s\n\nCommands:\n", cmd->def->description ? cmd->def->description : cmd->summary);
		for (size_t i = 0; dlk_subcommands[i].name; i++)
			if (!strcmp(dlk_subcommands[i].parent, cmd->name))
				fprintf(out, "  %-12s %s\n", dlk_subcommands[i].word, dlk_subcommands[i].summary);
		fprintf(out, "\nGlobal options:\n");
		print_options(out, dlk_global_options, NULL);
		fprintf(out, "\nRun 'dlk %s <command> -h' or 'dlk help %s <command>' for a command's options.\n", cmd->name,
		        cmd->name);
		if (cmd->def->examples)
			fprintf(out, "\nExamples:\n%s", cmd->def->examples);
		return;
	}
	fprintf(out, "usage: dlk %s [options]%s%s\n\n", cmd->name, cmd->def->usage && *cmd->def->usage ? " " : "",
	        cmd->def->usage ? cmd->def->usage : "");
	fprintf(out, "%s\n", cmd->def->description ? cmd->def->description : cmd->summary);
	if (opt_count(cmd->def->options)) {
		fprintf(out, "\nOptions:\n");
		print_options(out, cmd->def->options, NULL);
	}
	fprintf(out, "\nGlobal options:\n");
	print_options(out, dlk_global_options, cmd->def->options);
	if (cmd->def->examples)
		fprintf(out, "\nExamples:\n%s", cmd->def->examples);
}

/* ---- man markup ---- */

void dlk_man_escape(FILE *out, const char *s)
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

void dlk_man_synopsis(FILE *out, const struct dlk_command *cmd)
{
	if (!cmd) {
		fputs(".B dlk\n[\\fIglobal options\\fR] \\fIcommand\\fR [\\fIoptions\\fR] [\\fIargs\\fR]\n", out);
		return;
	}
	if (dlk_command_has_subcommands(cmd)) {
		fprintf(out, ".B dlk %s\n\\fIcommand\\fR [\\fIoptions\\fR] [\\fIargs\\fR]\n", cmd->name);
		return;
	}
	for (int link = 0; link < 2; link++) {
		fprintf(out, link ? ".B dlk\\-%s\n[\\fIoptions\\fR]" : ".B dlk %s\n[\\fIoptions\\fR]", cmd->name);
		if (cmd->def->usage && *cmd->def->usage) {
			fputc(' ', out);
			dlk_man_escape(out, cmd->def->usage);
		}
		fputs(link ? "\n" : "\n.br\n", out);
	}
}

void dlk_man_options(FILE *out, const struct dlk_option *o, const struct dlk_option *shadow)
{
	for (size_t i = 0; o && o[i].type != OPTION_END; i++) {
		char num[32];
		const char *def = default_text(&o[i], num, sizeof(num));

		if (shadowed(shadow, o[i].long_name))
			continue;
		fputs(".TP\n", out);
		if (o[i].short_name)
			fprintf(out, "\\fB\\-%c\\fR, ", o[i].short_name);
		fputs("\\fB\\-\\-", out);
		if (dlk_option_negatable(&o[i]))
			fputs("[no\\-]", out);
		dlk_man_escape(out, o[i].long_name);
		fputs("\\fR", out);
		if (o[i].arg_name) {
			fputs(" \\fI", out);
			dlk_man_escape(out, o[i].arg_name);
			fputs("\\fR", out);
		}
		fputc('\n', out);
		dlk_man_escape(out, o[i].help);
		if (o[i].type == OPTION_ENUM) {
			struct dlk_buf b = DLK_BUF_INIT;
			choices_text(&b, o[i].choices);
			fputs(" (", out);
			dlk_man_escape(out, b.data);
			fputs(")", out);
			dlk_buf_release(&b);
		}
		if (def) {
			fputs("; default: ", out);
			dlk_man_escape(out, def);
		}
		fputs(".\n", out);
	}
}
