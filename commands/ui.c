#include "commands/ui.h"
#include "lib/jobs/logline.h"
#include "lib/jobs/podenv.h"
#include "lib/util/buf.h"
#include "lib/util/clock.h"
#include "lib/util/jsonprint.h"
#include "lib/util/mem.h"
#include "lib/util/utf8.h"
#include "lib/util/yamljson.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* Writes prefix, then text with every control character made visible (but its line breaks), then
 * a newline, in one write: messages carry names, paths and API answers from outside, and an
 * escape sequence in one must not reach the terminal (git's sanitize_string). */
static void put_line(const char *prefix, const char *text)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_adds(&b, prefix);
	dlk_buf_add_visible(&b, text, strlen(text), 1);
	dlk_buf_addc(&b, '\n');
	fwrite(b.data, 1, b.len, stderr);
	dlk_buf_release(&b);
}

void dlk_put_text(FILE *f, const char *text, size_t len)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_add_visible(&b, text, len, 1);
	fwrite(b.data, 1, b.len, f);
	dlk_buf_release(&b);
}

static void put_linev(const char *prefix, const char *fmt, va_list ap)
{
	struct dlk_buf b = DLK_BUF_INIT;

	dlk_buf_vaddf(&b, fmt, ap);
	put_line(prefix, b.data);
	dlk_buf_release(&b);
}

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
	put_line(color ? "\033[1;31merror:\033[0m " : "error: ", msg);
	if (err->hint[0])
		put_line(color ? "\033[33mhint:\033[0m " : "hint: ", err->hint);
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

	va_start(ap, fmt);
	put_linev(color ? "\033[1;33mwarning:\033[0m " : "warning: ", fmt, ap);
	va_end(ap);
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
	put_linev("", fmt, ap);
	va_end(ap);
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

int dlk_print_objects(const struct dlk_ctx *ctx, cJSON *objects, struct dlk_err *err)
{
	if (ctx->output == DLK_OUTPUT_JSON)
		return dlk_print_json_list(objects, err);
	if (ctx->output != DLK_OUTPUT_YAML && ctx->output != DLK_OUTPUT_TEXT)
		return dlk_errf(err, DLK_EXIT_USAGE, "--dry-run prints yaml or json, not '%s'", dlk_output_names[ctx->output]);
	char *y = yamljson_emit_stream(objects, err);
	if (!y)
		return -1;
	fputs(y, stdout);
	free(y);
	return 0;
}

int dlk_print_applied(const struct dlk_ctx *ctx, cJSON *applied, const char *name)
{
	struct dlk_err err = DLK_ERR_INIT;

	if (ctx->output == DLK_OUTPUT_JSON) {
		/* the objects are in the cluster: a list that cannot be printed is said, not fatal */
		if (dlk_print_json_list(applied, &err))
			dlk_warn(ctx, "%s", err.msg);
		return 1;
	}
	if (ctx->quiet) {
		printf("%s\n", name);
		return 1;
	}
	return 0;
}

int dlk_term_width(void)
{
	struct winsize ws;
	const char *env = getenv("COLUMNS");
	char *end;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (env && *env) {
		long n = strtol(env, &end, 10);
		if (!*end && n > 0 && n < 10000)
			return (int)n;
	}
	return 80;
}

/* One cell as it is shown: control characters and bytes that are not UTF-8 made visible the
 * way every other outside string is (dlk_buf_add_visible). Returns its width in characters. */
static size_t cell_add(struct dlk_buf *b, const char *s)
{
	size_t from = b->len, chars = 0;

	dlk_buf_add_visible(b, s, strlen(s), 0);
	/* what was added is valid UTF-8 now: count its characters (the lead bytes) */
	for (size_t i = from; i < b->len; i++)
		chars += ((unsigned char)b->data[i] & 0xc0) != 0x80;
	return chars;
}

/* The width a cell is shown at (cell_add into a scratch buffer) */
static size_t cell_width(const char *s)
{
	struct dlk_buf t = DLK_BUF_INIT;
	size_t w = cell_add(&t, s);

	dlk_buf_release(&t);
	return w;
}

void dlk_table_print(const struct dlk_ctx *ctx, struct dlk_buf *b, const struct dlk_table_row *rows, int nrows,
                     int ncols)
{
	size_t w[DLK_TABLE_COLS] = { 0 }, width = ctx && ctx->tty_out ? (size_t)dlk_term_width() : 0;
	struct dlk_buf line = DLK_BUF_INIT;

	if (ncols > DLK_TABLE_COLS)
		ncols = DLK_TABLE_COLS;
	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++) {
			size_t cw = cell_width(rows[r].c[c]);
			if (cw > w[c])
				w[c] = cw;
		}
	for (int r = 0; r < nrows; r++) {
		size_t chars = 0;
		dlk_buf_reset(&line);
		for (int c = 0; c < ncols; c++) {
			size_t cw = cell_add(&line, rows[r].c[c]);
			chars += cw;
			for (; c < ncols - 1 && cw < w[c] + 3; cw++, chars++)
				dlk_buf_addc(&line, ' ');
		}
		for (; line.len && line.data[line.len - 1] == ' '; chars--)
			line.data[--line.len] = '\0';
		/* A line longer than the terminal would wrap into the next row and break every column
		 * below it (a failed run's reason did at 120 columns). The free text is last, so the
		 * cut takes it first; the "…" says something was cut. Piped output is data: kept whole. */
		if (width && chars > width) {
			size_t keep = 0, seen = 0;
			for (; keep < line.len; keep++)
				if (((unsigned char)line.data[keep] & 0xc0) != 0x80 && seen++ == width - 1)
					break;
			line.len = keep;
			while (line.len && line.data[line.len - 1] == ' ')
				line.len--;
			dlk_buf_add(b, line.data, line.len);
			dlk_buf_adds(b, "\xe2\x80\xa6"); /* … */
		} else {
			dlk_buf_add(b, line.data, line.len);
		}
		dlk_buf_addc(b, '\n');
	}
	dlk_buf_release(&line);
}

void dlk_progress_draw(struct dlk_progress *p, int force, const char *fmt, ...)
{
	char line[512];
	struct dlk_buf b = DLK_BUF_INIT;
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
	dlk_buf_adds(&b, "\r\033[K");
	dlk_buf_add_visible(&b, line, strlen(line), 0);
	fwrite(b.data, 1, b.len, stderr);
	dlk_buf_release(&b);
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

void dlk_fmt_flops(char *buf, size_t n, double f)
{
	static const char *const pre[] = { "", "k", "M", "G", "T", "P" };
	int i = 0;

	while (f >= 1000 && i < 5) {
		f /= 1000;
		i++;
	}
	snprintf(buf, n, "%.*f %sFLOP/s", f < 10 ? 2 : f < 100 ? 1 : 0, f, pre[i]);
}

void dlk_fmt_bytes(char *buf, size_t n, unsigned long long b)
{
	if (b < 1000)
		snprintf(buf, n, "%llu B", b);
	else if (b < 1000ull * 1000)
		snprintf(buf, n, "%.1f kB", (double)b / 1e3);
	else if (b < 1000ull * 1000 * 1000)
		snprintf(buf, n, "%.1f MB", (double)b / 1e6);
	else
		snprintf(buf, n, "%.2f GB", (double)b / 1e9);
}
