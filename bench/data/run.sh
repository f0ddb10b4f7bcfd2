#!/bin/sh
# BPE training and encoding speed on 40 MB of English (the first 40 MB of Debian's dict-gcide,
# installed by `.ci/deps bench`), at the vocabulary sizes people use for small models.
# Usage: sh bench/data/run.sh [VOCAB_SIZE...]   (default: 1000 8000)
set -eu
cd "$(dirname "$0")/../.."
dict=/usr/share/dictd/gcide.dict.dz
[ -f "$dict" ] || { echo "error: $dict is missing: run .ci/deps bench (Debian's dict-gcide)" >&2; exit 1; }
make -s -j2 build/bench/data/dlk_bpe_bench
text=$(mktemp)
trap 'rm -f "$text"' EXIT
zcat "$dict" | head -c 40000000 >"$text"
for v in ${*:-1000 8000}; do
	echo "== vocab_size $v"
	build/bench/data/dlk_bpe_bench "$v" "$text"
done
