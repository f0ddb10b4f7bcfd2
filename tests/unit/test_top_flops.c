/* A model's FLOPs per sample (lib/nn/flops.c), the numerator of its model FLOP utilisation,
 * against counts made by hand for the MLP, CNN and GPT examples, and for layers that count 0. */
#include "tests/unit/check.h"

#include <stdlib.h>

#include "lib/nn/net.h"
#include "lib/project/project.h"

static double example_flops(const char *path)
{
	struct dlk_err err = DLK_ERR_INIT;
	struct dlk_project *spec = project_load(path, NULL, 0, &err);
	struct dlk_net net = DLK_NET_INIT;
	double f = -1;

	CHECK_MSG(spec != NULL, "loads %s (%s)", path, err.msg);
	if (!spec)
		return -1;
	if (dlk_net_build(&net, &spec->model, path, 0, dlk_backend_cpu(), &err) == 0)
		f = dlk_net_flops_per_sample(&net);
	else
		CHECK_MSG(0, "builds %s (%s)", path, err.msg);
	dlk_net_release(&net);
	project_free(spec);
	return f;
}

int main(void)
{
	/* flatten 784 -> dense 256 -> relu -> dense 128 -> relu -> dense 10: the GEMMs' multiply-adds,
	 * twice */
	CHECK_NEAR(example_flops("examples/mlp/dlk.yaml"), 2.0 * (784 * 256 + 256 * 128 + 128 * 10), 0);
	/* conv 1->32 3x3 on 28x28 (padding 1), pool to 14x14, conv 32->64 3x3 on 14x14, pool to 7x7,
	 * dense 3136 -> 128 -> 10: 451,584 + 7,225,344 + 802,816 + 2,560 */
	CHECK_NEAR(example_flops("examples/cnn/dlk.yaml"),
	           2.0 * (32 * 1 * 9) * 28 * 28 + 2.0 * (64 * 32 * 9) * 14 * 14 + 2.0 * 3136 * 128 + 2.0 * 128 * 10, 0);
	CHECK_NEAR(example_flops("examples/cnn/dlk.yaml"), 8482304, 0);
	/* the GPT: T = 128 tokens, D = 128, 4 blocks, a tied head of 257. Per block: attention's
	 * projections 2 T (4 D^2), its scores and weighted sum 4 T^2 D, the MLP 2 T (2 x 4 D^2); the
	 * head 2 T D V; embeddings, norms and GELUs count 0. Per token this is PaLM's 2N + 4 L T D
	 * (N: the 786,432 weights of the blocks' matrices, and the head's 32,896). */
	{
		double T = 128, D = 128, V = 257, L = 4;
		double block = 2 * T * 4 * D * D + 4 * T * T * D + 2 * T * 2 * 4 * D * D;
		double want = L * block + 2 * T * D * V;
		CHECK_NEAR(want, 243302400, 0);
		CHECK_NEAR(example_flops("examples/gpt/dlk.yaml"), want, 0);
		CHECK_NEAR(want / T, 2 * (786432 + 32896) + 4 * L * T * D, 0);
	}
	CHECK_NEAR(DLK_TRAIN_FLOPS_FACTOR, 3, 0);
	return CHECK_DONE();
}
