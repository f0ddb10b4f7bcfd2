/* A model's FLOPs per sample (lib/nn/flops.c), the numerator of its model FLOP utilisation,
 * against counts made by hand for the MLP, CNN and GPT examples; and the denominator, a device's
 * peak (lib/top/peak.c): GPUs by their NVML names, this machine's CPU by its threads. */
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#include "lib/nn/net.h"
#include "lib/project/project.h"
#include "lib/top/peak.h"
#include <unistd.h>

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

	/* peaks: the names NVML gives, the longest match first (H100 PCIe is not an SXM H100, an
	 * A100 not an A10, an L40S not an L4) */
	{
		static const struct {
			const char *name;
			double tflops;
		} want[] = { { "NVIDIA H100 80GB HBM3", 66.9 }, { "NVIDIA H100 PCIe", 51.2 }, { "NVIDIA H200", 66.9 },
		             { "NVIDIA A100-SXM4-40GB", 19.5 }, { "NVIDIA A10G", 31.2 },    { "NVIDIA L4", 30.3 },
		             { "NVIDIA L40S", 91.6 },           { "Tesla T4", 8.1 } };
		struct dlk_peak p;
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			CHECK_MSG(dlk_peak_gpu(want[i].name, &p) == 0 && p.flops == want[i].tflops * 1e12, "%s: %g", want[i].name,
			          p.flops);
			CHECK(strstr(p.source, want[i].name) && strstr(p.source, "FP32"));
		}
		CHECK(dlk_peak_gpu("Some GPU 9000", &p) == -1 && dlk_peak_gpu(NULL, &p) == -1);
	}
	/* the CPU: proportional to the threads, all of them for 0 or too many */
	{
		struct dlk_peak one, two, all, over;
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		if (dlk_peak_cpu(1, &one) == 0) {
			CHECK(one.flops >= 1e8 * 8 && strstr(one.source, "CPU: 1 thread x "));
			CHECK(dlk_peak_cpu(0, &all) == 0 && all.flops == one.flops * (double)online);
			CHECK(dlk_peak_cpu(100000, &over) == 0 && over.flops == all.flops);
			if (online >= 2)
				CHECK(dlk_peak_cpu(2, &two) == 0 && two.flops == 2 * one.flops && strstr(two.source, "CPU: 2 threads x "));
		} else {
#if defined(__x86_64__) || defined(__i386__)
			/* an x86 /proc/cpuinfo always has "cpu MHz" */
			CHECK_MSG(0, "the CPU's clock can be read here (cpufreq or /proc/cpuinfo)");
#endif
		}
	}
	return CHECK_DONE();
}
