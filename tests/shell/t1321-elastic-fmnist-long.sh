#!/bin/sh
# Elastic workers on Fashion-MNIST (make test-long): the example MLP, 3 epochs, global batch 192,
# trained by 4 workers, interrupted, continued by 2, interrupted, finished by 3, ends within 0.5
# points of the test accuracy of an uninterrupted 4-worker run.
. "$(dirname "$0")/../lib.sh"

accuracy() { sed -n 's/.*"testAccuracy":[ \t]*\([0-9.]*\).*/\1/p' "$1"; }
close() { awk -v a="$1" -v b="$2" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.8 && d <= 0.005) }"; }
last_step() {
	ls -d "$1"/.dlk/checkpoints/*/*/step-* 2>/dev/null | sed "s/.*step-0*//" | sort -n | tail -n 1 | grep . || echo 0
}
# interrupt WORKERS DIR AFTER: trains, and stops it with SIGTERM once a checkpoint past step AFTER is written
interrupt() {
	{ DLK_TEST_CHECKPOINT_DELAY_MS=20 "$DLK" train --local --workers "$1" -f "$2/dlk.yaml" $ARGS >/dev/null 2>"$2/err.$1" & pid=$!; } &&
	i=0 && while [ "$(last_step "$2")" -le "$3" ]; do sleep 0.1; i=$((i + 1)); test $i -lt 6000 || return 1; done &&
	kill -TERM $pid; wait $pid; rc=$?; grep -v " step " "$2/err.$1" >&2; test $rc = 75
}

long_only "resize a Fashion-MNIST run"
fmnist_ready

ARGS="--set training.epochs=3 --set training.batch_size=48 --set training.checkpoint.every=50"
F=$TEST_TMP/fixed E=$TEST_TMP/elastic
mkdir -p "$F" "$E" && cp "$TEST_ROOT/examples/mlp/dlk.yaml" "$F/" && cp "$TEST_ROOT/examples/mlp/dlk.yaml" "$E/" &&
	"$DLK" train --local --workers 4 -q -o json -f "$F/dlk.yaml" $ARGS >"$F/out.json" 2>"$F/err" ||
	{ echo "Bail out! the fixed-size run failed"; cat "$F/err"; exit 1; }

test_expect_success '4 -> 2 -> 3 workers mid-run ends within 0.5 points of 4 workers throughout' '
	interrupt 4 "$E" 300 && s=$(last_step "$E") && interrupt 2 "$E" $((s + 250)) &&
	grep -q "at 2 workers (was 4), batch 96 per worker, global 192$" "$E/err.2" &&
	"$DLK" train --local --workers 3 -o json -f "$E/dlk.yaml" $ARGS >"$E/out.json" 2>"$E/err.3" &&
	grep "resuming" "$E/err.3" && grep -q "at 3 workers (was 2), batch 64 per worker, global 192$" "$E/err.3" &&
	a=$(accuracy "$F/out.json") && b=$(accuracy "$E/out.json") &&
	echo "# test accuracy after 3 epochs: 4 workers $a, 4 -> 2 -> 3 workers $b" >"$TEST_TMP/acc" && close "$a" "$b"
'
cat "$TEST_TMP/acc" 2>/dev/null

test_done
