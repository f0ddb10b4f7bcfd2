/* GEMMs of the CUDA backend: cuBLAS for the plain ones, cuBLASLt for a dense layer's forward,
 * whose bias and ReLU ride in the GEMM's epilogue instead of a second pass over the output.
 *
 * Everything is row-major to the caller and column-major to cuBLAS: a row-major [m, n] matrix is
 * the column-major [n, m] matrix with the same bytes, so C = op(A) op(B) is computed as
 * C^T = op(B)^T op(A)^T with the operands swapped. FP32 in, FP32 out, FP32 accumulation
 * (CUBLAS_COMPUTE_32F: no TF32), so results stay within float rounding of the CPU backend.
 *
 * training.precision: bf16 (set_precision): the operands are rounded to bfloat16 (to nearest
 * even, the CPU backend's rounding, lib/nn/cpu_bgemm.h) into scratch buffers, and cublasGemmEx
 * multiplies them with FP32 accumulation into the FP32 C. A dense layer's forward then takes the
 * plain path (the GEMM, then bias and activation). */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda.h"

static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_ws;                 /* cuBLASLt's workspace */
static const size_t WS_BYTES = 32u << 20;
static void (*g_bias_act)(float *y, const float *bias, int rows, int cols, int act);

static void note_blas(const char *what, cublasStatus_t s)
{
	if (s != CUBLAS_STATUS_SUCCESS)
		dlk_cu_notef("%s: %s (cuBLAS status %d)", what, cublasGetStatusString(s), (int)s);
}

/* ---- bf16 products ---- */

static int g_bf16;
static __nv_bfloat16 *g_half[2]; /* the rounded operands, grown as needed */
static size_t g_half_n[2];

static void cu_set_precision(int bf16)
{
	g_bf16 = bf16 != 0;
}

__global__ void k_round_bf16(const float *x, int rows, int cols, int ld, __nv_bfloat16 *y)
{
	size_t n = (size_t)rows * cols;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		y[i] = __float2bfloat16_rn(x[(i / cols) * (size_t)ld + i % cols]);
}

/* rows x cols of x (row stride ld) rounded into scratch buffer `which`, packed (stride cols);
 * NULL when out of device memory */
static const __nv_bfloat16 *rounded(int which, const float *x, int rows, int cols, int ld)
{
	size_t n = (size_t)rows * cols;
	if (g_half_n[which] < n) {
		dlk_cu_free(g_half[which]);
		g_half[which] = (__nv_bfloat16 *)dlk_cu_alloc(n * sizeof(__nv_bfloat16));
		g_half_n[which] = g_half[which] ? n : 0;
		if (!g_half[which]) {
			dlk_cu_notef("training.precision: bf16: no device memory for a %d x %d operand", rows, cols);
			return NULL;
		}
	}
	int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
	k_round_bf16<<<blocks, 256, 0, dlk_cu_stream>>>(x, rows, cols, ld, g_half[which]);
	return g_half[which];
}

static void bgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                  float beta, float *c, int ldc)
{
	/* op(A) is [m, k]: stored [m, k] or, transposed, [k, m]; likewise op(B) [k, n] */
	int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
	const __nv_bfloat16 *ah = rounded(0, a, ar, ac, lda), *bh = rounded(1, b, br, bc, ldb);
	if (!ah || !bh)
		return;
	note_blas("cublasGemmEx (bf16)",
	          cublasGemmEx(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, bh,
	                       CUDA_R_16BF, bc, ah, CUDA_R_16BF, ac, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
	                       CUBLAS_GEMM_DEFAULT));
}

