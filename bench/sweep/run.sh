#!/bin/sh
# The search compared with Optuna (the frameworks venv's wheel), on the same objective and budget:
# 1. a cheap synthetic objective with a known optimum (0): best value found and wall time per
#    search, random and TPE, mean over seeds (bench/sweep/dlk_sweep_synth.c, optuna_synth.py);
# 2. Fashion-MNIST (a 12,000-image subset, the sweep example's model and space, 12 trials, 2 at
#    once): `dlk sweep --local` (TPE + ASHA) against Optuna's TPE driving the same
#    `dlk train --local` runs (optuna_fmnist.py), best test accuracy and wall time.
# Usage: bench/sweep/run.sh [BUDGET SEEDS]   (needs make, and .ci/deps.d/frameworks for Optuna)
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
out=bench/out/sweep
mkdir -p "$out"
[ -f build/libdlk.a ] || make -j2 build/libdlk.a >/dev/null
[ -x dlk ] || make -j2 dlk >/dev/null
PKGS="yaml-0.1 libcurl libcjson libarchive openblas libmicrohttpd libcrypto"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. $(pkg-config --cflags $PKGS) -o "$out/dlk_sweep_synth" \
	bench/sweep/dlk_sweep_synth.c build/libdlk.a $(pkg-config --libs $PKGS) -ldl -lpthread -lm
PY=$top/.deps/frameworks/bin/python
budget=${1:-40} seeds=${2:-10}
echo "# synthetic objective, optimum 0"
"$out/dlk_sweep_synth" "$budget" "$seeds"
if "$PY" -c "import optuna" 2>/dev/null; then
	"$PY" bench/sweep/optuna_synth.py "$budget" "$seeds"
else
	echo "# optuna is not installed in .deps/frameworks (.ci/deps.d/frameworks): dlk only"
fi

FM=/usr/share/datasets/fashion-mnist
[ -f "$FM/train-images-idx3-ubyte.gz" ] || { echo "# Fashion-MNIST is not in $FM: synthetic only"; exit 0; }
P=$out/fmnist
rm -rf "$P"
./dlk init -q --example sweep "$P" >/dev/null
"$PY" - "$FM" "$P" <<'PYEOF'
import gzip, struct, sys
fm, p = sys.argv[1], sys.argv[2]
def head(src, n, dst):
    d = gzip.open(src).read()
    magic = struct.unpack(">I", d[:4])[0]; nd = magic & 0xff
    dims = list(struct.unpack(">" + "I" * nd, d[4:4 + 4 * nd])); per = 1
    for x in dims[1:]: per *= x
    dims[0] = n
    open(dst, "wb").write(struct.pack(">I", magic) + struct.pack(">" + "I" * nd, *dims) + d[4 + 4 * nd:4 + 4 * nd + n * per])
head(fm + "/train-images-idx3-ubyte.gz", 12000, p + "/train-images"); head(fm + "/train-labels-idx1-ubyte.gz", 12000, p + "/train-labels")
head(fm + "/t10k-images-idx3-ubyte.gz", 2000, p + "/test-images"); head(fm + "/t10k-labels-idx1-ubyte.gz", 2000, p + "/test-labels")
PYEOF
sed -i "s|file://$FM/train-images-idx3-ubyte.gz|train-images|; s|file://$FM/train-labels-idx1-ubyte.gz|train-labels|;
	s|file://$FM/t10k-images-idx3-ubyte.gz|test-images|; s|file://$FM/t10k-labels-idx1-ubyte.gz|test-labels|" "$P/dlk.yaml"
echo "# Fashion-MNIST subset, 12 trials, 2 at once"
t0=$(date +%s.%N)
./dlk -f "$P/dlk.yaml" sweep --local -q -o json >"$out/dlk-fmnist.json"
t1=$(date +%s.%N)
echo "dlk sweep (TPE + ASHA): best accuracy $(jq .best.value "$out/dlk-fmnist.json"), $(jq '[.trials[] | select(.outcome == "stopped")] | length' "$out/dlk-fmnist.json") of 12 stopped early, $(echo "$t1 - $t0" | bc) s"
if "$PY" -c "import optuna" 2>/dev/null; then
	"$PY" bench/sweep/optuna_fmnist.py "$top/dlk" "$P/dlk.yaml" 12 2
fi
