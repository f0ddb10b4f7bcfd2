#include "commands/ui.h"
#include "lib/util/clock.h"

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
	/* a multi-line message (several problems in one file) keeps its lines readable */
	fprintf(stderr, "%serror:%s %s\n", color ? "\033[1;31m" : "", color ? "\033[0m" : "", msg);
	if (err->hint[0])
		fprintf(stderr, "%shint:%s %s\n", color ? "\033[33m" : "", color ? "\033[0m" : "", err->hint);
	return err->code ? err->code : DLK_EXIT_FAIL;
}

void dlk_warn(const struct dlk_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	int color = ctx && ctx->color;

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
	s = cJSON_Print(list);
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
