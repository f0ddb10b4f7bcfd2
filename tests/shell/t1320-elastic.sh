#!/bin/sh
# Elastic workers here: a run interrupted at one worker count goes on at another from its
# checkpoint with the same global batch (each worker takes global / N), saying so in one line,
# recording the worker counts in the run's record and a resume event with each; a global batch
# that does not split into N equal batches is refused before anything starts, and the run stays
# resumable.
. "$(dirname "$0")/../lib.sh"

# Two overlapping blobs: a test accuracy near 80%, so that half a point means something.
make_project() {
	mkdir -p "$1" &&
	awk 'BEGIN { srand(5); for (i = 0; i < 2000; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() * 1.6 + c * 0.6, rand() * 1.6 - c * 0.6, c } }' >"$1/train.csv" &&
	head -n 400 "$1/train.csv" >"$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 8}
    - relu
    - dense: {units: 2}
training: {epochs: 8, optimizer: {lr: 0.02}, batch_size: 24, threads: 1, checkpoint: {every: 5, keep: 2}}
EOT
}
# the newest checkpoint's step in project $1 (0: none)
last_step() {
	ls -d "$1"/.dlk/checkpoints/blobs/*/step-* 2>/dev/null | sed "s/.*step-0*//" | sort -n | tail -n 1 | grep . || echo 0
}
# interrupt WORKERS DIR AFTER: trains, and stops it with SIGTERM once a checkpoint past step AFTER is written
interrupt() {
	{ DLK_TEST_CHECKPOINT_DELAY_MS=30 "$DLK" train --local --workers "$1" -f "$2/dlk.yaml" >/dev/null 2>"$2/err.$1" & pid=$!; } &&
	i=0 && while [ "$(last_step "$2")" -le "$3" ]; do sleep 0.05; i=$((i + 1)); test $i -lt 600 || return 1; done &&
	kill -TERM $pid; wait $pid; rc=$?; cat "$2/err.$1" >&2; test $rc = 75
}
acc() { jq -r .metrics.test_accuracy "$1"/.dlk/runs/blobs/*.json; }

P=$TEST_TMP/p F=$TEST_TMP/fixed
make_project "$P" && make_project "$F" &&
	dlk train --local --workers 4 -q -f "$F/dlk.yaml" >/dev/null 2>"$TEST_TMP/err" ||
	{ echo "Bail out! the fixed-size run failed"; cat "$TEST_TMP/err"; exit 1; }

test_expect_success '4 workers, interrupted; 2 go on from its checkpoint with the same global batch' '
	interrupt 4 "$P" 30 && s=$(last_step "$P") &&
	interrupt 2 "$P" $((s + 30)) &&
	grep_q "resuming run [0-9a-f]\{8\} from checkpoint $s at 2 workers (was 4), batch 48 per worker, global 96$" "$P/err.2" &&
	grep_q "2 workers x batch 48" "$P/err.2"
'

test_expect_success 'then 3 workers finish it, within half a point of the fixed-size run' '
	s=$(last_step "$P") &&
	dlk train --local --workers 3 -f "$P/dlk.yaml" >/dev/null 2>err && cat err &&
	grep_q "resuming run [0-9a-f]\{8\} from checkpoint $s at 3 workers (was 2), batch 32 per worker, global 96$" err &&
	a=$(acc "$P") && b=$(acc "$F") && echo "elastic $a, fixed $b" &&
	awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.005 && b > 0.7) }"
'

test_expect_success 'the record holds the worker counts in order, and a resume event with each' '
	rec=$(ls "$P"/.dlk/runs/blobs/*.json) && test "$(echo "$rec" | wc -l)" = 1 &&
	jq -e ".run.worlds == [4, 2, 3] and .run.restarts == 2 and .run.outcome == \"succeeded\"" "$rec" &&
	jq -e "[.history.events[] | [.event, .world]] == [[\"start\", 4], [\"resume\", 2], [\"resume\", 3]]" "$rec" &&
	jq -e "[.history.events[].step] | (.[0] == 0 and .[1] > 0 and .[2] > .[1])" "$rec" &&
	dlk status blobs --history --local -f "$P/dlk.yaml" | sed -n 2p | grep_q " 4,2,3 "
'

test_expect_success 'a global batch that does not split is refused, naming both counts and the batch; the run stays resumable' '
	make_project q && interrupt 4 q 20 &&
	test_exit_code 3 dlk train --local --workers 5 -f q/dlk.yaml 2>err && cat err &&
	grep_q "cannot go on at 5 workers: the run.s global batch of 96 (4 workers x 24) does not split into 5 equal batches" err &&
	grep_q "use a worker count that divides 96 (it was 4), or start a new run with --fresh" err &&
	dlk status blobs --history --local -f q/dlk.yaml -o json | jq -e ".runs[0].run.outcome == \"interrupted\" and .runs[0].run.worlds == [4]" &&
	dlk train --local -f q/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "resuming run [0-9a-f]\{8\} from checkpoint [0-9]* at 1 worker (was 4), batch 96 per worker, global 96$" err &&
	dlk status blobs --history --local -f q/dlk.yaml -o json | jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].run.worlds == [4, 1]"
'

test_done
