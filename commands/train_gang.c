/* What a gang of workers shows on the terminal: every worker's stderr, a line at a time with
 * its rank in front (as JSON objects naming the rank under --log-format json), and rank 0's
 * progress line redrawn in place on a terminal. Supervising the gang is lib/trainer/gang.c. */
#include "commands/train_gang.h"
#include "commands/train_report.h"
#include "commands/ui.h"
#include "lib/jobs/logline.h"
#include "lib/program/supervise.h"
#include "commands/train_data.h"
#include "lib/trainer/gang.h"
#include "lib/util/buf.h"
#include "lib/util/fsutil.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct view {
	struct dlk_ctx *ctx;
	const struct dlk_train_cli *cli;
	const struct dlk_project *spec;
	int progress_open; /* rank 0's progress line is drawn on the terminal */
};

static void put(const char *s, size_t n)
{
	while (n) {
		ssize_t k = write(STDERR_FILENO, s, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		s += k;
		n -= (size_t)k;
	}
}

/* A worker's line as it reached the pipe: what it printed of outside text is visible already, and
 * anything else a library or the program wrote there is made so here (printable text, a backslash
 * included, passes unchanged, so a line is never escaped twice) */
static void put_visible(const char *s, size_t n)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_add_visible(&b, s, n, 0);
	put(b.data ? b.data : "", b.len);
	dlk_buf_release(&b);
}

static void clear_progress(struct view *v)
{
	if (v->progress_open) {
		put("\r\033[K", 4);
		v->progress_open = 0;
	}
}

static void on_line(void *ud, int local, int rank, char *s, size_t n)
{
	struct view *v = ud;
	char prefix[32], text[1032]; /* as lib/trainer/gang.c reads the same line */
	/* rank -1: a pod's only process, whose log is its rank's already (no prefix) */
	int pl = rank < 0 ? 0 : snprintf(prefix, sizeof(prefix), "[rank %d] ", rank);

	(void)local;
	if (v->ctx->log_json && n) {
		/* --log-format json: the worker's objects name their rank and pass as they are; what
		 * else it wrote (a library's message) becomes an object of its rank */
		if (s[0] == '{' && dlk_logline_text(s, n, text, sizeof(text))) {
			pl = 0;
		} else {
			cJSON *f = cJSON_CreateObject();
			char *line = xstrndup(s, n);
			if (rank >= 0)
				cJSON_AddNumberToObject(f, "rank", rank);
			clear_progress(v);
			dlk_log_json(v->ctx, "info", line, f);
			free(line);
			cJSON_Delete(f);
			return;
		}
	}
	clear_progress(v);
	if (n && pl > 0)
		put(prefix, (size_t)pl);
	put_visible(s, n);
	put("\n", 1);
}

static void on_progress(void *ud, int local, int rank, char *s, size_t n)
{
	struct view *v = ud;
	char prefix[32];
	int pl = snprintf(prefix, sizeof(prefix), "[rank %d] ", rank);

	(void)local;
	if (!n || !v->ctx->tty_err || rank != 0)
		return;
	put("\r\033[K", 4);
	put(prefix, (size_t)pl);
	put_visible(s, n);
	v->progress_open = 1;
}

static void on_ended(void *ud)
{
	clear_progress(ud);
}

/* In the worker's process: the --worker path, without colour (its stderr is a pipe). */
static int on_worker(void *ud, int local)
{
	struct view *v = ud;

	(void)local;
	v->ctx->color = 0;
	return dlk_train_here(v->ctx, v->cli, v->spec, 1);
}

int dlk_train_gang(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec)
{
	struct view v = { ctx, opts, spec, 0 };
	struct dlk_gang_hooks hooks = { on_worker, on_line, on_progress, on_ended, &v, NULL, NULL, NULL };
	struct dlk_gang_output out = { ctx->log_json };
	struct dlk_trainer_sink sink = { .note = dlk_train_note, .ud = ctx };
	struct dlk_trainer_opts topts;
	struct dlk_err err = DLK_ERR_INIT;
	int rc;

	dlk_train_trainer_opts(opts, ctx->file, &topts);
	rc = dlk_trainer_gang(&topts, spec, out, &hooks, &sink, &err);
	if (err.msg[0])
		dlk_report(ctx, &err);
	return rc;
}

int dlk_train_pod_gang(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec, int gpus)
{
	struct view v = { ctx, opts, spec, 0 };
	struct dlk_gang_hooks hooks = { on_worker, on_line, on_progress, on_ended, &v, NULL, NULL, NULL };
	struct dlk_gang_output out = { ctx->log_json };
	struct dlk_err err = DLK_ERR_INIT;
	int rc;

	rc = dlk_trainer_pod_gang(spec, gpus, out, &hooks, &err);
	if (err.msg[0])
		dlk_report(ctx, &err);
	return rc;
}

int dlk_train_program(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec)
{
	struct view v = { ctx, opts, spec, 0 };
	struct dlk_program_view pv = { on_line, on_progress, on_ended, &v, NULL, NULL, 0, 0 };
	struct dlk_trainer_sink sink = { .note = dlk_train_note, .ud = ctx };
	struct dlk_trainer_opts topts;
	struct dlk_err err = DLK_ERR_INIT;
	char *pdir = dlk_dir_of(ctx->file), *data = NULL, *data_id = NULL;
	int rc;

	/* data.dataset: its files placed where the program reads them (DLK_DATA_DIR) */
	if (dlk_train_program_data(ctx, spec, 0, pdir, &data, &data_id, &err)) {
		free(pdir);
		return dlk_report(ctx, &err);
	}
	pv.data_dir = data;
	pv.data_id = data_id;
	pv.metrics_port = opts->metrics_port;
	pv.verbose = ctx->verbose;
	dlk_train_trainer_opts(opts, ctx->file, &topts);
	rc = dlk_program_local(&topts, spec, &pv, &sink, &err);
	if (err.msg[0])
		dlk_report(ctx, &err);
	free(data);
	free(data_id);
	free(pdir);
	return rc;
}

int dlk_train_program_pod(struct dlk_ctx *ctx, const struct dlk_train_cli *opts, const struct dlk_project *spec)
{
	struct view v = { ctx, opts, spec, 0 };
	struct dlk_program_view pv = { on_line, on_progress, on_ended, &v, NULL, NULL, 0, 0 };
	struct dlk_trainer_sink sink = { .note = dlk_train_note, .ud = ctx };
	struct dlk_err err = DLK_ERR_INIT;
	char *data = NULL, *data_id = NULL;
	int rc;

	/* data.dataset: its files placed through the node cache, where the program reads them */
	if (dlk_train_program_data(ctx, spec, 1, ".", &data, &data_id, &err))
		return dlk_report(ctx, &err);
	pv.data_dir = data;
	pv.data_id = data_id;
	pv.verbose = ctx->verbose;
	rc = dlk_program_pod(spec, ctx->file, &pv, &sink, &err);
	if (err.msg[0])
		dlk_report(ctx, &err);
	free(data);
	free(data_id);
	return rc;
}
