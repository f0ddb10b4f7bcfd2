/* `dlk help`: the list of commands, or a manual page. The pages' prose (man/NAME.in) is built
 * into the binary and filled from the tables as the build fills them, so the reference is there
 * in a checkout, before (or without) `make install`. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/render/embedded.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- man(7) markup as plain text: the subset the pages in man/ use ---- */

#define PLAIN_WIDTH 80
#define SECTION_INDENT 7
#define NBSP '\001' /* roff's unbreakable space while words are split, a space when printed */

struct plain {
	FILE *out;
	int left;           /* left margin of body text */
	int hang;           /* how far a tagged paragraph's body sits right of `left` */
	int rs_left[8];     /* margins saved by .RS */
	int rs_depth;
	int nofill;
	int tag_next;       /* the next line of text is a .TP tag */
	int printed;        /* something was printed: a paragraph break prints a blank line */
	int any;            /* the page has begun: a heading follows a blank line */
	int blank_due;
	struct dlk_buf tag; /* the tag of the paragraph being filled */
	struct dlk_buf text;
};

static const struct {
	const char *name, *text;
} glyphs[] = {
	{ "aq", "'" }, { "dq", "\"" }, { "em", "--" }, { "en", "-" }, { "bu", "*" },
	{ "mu", "x" }, { "co", "(c)" }, { "lq", "\"" }, { "rq", "\"" }, { "ga", "`" }, { "rs", "\\" },
};

/* Appends the text of roff input `s` to b: escapes resolved, fonts dropped. */
static void decode(struct dlk_buf *b, const char *s)
{
	while (*s && *s != '\n') {
		if (*s != '\\') {
			char c = *s++;
			dlk_buf_addc(b, c == '\t' ? ' ' : c);
			continue;
		}
		s++;
		switch (*s) {
		case '\0':
			return;
		case '"': /* a comment to the end of the line */
			return;
		case '-': dlk_buf_addc(b, '-'); s++; break;
		case 'e': case '\\': dlk_buf_addc(b, '\\'); s++; break;
		case ' ': case '~': dlk_buf_addc(b, NBSP); s++; break;
		case '&': case 'c': case '/': case ',': case '|': case '^': s++; break;
		case 'f': /* \fB, \f(BI, \f[B] */
			s++;
			if (*s == '(')
				s += s[1] && s[2] ? 3 : strlen(s);
			else if (*s == '[')
				s = strchr(s, ']') ? strchr(s, ']') + 1 : s + strlen(s);
			else if (*s)
				s++;
			break;
		case '(': {
			const char *g = NULL;
			for (size_t i = 0; s[1] && s[2] && i < sizeof(glyphs) / sizeof(glyphs[0]); i++)
				if (!strncmp(s + 1, glyphs[i].name, 2))
					g = glyphs[i].text;
			dlk_buf_adds(b, g ? g : "?");
			s += s[1] && s[2] ? 3 : strlen(s);
			break;
		}
		default:
			dlk_buf_addc(b, *s++);
		}
	}
}

static void put_line(struct plain *p, int indent, const char *s, size_t len)
{
	while (len && s[len - 1] == ' ')
		len--;
	for (int i = 0; i < indent && len; i++)
		fputc(' ', p->out);
	for (size_t i = 0; i < len; i++)
		fputc(s[i] == NBSP ? ' ' : s[i], p->out);
	fputc('\n', p->out);
	p->printed = p->any = 1;
}

static void blank_if_due(struct plain *p)
{
	if (p->blank_due && p->printed)
		fputc('\n', p->out);
	p->blank_due = 0;
}

/* Prints the paragraph gathered so far, its words filled to the width, under its tag: on the
 * tag's line when the tag fits in the hang, as man does, else below it. */
