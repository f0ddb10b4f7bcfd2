#include "lib/nn/cpu_gemv.h"

#include <cblas.h>

void dlk_cpu_gemv(const float *W, const float *x, int k, int n, float *y)
{
	if (n <= 0)
		return;
	cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, W, k, x, 1, 0.0f, y, 1);
}
