#include "lib/util/jsonprint.h"
#include "lib/util/buf.h"
#include "lib/util/err.h"
#include "lib/util/yamljson.h"

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

char *dlk_doc_text(const cJSON *doc, int json, struct dlk_err *err)
{
	char *s;
	size_t n;

	if (!json)
		return yamljson_emit(doc, err);
	s = dlk_json_print(doc);
	n = s ? strlen(s) : 0;
	if (s) {
		char *t = realloc(s, n + 2);
		if (t) {
			t[n] = '\n';
			t[n + 1] = '\0';
			return t;
		}
		free(s);
	}
	dlk_errf(err, DLK_EXIT_FAIL, "out of memory writing the JSON document");
	return NULL;
}

int dlk_doc_print(FILE *f, const cJSON *doc, int json, struct dlk_err *err)
{
	char *s = dlk_doc_text(doc, json, err);

	if (!s)
		return -1;
	fputs(s, f);
	free(s);
	return 0;
}