static void flush(struct plain *p)
{
	int indent = p->left + p->hang, words = 0;
	struct dlk_buf line = DLK_BUF_INIT;
	const char *w = p->text.data ? p->text.data : "";

	if (!p->tag.len && !p->text.len)
		goto out;
	blank_if_due(p);
	if (p->tag.len && (int)p->tag.len + 1 <= p->hang) {
		dlk_buf_add(&line, p->tag.data, p->tag.len);
		while ((int)line.len < p->hang)
			dlk_buf_addc(&line, ' ');
		indent = p->left;
	} else if (p->tag.len) {
		put_line(p, p->left, p->tag.data, p->tag.len);
	}
	for (;;) {
		while (*w == ' ')
			w++;
		if (!*w)
			break;
		size_t n = strcspn(w, " ");
		if (words && indent + (int)(line.len + 1 + n) > PLAIN_WIDTH) {
			put_line(p, indent, line.data, line.len);
			dlk_buf_reset(&line);
			indent = p->left + p->hang;
			words = 0;
		}
		if (words)
			dlk_buf_addc(&line, ' ');
		dlk_buf_add(&line, w, n);
		words++;
		w += n;
	}
	if (line.len)
		put_line(p, indent, line.data, line.len);
out:
	dlk_buf_release(&line);
	dlk_buf_reset(&p->tag);
	dlk_buf_reset(&p->text);
}

/* Text that a request or a line of input adds: a .TP tag, a line kept as it is, or words. */
static void add_text(struct plain *p, const char *decoded)
{
	if (p->tag_next) {
		dlk_buf_adds(&p->tag, decoded);
		p->tag_next = 0;
	} else if (p->nofill) {
		blank_if_due(p);
		put_line(p, p->left + p->hang, decoded, strlen(decoded));
	} else {
		if (p->text.len)
			dlk_buf_addc(&p->text, ' ');
		dlk_buf_adds(&p->text, decoded);
	}
}

/* The arguments of a request, quotes honoured, each decoded. Returns how many (at most max). */
static int request_args(const char *s, struct dlk_buf *args, int max)
{
	int n = 0;
	while (n < max) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '\n')
			break;
		char *raw;
		if (*s == '"') {
			/* a quoted argument, in which "" is a quote */
			struct dlk_buf q = DLK_BUF_INIT;
			for (s++; *s && *s != '\n'; s++) {
				if (*s == '"' && s[1] != '"') {
					s++;
					break;
				}
				dlk_buf_addc(&q, *s);
				if (*s == '"')
					s++;
			}
			raw = dlk_buf_detach(&q, NULL);
		} else {
			size_t len = strcspn(s, " \t\n");
			raw = xstrndup(s, len);
			s += len;
		}
		decode(&args[n++], raw);
		free(raw);
	}
	return n;
}

static void paragraph(struct plain *p, int hang)
{
	flush(p);
	p->blank_due = 1;
	p->hang = hang;
}

/* roff gives a macro nine arguments; more are kept too rather than dropped unseen */
#define MAX_ARGS 16

