#!/bin/sh
# The GPU benchmarks, each against PyTorch on the same GPU measured in the same run, alternating
# the two programs (A B A B, PAIRS pairs after a warm-up of each), medians with min-max:
#   training   samples/s and test accuracy of bench/train's MLP and CNN on Fashion-MNIST
#   anatomy    one training step of each model against the sum of its GEMMs timed alone (llm.c's
#              rule: the GEMMs are the bound an expert implementation cannot beat), and PyTorch's step
#   all-reduce with 2 GPUs or more: NCCL bus bandwidth through dlk's device communicator against
#              PyTorch's torch.distributed all_reduce (nccl-tests' definition of busbw)
# Runs only where a CUDA device can be used; elsewhere it prints why and exits 0.
#   sh bench/gpu/run.sh     (after `make` with the CUDA toolchain; `.ci/deps bench` installs
#                            PyTorch with CUDA into .deps/ on a machine with a GPU)
#   PAIRS=5 EPOCHS=2 LIMIT=10000 sh bench/gpu/run.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${BUILD:-build}
pairs=${PAIRS:-3}
epochs=${EPOCHS:-2}
limit=${LIMIT:-0}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

[ -x "$build/dlk" ] || { echo "bench/gpu: build $build/dlk first (make)" >&2; exit 2; }
"$build/dlk" version -o json >"$out/version.json"
usable=$(jq -r .cudaBackend.usable "$out/version.json")
if [ "$usable" != true ]; then
	echo "bench/gpu: skipped: $(jq -r .cudaBackend.why "$out/version.json")"
	exit 0
fi
devices=$(jq -r .cudaBackend.devices "$out/version.json")
py=$(ls -d .deps/torch-cuda-*/bin/python 2>/dev/null | tail -n 1)
if [ -z "$py" ] || ! "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	echo "bench/gpu: no PyTorch with CUDA here ('.ci/deps bench' installs it into .deps/ where a GPU is)" >&2
	exit 2
fi

pkgs="openblas libarchive libcrypto libcurl libcjson"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. $(pkg-config --cflags $pkgs) -o "$out/dlk_gpu_bench" \
	bench/gpu/dlk_gpu_bench.c "$build/libdlk.a" $(pkg-config --libs $pkgs) -ldl -lpthread -lm
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. $(pkg-config --cflags $pkgs) -o "$out/dlk_allreduce_bench" \
	bench/gpu/dlk_allreduce_bench.c "$build/libdlk.a" $(pkg-config --libs $pkgs) -ldl -lpthread -lm
export BUILD="$build"

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
jq -r '"device: \(.cudaBackend.device0) (\(.cudaBackend.devices) visible), driver CUDA \(.cudaBackend.driverCuda)",
	"dlk: \(.version), built with CUDA \(.cudaBackend.builtWithCuda), \(.cudaBackend.cublas), \(.cudaBackend.nccl)"' \
	"$out/version.json"
"$py" -c 'import torch; print("pytorch: %s, CUDA %s, cuDNN %s" % (torch.__version__, torch.version.cuda, torch.backends.cudnn.version()))'
echo "batch 128, Adam 1e-3, $epochs epochs${limit:+ on the first $limit samples}; $pairs pairs after a warm-up"

# warm-up: each program once (GPU clocks, cuDNN's autotuner, the page cache)
"$out/dlk_gpu_bench" train mlp 1 10000 >/dev/null
"$py" bench/gpu/torch_gpu_bench.py train mlp 1 10000 >/dev/null
for m in mlp cnn; do
	for i in $(seq "$pairs"); do
		"$out/dlk_gpu_bench" train $m "$epochs" "$limit" >>"$out/dlk_$m.jsonl"
		"$py" bench/gpu/torch_gpu_bench.py train $m "$epochs" "$limit" >>"$out/torch_$m.jsonl"
	done
	for i in $(seq "$pairs"); do
		"$out/dlk_gpu_bench" anatomy $m 128 >>"$out/dlk_anat_$m.jsonl"
		"$py" bench/gpu/torch_gpu_bench.py anatomy $m 128 >>"$out/torch_anat_$m.jsonl"
	done
done
if [ "$devices" -ge 2 ]; then
	"$out/dlk_allreduce_bench" "$devices" >/dev/null
	for i in $(seq "$pairs"); do
		"$out/dlk_allreduce_bench" "$devices" >>"$out/dlk_ar.jsonl"
		"$py" bench/gpu/torch_gpu_bench.py allreduce >>"$out/torch_ar.jsonl"
	done
fi

"$py" - "$out" "$devices" <<'PY'
import json, os, statistics, sys
d, devices = sys.argv[1], int(sys.argv[2])
rows = lambda n: [json.loads(l) for l in open(os.path.join(d, n + ".jsonl")) if l.strip()]
def stat(xs):
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))
print()
print("%-5s %-8s %28s %22s" % ("model", "impl", "samples/s median (min-max)", "test accuracy median"))
for m in ("mlp", "cnn"):
    a, b = rows("dlk_" + m), rows("torch_" + m)
    for name, r in (("dlk", a), ("pytorch", b)):
        print("%-5s %-8s %28s %22.4f" % (m, name, stat([x["samples_per_sec"] for x in r]),
                                         statistics.median([x["test_accuracy"] for x in r])))
    print("%-5s ratio    %.2fx PyTorch's samples/s" % (
        m, statistics.median([x["samples_per_sec"] for x in a]) / statistics.median([x["samples_per_sec"] for x in b])))
print()
print("%-5s %22s %22s %14s %22s" % ("model", "dlk step ms", "its GEMMs alone ms", "step / GEMMs", "pytorch step ms"))
for m in ("mlp", "cnn"):
    a, b = rows("dlk_anat_" + m), rows("torch_anat_" + m)
    st, gm = [x["step_ms"] for x in a], [x["gemm_ms"] for x in a]
    print("%-5s %22s %22s %14.2f %22s" % (m, stat(st), stat(gm), statistics.median(st) / statistics.median(gm),
                                          stat([x["step_ms"] for x in b])))
if devices >= 2:
    a, b = rows("dlk_ar"), rows("torch_ar")
    print()
    print("all-reduce over %d GPUs (NCCL %s under PyTorch); bus bandwidth GB/s" % (devices, b[0].get("nccl", "?")))
    print("%10s %22s %22s %8s" % ("bytes", "dlk median (min-max)", "pytorch median (min-max)", "ratio"))
    for i, row in enumerate(a[0]["rows"]):
        x = [r["rows"][i]["busbw_gbs"] for r in a]
        y = [r["rows"][i]["busbw_gbs"] for r in b]
        print("%10d %22s %22s %8.2f" % (row["bytes"], stat(x), stat(y), statistics.median(x) / statistics.median(y)))
else:
    print()
    print("all-reduce: skipped, %d GPU here (it needs 2 or more)" % devices)
PY
