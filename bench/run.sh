#!/bin/sh
# make bench: every benchmark, each against its peer measured in the same run.
#   bench/train/run.sh      dlk vs PyTorch (CPU, OpenBLAS) on Fashion-MNIST: samples/s, accuracy, memory
#   bench/models/run.sh     dlk vs PyTorch on the ResNet, text and denoiser examples: samples/s, CPU, quality, memory
#   bench/blas/run.sh       the GPT step's products through OpenBLAS (dlk's) and MKL (PyTorch's): ms, GFLOP/s
#   bench/allreduce/run.sh  dlk's TCP ring all-reduce vs Gloo's on loopback: bus bandwidth
#   bench/rendezvous/run.sh 256 local ranks: time to the first all-reduce, dlk vs Gloo
#   bench/cluster/run.sh    1,000 jobs x 8 workers on 200 kwok nodes: dlk status -A vs kubectl get jobs -A
#   bench/program/run.sh    a user's PyTorch program bare vs under dlk train --local: wall and CPU
#   bench/program/first-step.sh  dlk train vs a hand-written torchrun Job: time to the first step
#   bench/sweep/run.sh      the search vs Optuna: synthetic objective with known optimum, Fashion-MNIST
#   bench/gpu/run.sh        dlk vs PyTorch on the same GPU (training, step anatomy, NCCL all-reduce);
#                           prints why it skipped where no GPU is
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "== training: dlk vs PyTorch"
sh bench/train/run.sh
echo
echo "== the model kinds (ResNet, text classifier, denoiser): dlk vs PyTorch"
sh bench/models/run.sh
echo
echo "== the GPT step's products: OpenBLAS (dlk's) vs MKL (PyTorch's)"
sh bench/blas/run.sh
echo
echo "== all-reduce: dlk vs Gloo"
sh bench/allreduce/run.sh
echo
echo "== rendezvous of 256 ranks: dlk vs Gloo"
sh bench/rendezvous/run.sh
echo
echo "== a real control plane at scale: dlk status -A vs kubectl get jobs -A"
sh bench/cluster/run.sh
echo
echo "== a user's program: bare vs under dlk's supervisor"
sh bench/program/run.sh
echo
echo "== a user's program on the test cluster: dlk train vs a hand-written torchrun Job, to the first step"
sh bench/program/first-step.sh
echo
echo "== sweeps: dlk vs Optuna"
sh bench/sweep/run.sh
echo
echo "== GPU: dlk vs PyTorch on the same GPU"
sh bench/gpu/run.sh
