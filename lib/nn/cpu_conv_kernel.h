/* The one matrix kernel of cpu_conv.c, included there once per instruction set with
 *   KSUF  a name suffix, KATTR the function attributes (the target), KVW floats per vector,
 *   KNV   vectors per tile row (so a tile of 4 x KNV vectors stays in registers; a tile of one
 *         vector a row has 8 rows, and of two with AVX-512's 32 registers).
 *
 *   C[m][0..n) = (acc ? C[m][0..n) : 0) + sum over j = 0, 1, ..., J-1 of A(m, j) * B(j)[0..n)
 *
 * with A(m, j) = arow[m][j * saj], B(j) = B + boff[j] (row tables let the convolutions read
 * shifted windows of a padded image in place of an im2col copy) and n a multiple of KVW. Every element of C is one chain of
 * multiply-adds in the order of j, whatever the tile or the vector width, so the kernels of two
 * instruction sets that both fuse the multiply-add (AVX-512 and AVX2 + FMA) give the same bits. */
#define KCAT2(a, b) a##_##b
#define KCAT(a, b) KCAT2(a, b)
#define KVEC KCAT(kvec, KSUF)
#define KTILE KCAT(ktile, KSUF)
#define KGEMM KCAT(kgemm, KSUF)

typedef float KVEC __attribute__((vector_size(KVW * sizeof(float))));

KATTR static inline __attribute__((always_inline)) void KTILE(const int mr, const int nv, int J,
                                                              const float *const *arow, size_t saj,
                                                              const float *restrict B, const size_t *restrict boff,
                                                              float *restrict C, size_t ldc, int acc)
{
	KVEC c[8][4], bv[4];
	const float *restrict a[8];
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		a[r] = arow[r];
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		for (int v = 0; v < nv; v++) {
			if (acc)
				memcpy(&c[r][v], C + r * ldc + (size_t)v * KVW, sizeof(KVEC));
			else
				c[r][v] = (KVEC){ 0 };
		}
	for (int j = 0; j < J; j++) {
		const float *restrict b = B + boff[j];
		_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
			memcpy(&bv[v], b + (size_t)v * KVW, sizeof(KVEC));
		_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
			float s = a[r][(size_t)j * saj];
			_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
				c[r][v] += s * bv[v];
		}
	}
	_Pragma("GCC unroll 8") for (int r = 0; r < mr; r++)
		_Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
			memcpy(C + r * ldc + (size_t)v * KVW, &c[r][v], sizeof(KVEC));
}

KATTR static void KGEMM(int M, int n, int J, const float *const *arow, size_t saj, const float *B,
                        const size_t *boff, float *C, size_t ldc, int acc)
{
#define KCALL(MR)                                                                                     \
	switch (nv) {                                                                                 \
	case 1: KTILE(MR, 1, J, arow + m, saj, B + n0, boff, C + m * ldc + n0, ldc, acc); break; \
	case 2: KTILE(MR, 2, J, arow + m, saj, B + n0, boff, C + m * ldc + n0, ldc, acc); break; \
	case 3: KTILE(MR, 3, J, arow + m, saj, B + n0, boff, C + m * ldc + n0, ldc, acc); break; \
	default: KTILE(MR, 4, J, arow + m, saj, B + n0, boff, C + m * ldc + n0, ldc, acc); break; \
	}
	for (int n0 = 0; n0 < n; n0 += KNV * KVW) {
		int nv = (n - n0) / KVW;
		nv = nv > KNV ? KNV : nv;
		size_t m = 0;
		/* one vector a row (a weight gradient of up to 16 filters): 8 rows, 8 sums in flight */
		if (nv == 1)
			for (; m + 8 <= (size_t)M; m += 8)
				KTILE(8, 1, J, arow + m, saj, B + n0, boff, C + m * ldc + n0, ldc, acc);
		if (nv == 2 && KVW == 16) /* 32 filters: 16 sums in flight, where 32 registers hold them */
			for (; m + 8 <= (size_t)M; m += 8)
				KTILE(8, 2, J, arow + m, saj, B + n0, boff, C + m * ldc + n0, ldc, acc);
		for (; m + 4 <= (size_t)M; m += 4)
			KCALL(4)
		for (; m < (size_t)M; m++)
			KCALL(1)
	}
#undef KCALL
}

#undef KVEC
#undef KTILE
#undef KGEMM
#undef KCAT
#undef KCAT2
#undef KSUF
#undef KATTR
#undef KVW
#undef KNV
