#include "commands/ctx.h"
#include "lib/spec/spec.h"

struct dlk_spec *dlk_ctx_load_spec(const struct dlk_ctx *ctx, struct dlk_err *err)
{
	return spec_load(ctx->file, ctx->sets, ctx->n_sets, err);
}
