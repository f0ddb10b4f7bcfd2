#include "lib/util/err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

const char *dlk_exit_name(int code)
{
	static const struct {
		int code;
		const char *name;
	} names[] = {
#define X(name, c, text) { c, #name },
		DLK_EXIT_CODES(X)
#undef X
	};
	static _Thread_local char lower[32];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].code != code)
			continue;
		size_t k = 0;
		for (; names[i].name[k] && k + 1 < sizeof(lower); k++)
			lower[k] = (char)tolower((unsigned char)names[i].name[k]);
		lower[k] = '\0';
		return lower;
	}
	return NULL;
}

int dlk_errf(struct dlk_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	err->code = code ? code : DLK_EXIT_FAIL;
	err->hint[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int dlk_err_hint(struct dlk_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
	va_end(ap);
	return -1;
}

int dlk_err_prefix(struct dlk_err *err, const char *fmt, ...)
{
	char old[DLK_ERR_MSG_MAX];
	va_list ap;
	int n;

	if (!err)
		return -1;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n + 2 < sizeof(err->msg)) {
		/* memcpy, not snprintf("%s"): gcc -O1 (SANITIZE=1) flags that as possible truncation */
		size_t used = (size_t)n + 2, k = strnlen(old, sizeof(err->msg) - used - 1);
		memcpy(err->msg + n, ": ", 2);
		memcpy(err->msg + used, old, k);
		err->msg[used + k] = '\0';
	}
	if (!err->code)
		err->code = DLK_EXIT_FAIL;
	return -1;
}

void dlk_err_clear(struct dlk_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
	err->hint[0] = '\0';
}
