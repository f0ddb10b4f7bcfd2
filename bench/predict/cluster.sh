#!/bin/sh
# dlk predict --workers 1 against --workers 2 on the real test control plane (tests/cluster/up,
# the pod runner, the S3 store as a pod), over the 10,000 Fashion-MNIST test images with the MLP
# example's bundle (1 epoch): seconds from the command's start to its end with --wait (the bundle
# pushed, the Job submitted, the pods started, the parts scored and pushed, rank 0's join and
# push), A (1 worker) and B (2 workers) alternating; each round scores with another --batch, so
# no round finds the parts of an earlier one. Prints each round, the medians (min-max) and the
# load average before and after (the machine is shared).
# Usage: bench/predict/cluster.sh [PAIRS]   (default 3)
# Needs the cluster binaries and versitygw (.ci/deps bench) and ./dlk (make).
. "$(dirname "$0")/../../tests/lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"
pairs=${1:-3}
FM=/usr/share/datasets/fashion-mnist
[ -f "$FM/t10k-images-idx3-ubyte.gz" ] || { echo "bench/predict: Fashion-MNIST is not in $FM" >&2; exit 2; }
start_s3 || { echo "bench/predict: cannot start the S3 server" >&2; exit 1; }
cluster_up
trap 'stop_s3; cluster_down; test_cleanup' EXIT
s3_in_cluster
S3=s3://data/bench
now() { date +%s.%N; }

cd "$TEST_TMP" || exit 1
mkdir -p fm proj && cp "$FM"/t10k-* fm/ && cp "$TEST_ROOT/examples/mlp/dlk.yaml" proj/ || exit 1
dlk train --local -q -f proj/dlk.yaml --set training.epochs=1 --set training.threads=2 \
	--set training.checkpoint.every=0 >/dev/null || exit 1
dlk data push -q fm --to $S3 --tag fm@v1 >/dev/null || exit 1
kubectl wait --for=condition=Ready pod/s3 --timeout=60s >/dev/null || exit 1
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >a && : >b
n=0
while [ $n -lt $((pairs * 2)) ]; do
	n=$((n + 1))
	w=$((2 - n % 2))
	batch=$((500 + (n + 1) / 2))
	t0=$(now)
	dlk predict proj/fashion-mlp.dlk --data fm@v1 --to $S3 --name "b$n@v1" --threads 1 --batch $batch \
		--workers $w --store-secret s3-creds --job bench --wait -q >"id$n" 2>"err$n" || { cat "err$n"; exit 1; }
	t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
	echo "round $n: $w worker(s), batch $batch: $t s"
	[ $w = 1 ] && echo "$t" >>a || echo "$t" >>b
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%.2f (%.2f-%.2f)", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'; }
echo "1 worker:  $(med a) s end to end, 10000 samples"
echo "2 workers: $(med b) s end to end, 10000 samples"
