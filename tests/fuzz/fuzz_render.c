/* libFuzzer target: the mustache renderer. The input is a template; it is rendered against a
 * context with hostile values, and whatever renders must not crash the YAML reader either.
 * Corpus: tests/fuzz/render/. */
#include "lib/render/mustache.h"
#include "lib/util/yamljson.h"

#include <stdint.h>
#include <stdlib.h>

static cJSON *ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf out = DLK_BUF_INIT;
	struct mustache *t;
	size_t line;

	if (!ctx)
		ctx = cJSON_Parse("{\"name\":\"a: b\\n- c\",\"n\":3,\"t\":true,\"f\":false,\"z\":null,"
		                  "\"list\":[{\"k\":\"{{x}}\"},{\"k\":\"*a &b\"}],\"obj\":{\"k\":\"yes\",\"e\":\"\"}}");
	t = mustache_parse("fuzz.yaml", (const char *)data, size, &err);
	if (!t)
		return 0;
	if (!mustache_render(t, ctx, NULL, 1 << 20, &out, &err)) {
		cJSON *docs = yamljson_parse(out.data, out.len, "rendered", &line, &err);
		cJSON_Delete(docs);
	}
	dlk_buf_release(&out);
	mustache_free(t);
	return 0;
}
