#!/bin/sh
# Image folders decoded once versus streamed (data.images.decode), and PyTorch reading the same
# folder: the same CNN trained on the same folder of Fashion-MNIST PNG files (written by Pillow,
# tests/data/fmnist-images.py) with flip and random crop, alternating dlk once / dlk stream /
# PyTorch after a warm-up. The peer (bench/data/images_peer.py) is a Dataset that opens each file
# with Pillow as a sample is drawn and a DataLoader of worker processes, PyTorch's way of reading
# an image folder; the warm-up tries 0, 1 and 2 workers (WORKERS) and keeps the fastest. Prints
# each run's wall and CPU seconds, samples/s (every training step), peak resident memory, test
# accuracy, and the medians (min-max) with the ratios. dlk's two modes must train the same
# weights, bit for bit: the script fails otherwise.
# Usage: sh bench/data/images.sh [N_TRAIN] [EPOCHS] [PAIRS]   (default 60000 3 3)
set -eu
cd "$(dirname "$0")/../.."
root=$PWD
n=${1:-60000} epochs=${2:-3} pairs=${3:-3}
py=$root/.deps/frameworks/bin/python
[ -x "$py" ] || { echo "error: $py is missing: run .ci/deps (the frameworks venv, with Pillow)" >&2; exit 1; }
make -s -j2 all
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "writing $n training and 10000 test images as PNG files (Pillow)"
"$py" tests/data/fmnist-images.py train "$n" png "$work/train"
"$py" tests/data/fmnist-images.py test 10000 png "$work/test"
for mode in once stream; do
	mkdir -p "$work/$mode"
	cat >"$work/$mode/dlk.yaml" <<EOT
name: fm-$mode
data:
  format: images
  train: {source: $work/train}
  test: {source: $work/test}
  images: {flip: true, crop_padding: 2, decode: $mode}
model:
  input: [1, 28, 28]
  layers:
    - conv2d: {filters: 32, kernel: 3, padding: 1}
    - relu
    - maxpool: {size: 2}
    - conv2d: {filters: 64, kernel: 3, padding: 1}
    - relu
    - maxpool: {size: 2}
    - flatten
    - dense: {units: 128}
    - relu
    - dense: {units: 10}
training: {epochs: $epochs, batch_size: 128, seed: 7, checkpoint: {every: 0}}
EOT
done
echo "machine: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$work/torch"
# one run: MODE ROUND [WORKERS] -> "MODE wall cpu samples/s peak_kib accuracy" on results
run() {
	wk=${3:-}
	if [ "$1" = torch ]; then
		(cd "$work/torch" && /usr/bin/time -f "%e %U %S %M" -o time.txt "$py" "$root/bench/data/images_peer.py" \
			"$work/train" "$work/test" "$epochs" --workers "$3" --threads 2 >out.json)
		acc=$(jq -r .accuracy "$work/torch/out.json")
	else
		(cd "$work/$1" && /usr/bin/time -f "%e %U %S %M" -o time.txt "$root/dlk" train --local --fresh -q -o json >out.json)
		acc=$(jq -r .test.accuracy "$work/$1/out.json")
	fi
	sps=$(jq -r '.samplesPerSecond // empty' "$work/$1/out.json" 2>/dev/null | head -1)
	set -- "$1" "$2" $(cat "$work/$1/time.txt") "$sps"
	printf '%s round %s: wall %s s, cpu %s s, %.0f samples/s, peak %s MiB, accuracy %s\n' "$1${wk:+ ($wk workers)}" "$2" "$3" \
		"$(echo "$4 + $5" | bc)" "${7:-0}" $(($6 / 1024)) "$acc"
	[ "$2" = warm-up ] || echo "$1 $3 $(echo "$4 + $5" | bc) ${7:-0} $6 $acc" >>"$work/results"
}
run once warm-up
run stream warm-up
best=0 best_sps=0
for w in ${WORKERS:-0 1 2}; do
	run torch warm-up "$w"
	s=$(jq -r .samplesPerSecond "$work/torch/out.json")
	if [ "$(echo "$s > $best_sps" | bc)" = 1 ]; then best=$w best_sps=$s; fi
done
echo "peer: PyTorch $("$py" -c 'import torch; print(torch.__version__)'), a DataLoader of $best worker process(es) (the fastest of ${WORKERS:-0 1 2}), 2 threads"
for k in $(seq "$pairs"); do
	run once "$k"
	run stream "$k"
	run torch "$k" "$best"
done
tar -xOf "$work/once/fm-once.dlk" weights.safetensors | cmp - "$(tar -xOf "$work/stream/fm-stream.dlk" weights.safetensors >"$work/w" && echo "$work/w")" ||
	{ echo "error: stream and once trained different weights" >&2; exit 1; }
echo "the same weights, bit for bit"
awk '
function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
{ k = ++n[$1]; w[$1, k] = $2; c[$1, k] = $3; s[$1, k] = $4; p[$1, k] = $5; acc[$1] += $6 }
END {
	for (m = 0; m < 3; m++) {
		mode = m == 2 ? "torch" : m ? "stream" : "once"
		for (q = 0; q < 4; q++) {
			lo = hi = ""
			for (k = 1; k <= n[mode]; k++) {
				v = q == 0 ? w[mode, k] : q == 1 ? c[mode, k] : q == 2 ? s[mode, k] : p[mode, k] / 1024
				a[k] = v; if (lo == "" || v < lo) lo = v; if (hi == "" || v > hi) hi = v
			}
			md[mode, q] = med(a, n[mode]); mn[mode, q] = lo; mx[mode, q] = hi
		}
		printf "%-6s median wall %.2f s (%.2f-%.2f), cpu %.2f s, %.0f samples/s (%.0f-%.0f), peak %.0f MiB (%.0f-%.0f), mean accuracy %.4f\n", mode,
		       md[mode, 0], mn[mode, 0], mx[mode, 0], md[mode, 1], md[mode, 2], mn[mode, 2], mx[mode, 2], md[mode, 3], mn[mode, 3], mx[mode, 3],
		       acc[mode] / n[mode]
	}
	printf "stream / once: wall %.2fx, samples/s %.2fx, peak memory %.2fx\n", md["stream", 0] / md["once", 0],
	       md["stream", 2] / md["once", 2], md["stream", 3] / md["once", 3]
	printf "dlk stream / PyTorch: wall %.2fx, samples/s %.2fx, peak memory %.2fx\n", md["stream", 0] / md["torch", 0],
	       md["stream", 2] / md["torch", 2], md["stream", 3] / md["torch", 3]
	printf "dlk once / PyTorch: wall %.2fx, samples/s %.2fx, peak memory %.2fx\n", md["once", 0] / md["torch", 0],
	       md["once", 2] / md["torch", 2], md["once", 3] / md["torch", 3]
}' "$work/results"