static void request(struct plain *p, const char *line)
{
	char name[8] = "";
	struct dlk_buf args[MAX_ARGS];
	size_t len = strcspn(line + 1, " \t\n");
	int n;

	if (len >= sizeof(name) || line[1] == '\\')
		return; /* a comment, or nothing this renderer knows */
	memcpy(name, line + 1, len);
	for (int i = 0; i < MAX_ARGS; i++)
		args[i] = (struct dlk_buf)DLK_BUF_INIT;
	n = request_args(line + 1 + len, args, MAX_ARGS);

	if (!strcmp(name, "TH")) {
		struct dlk_buf t = DLK_BUF_INIT;
		dlk_buf_addf(&t, "%s(%s)", n > 0 ? args[0].data : "", n > 1 ? args[1].data : "");
		put_line(p, 0, t.data, t.len);
		dlk_buf_release(&t);
	} else if (!strcmp(name, "SH") || !strcmp(name, "SS")) {
		flush(p);
		p->rs_depth = 0;
		p->blank_due = 0;
		if (p->any)
			fputc('\n', p->out);
		struct dlk_buf h = DLK_BUF_INIT;
		for (int i = 0; i < n; i++)
			dlk_buf_addf(&h, "%s%s", i ? " " : "", args[i].data);
		put_line(p, name[1] == 'H' ? 0 : 3, h.data ? h.data : "", h.len);
		dlk_buf_release(&h);
		p->left = SECTION_INDENT;
		p->hang = 0;
		p->printed = 0; /* the section's first paragraph follows its heading directly */
	} else if (!strcmp(name, "PP") || !strcmp(name, "LP") || !strcmp(name, "P")) {
		paragraph(p, 0);
	} else if (!strcmp(name, "TP")) {
		paragraph(p, 7);
		p->tag_next = 1;
	} else if (!strcmp(name, "IP")) {
		paragraph(p, n > 1 ? atoi(args[1].data) : 7);
		if (n > 0 && args[0].len)
			dlk_buf_adds(&p->tag, args[0].data);
	} else if (!strcmp(name, "RS")) {
		flush(p);
		if (p->rs_depth < (int)(sizeof(p->rs_left) / sizeof(p->rs_left[0])))
			p->rs_left[p->rs_depth++] = p->left;
		p->left += p->hang ? p->hang : 7;
		p->hang = 0;
	} else if (!strcmp(name, "RE")) {
		flush(p);
		if (p->rs_depth)
			p->left = p->rs_left[--p->rs_depth];
		p->hang = 0;
	} else if (!strcmp(name, "nf") || !strcmp(name, "fi")) {
		flush(p);
		p->nofill = name[0] == 'n';
	} else if (!strcmp(name, "br")) {
		flush(p);
	} else if (!strcmp(name, "B") || !strcmp(name, "I") || !strcmp(name, "SM")) {
		struct dlk_buf t = DLK_BUF_INIT;
		for (int i = 0; i < n; i++)
			dlk_buf_addf(&t, "%s%s", i ? " " : "", args[i].data);
		if (n)
			add_text(p, t.data);
		dlk_buf_release(&t);
	} else if (len == 2 && strchr("BIR", name[0]) && strchr("BIR", name[1])) {
		/* .BR, .IR, ...: alternating fonts, the arguments joined without spaces */
		struct dlk_buf t = DLK_BUF_INIT;
		for (int i = 0; i < n; i++)
			dlk_buf_adds(&t, args[i].data);
		if (n)
			add_text(p, t.data);
		dlk_buf_release(&t);
	}
	for (int i = 0; i < MAX_ARGS; i++)
		dlk_buf_release(&args[i]);
}

/* Writes a page in man(7) markup as plain text, as man would lay it out on 80 columns. */
static void render_plain(const char *roff, FILE *out)
{
	struct plain p = { .out = out, .left = 0, .tag = DLK_BUF_INIT, .text = DLK_BUF_INIT };

	for (const char *s = roff; *s;) {
		size_t len = strcspn(s, "\n");
		char *line = xstrndup(s, len);
		s += len + (s[len] == '\n');
		if (line[0] == '.' || line[0] == '\'') {
			request(&p, line);
		} else if (!line[0] && !p.nofill) {
			paragraph(&p, 0);
		} else {
			struct dlk_buf t = DLK_BUF_INIT;
			if (line[0] == ' ' && !p.nofill)
				flush(&p); /* a line that starts with a space starts a line */
			decode(&t, line);
			add_text(&p, t.data ? t.data : "");
			dlk_buf_release(&t);
		}
		free(line);
	}
	flush(&p);
	dlk_buf_release(&p.tag);
	dlk_buf_release(&p.text);
}

/* ---- showing a page ---- */

static int man_on_path(void)
{
	const char *path = getenv("PATH");
	struct dlk_buf f = DLK_BUF_INIT;
	int found = 0;

	while (path && *path && !found) {
		size_t len = strcspn(path, ":");
		dlk_buf_reset(&f);
		dlk_buf_addf(&f, "%.*s/man", (int)len, path);
		found = len && access(f.data, X_OK) == 0;
		path += len + (path[len] == ':');
	}
	dlk_buf_release(&f);
	return found;
}

/* Shows the page on a terminal through man(1), which pages and formats it as every other
 * manual; elsewhere (a pipe, a file, a machine without man) as plain text, so that the page
 * can be read, searched and tested without groff. */