static void cu_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                     int ldb, float beta, float *c, int ldc)
{
	if (m <= 0 || n <= 0)
		return;
	if (g_bf16 && k > 0) {
		bgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
	note_blas("cublasSgemm", cublasSgemm(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n,
	                                     m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

/* ---- the dense forward with a cuBLASLt epilogue ---- */

/* One prepared GEMM: descriptors and the algorithm the heuristic chose for one shape, one
 * epilogue and one alignment of the pointers (the heuristic picks by alignment too). */
struct plan {
	int used;
	int batch, in, out, epi;
	int align[4]; /* W, x, y, bias: the largest power of two up to 16 dividing the address */
	int ok;       /* 0: cuBLASLt has no algorithm for it, use the plain path */
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasLtMatmulAlgo_t algo;
};

#define PLANS 64
static struct plan g_plans[PLANS];
static int g_next_plan;

static int align_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	int al = 16;
	while (al > 1 && a % (uintptr_t)al)
		al >>= 1;
	return al;
}

static void plan_release(struct plan *p)
{
	if (p->desc)
		cublasLtMatmulDescDestroy(p->desc);
	if (p->la)
		cublasLtMatrixLayoutDestroy(p->la);
	if (p->lb)
		cublasLtMatrixLayoutDestroy(p->lb);
	if (p->ld)
		cublasLtMatrixLayoutDestroy(p->ld);
	memset(p, 0, sizeof(*p));
}

/* y^T[out, batch] = W^T...: in column-major terms D (out x batch) = op(A) B with A = W stored
 * as the column-major [in x out] matrix (so op = T), B = x as [in x batch], bias per row of D. */
static struct plan *plan_for(int batch, int in, int out, int epi, const int align[4], const float *bias)
{
	for (int i = 0; i < PLANS; i++) {
		struct plan *p = &g_plans[i];
		if (p->used && p->batch == batch && p->in == in && p->out == out && p->epi == epi &&
		    !memcmp(p->align, align, sizeof(p->align)))
			return p;
	}
	struct plan *p = &g_plans[g_next_plan];
	g_next_plan = (g_next_plan + 1) % PLANS;
	plan_release(p);
	p->used = 1;
	p->batch = batch;
	p->in = in;
	p->out = out;
	p->epi = epi;
	memcpy(p->align, align, sizeof(p->align));

	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	cublasLtEpilogue_t e = (cublasLtEpilogue_t)epi;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res;
	int found = 0;
	uint32_t al[4] = { (uint32_t)align[0], (uint32_t)align[1], (uint32_t)align[2], (uint32_t)align[2] };
	size_t ws = WS_BYTES;

	memset(&res, 0, sizeof(res));
	if (cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) ||
	    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) ||
	    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)) ||
	    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) ||
	    cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, (uint64_t)in, (uint64_t)out, in) ||
	    cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_32F, (uint64_t)in, (uint64_t)batch, in) ||
	    cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_32F, (uint64_t)out, (uint64_t)batch, out) ||
	    cublasLtMatmulPreferenceCreate(&pref) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], 4) ||
	    cublasLtMatmulAlgoGetHeuristic(g_lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &found) ||
	    found < 1) {
		p->ok = 0;
	} else {
		p->algo = res.algo;
		p->ok = 1;
	}
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	return p;
}

static void cu_dense_forward(const float *x, const float *w, const float *bias, int batch, int in, int out, int act,
                             float *y)
{
	if (batch <= 0 || out <= 0)
		return;
	/* the epilogues that fit: bias alone, or bias then ReLU; cuBLASLt wants the bias 16-byte
	 * aligned (layers' biases sit wherever the flat parameter array puts them) */
	int epi = g_bf16                ? 0 /* the plain path rounds the operands */
	          : act == DLK_ACT_NONE ? CUBLASLT_EPILOGUE_BIAS
	          : act == DLK_ACT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS
	                                : 0;
	int align[4] = { align_of(w), align_of(x), align_of(y), align_of(bias) };
	if (epi && g_lt && align[3] == 16) {
		struct plan *p = plan_for(batch, in, out, epi, align, bias);
		if (p->ok) {
			const float one = 1.0f, zero = 0.0f;
			cublasStatus_t s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
			                                                  sizeof(bias));
			if (s == CUBLAS_STATUS_SUCCESS)
				s = cublasLtMatmul(g_lt, p->desc, &one, w, p->la, x, p->lb, &zero, y, p->ld, y, p->ld, &p->algo,
				                   g_ws, WS_BYTES, dlk_cu_stream);
			if (s == CUBLAS_STATUS_SUCCESS)
				return;
			/* a plan that fails once is not tried again: the plain path is always right */
			p->ok = 0;
			if (s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE) {
				note_blas("cublasLtMatmul", s);
				return;
			}
		}
	}
	cu_sgemm(0, 1, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
	g_bias_act(y, bias, batch, out, act);
}

int dlk_cu_blas_init(struct dlk_backend *b, char *msg, size_t len)
{
	cublasStatus_t s = cublasCreate(&g_blas);
	if (s != CUBLAS_STATUS_SUCCESS) {
		snprintf(msg, len, "cuBLAS cannot start: %s", cublasGetStatusString(s));
		return -1;
	}
	cublasSetStream(g_blas, dlk_cu_stream);
	/* strict FP32 (the default math mode uses no TF32 for FP32 GEMMs): TF32 would drift from
	 * the CPU backend by more than the tests allow */
	cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH);
	/* one workspace from the pool for both libraries (they share the stream, so never use it at
	 * once): cuBLAS would otherwise cudaMalloc its own on first use */
	g_ws = dlk_cu_alloc(WS_BYTES);
	if (g_ws)
		cublasSetWorkspace(g_blas, g_ws, WS_BYTES);
	/* cuBLASLt is an optimisation: without it (or the workspace) dense layers take the plain path */
	if (!g_ws || cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS)
		g_lt = NULL;
	g_bias_act = b->bias_act; /* installed by dlk_cu_install_kernels() before this */
	b->sgemm = cu_sgemm;
	b->dense_forward = cu_dense_forward;
	b->set_precision = cu_set_precision;
	return 0;
}

void dlk_cu_blas_version(char *out, size_t len)
{
	int maj = 0, min = 0, pat = 0;
	cublasGetProperty(MAJOR_VERSION, &maj);
	cublasGetProperty(MINOR_VERSION, &min);
	cublasGetProperty(PATCH_LEVEL, &pat);
	snprintf(out, len, "cuBLAS %d.%d.%d", maj, min, pat);
}
