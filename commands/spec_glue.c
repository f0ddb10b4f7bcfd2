#include "commands/ctx.h"
#include "lib/project/project.h"

struct dlk_project *dlk_ctx_load_spec(const struct dlk_ctx *ctx, struct dlk_err *err)
{
	return project_load(ctx->file, ctx->sets.v, ctx->sets.n, err);
}
