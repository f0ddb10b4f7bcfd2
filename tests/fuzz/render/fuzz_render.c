/* libFuzzer harness for lib/render/mustache (the other files here are its seed corpus):
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -I. -Ibuild $(pkg-config --cflags libcjson) \
 *     -DDLK_VERSION='"0.1.0"' tests/fuzz/render/fuzz_render.c lib/render/mustache.c lib/render/render.c lib/util/yamljson.c \
 *     lib/util/buf.c lib/util/mem.c lib/util/err.c lib/util/suggest.c build/templates.c \
 *     -lyaml -lcjson -o fuzz_render && ./fuzz_render CORPUS tests/fuzz/render
 * Each input is a template, rendered with a training context and parsed as YAML. */
#include <string.h>

#include "lib/render/mustache.h"
#include "lib/render/render.h"
#include "lib/util/yamljson.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static cJSON *ctx;
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_buf out = DLK_BUF_INIT;
	struct mustache *t;

	if (!ctx) {
		static struct dlk_kv labels[] = { { "team", "a\nb: {{x}}" } };
		static struct dlk_spec s;
		s.name = "x";
		s.image = "dlk:0.1.0";
		s.labels = labels;
		s.n_labels = 1;
		s.resources.workers = 2;
		s.resources.gpus = 1;
		s.resources.cpu = "1";
		s.resources.memory = "1Gi";
		s.resources.shm_size = "1Gi";
		s.resources.master_port = 29500;
		s.storage.size = "1Gi";
		s.storage.mount = "/checkpoints";
		ctx = render_context_train(&s, "name: x\n", NULL, &err);
	}
	t = mustache_parse("fuzz.yaml", (const char *)data, size, &err);
	if (!t)
		return 0;
	mustache_check(t, ctx, NULL, &err);
	if (mustache_render(t, ctx, NULL, 1 << 20, &out, &err) == 0)
		cJSON_Delete(yamljson_parse(out.data, out.len, "rendered", NULL, &err));
	dlk_buf_release(&out);
	mustache_free(t);
	return 0;
}
