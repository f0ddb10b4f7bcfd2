#!/bin/sh
# The overhead of a pipeline's driver on the real test control plane (tests/cluster/up, the pod
# runner, the S3 store as a pod): three program stages (shell commands, each well under a second
# of work) run A) by `dlk pipeline run` (the driver Job creates each stage Job through the API)
# and B) by hand: the same stage Jobs (taken from `dlk pipeline run --dry-run`) created with
# kubectl in sequence, each after `kubectl wait` saw the previous one complete. Each run has new
# raw data, so every stage runs. Reported per run: seconds from the start to the first stage's
# pod, and from a stage's pod succeeding to the next stage's pod (mean of the two gaps), from a
# poller of the pods (kubectl every ~0.1 s: resolution about 0.2 s); medians over the runs.
# Usage: bench/pipeline/run.sh [PAIRS]   (default 3; A and B alternate)
# Needs the cluster binaries and versitygw (.ci/deps bench) and ./dlk (make).
. "$(dirname "$0")/../../tests/lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"
pairs=${1:-3}
start_s3 || { echo "bench/pipeline: cannot start the S3 server" >&2; exit 1; }
cluster_up
trap 'stop_s3; cluster_down; test_cleanup' EXIT
s3_in_cluster
now() { date +%s.%N; }

P=$TEST_TMP/p
mkdir -p "$P" && cd "$P" || exit 1
pipeline() {
	cat >dlk-pipeline.yaml <<EOT
name: bp
store: s3://data/bp
store_secret: s3-creds
stages:
  upper: {inputs: {raw: bp-raw@$1}, run: [sh, upper.sh]}
  number: {inputs: {text: upper}, run: [sh, number.sh]}
  count: {inputs: {text: number}, run: [sh, count.sh]}
EOT
}
echo 'tr a-z A-Z <"$DLK_INPUT_RAW/f.txt" >"$DLK_OUTPUT/f.txt"' >upper.sh
echo 'nl -ba "$DLK_INPUT_TEXT/f.txt" >"$DLK_OUTPUT/f.txt"' >number.sh
echo 'wc -l <"$DLK_INPUT_TEXT/f.txt" >"$DLK_OUTPUT/count.txt"' >count.sh
kubectl wait --for=condition=Ready pod/s3 --timeout=60s >/dev/null || exit 1

# poll the stage pods: "TIME POD PHASE" once per pod and phase
poll() {
	: >"$1"
	while [ ! -f "$1.stop" ]; do
		kubectl get pods -l dlk.dev/pipeline=bp --no-headers -o custom-columns=N:.metadata.name,P:.status.phase 2>/dev/null |
		while read -r n ph; do
			grep -q " $n $ph\$" "$1" 2>/dev/null || echo "$(now) $n $ph" >>"$1"
		done
		sleep 0.1
	done
}
# first PHASE time of stage STAGE's pod in FILE
at() { awk -v s="bp-$2-" -v ph="$3" 'index($2, s) == 1 && ($3 == ph || ph == "any") { print $1; exit }' "$1"; }
# FILE T0 -> "first-pod gap"
figures() {
	awk -v t0="$2" -v a="$(at "$1" upper any)" -v b1="$(at "$1" upper Succeeded)" -v a2="$(at "$1" number any)" \
		-v b2="$(at "$1" number Succeeded)" -v a3="$(at "$1" count any)" \
		'BEGIN { printf "%.2f %.2f\n", a - t0, ((a2 - b1) + (a3 - b2)) / 2 }'
}
clean() {
	kubectl delete jobs -l dlk.dev/pipeline=bp --wait=true >/dev/null 2>&1
	kubectl delete job bp-upper bp-number bp-count bp-pipeline --ignore-not-found --wait=true >/dev/null 2>&1
	while [ -n "$(kubectl get pods -l dlk.dev/pipeline=bp -o name 2>/dev/null)" ]; do sleep 0.2; done
}

n=0
: >"$TEST_TMP/a" && : >"$TEST_TMP/b"
while [ $n -lt $((pairs * 2)) ]; do
	n=$((n + 1))
	mkdir -p "$TEST_TMP/raw$n" && printf 'run %s\nb\nc\n' "$n" >"$TEST_TMP/raw$n/f.txt"
	dlk data push -q "$TEST_TMP/raw$n" --to s3://data/bp --tag "bp-raw@v$n" >/dev/null || exit 1
	pipeline "v$n"
	clean
	poll "$TEST_TMP/ev$n" &
	poller=$!
	t0=$(now)
	if [ $((n % 2)) = 1 ]; then
		dlk pipeline run --wait 2>"$TEST_TMP/run$n.err" || { cat "$TEST_TMP/run$n.err"; exit 1; }
		sleep 0.5
		figures "$TEST_TMP/ev$n" "$t0" >>"$TEST_TMP/a"
	else
		dlk pipeline run --dry-run -o json >objs.json 2>/dev/null &&
		jq '.items |= .[:-1]' objs.json | kubectl apply -f - >/dev/null &&
		jq -r '.items[] | select(.metadata.name == "bp-pipeline-jobs") | .data["jobs.json"]' objs.json >jobs.json || exit 1
		t0=$(now)
		for s in upper number count; do
			jq ".$s" jobs.json | kubectl create -f - >/dev/null &&
			kubectl wait --for=condition=complete "job/bp-$s" --timeout=120s >/dev/null || exit 1
		done
		sleep 0.5
		figures "$TEST_TMP/ev$n" "$t0" >>"$TEST_TMP/b"
	fi
	touch "$TEST_TMP/ev$n.stop"
	wait "$poller"
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "pipeline of 3 program stages, $pairs runs each (seconds, medians; A = dlk pipeline run, B = the same Jobs by hand)"
echo "A: start to first stage pod $(cut -d' ' -f1 "$TEST_TMP/a" | median)  between stages $(cut -d' ' -f2 "$TEST_TMP/a" | median)"
echo "B: start to first stage pod $(cut -d' ' -f1 "$TEST_TMP/b" | median)  between stages $(cut -d' ' -f2 "$TEST_TMP/b" | median)"
