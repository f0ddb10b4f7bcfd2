#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"

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
		cmd = sub;
	}
	dlk_usage_print(stdout, cmd);
	return 0;
}

const struct dlk_command_def dlk_cmd_help = {
	.usage = "[COMMAND [SUBCOMMAND]]",
	.description = "Show the list of commands, or the options of one command (the same text as\n"
	               "'dlk COMMAND -h'). 'man dlk-COMMAND' has the full reference.",
	.min_pos = 0,
	.max_pos = 2,
	.complete_pos = COMPLETE_NONE, /* command names are completed specially */
	.run = run_help,
	.examples = "  $ dlk help train\n"
	            "  $ dlk help data push\n",
};
