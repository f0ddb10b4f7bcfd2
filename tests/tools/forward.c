/* dlk's in-process forward pass, for tests that compare a server's answers with it:
 *   forward BUNDLE PROJECT.yaml START N BATCH OUT.f32
 * loads the project's test split as training does (lib/data: its scaling, bit for bit), runs samples
 * [START, START+N) through the bundle's network (lib/nn) BATCH rows at a time, and writes their
 * logits (float32, little-endian on this machine) to OUT. Prints the argmax accuracy on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/dataset.h"
#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/train/bundle.h"
#include "lib/util/mem.h"

int main(int argc, char **argv)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_bundle b = DLK_BUNDLE_INIT;
	struct dlk_net net = DLK_NET_INIT;
	struct dlk_dataset test = DLK_DATASET_INIT;
	struct dlk_data_opts dopts = { 0 };
	struct dlk_project *spec;

	if (argc != 7) {
		fprintf(stderr, "usage: forward BUNDLE PROJECT.yaml START N BATCH OUT.f32\n");
		return 2;
	}
	size_t start = strtoull(argv[3], NULL, 10), n = strtoull(argv[4], NULL, 10);
	int batch = atoi(argv[5]);
	if (!(spec = project_load(argv[2], NULL, 0, &err)) || dlk_bundle_read(argv[1], &b, &err) ||
	    dlk_bundle_net(&b, dlk_backend_cpu(), &net, &err) || dlk_net_reserve(&net, batch, &err)) {
		fprintf(stderr, "forward: %s\n", err.msg);
		return 1;
	}
	memcpy(dopts.shape, spec->model.input, sizeof(dopts.shape));
	if (dlk_data_load(&spec->data, "test", &dopts, &test, &err)) {
		fprintf(stderr, "forward: %s\n", err.msg);
		return 1;
	}
	if (start + n > test.n) {
		fprintf(stderr, "forward: the test split has %zu samples\n", test.n);
		return 1;
	}
	FILE *out = fopen(argv[6], "wb");
	if (!out) {
		perror(argv[6]);
		return 1;
	}
	float *x = xmalloc((size_t)batch * test.sample_size * sizeof(float));
	size_t correct = 0;
	for (size_t i = start; i < start + n; i += (size_t)batch) {
		int rows = (int)(start + n - i < (size_t)batch ? start + n - i : (size_t)batch);
		dlk_dataset_gather_range(&test, i, (size_t)rows, x);
		const float *y = dlk_net_forward(&net, x, rows, 0);
		fwrite(y, sizeof(float), (size_t)rows * (size_t)net.n_classes, out);
		for (int r = 0; r < rows; r++) {
			int best = 0;
			for (int k = 1; k < net.n_classes; k++)
				if (y[r * net.n_classes + k] > y[r * net.n_classes + best])
					best = k;
			correct += best == test.y[i + (size_t)r];
		}
	}
	fclose(out);
	printf("%zu %zu\n", correct, n);
	free(x);
	dlk_dataset_release(&test);
	dlk_net_release(&net);
	dlk_bundle_release(&b);
	project_free(spec);
	return 0;
}
