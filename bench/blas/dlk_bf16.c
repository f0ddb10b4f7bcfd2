/* bench/blas: dlk's bf16 products (lib/nn/cpu_bgemm.c, training.precision: bf16) behind the
 * cblas_sgemm that bench/blas/gemm.c loads, built by run.sh into a shared library of its own:
 * row-major only (all gemm.c asks), one thread (as dlk calls it, a block of C per thread). */
#include "lib/nn/cpu_bgemm.h"

enum { ROW_MAJOR = 101, TRANS = 112 };

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc);

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
	if (order != ROW_MAJOR)
		return;
	dlk_bgemm(ta == TRANS, tb == TRANS, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
