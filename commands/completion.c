#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/render/embedded.h"

#include <string.h>

static int run_completion(struct dlk_ctx *ctx, struct dlk_args *args)
{
	const char *shell = args->pos[0];
	const struct dlk_embedded *f = NULL;
	struct dlk_err err = DLK_ERR_INIT;

	if (!strcmp(shell, "bash"))
		f = dlk_embedded_find(dlk_builtin_files, "completions/dlk.bash");
	else if (!strcmp(shell, "zsh"))
		f = dlk_embedded_find(dlk_builtin_files, "completions/_dlk");
	if (!f) {
		dlk_errf(&err, DLK_EXIT_USAGE, "no completion for shell '%s'", shell);
		dlk_err_hint(&err, "choose one of: bash zsh");
		return dlk_report(ctx, &err);
	}
	fwrite(f->data, 1, f->len, stdout);
	return 0;
}

const struct dlk_command_def dlk_cmd_completion = {
	.usage = "SHELL",
	.description = "Print the completion script for SHELL (bash or zsh). Completion asks dlk itself,\n"
	               "so it always matches the installed version's commands and options.",
	.min_pos = 1,
	.max_pos = 1,
	.complete_pos = COMPLETE_WORDS,
	.pos_words = "bash zsh",
	.run = run_completion,
	.examples = "  $ source <(dlk completion bash)\n"
	            "  $ dlk completion zsh > \"${fpath[1]}/_dlk\"\n",
};
