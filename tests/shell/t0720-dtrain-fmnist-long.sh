#!/bin/sh
# The full comparison (make test-long): 1, 2 and 4 local workers on Fashion-MNIST (3 epochs of
# the example MLP, global batch 128) reach the same accuracy within 0.5 points, and a 4-worker
# run that loses a worker to kill -9 mid-epoch restarts from its last checkpoint and ends with
# the uninterrupted run's weights.
. "$(dirname "$0")/../lib.sh"

accuracy() { sed -n 's/.*"testAccuracy":[ \t]*\([0-9.]*\).*/\1/p' "$1"; }
weights_sha() { tar -xOf "$1" model.json | tr -d ' \t\n' | sed 's/.*"weights":{[^}]*"sha256":"\([0-9a-f]*\)".*/\1/'; }
wait_for() { i=0; while [ ! -e "$1" ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i + 1)); done; [ -e "$1" ]; }
close() { awk -v a="$1" -v b="$2" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.8 && d <= 0.005) }"; }

long_only "compare workers on Fashion-MNIST"
fmnist_ready

R=$TEST_TMP/runs
mkdir -p "$R/w1" "$R/w2" "$R/w4"
for n in 1 2 4; do
	cp "$TEST_ROOT/examples/mlp/dlk.yaml" "$R/w$n/" &&
	"$DLK" train --local --workers $n -q -o json -f "$R/w$n/dlk.yaml" --set training.epochs=3 \
		--set training.batch_size=$((128 / n)) >"$R/w$n/out.json" 2>"$R/w$n/err" ||
		{ echo "Bail out! the run with $n workers failed"; cat "$R/w$n/err"; exit 1; }
done

echo "# test accuracy after 3 epochs: 1 worker $(accuracy "$R/w1/out.json"), 2 workers $(accuracy "$R/w2/out.json"), 4 workers $(accuracy "$R/w4/out.json")"

test_expect_success '2 workers x batch 64 reach the accuracy of 1 worker x batch 128 within 0.5 points' '
	a=$(accuracy "$R/w1/out.json") && b=$(accuracy "$R/w2/out.json") && echo "$a $b" && close "$a" "$b"
'

test_expect_success '4 workers x batch 32 reach the accuracy of 1 worker x batch 128 within 0.5 points' '
	a=$(accuracy "$R/w1/out.json") && b=$(accuracy "$R/w4/out.json") && echo "$a $b" && close "$a" "$b"
'

test_expect_success 'kill -9 of one of 4 workers mid-epoch: restarted from the last checkpoint, same result' '
	mkdir p && cp "$TEST_ROOT/examples/mlp/dlk.yaml" p/ &&
	{ "$DLK" train --local --workers 4 -o json -f p/dlk.yaml --set training.epochs=3 --set training.batch_size=32 \
		--set training.checkpoint.every=200 >out.json 2>err & pid=$!; } &&
	wait_for_glob "p/.dlk/checkpoints/fashion-mlp/*/step-00000600" 3000 &&
	victim=$(cat /proc/$pid/task/$pid/children | tr " " "\n" | sed -n 2p) && test -n "$victim" &&
	sleep 1 && kill -9 "$victim" && wait $pid && grep -v "step .*/" err &&
	grep_q "restarting all 4 workers from the last checkpoint" err &&
	a=$(accuracy "$R/w4/out.json") && b=$(accuracy out.json) && echo "$a $b" && close "$a" "$b" &&
	a=$(accuracy "$R/w1/out.json") && close "$a" "$b" &&
	test "$(weights_sha p/fashion-mlp.dlk)" = "$(weights_sha "$R/w4/fashion-mlp.dlk")"
'

test_done
