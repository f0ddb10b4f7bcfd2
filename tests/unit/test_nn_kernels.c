/* The per-element rules of lib/nn/kernels.h that both backends call, where the CPU backend has a
 * fast path beside its plain loop: the two must follow the header's rule, or the CUDA backend
 * (which has only the plain form) disagrees with the CPU on the same input. */
#include "tests/unit/check.h"

#include "lib/nn/backend.h"

int main(void)
{
	const struct dlk_backend *cpu = dlk_backend_cpu();

	/* the max-pooling rule: a NaN wins and then stays, the first maximum wins a tie */
	CHECK(dlk_k_max_takes(2.0f, 1.0f) && !dlk_k_max_takes(1.0f, 2.0f) && !dlk_k_max_takes(1.0f, 1.0f));
	CHECK(dlk_k_max_takes(NAN, 1.0f) && !dlk_k_max_takes(5.0f, NAN) && dlk_k_max_takes(NAN, NAN));

	/* a NaN in each position of a 2x2 window, on the unrolled 2x2/2 path and the general path
	 * (the same window seen as 2x2 windows with stride 1 of a 2x2 image: one output) */
	for (int pos = 0; pos < 4; pos++) {
		float x[4] = { 1, 4, 3, 2 }, y[1] = { 0 }, yg[1] = { 0 };
		int32_t am[1], amg[1];
		x[pos] = NAN;
		cpu->maxpool_forward(x, 1, 1, 2, 2, 2, 2, 1, 1, y, am);
		cpu->maxpool_forward(x, 1, 1, 2, 2, 2, 1, 1, 1, yg, amg);
		CHECK_MSG(isnan(y[0]) && am[0] == pos, "2x2/2 path: a NaN at %d wins and stays (got %g at %d)", pos,
		          (double)y[0], am[0]);
		CHECK_MSG(isnan(yg[0]) && amg[0] == pos, "general path: a NaN at %d wins and stays (got %g at %d)", pos,
		          (double)yg[0], amg[0]);
	}
	{
		float x[4] = { 3, 3, 1, 3 }, y[1];
		int32_t am[1];
		cpu->maxpool_forward(x, 1, 1, 2, 2, 2, 2, 1, 1, y, am);
		CHECK_MSG(y[0] == 3 && am[0] == 0, "a tie goes to the first maximum");
	}
	return CHECK_DONE();
}
