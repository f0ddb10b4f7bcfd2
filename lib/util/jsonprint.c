#include "lib/util/jsonprint.h"
#include "lib/util/buf.h"

#include <stdlib.h>
#include <string.h>

/* A scalar (or an empty container) as cJSON writes it, so numbers, escapes and raw nodes read
 * the same as everywhere else dlk writes JSON. 0, or -1 when out of memory. */
static int add_scalar(struct dlk_buf *b, const cJSON *v)
{
	char *s = cJSON_PrintUnformatted(v);

	if (!s)
		return -1;
	dlk_buf_adds(b, s);
	free(s);
	return 0;
}

static int add_value(struct dlk_buf *b, const cJSON *v, int depth)
{
	const cJSON *c;
	int obj = cJSON_IsObject(v);

	if ((!obj && !cJSON_IsArray(v)) || !v->child)
		return add_scalar(b, v);
	dlk_buf_addc(b, obj ? '{' : '[');
	for (c = v->child; c; c = c->next) {
		dlk_buf_addf(b, "\n%*s", 2 * (depth + 1), "");
		if (obj) {
			cJSON *key = cJSON_CreateStringReference(c->string ? c->string : "");
			int rc = key ? add_scalar(b, key) : -1;
			cJSON_Delete(key);
			if (rc)
				return -1;
			dlk_buf_adds(b, ": ");
		}
		if (add_value(b, c, depth + 1))
			return -1;
		if (c->next)
			dlk_buf_addc(b, ',');
	}
	dlk_buf_addf(b, "\n%*s%c", 2 * depth, "", obj ? '}' : ']');
	return 0;
}

char *dlk_json_print(const cJSON *v)
{
	struct dlk_buf b = DLK_BUF_INIT;

	if (!v || add_value(&b, v, 0)) {
		dlk_buf_release(&b);
		return NULL;
	}
	return dlk_buf_detach(&b, NULL);
}
