#include "commands/commands.h"
#include "commands/ctx.h"

#include <string.h>

static int run_help(struct dlk_ctx *ctx, struct dlk_args *args)
{
	(void)ctx;
	if (args->n_pos == 0) {
		dlk_usage_print(stdout, NULL);
		return 0;
	}
	const struct dlk_command *cmd = dlk_command_find(args->pos[0]);
	if (!cmd)
		return dlk_report_unknown_command(args->pos[0]);
	dlk_usage_print(stdout, cmd);
	return 0;
}

const struct dlk_command_def dlk_cmd_help = {
	.usage = "[COMMAND]",
	.description = "Show the list of commands, or the options of one command (the same text as\n"
	               "'dlk COMMAND -h'). 'man dlk-COMMAND' has the full reference.",
	.min_pos = 0,
	.max_pos = 1,
	.complete_pos = COMPLETE_NONE, /* command names are completed specially */
	.run = run_help,
	.examples = "  $ dlk help train\n",
};
