/* libFuzzer harness for lib/util/yamljson (the other files here are its seed corpus):
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -I. $(pkg-config --cflags libcjson) \
 *     tests/fuzz/yamljson/fuzz_yamljson.c lib/util/yamljson.c lib/util/buf.c lib/util/mem.c \
 *     lib/util/err.c -lyaml -lcjson -o fuzz_yamljson && ./fuzz_yamljson CORPUS tests/fuzz/yamljson
 * Checks the writer's promise too: what parses, written back and parsed again, is the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util/yamljson.h"

static int same(const cJSON *a, const cJSON *b)
{
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return (isnan(a->valuedouble) && isnan(b->valuedouble)) || a->valuedouble == b->valuedouble;
	if ((a->type & 0xff) != (b->type & 0xff))
		return 0;
	if (cJSON_IsString(a) || cJSON_IsRaw(a))
		return !strcmp(a->valuestring, b->valuestring);
	if (cJSON_IsArray(a) || cJSON_IsObject(a)) {
		const cJSON *x = a->child, *y = b->child;
		for (; x && y; x = x->next, y = y->next)
			if ((cJSON_IsObject(a) && strcmp(x->string, y->string)) || !same(x, y))
				return 0;
		return !x && !y;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	cJSON *first = yamljson_parse((const char *)data, size, "fuzz", NULL, &err);
	char *yaml;

	if (!first)
		return 0;
	yaml = yamljson_emit_stream(first, &err);
	if (yaml) {
		cJSON *again = yamljson_parse(yaml, strlen(yaml), "again", NULL, &err);
		if (!again || !same(first, again)) {
			fprintf(stderr, "round trip broken (%s):\n%s\n", again ? "differs" : err.msg, yaml);
			abort();
		}
		cJSON_Delete(again);
		free(yaml);
	}
	cJSON_Delete(first);
	return 0;
}
