/* libFuzzer target: the model bundle reader (tar, model.json, safetensors header and sizes),
 * through a memory file. Corpus: tests/fuzz/bundle/. */
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
		dlk_bundle_read(path, &b, &err);
		dlk_bundle_release(&b);
	}
	close(fd);
	return 0;
}
