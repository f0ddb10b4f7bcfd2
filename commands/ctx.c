#include "commands/ctx.h"
#include "lib/project/project.h"
#include "lib/util/mem.h"

#include <unistd.h>

const char *const dlk_output_names[] = {
	[DLK_OUTPUT_TEXT] = "text", [DLK_OUTPUT_JSON] = "json", [DLK_OUTPUT_YAML] = "yaml", [DLK_OUTPUT_WIDE] = "wide", NULL,
};

struct dlk_project *dlk_ctx_load_spec(const struct dlk_ctx *ctx, struct dlk_err *err)
{
	return project_load(ctx->file, ctx->sets.v, ctx->sets.n, err);
}

char *dlk_ctx_project_name(const struct dlk_ctx *ctx, const char *what, struct dlk_err *err)
{
	struct dlk_project *spec;
	char *name;

	if (access(ctx->file, F_OK)) {
		dlk_errf(err, DLK_EXIT_USAGE, "no %s given, and no project file '%s' here to take it from", what, ctx->file);
		dlk_err_hint(err, "give the %s, run it in a project's directory, or name the project file with -f", what);
		return NULL;
	}
	spec = dlk_ctx_load_spec(ctx, err);
	if (!spec)
		return NULL;
	name = xstrdup(spec->name);
	project_free(spec);
	return name;
}
