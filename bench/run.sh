#!/bin/sh
# make bench: every benchmark, each against its peer measured in the same run.
#   bench/train/run.sh      dlk vs PyTorch (CPU, OpenBLAS) on Fashion-MNIST: samples/s, accuracy, memory
#   bench/allreduce/run.sh  dlk's TCP ring all-reduce vs Gloo's on loopback: bus bandwidth
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "== training: dlk vs PyTorch"
sh bench/train/run.sh
echo
echo "== all-reduce: dlk vs Gloo"
sh bench/allreduce/run.sh
