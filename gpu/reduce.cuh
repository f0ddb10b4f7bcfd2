/* The block reduction, written once for every kernel of the CUDA backend that reduces (sum of
 * squares, row sums, softmax's max and sum, the loss).
 *
 * Each warp reduces its 32 values with shuffles, warp leaders meet in shared memory, and the
 * first warp reduces those. The order of the additions depends only on the block size and the
 * thread index, never on timing, so a sum is the same bits on every run. */
#ifndef DLK_GPU_REDUCE_CUH
#define DLK_GPU_REDUCE_CUH

#define DLK_WARP 32
#define DLK_BLOCK_MAX 1024

struct dlk_sum_op {
	template <typename T> __device__ static T apply(T a, T b) { return a + b; }
	template <typename T> __device__ static T identity() { return T(0); }
};

/* The NaN rule is the CPU's: fmaxf would drop a NaN, a NaN must win. */
struct dlk_max_op {
	template <typename T> __device__ static T apply(T a, T b) { return (b > a || b != b) ? b : a; }
	template <typename T> __device__ static T identity() { return -INFINITY; }
};

template <typename Op, typename T> __device__ inline T dlk_warp_reduce(T v)
{
	for (int off = DLK_WARP / 2; off > 0; off >>= 1)
		v = Op::apply(v, __shfl_down_sync(0xffffffffu, v, off));
	return v;
}

/* Reduces v over the whole block (blockDim.x a multiple of 32, at most 1024) and returns the
 * result to EVERY thread. Every thread of the block must call it (it synchronises), and it may be
 * called several times in a row by the same kernel. */
template <typename Op, typename T> __device__ inline T dlk_block_reduce(T v)
{
	__shared__ T lead[DLK_BLOCK_MAX / DLK_WARP];
	__shared__ T result;
	int lane = threadIdx.x % DLK_WARP, warp = threadIdx.x / DLK_WARP;
	int nwarps = (blockDim.x + DLK_WARP - 1) / DLK_WARP;

	v = dlk_warp_reduce<Op>(v);
	__syncthreads(); /* a previous call's readers of lead[] and result are done */
	if (lane == 0)
		lead[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < nwarps ? lead[lane] : Op::template identity<T>();
		v = dlk_warp_reduce<Op>(v);
		if (lane == 0)
			result = v;
	}
	__syncthreads();
	return result;
}

template <typename T> __device__ inline T dlk_block_sum(T v) { return dlk_block_reduce<dlk_sum_op>(v); }
template <typename T> __device__ inline T dlk_block_max(T v) { return dlk_block_reduce<dlk_max_op>(v); }

#endif
