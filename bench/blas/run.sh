#!/bin/sh
# Is it the BLAS? The 13 matrix products of the example GPT's step (bench/blas/gemm.c), timed
# through OpenBLAS (Debian's, the library dlk links, with the kernels dlk makes it choose),
# Intel MKL (the BLAS PyTorch's CPU wheel is built with: `torch.__config__.show()`) and, when
# Debian's libblis4-pthread is installed, BLIS; on 1 thread (dlk cuts each product over its own
# pool into one-threaded calls, so this is the rate it gets a core) and on THREADS (each library's
# own threading), and on 1 thread dlk's bf16 products (training.precision: bf16; bench/blas/dlk_bf16.c:
# the operands rounded to bfloat16, so not the same arithmetic: it says what bf16 buys). After a
# warm-up round, ROUNDS rounds alternate the libraries; prints each one's step total, median with
# min-max, its GFLOP/s, and the ratios to OpenBLAS.
#   sh bench/blas/run.sh            (after .ci/deps bench, which unpacks MKL into .deps/mkl-*)
#   ROUNDS=12 THREADS=2 sh bench/blas/run.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
rounds=${ROUNDS:-12}
threads=${THREADS:-2}
out=${OUT:-bench/out/blas}
bin=${BUILD:-build}/bench/blas/dlk_blas_bench
mkdir -p "$out" "$(dirname "$bin")"
${CC:-cc} -O2 -Wall -Wextra -Werror -o "$bin" bench/blas/gemm.c -ldl ||
	{ echo "bench/blas: cannot build $bin" >&2; exit 2; }
bf16lib=$(dirname "$bin")/libdlk_bf16.so
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -fno-math-errno -Wall -Wextra -Werror -I. -shared -fPIC -o "$bf16lib" \
	bench/blas/dlk_bf16.c lib/nn/cpu_bgemm.c lib/util/mem.c ||
	{ echo "bench/blas: cannot build $bf16lib" >&2; exit 2; }

openblas=$(ls /usr/lib/*-linux-gnu/libopenblas.so.0 2>/dev/null | head -1)
[ -n "$openblas" ] || { echo "bench/blas: no libopenblas.so.0 (apt install libopenblas0)" >&2; exit 2; }
mkl=$(ls -d .deps/mkl-*/lib 2>/dev/null | tail -1)
[ -n "$mkl" ] && [ -f "$mkl/libmkl_rt.so.3" ] || { echo "bench/blas: no MKL in .deps (run .ci/deps bench)" >&2; exit 2; }
blis=$(ls /usr/lib/*-linux-gnu/blis-pthread/libblis.so.4 2>/dev/null | head -1 || true)
# OpenBLAS falls back to its oldest kernels on a CPU it does not know; dlk then names the right
# ones in OPENBLAS_CORETYPE (lib/nn/cpu.c), and so does this
has() { grep -m1 '^flags' /proc/cpuinfo | tr ' \t' '\n\n' | grep -qx "$1"; }
coretype=
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then coretype=SkylakeX
elif has avx2 && has fma; then coretype=Haswell; fi
echo "OpenBLAS: $openblas, OPENBLAS_CORETYPE=${coretype:-(its own choice)}"
echo "MKL: $mkl/libmkl_rt.so.3, MKL_THREADING_LAYER=SEQUENTIAL on 1 thread, GNU on $threads"
echo "BLIS: ${blis:-not installed (apt install libblis4-pthread to add it)}"
if has avx512_bf16; then bf16how="on AVX512_BF16"; else bf16how="emulated: this CPU has no AVX512_BF16"; fi
echo "dlk-bf16: $bf16lib, 1 thread, $bf16how"

one() { # $1: library name, $2: threads
	case $1 in
	openblas) env ${coretype:+OPENBLAS_CORETYPE=$coretype} "$bin" "$openblas" "$2" ;;
	mkl)
		if [ "$2" = 1 ]; then layer=SEQUENTIAL; else layer=GNU; fi
		env LD_LIBRARY_PATH="$top/$mkl" MKL_THREADING_LAYER=$layer "$bin" "$top/$mkl/libmkl_rt.so.3" "$2" ;;
	blis) env BLIS_NUM_THREADS="$2" "$bin" "$blis" "$2" ;;
	dlk-bf16) "$bin" "$top/$bf16lib" 1 ;;
	esac | sed "s/^{/{\"name\": \"$1\", /"
}
libs="openblas mkl${blis:+ blis} dlk-bf16"
: >"$out/runs.jsonl"
for r in $(seq 0 "$rounds"); do
	for t in 1 "$threads"; do
		for l in $libs; do
			if [ "$l" = dlk-bf16 ] && [ "$t" != 1 ]; then continue; fi
			if [ "$r" = 0 ]; then one "$l" "$t" >/dev/null; else one "$l" "$t" >>"$out/runs.jsonl"; fi
		done
	done
done
python3 - "$out/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in runs:
    by.setdefault((r["name"], r["threads"]), []).append(r["ms"])
gflop = runs[0]["gflop"]
print(f"{len(runs) // len(by)} rounds; the step's 13 products: {gflop:.2f} GFLOP; ms: median (min-max), GFLOP/s at the median")
for t in sorted({k[1] for k in by}):
    base = statistics.median(by[("openblas", t)])
    for name in ("openblas", "mkl", "blis", "dlk-bf16"):
        if (name, t) not in by:
            continue
        v = by[(name, t)]
        m = statistics.median(v)
        print(f"  {t} thread(s)  {name:9s} {m:8.2f} ms ({min(v):.2f}-{max(v):.2f})  {gflop / m * 1e3:6.1f} GFLOP/s"
              f"  {base / m:.2f}x OpenBLAS")
PY
