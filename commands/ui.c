#include "commands/ui.h"
#include "lib/jobs/logline.h"
#include "lib/jobs/podenv.h"
#include "lib/util/clock.h"
#include "lib/util/jsonprint.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int dlk_report(const struct dlk_ctx *ctx, const struct dlk_err *err)
{
	int color = ctx && ctx->color;
	const char *msg = err->msg[0] ? err->msg : "failed";

	if (ctx && ctx->last_err && ctx->last_err != err)
		*ctx->last_err = *err;
	if (ctx && ctx->log_json) {
		cJSON *f = cJSON_CreateObject();
		if (err->hint[0])
			cJSON_AddStringToObject(f, DLK_LOG_KEY_HINT, err->hint);
		cJSON_AddStringToObject(f, "class", dlk_exit_name(err->code ? err->code : DLK_EXIT_FAIL));
		dlk_log_json(ctx, "error", msg, f);
		cJSON_Delete(f);
		return err->code ? err->code : DLK_EXIT_FAIL;
	}
	/* a multi-line message (several problems in one file) keeps its lines readable */
	fprintf(stderr, "%serror:%s %s\n", color ? "\033[1;31m" : "", color ? "\033[0m" : "", msg);
	if (err->hint[0])
		fprintf(stderr, "%shint:%s %s\n", color ? "\033[33m" : "", color ? "\033[0m" : "", err->hint);
	return err->code ? err->code : DLK_EXIT_FAIL;
}

const char *const dlk_log_format_names[] = { "text", "json", NULL };

int dlk_log_format_set(struct dlk_ctx *ctx, int opt, struct dlk_err *err)
{
	const char *env = getenv(DLK_ENV_LOG_FORMAT);

	if (opt < 0 && env && *env) {
		for (int i = 0; dlk_log_format_names[i]; i++)
			if (!strcmp(env, dlk_log_format_names[i]))
				opt = i;
		if (opt < 0)
			return dlk_errf(err, DLK_EXIT_USAGE, "%s: expected text or json, not '%.64s'", DLK_ENV_LOG_FORMAT, env);
	}
	ctx->log_json = opt == DLK_LOG_JSON;
	if (ctx->log_json) {
		/* nothing drawn in place, no colour: every line is an object */
		ctx->tty_err = 0;
		ctx->color = 0;
	}
	return 0;
}

void dlk_log_json(const struct dlk_ctx *ctx, const char *level, const char *msg, const cJSON *fields)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *f;
	const char *rank = getenv(DLK_ENV_RANK);
	struct timespec ts;
	struct tm tm;
	char when[40], *s;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ", ts.tv_nsec / 1000000);
	cJSON_AddStringToObject(o, DLK_LOG_KEY_TIME, when);
	cJSON_AddStringToObject(o, DLK_LOG_KEY_LEVEL, level);
	/* the rank a line is about: the fields' (a gang's parent speaking for a worker), else ours */
	f = cJSON_GetObjectItemCaseSensitive(fields, DLK_LOG_KEY_RANK);
	cJSON_AddNumberToObject(o, DLK_LOG_KEY_RANK, cJSON_IsNumber(f) ? f->valuedouble : rank && *rank ? atoi(rank) : 0);
	cJSON_AddStringToObject(o, DLK_LOG_KEY_MSG, msg);
	cJSON_ArrayForEach(f, fields)
		if (f->string && !cJSON_GetObjectItemCaseSensitive(o, f->string))
			cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, 1));
	s = cJSON_PrintUnformatted(o);
	/* one write per line: the processes of a gang share the pipe */
	if (s) {
		size_t n = strlen(s);
		s[n] = '\n';
		fwrite(s, 1, n + 1, stderr);
		fflush(stderr);
	}
	free(s);
	cJSON_Delete(o);
}

static void log_jsonv(const struct dlk_ctx *ctx, const char *level, const char *fmt, va_list ap)
{
	char msg[4096];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	dlk_log_json(ctx, level, msg, NULL);
}

void dlk_warn(const struct dlk_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	int color = ctx && ctx->color;

	if (ctx && ctx->log_json) {
		va_start(ap, fmt);
		log_jsonv(ctx, "warning", fmt, ap);
		va_end(ap);
		return;
	}

	fprintf(stderr, "%swarning:%s ", color ? "\033[1;33m" : "", color ? "\033[0m" : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void dlk_info(const struct dlk_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx && ctx->quiet)
		return;
	if (ctx && ctx->log_json) {
		va_start(ap, fmt);
		log_jsonv(ctx, "info", fmt, ap);
		va_end(ap);
		return;
	}
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int dlk_print_json_list(cJSON *objects, struct dlk_err *err)
{
	cJSON *list = cJSON_CreateObject();
	char *s;

	cJSON_AddStringToObject(list, "apiVersion", "v1");
	cJSON_AddStringToObject(list, "kind", "List");
	cJSON_AddItemReferenceToObject(list, "items", objects);
	s = dlk_json_print(list);
	cJSON_Delete(list);
	if (!s)
		return dlk_errf(err, DLK_EXIT_FAIL, "cannot print the objects as JSON");
	printf("%s\n", s);
	free(s);
	return 0;
}

void dlk_progress_draw(struct dlk_progress *p, int force, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	double now;

	if (!p->ctx || !p->ctx->tty_err || p->ctx->quiet)
		return;
	now = dlk_now();
	if (!force && p->drawn && now - p->last_draw < 0.1)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
	p->last_draw = now;
	p->drawn = 1;
}

void dlk_progress_clear(struct dlk_progress *p)
{
	if (p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->drawn = 0;
	}
}
