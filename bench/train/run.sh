#!/bin/sh
# Trains the same MLP and CNN on Fashion-MNIST with dlk (lib/train through bench/train/dlk_bench.c)
# and with PyTorch on the CPU, same architecture, batch 128, Adam 1e-3, PyTorch's default init,
# same thread count, alternating the programs, and prints samples/s, test accuracy, peak RSS and
# the ratios (bench/train/compare.py says how). The peers, each in its fastest configuration:
#   torch2  PyTorch 2.x from the package registry (.ci/deps bench installs it into .deps/)
#   torch1  Debian's PyTorch 1.13 (python3-torch) on Debian's OpenMP build of OpenBLAS
#   sh bench/train/run.sh            (from the source tree, after `make` and `.ci/deps bench`)
#   THREADS=2 EPOCHS_MLP=5 EPOCHS_CNN=2 PAIRS=3 MODELS=mlp,cnn sh bench/train/run.sh
#   WAITS=PASSIVE limits the peers' tuning to that OpenMP wait policy (default PASSIVE,default: on
#   a machine whose load changes, the spinning default can win the tuning and then lose 10x)
#   KEEP_BLAS_ENV=1 passes OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE on to the programs (default: dropped)
#   PRECISION=bf16 trains dlk with training.precision: bf16 and adds PyTorch's CPU mixed precision
#   (torch.autocast to bfloat16) to the peers' candidates (default fp32: both in fp32)
#   VARIANTS=0 leaves out the allocators and Intel's OpenMP runtime from the peers' tuning
#   LIMIT=N trains on the first N samples only (a smoke run); TUNE=0 skips the peers' tuning
#   (then $TORCH_BENCH_CONFIG, JSON, is their configuration, under OMP_WAIT_POLICY=$TORCH_BENCH_WAIT,
#   default PASSIVE)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${BUILD:-build}
torch2=$(ls -d .deps/torch-2.* 2>/dev/null | sort -V | tail -n 1)
openmp_blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
out=${OUT:-bench/out/train}

[ -f "$build/libdlk.a" ] || { echo "bench/train: build $build/libdlk.a first (make)" >&2; exit 2; }
[ -n "$torch2" ] && [ -f "$torch2/.complete" ] || { echo "bench/train: no PyTorch 2.x in .deps/ (run .ci/deps bench)" >&2; exit 2; }
[ -f "$openmp_blas/libblas.so.3" ] || { echo "bench/train: $openmp_blas missing (run .ci/deps bench)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "bench/train: Debian's python3-torch is missing (run .ci/deps bench)" >&2; exit 2; }

# Every program runs with the BLAS kernels OpenBLAS picks for this CPU by itself, as on a machine
# where nobody chose them: an OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE in this environment is not
# passed on (KEEP_BLAS_ENV=1 passes it). The kernels each program ends up with are printed below.
if [ "${KEEP_BLAS_ENV:-0}" != 1 ] && [ -n "${OPENBLAS_CORETYPE:-}${OPENBLAS_L2_SIZE:-}" ]; then
	echo "not passed on: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-} (KEEP_BLAS_ENV=1 passes them)"
	unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
fi

BENCH_PRECISION=${PRECISION:-fp32}
case $BENCH_PRECISION in fp32 | bf16) ;; *) echo "bench/train: PRECISION is fp32 or bf16, not '$BENCH_PRECISION'" >&2; exit 2 ;; esac
export BENCH_PRECISION
echo "precision: $BENCH_PRECISION (dlk's training.precision; with bf16 the peers may choose torch.autocast to bfloat16)"

mkdir -p "$out"
rm -f "$out/runs.jsonl"
# built by the Makefile with the flags and libraries of every other dlk program
make --no-print-directory -s "$build/bench/train/dlk_bench" >&2
cp "$build/bench/train/dlk_bench" "$out/dlk_bench"

grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
# Debian's PyTorch on the default libblas.so.3 alternative is the pathological peer: show that
# it is refused, then compare with the two that are not
if ! /usr/bin/python3 bench/train/torch_bench.py info "${THREADS:-2}" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["refuse"]
print("Debian PyTorch on the default libblas.so.3 alternative: " + ("refused: " + r if r else "accepted"))'; then
	exit 1
fi
exec /usr/bin/python3 bench/train/compare.py --dlk "$out/dlk_bench" --out "$out" \
	--threads "${THREADS:-2}" --epochs "mlp=${EPOCHS_MLP:-5},cnn=${EPOCHS_CNN:-2}" --pairs "${PAIRS:-3}" \
	--models "${MODELS:-mlp,cnn}" --limit "${LIMIT:-}" --tune "${TUNE:-1}" --waits "${WAITS:-PASSIVE,default}" \
	--iomp "$torch2/lib/libiomp5.so" --variants "${VARIANTS:-1}" \
	--peer "torch2=$torch2/bin/python" \
	--peer "torch1=/usr/bin/python3:LD_LIBRARY_PATH=$openmp_blas"
