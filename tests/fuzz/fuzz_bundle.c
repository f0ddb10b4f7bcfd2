/* libFuzzer target: the model bundle reader (tar, model.json, safetensors header and sizes),
 * through a memory file, then what serving does with a bundle that reads: its name checked for
 * URLs (the error path that once read a freed name) and the memory its activations need for a
 * batch (serving.max_memory). Corpus: tests/fuzz/bundle/. */
#include "lib/nn/backend.h"
#include "lib/serve/model.h"
#include "lib/train/bundle.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	char path[64];
	int fd = memfd_create("bundle", 0);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (!dlk_bundle_read(path, &b, &err)) {
			struct dlk_serve_model m;
			int lowered;
			if (!dlk_serve_model_load(&m, NULL, path, dlk_backend_cpu(), &err)) {
				dlk_serve_model_fit(&m, 64, 64 << 20, &lowered, &err);
				dlk_serve_model_release(&m);
			}
		}
		dlk_bundle_release(&b);
	}
	close(fd);
	return 0;
}
