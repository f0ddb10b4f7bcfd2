/* The store pod's protocol, as each side reads the other (see wire.h). */
#include "lib/store/wire.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int dlk_store_wire_size(const char *body, size_t len, unsigned long long *size)
{
	cJSON *j = cJSON_ParseWithLength(body, len);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "size");
	/* exactly a whole number below 2^53, where a double still counts bytes one by one */
	int ok = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9007199254740992.0 &&
	         v->valuedouble == (double)(unsigned long long)v->valuedouble;

	if (ok)
		*size = (unsigned long long)v->valuedouble;
	cJSON_Delete(j);
	return ok ? 0 : -1;
}

int dlk_store_wire_stat(const char *body, size_t len, unsigned long long *size, char hex[65])
{
	cJSON *j;
	const cJSON *v;

	hex[0] = '\0';
	if (dlk_store_wire_size(body, len, size))
		return -1;
	j = cJSON_ParseWithLength(body, len);
	v = cJSON_GetObjectItemCaseSensitive(j, "sha256");
	/* only 64 lowercase hex digits are a digest; anything else is no claim */
	if (cJSON_IsString(v) && strlen(v->valuestring) == 64 && strspn(v->valuestring, "0123456789abcdef") == 64)
		memcpy(hex, v->valuestring, 65);
	cJSON_Delete(j);
	return 0;
}

int dlk_store_wire_list(const char *body, size_t len, const char *what, dlk_store_list_fn fn, void *ctx,
                        struct dlk_err *err)
{
	cJSON *j = cJSON_ParseWithLength(body, len);
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(j, "names"), *e;

	if (!cJSON_IsArray(names)) {
		cJSON_Delete(j);
		return dlk_errf(err, DLK_EXIT_CONNECT, "%s: the store's pod answered something that is not a list", what);
	}
	cJSON_ArrayForEach(e, names)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *sz = cJSON_GetObjectItemCaseSensitive(e, "size");
		unsigned long long size = 0;
		if (!cJSON_IsString(n) || !*n->valuestring || strchr(n->valuestring, '/') || !strcmp(n->valuestring, ".") ||
		    !strcmp(n->valuestring, ".."))
			continue;
		if (cJSON_IsNumber(sz) && sz->valuedouble >= 0 && sz->valuedouble < 9007199254740992.0)
			size = (unsigned long long)sz->valuedouble;
		if (fn(ctx, n->valuestring, size))
			break;
	}
	cJSON_Delete(j);
	return 0;
}

int dlk_store_wire_range(const char *range, unsigned long long size, unsigned long long *from)
{
	const char *p = range;
	unsigned long long v = 0;

	if (!range || strncmp(p, "bytes=", 6))
		return -1;
	p += 6;
	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		if (v > (~0ull - 9) / 10)
			return -1;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (strcmp(p, "-") || v > size)
		return -1;
	*from = v;
	return 0;
}
