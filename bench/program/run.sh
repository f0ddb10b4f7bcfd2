#!/bin/sh
# The supervision overhead of dlk around a user's program (bench/program/overhead.py says how):
#   sh bench/program/run.sh               (after `make` and `.ci/deps`, which installs the venv)
#   PAIRS=5 SAMPLES=60000 EPOCHS=2 sh bench/program/run.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
venv=.deps/frameworks/bin
[ -x "$venv/python3" ] || { echo "bench/program: no .deps/frameworks (run .ci/deps)" >&2; exit 2; }
[ -x "${BUILD:-build}/dlk" ] || { echo "bench/program: build dlk first (make)" >&2; exit 2; }
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
PATH=$top/$venv:$PATH exec "$venv/python3" bench/program/overhead.py --dlk "$top/${BUILD:-build}/dlk" \
	--pairs "${PAIRS:-3}" --train-samples "${SAMPLES:-20000}" --epochs "${EPOCHS:-2}"
