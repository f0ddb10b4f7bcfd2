#!/bin/sh
# dlk at scale on the real control plane (tests/cluster/up --simulate: kwok nodes, pods that the
# real scheduler binds and kwok keeps Running):
#   1. submit JOBS dlk jobs of WORKERS workers each (`dlk train`, 4 at a time) onto NODES nodes and
#      time the submissions and the wait until every pod is bound to a node;
#   2. on that loaded cluster, time single jobs from `dlk train` to all their pods bound;
#   3. `dlk status -A` against `kubectl get jobs -A` (the peer in its best configuration: the
#      server-side table, discovery cache warm), alternated A B A B after a warm-up of each:
#      wall time and peak RSS, medians with min-max, and the ratio of the medians.
# Usage: bench/cluster/run.sh [JOBS [WORKERS [NODES [PAIRS]]]]   (default 1000 8 200 5)
# Needs the cluster binaries (.ci/deps bench) and ./dlk (make). Output under bench/out/cluster/.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
jobs=${1:-1000} workers=${2:-8} nodes=${3:-200} pairs=${4:-5}
out=$top/bench/out/cluster
cluster=$out/cluster
cluster_src=$top/tests/cluster cluster_top=$top
. tests/cluster/env.sh
[ -x ./dlk ] || { echo "bench/cluster: build dlk first (make)" >&2; exit 1; }
dlk=$top/dlk
kubectl=$K8S_BIN/kubectl
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ -d "$cluster" ] && tests/cluster/down "$cluster"
rm -rf "$out"
mkdir -p "$out/home"
trap 'tests/cluster/down "$cluster"' EXIT
trap 'exit 130' INT TERM
# room for every pod: 100m CPU and 64Mi per worker, nodes of 32 CPUs
tests/cluster/up "$cluster" --simulate --cpu-nodes "$nodes" --gpu-nodes 0 --no-qps-limits >/dev/null
export KUBECONFIG=$cluster/kubeconfig HOME=$out/home
"$kubectl" get nodes -o name | sed -n '1p' >/dev/null
echo "# $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); Kubernetes $K8S_VERSION (kube-apiserver," \
	"controller-manager, scheduler without client QPS limits), kwok nodes: $nodes"

cert="--cacert $cluster/pki/ca.crt --cert $cluster/pki/admin.crt --key $cluster/pki/admin.key"
server=$(sed -n 's/^CLUSTER_SERVER=//p' "$cluster/env")
# bound PODS of the cluster (metadata only, so that counting does not load the server much)
count_pods() {
	curl -sf $cert -H 'Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' \
		"$server/api/v1/pods?fieldSelector=$1" | jq '.items | length'
}

mkdir -p "$out/proj"
"$dlk" init -q --name bench "$out/proj" >/dev/null
set -- -q -f "$out/proj/dlk.yaml" --set resources.workers="$workers" --set resources.cpu=100m \
	--set resources.memory=64Mi
submit_args="$*"

# ---- 1. the bulk ----
total=$((jobs * workers))
t0=$(now)
i=0
while [ $i -lt "$jobs" ]; do printf 'job-%04d\n' $i; i=$((i + 1)); done |
	xargs -P 4 -I NAME "$dlk" train $submit_args --set name=NAME >/dev/null
submitted=$(since "$t0")
while :; do
	bound=$(count_pods 'spec.nodeName!%3D')
	[ "$bound" -ge "$total" ] && break
	sleep 1
done
all_bound=$(since "$t0")
echo "submit: $jobs jobs x $workers workers with 'dlk train' (4 at a time): ${submitted}s;" \
	"all $total pods bound ${all_bound}s after the first submit (polled every second)"

# ---- 2. single jobs on the loaded cluster ----
: >"$out/single.txt"
i=0
while [ $i -lt "$pairs" ]; do
	name=single-$i
	t=$(now)
	"$dlk" train $submit_args --set name="$name" >/dev/null
	while [ "$(count_pods "spec.nodeName!%3D&labelSelector=batch.kubernetes.io/job-name%3D$name")" -lt "$workers" ]; do
		sleep 0.05
	done
	since "$t" >>"$out/single.txt"
	echo >>"$out/single.txt"
	i=$((i + 1))
done

stats() { sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
	printf "%.3f (%.3f-%.3f)", m, v[1], v[NR] }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "one more job of $workers workers, from 'dlk train' to all its pods bound: median $(stats <"$out/single.txt") s over $pairs jobs"

# ---- 3. dlk status -A against kubectl get jobs -A ----
run() { # run NAME COMMAND...: appends "seconds peak-KiB" to $out/NAME.txt
	name=$1
	shift
	t=$(now)
	/usr/bin/time -f "%M" -o "$out/time.tmp" "$@" >"$out/$name.out" 2>"$out/$name.err"
	echo "$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }') $(cat "$out/time.tmp")" >>"$out/$name.txt"
}
run warmup-dlk "$dlk" status -A
run warmup-kubectl "$kubectl" get jobs -A
: >"$out/dlk.txt"
: >"$out/kubectl.txt"
i=0
while [ $i -lt "$pairs" ]; do
	run dlk "$dlk" status -A
	run kubectl "$kubectl" get jobs -A
	i=$((i + 1))
done
rows_dlk=$(($(wc -l <"$out/dlk.out") - 1))
rows_kubectl=$(($(wc -l <"$out/kubectl.out") - 1))
dt=$(cut -d' ' -f1 "$out/dlk.txt" | median)
kt=$(cut -d' ' -f1 "$out/kubectl.txt" | median)
dm=$(cut -d' ' -f2 "$out/dlk.txt" | median)
km=$(cut -d' ' -f2 "$out/kubectl.txt" | median)
echo "list every job of every namespace, $pairs pairs alternated after a warm-up of each:"
printf '  %-22s %6s rows  wall %s s  peak %s KiB\n' "dlk status -A" "$rows_dlk" \
	"$(cut -d' ' -f1 "$out/dlk.txt" | stats)" "$(cut -d' ' -f2 "$out/dlk.txt" | stats | sed 's/\.000//g')"
printf '  %-22s %6s rows  wall %s s  peak %s KiB\n' "kubectl get jobs -A" "$rows_kubectl" \
	"$(cut -d' ' -f1 "$out/kubectl.txt" | stats)" "$(cut -d' ' -f2 "$out/kubectl.txt" | stats | sed 's/\.000//g')"
awk -v a="$dt" -v b="$kt" -v c="$dm" -v d="$km" \
	'BEGIN { printf "  ratio dlk/kubectl: wall %.2f (target <= 0.33), peak memory %.2f\n", a / b, c / d }'
