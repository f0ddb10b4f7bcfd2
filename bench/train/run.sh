#!/bin/sh
# Trains the same MLP and CNN on Fashion-MNIST with dlk (lib/train through bench/train/dlk_bench.c)
# and with PyTorch on the CPU (Debian's python3-torch), same architecture, batch 128, Adam 1e-3,
# PyTorch's default init, same thread count, and prints samples/s, test accuracy, peak RSS and
# the ratios. Refuses to compare against the reference (unoptimised) BLAS.
#   sh bench/train/run.sh            (from the source tree, after `make`)
#   THREADS=2 EPOCHS_MLP=5 EPOCHS_CNN=2 sh bench/train/run.sh
#   BENCH_SEED=N seeds both sides (default 42); bench/train/seeds.sh compares over several seeds
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${BUILD:-build}
threads=${THREADS:-2}
epochs_mlp=${EPOCHS_MLP:-5}
epochs_cnn=${EPOCHS_CNN:-2}
limit=${LIMIT:-}      # train on the first LIMIT samples only (a quick smoke run); empty = all
py=/usr/bin/python3   # Debian's python with python3-torch, not a pyenv one first on PATH
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

[ -f "$build/libdlk.a" ] || { echo "bench/train: build $build/libdlk.a first (make)" >&2; exit 2; }
pkgs="openblas libarchive libcrypto libcurl libcjson"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. $(pkg-config --cflags $pkgs) -o "$out/dlk_bench" \
	bench/train/dlk_bench.c "$build/libdlk.a" $(pkg-config --libs $pkgs) -ldl -lpthread -lm

if ! $py -c 'import torch' 2>/dev/null; then
	echo "bench/train: $py cannot import torch (apt install python3-torch)" >&2
	exit 2
fi

# Which BLAS each side uses. dlk links OpenBLAS directly; PyTorch (Debian) goes through the
# libblas.so.3 alternative, so a machine left on the reference BLAS would make PyTorch look slow.
alt=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p')
echo "libblas.so.3 alternative: ${alt:-unknown}"
$py bench/train/torch_bench.py blas 1 "$threads" > "$out/blas.json"
$py - "$out/blas.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
print("PyTorch BLAS, loaded:", ", ".join(b["loaded"]) or "none found in /proc/self/maps")
for line in b["config"]:
    print("PyTorch config:", line[:160])
ref = [p for p in b["loaded"] if "/blas/libblas.so" in p]
if ref or not b["loaded"]:
    print("bench/train: PyTorch is on the reference BLAS (%s); switch the libblas.so.3 alternative to "
          "OpenBLAS before comparing" % (", ".join(ref) or "unknown"), file=sys.stderr)
    sys.exit(3)
PY
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "threads: $threads, batch 128, Adam 1e-3; MLP $epochs_mlp epochs, CNN $epochs_cnn epochs"

"$out/dlk_bench" gemm 1 "$threads" > "$out/gemm.json"
"$out/dlk_bench" mlp "$epochs_mlp" "$threads" $limit > "$out/dlk_mlp.json"
$py bench/train/torch_bench.py mlp "$epochs_mlp" "$threads" $limit > "$out/torch_mlp.json"
DLK_BENCH_BUNDLE="$out/cnn.dlk" "$out/dlk_bench" cnn "$epochs_cnn" "$threads" $limit > "$out/dlk_cnn.json"
$py bench/train/torch_bench.py check cnn "$out/cnn.dlk" > "$out/check.json"
$py bench/train/torch_bench.py cnn "$epochs_cnn" "$threads" $limit > "$out/torch_cnn.json"

$py - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
r = lambda n: json.load(open(os.path.join(d, n + ".json")))
gemm = r("gemm")
print()
print("%-5s %-8s %12s %10s %10s %10s" % ("model", "impl", "samples/s", "step ms", "test acc", "peak MB"))
for m in ("mlp", "cnn"):
    a, b = r("dlk_" + m), r("torch_" + m)
    for x in (a, b):
        print("%-5s %-8s %12.1f %10.3f %10.4f %10.1f" % (m, x["impl"], x["samples_per_sec"], x["step_ms"],
                                                         x["test_accuracy"], x["peak_rss_mb"]))
    print("%-5s ratio    speed %.2fx, accuracy %+.2f points, memory %.2f of PyTorch's" % (
        m, a["samples_per_sec"] / b["samples_per_sec"], 100 * (a["test_accuracy"] - b["test_accuracy"]),
        a["peak_rss_mb"] / b["peak_rss_mb"]))
    if m == "mlp":
        print("mlp   step %.3f ms, of which its GEMMs alone take %.3f ms (%.0f%%)" % (
            a["step_ms"], gemm["step_ms"], 100 * gemm["step_ms"] / a["step_ms"]))
c = r("check")
print("cnn   dlk's bundle loaded into PyTorch: test accuracy %.4f (dlk recorded %.4f)%s" % (
    c["test_accuracy"], c["dlk_recorded_accuracy"],
    "" if abs(c["test_accuracy"] - c["dlk_recorded_accuracy"]) < 1e-3 else "  MISMATCH"))
PY
