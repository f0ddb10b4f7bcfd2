#!/bin/sh
# A sweep driver killed while a trial writes its final checkpoint: the trial got SIGTERM with
# its driver's death, but its training was over, so it ends as having succeeded a moment later.
# The driver run again must wait for it and read what it left: the trial is done, and it is not
# trained a second time (it once was: the record the driver had read first said "running"), and
# its record is completed with its curve and value (it once was not, and showed no accuracy).
. "$(dirname "$0")/../lib.sh"

fmnist_ready

P=$TEST_TMP/p
sweep_project "$P" 2000 500
sed -i "s|epochs: 6|epochs: 1|; s|parallel: 2 |parallel: 1 |" "$P/dlk.yaml"

test_expect_success 'killed during the last checkpoint, run again: the trial is done, trained once' '
	# each checkpoint file takes a second: the driver dies while the final one (after the one
	# epoch of 32 steps) is being written
	{ DLK_TEST_CHECKPOINT_DELAY_MS=1000 "$DLK" -f "$P/dlk.yaml" sweep --local --trials 1 -q >out 2>err & pid=$!; } &&
	i=0 && while [ $i -lt 1200 ]; do
		ls -a "$P"/.dlk/checkpoints/p-sweep-0/*/ 2>/dev/null | grep -q "^\.tmp-step-0*[1-9]" && break
		sleep 0.05; i=$((i + 1))
	done &&
	test $i -lt 1200 && kill -9 $pid && { wait $pid; true; } &&
	dlk -f "$P/dlk.yaml" sweep --local --trials 1 >out2 2>err2 && cat err2 &&
	grep -q "1 of 1 trials are done already" err2 && ! grep -q "^trial 0 \(continues\|starts\)" err2 &&
	test "$(ls "$P"/.dlk/runs/p-sweep-0/*.json | wc -l)" = 1 &&
	jq -e ".run.outcome == \"succeeded\" and .run.sweep.trial == 0" "$P"/.dlk/runs/p-sweep-0/*.json &&
	# and its record is completed with its curve and value, as its driver would have done
	grep -q "^trial 0 succeeded: accuracy" err2 &&
	jq -e "(.run.sweep.curve | length) == 1 and .run.sweep.value == .run.sweep.curve[0][1] and
		.run.sweep.value == .metrics.test_accuracy" "$P"/.dlk/runs/p-sweep-0/*.json &&
	dlk -f "$P/dlk.yaml" status p-sweep -o json | jq -e ".best.trial == 0 and (.best.value | type) == \"number\""
'

test_done
