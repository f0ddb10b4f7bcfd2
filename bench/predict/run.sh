#!/bin/sh
# dlk predict against dlk serve over HTTP and a PyTorch batch-scoring loop on the same weights,
# over the Fashion-MNIST test set with the MLP and CNN examples' bundles (bench/predict/run.py
# says how: A/B alternating rounds after a warm-up, medians with min-max, peak RSS).
#   sh bench/predict/run.sh                     (from the source tree, after `make` and .ci/deps)
#   PAIRS=5 MODELS=mlp sh bench/predict/run.sh
#   MLP_BUNDLE=x.dlk CNN_BUNDLE=y.dlk sh bench/predict/run.sh   (else each is trained for 1 epoch)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ -x ./dlk ] || { echo "bench/predict: build ./dlk first (make)" >&2; exit 2; }
[ -x .deps/frameworks/bin/python ] || { echo "bench/predict: no .deps/frameworks (run .ci/deps)" >&2; exit 2; }
[ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] ||
	{ echo "bench/predict: Fashion-MNIST is not in /usr/share/datasets/fashion-mnist (dataset-fashion-mnist)" >&2; exit 2; }
exec python3 bench/predict/run.py --pairs "${PAIRS:-3}" --models "${MODELS:-mlp,cnn}" --out "${OUT:-bench/out/predict}"
