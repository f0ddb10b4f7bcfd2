#!/bin/sh
# Test accuracy of one model over several seeds, dlk and PyTorch side by side: one seed per side
# says little about "equal accuracy", since each side draws its own initial weights and order.
#   MODEL=cnn EPOCHS=2 SEEDS="1 2 3" sh bench/train/seeds.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${BUILD:-build}
model=${MODEL:-cnn}
epochs=${EPOCHS:-2}
threads=${THREADS:-2}
seeds=${SEEDS:-"1 2 3"}
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

[ -f "$build/libdlk.a" ] || { echo "bench/train: build $build/libdlk.a first (make)" >&2; exit 2; }
pkgs="openblas libarchive libcrypto libcurl libcjson"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. $(pkg-config --cflags $pkgs) -o "$out/dlk_bench" \
	bench/train/dlk_bench.c "$build/libdlk.a" $(pkg-config --libs $pkgs) -ldl -lpthread -lm

echo "$model, $epochs epochs, $threads threads, seeds: $seeds"
for s in $seeds; do
	BENCH_SEED=$s "$out/dlk_bench" "$model" "$epochs" "$threads" > "$out/dlk_$s.json"
	BENCH_SEED=$s $py bench/train/torch_bench.py "$model" "$epochs" "$threads" > "$out/torch_$s.json"
done
$py - "$out" $seeds <<'PY'
import json, os, sys
d, seeds = sys.argv[1], sys.argv[2:]
acc = lambda impl, s: json.load(open(os.path.join(d, "%s_%s.json" % (impl, s))))["test_accuracy"]
print("%6s %10s %10s %8s" % ("seed", "dlk", "pytorch", "diff"))
a = [acc("dlk", s) for s in seeds]
b = [acc("torch", s) for s in seeds]
for s, x, y in zip(seeds, a, b):
    print("%6s %10.4f %10.4f %+8.2f" % (s, x, y, 100 * (x - y)))
ma, mb = sum(a) / len(a), sum(b) / len(b)
print("%6s %10.4f %10.4f %+8.2f  (mean over %d seeds, points)" % ("mean", ma, mb, 100 * (ma - mb), len(seeds)))
PY
