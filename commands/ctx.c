#include "commands/ctx.h"
#include "lib/project/project.h"

const char *const dlk_output_names[] = {
	[DLK_OUTPUT_TEXT] = "text", [DLK_OUTPUT_JSON] = "json", [DLK_OUTPUT_YAML] = "yaml", [DLK_OUTPUT_WIDE] = "wide", NULL,
};

struct dlk_project *dlk_ctx_load_spec(const struct dlk_ctx *ctx, struct dlk_err *err)
{
	return project_load(ctx->file, ctx->sets.v, ctx->sets.n, err);
}
