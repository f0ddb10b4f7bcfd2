/* Reading a --log-format json line back as text (see logline.h). */
#include "lib/jobs/logline.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#define MAX_LINE (1u << 20) /* a log line longer than this is shown as it is */

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int dlk_logline_text(const char *line, size_t len, char *out, size_t n)
{
	cJSON *o;
	const char *level, *msg, *hint;
	int ok = 0;

	if (!n || len < 2 || len > MAX_LINE || line[0] != '{')
		return 0;
	o = cJSON_ParseWithLength(line, len);
	level = str(o, DLK_LOG_KEY_LEVEL);
	msg = str(o, DLK_LOG_KEY_MSG);
	hint = str(o, DLK_LOG_KEY_HINT);
	if (cJSON_IsObject(o) && level && msg && str(o, DLK_LOG_KEY_TIME)) {
		const char *prefix = !strcmp(level, "error") ? "error: " : !strcmp(level, "warning") ? "warning: " : "";
		snprintf(out, n, "%s%s%s%s%s", prefix, msg, hint ? " (hint: " : "", hint ? hint : "", hint ? ")" : "");
		/* one line: a message of several keeps them on it */
		for (char *p = out; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		ok = 1;
	}
	cJSON_Delete(o);
	return ok;
}
