/* libFuzzer target: PNG and JPEG decoding as an image folder or a WebDataset shard reads a file
 * (lib/data/image.c): to gray and to RGB, resized, made planar. Corpus: tests/fuzz/image/. */
#include "lib/data/image.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlk_err err = DLK_ERR_INIT;
	static const int shapes[2][3] = { { 1, 28, 28 }, { 3, 7, 5 } };
	uint8_t out[3 * 28 * 28];

	for (int c = 1; c <= 3; c += 2) {
		struct dlk_image im = DLK_IMAGE_INIT, small = DLK_IMAGE_INIT;
		if (dlk_image_decode(data, size, "fuzz", c, &im, &err) == 0) {
			if (im.c != c || im.w < 1 || im.h < 1 || !im.px)
				abort();
			dlk_image_resize(&im, 5, 3, &small);
			dlk_image_to_planar(&small, out);
			dlk_image_release(&small);
		} else if (im.px) {
			abort(); /* a failed decode leaves nothing behind */
		}
		dlk_image_release(&im);
	}
	for (int s = 0; s < 2; s++)
		dlk_image_sample(data, size, "fuzz", shapes[s], out, &err);
	return 0;
}