static int show_page(const struct dlk_ctx *ctx, const char *page)
{
	struct dlk_buf path = DLK_BUF_INIT;
	const struct dlk_embedded *in;
	char *roff = NULL;
	size_t len = 0;
	FILE *src = NULL, *mem = NULL;
	int rc = DLK_EXIT_FAIL;

	dlk_buf_addf(&path, "man/%s.in", page);
	in = dlk_embedded_find(dlk_builtin_files, path.data);
	if (!in) {
		fprintf(stderr, "error: no manual page '%s' is built into this dlk\n", page);
		goto out;
	}
	src = fmemopen((void *)in->data, in->len, "r");
	mem = open_memstream(&roff, &len);
	if (!src || !mem) {
		perror("dlk help");
		goto out;
	}
	if (dlk_man_fill(src, page, mem))
		goto out;
	fclose(mem);
	mem = NULL;

	if (ctx && ctx->tty_out && man_on_path()) {
		void (*old)(int) = signal(SIGPIPE, SIG_IGN); /* a reader who quits early is no error */
		FILE *man;
		fflush(stdout);
		man = popen("man -l -", "w");
		if (man) {
			fwrite(roff, 1, len, man);
			int st = pclose(man);
			signal(SIGPIPE, old);
			if (st == 0) {
				rc = 0;
				goto out;
			}
		} else {
			signal(SIGPIPE, old);
		}
		/* man could not show it: the plain text still can */
	}
	render_plain(roff, stdout);
	rc = fflush(stdout) ? DLK_EXIT_FAIL : 0;
out:
	if (mem)
		fclose(mem);
	if (src)
		fclose(src);
	free(roff);
	dlk_buf_release(&path);
	return rc;
}

static int run_help(struct dlk_ctx *ctx, struct dlk_args *args)
{
	char page[96];

	if (args->n_pos == 0) {
		dlk_usage_print(stdout, NULL);
		return 0;
	}
	if (!strcmp(args->pos[0], "dlk.yaml") || !strcmp(args->pos[0], "dlk")) {
		if (args->n_pos > 1) {
			struct dlk_err err = DLK_ERR_INIT;
			dlk_errf(&err, DLK_EXIT_USAGE, "'dlk help %s' takes no more words", args->pos[0]);
			return dlk_report(ctx, &err);
		}
		return show_page(ctx, args->pos[0][3] ? "dlk.yaml.5" : "dlk.1");
	}
	const struct dlk_command *cmd = dlk_command_find(args->pos[0]);
	if (!cmd)
		return dlk_report_unknown_command(args->pos[0]);
	if (args->n_pos > 1) {
		const struct dlk_command *sub = dlk_subcommand_find(cmd, args->pos[1]);
		if (!sub) {
			struct dlk_err err = DLK_ERR_INIT;
			if (dlk_command_has_subcommands(cmd))
				dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' has no command '%s'", cmd->name, args->pos[1]);
			else
				dlk_errf(&err, DLK_EXIT_USAGE, "'dlk %s' has no commands of its own", cmd->name);
			dlk_err_hint(&err, "see 'dlk %s -h'", cmd->name);
			return dlk_report(ctx, &err);
		}
		snprintf(page, sizeof(page), "dlk-%s-%s.1", cmd->name, args->pos[1]);
	} else {
		snprintf(page, sizeof(page), "dlk-%s.1", cmd->name);
	}
	return show_page(ctx, page);
}

const struct dlk_command_def dlk_cmd_help = {
	.usage = "[COMMAND [SUBCOMMAND] | dlk.yaml | dlk]",
	.description = "Show the list of commands, or a manual page: a command's ('dlk help train',\n"
	               "'dlk help data push'), the project file's ('dlk help dlk.yaml') or dlk's own\n"
	               "with the exit codes ('dlk help dlk'). On a terminal the page opens in man;\n"
	               "piped or without man it is printed as plain text. 'dlk COMMAND -h' lists\n"
	               "only the options.",
	.min_pos = 0,
	.max_pos = 2,
	.complete_pos = COMPLETE_NONE, /* command names are completed specially */
	.run = run_help,
	.examples = "  $ dlk help train\n"
	            "  $ dlk help data push\n"
	            "  $ dlk help dlk.yaml\n"
	            "  $ dlk help dlk.yaml | grep -A3 epochs\n",
};
