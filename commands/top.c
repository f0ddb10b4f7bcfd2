/* dlk top: what the runs here are doing, refreshed in place on a terminal, one sample as plain
 * lines or JSON otherwise. lib/top samples; this file prints. */
#include "commands/commands.h"
#include "commands/ctx.h"
#include "commands/ui.h"
#include "lib/top/top.h"
#include "lib/util/buf.h"
#include "lib/util/mem.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double top_interval = 1.0;
static int top_once;
static volatile sig_atomic_t top_stop;

static void on_int(int s)
{
	(void)s;
	top_stop = 1;
}

static void show(struct dlk_ctx *ctx, const cJSON *rows, const char *only)
{
	struct dlk_table_row *t;
	struct dlk_buf b = DLK_BUF_INIT;
	const cJSON *r;
	int n = 0;

	t = xcalloc((size_t)cJSON_GetArraySize(rows) + 1, sizeof(*t));
	snprintf(t[0].c[0], DLK_TABLE_CELL, "PROJECT");
	snprintf(t[0].c[1], DLK_TABLE_CELL, "RUN");
	snprintf(t[0].c[2], DLK_TABLE_CELL, "PID");
	snprintf(t[0].c[3], DLK_TABLE_CELL, "PROCS");
	snprintf(t[0].c[4], DLK_TABLE_CELL, "CPU%%");
	snprintf(t[0].c[5], DLK_TABLE_CELL, "RSS");
	snprintf(t[0].c[6], DLK_TABLE_CELL, "SINCE");
	cJSON_ArrayForEach(r, rows) {
		const char *p = cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring;
		if (only && strcmp(only, p))
			continue;
		n++;
		snprintf(t[n].c[0], DLK_TABLE_CELL, "%s", p);
		snprintf(t[n].c[1], DLK_TABLE_CELL, "%.8s", cJSON_GetObjectItemCaseSensitive(r, "run")->valuestring);
		snprintf(t[n].c[2], DLK_TABLE_CELL, "%.0f", cJSON_GetObjectItemCaseSensitive(r, "pid")->valuedouble);
		snprintf(t[n].c[3], DLK_TABLE_CELL, "%.0f", cJSON_GetObjectItemCaseSensitive(r, "processes")->valuedouble);
		snprintf(t[n].c[4], DLK_TABLE_CELL, "%.0f", cJSON_GetObjectItemCaseSensitive(r, "cpu_percent")->valuedouble);
		dlk_fmt_bytes(t[n].c[5], DLK_TABLE_CELL,
		              (unsigned long long)cJSON_GetObjectItemCaseSensitive(r, "rss_bytes")->valuedouble);
		snprintf(t[n].c[6], DLK_TABLE_CELL, "%s", cJSON_GetObjectItemCaseSensitive(r, "since")->valuestring);
	}
	if (n)
		dlk_table_print(ctx, &b, t, n + 1, 7);
	else
		dlk_buf_adds(&b, "no runs going on here\n");
	dlk_put_text(stdout, b.data, b.len);
	fflush(stdout);
	dlk_buf_release(&b);
	free(t);
}

static int run_top(struct dlk_ctx *ctx, struct dlk_args *args)
{
	struct dlk_err err = DLK_ERR_INIT;
	const char *only = args->n_pos ? args->pos[0] : NULL;
	int live = ctx->tty_out && !top_once && ctx->output != DLK_OUTPUT_JSON && ctx->output != DLK_OUTPUT_YAML;
	struct sigaction sa = { 0 };

	sa.sa_handler = on_int;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	do {
		cJSON *rows = dlk_top_local(ctx->file, top_interval, &err);
		if (!rows)
			return dlk_report(ctx, &err);
		if (ctx->output == DLK_OUTPUT_JSON) {
			cJSON *doc = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(doc, "runs"), *r, *next;
			char *s;
			for (r = rows->child; r; r = next) {
				next = r->next;
				if (only && strcmp(only, cJSON_GetObjectItemCaseSensitive(r, "project")->valuestring))
					continue;
				cJSON_AddItemToArray(arr, cJSON_DetachItemViaPointer(rows, r));
			}
			cJSON_AddNumberToObject(doc, "interval_s", top_interval);
			s = cJSON_Print(doc);
			printf("%s\n", s);
			free(s);
			cJSON_Delete(doc);
		} else {
			/* in place: home, clear to the end, the table */
			if (live)
				fputs("\033[H\033[J", stdout);
			show(ctx, rows, only);
		}
		cJSON_Delete(rows);
	} while (live && !top_stop);
	return 0;
}

static const struct dlk_option top_options[] = {
	OPT_DURATION(0, "interval", &top_interval, "DURATION", "sample CPU use over this long (and refresh as often)",
	             .def_doc = "1s"),
	OPT_BOOL(0, "once", &top_once, "one sample, even on a terminal", .flags = OPT_NONEG),
	OPT_END(),
};

const struct dlk_command_def dlk_cmd_top = {
	.usage = "[PROJECT]",
	.description = "Show what the runs going on here are doing: for each project trained on this machine\n"
	               "(dlk train --local, the trials of dlk sweep --local), its run, the processes (a gang's\n"
	               "workers included), their CPU use (100% is one core) and resident memory. On a terminal\n"
	               "the view refreshes in place until Ctrl-C; piped, it prints one sample; -o json prints\n"
	               "one sample as {\"runs\": [...], \"interval_s\"}.",
	.options = top_options,
	.min_pos = 0,
	.max_pos = 1,
	.run = run_top,
	.examples = "  $ dlk top\n"
	            "  $ dlk top --once fashion-mlp\n"
	            "  $ dlk top -o json --interval 2s\n",
};
