#!/bin/sh
# Data-parallel training on this machine: checkpoints and resuming bit for bit, SIGTERM,
# corrupted checkpoints, a gang of workers that averages gradients, loses a worker and restarts,
# and a rendezvous that a worker never joins. A small CSV project keeps every run short.
. "$(dirname "$0")/../lib.sh"

# 2048 training and 512 test rows of 16 features in 4 classes (gaussian-ish blobs).
make_project() {
	mkdir -p "$1" &&
	blobs_csv 2048 1 "$1/train.csv" &&
	blobs_csv 512 2 "$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [16]
  layers:
    - dense: {units: 32}
    - relu
    - dropout: {rate: 0.1}
    - dense: {units: 4}
training:
  epochs: 3
  batch_size: 64
  optimizer: {name: adam, lr: 0.01}
  threads: 1
  checkpoint: {every: 5, keep: 3}
EOT
}

# the sha256 of the weights recorded in a bundle's model.json
weights_sha() { tar -xOf "$1" model.json | tr -d ' \t\n' | sed 's/.*"weights":{[^}]*"sha256":"\([0-9a-f]*\)".*/\1/'; }
accuracy() { sed -n 's/.*"testAccuracy":[ \t]*\([0-9.]*\).*/\1/p' "$1"; }
# waits (up to 20 s) until a file or directory exists
wait_for() { i=0; while [ ! -e "$1" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done; [ -e "$1" ]; }
# the checkpoints of a project's newest run (each run has a directory of its own, named by its id)
ckpts() { ls -td "$1"/.dlk/checkpoints/blobs/*/ 2>/dev/null | head -1 | sed "s,/$,,"; }
# waits (up to 20 s) until the newest run of project $1 has checkpoint $2
wait_for_ckpt() {
	i=0; while [ ! -e "$(ckpts "$1")/$2" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
	[ -e "$(ckpts "$1")/$2" ]
}

# reference runs, shared by several cases
mkdir -p "$TEST_TMP/ref1" "$TEST_TMP/ref2" "$TEST_TMP/ref4"
make_project "$TEST_TMP/ref1" && dlk train --local -q -f "$TEST_TMP/ref1/dlk.yaml" -o json \
	--metrics "$TEST_TMP/ref1/m.jsonl" >"$TEST_TMP/ref1/out.json" 2>"$TEST_TMP/ref1/err" ||
	{ echo "Bail out! reference run failed"; cat "$TEST_TMP/ref1/err"; exit 1; }
make_project "$TEST_TMP/ref2" && dlk train --local --workers 2 -q -f "$TEST_TMP/ref2/dlk.yaml" -o json \
	--set training.batch_size=32 --metrics "$TEST_TMP/ref2/m.jsonl" >"$TEST_TMP/ref2/out.json" 2>"$TEST_TMP/ref2/err" ||
	{ echo "Bail out! reference run with 2 workers failed"; cat "$TEST_TMP/ref2/err"; exit 1; }
make_project "$TEST_TMP/ref4" && dlk train --local --workers 4 -q -f "$TEST_TMP/ref4/dlk.yaml" -o json \
	--set training.batch_size=16 >"$TEST_TMP/ref4/out.json" 2>"$TEST_TMP/ref4/err" ||
	{ echo "Bail out! reference run with 4 workers failed"; cat "$TEST_TMP/ref4/err"; exit 1; }
REF1=$(weights_sha "$TEST_TMP/ref1/blobs.dlk")
REF2=$(weights_sha "$TEST_TMP/ref2/blobs.dlk")
REF4=$(weights_sha "$TEST_TMP/ref4/blobs.dlk")

test_expect_success 'a run writes checkpoints (keep 3) with the whole training state, in a directory of its own' '
	ls "$TEST_TMP/ref1/.dlk/checkpoints/blobs" >runs && test "$(wc -l <runs)" = 1 &&
	grep_q "^[0-9a-f]\{8\}-[0-9a-f]\{4\}-4[0-9a-f]\{3\}-[89ab][0-9a-f]\{3\}-[0-9a-f]\{12\}\$" runs &&
	ck=$(ckpts "$TEST_TMP/ref1") && ls "$ck" >dirs &&
	test "$(wc -l <dirs)" = 3 && grep_q step-00000096 dirs &&
	for b in state.json params.f32 optim_m.f32 optim_v.f32 manifest.json; do
		test -s "$ck/step-00000096/$b" || exit 1
	done &&
	grep_q "\"globalStep\":\"96\"" "$ck/step-00000096/state.json"
'

test_expect_success 'a finished run is not reported again: running again trains a new run' '
	cp -r "$TEST_TMP/ref1" p && dlk train --local -f p/dlk.yaml -o json >out.json 2>err && cat err &&
	! grep -q "nothing left to train" err && ! grep -q "resuming" err && grep_q "epoch 3/3" err &&
	test "$(ls p/.dlk/checkpoints/blobs | wc -l)" = 2 && test "$(weights_sha p/blobs.dlk)" = "$REF1"
'

test_expect_success 'SIGTERM writes a checkpoint and exits 75; resuming gives the same weights bit for bit' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=15 "$DLK" train --local -f p/dlk.yaml >/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 && kill -TERM $pid; wait $pid; rc=$?;
	cat err && test $rc = 75 && grep_q "stopped by SIGTERM after" err && grep_q "checkpoint written" err &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err2 && cat err2 && grep_q "resuming run .* from checkpoint" err2 &&
	test "$(weights_sha p/blobs.dlk)" = "$REF1"
'

test_expect_success 'SIGTERM during a checkpoint write past the grace leaves the previous checkpoint valid' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=300 DLK_TERM_GRACE=1 "$DLK" train --local -f p/dlk.yaml >/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000005 && kill -TERM $pid; wait $pid; rc=$?;
	cat err && test $rc = 75 && grep_q "did not finish within the termination grace" err &&
	ls -a "$(ckpts p)" && ls "$(ckpts p)" | grep -v step-00000005 >others;
	test ! -s others &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err2 && cat err2 &&
	grep_q "resuming run .* from checkpoint .*step-00000005" err2 && ! grep -q warning err2 &&
	test "$(weights_sha p/blobs.dlk)" = "$REF1"
'

test_expect_success 'a corrupted checkpoint is named in a warning and the previous one is used' '
	make_project p &&
	dlk train --local -q -f p/dlk.yaml --set training.epochs=1 >/dev/null 2>&1 &&
	ck=$(ckpts p) && ls "$ck" >dirs && cat dirs && grep_q step-00000032 dirs &&
	printf "\377\377\377\377" | dd of="$ck/step-00000032/params.f32" bs=1 seek=8 conv=notrunc 2>/dev/null &&
	rec=$(ls p/.dlk/runs/blobs/*.json) && sed "s/\"outcome\":[ \t]*\"succeeded\"/\"outcome\":\"interrupted\"/" "$rec" >x && mv x "$rec" &&
	dlk train --local -f p/dlk.yaml --set training.epochs=1 >/dev/null 2>err; cat err &&
	grep_q "warning: .*step-00000032" err && grep_q "resuming run .* from checkpoint .*step-00000030" err
'

test_expect_success 'an interrupted run of a project changed since is not continued: a new run starts' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=15 "$DLK" train --local -f p/dlk.yaml >/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 && kill -TERM $pid; wait $pid; test $? = 75 &&
	sed "s/units: 32/units: 33/" p/dlk.yaml >p/x && mv p/x p/dlk.yaml &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "was interrupted, but the project has changed since: starting a new run" err &&
	test "$(ls p/.dlk/checkpoints/blobs | wc -l)" = 2
'

test_expect_success '--fresh starts a new run instead of continuing the interrupted one' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=15 "$DLK" train --local -f p/dlk.yaml >/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 && kill -TERM $pid; wait $pid; test $? = 75 &&
	dlk train --local -f p/dlk.yaml --fresh >/dev/null 2>err && cat err &&
	grep_q "starting a new run (--fresh)" err && ! grep -q resuming err &&
	test "$(ls p/.dlk/checkpoints/blobs | wc -l)" = 2 && test "$(weights_sha p/blobs.dlk)" = "$REF1"
'

test_expect_success 'two workers print one log with rank prefixes and write one bundle' '
	grep_q "^\[rank 0\] training .blobs. on 2048 samples (3 epochs, 2 workers x batch 32" "$TEST_TMP/ref2/err" ||
	{ dlk train --local --workers 2 -f "$TEST_TMP/ref2/dlk.yaml" --set training.batch_size=32 >/dev/null 2>err; cat err; } &&
	grep_q "\"testAccuracy\"" "$TEST_TMP/ref2/out.json" &&
	test -f "$TEST_TMP/ref2/blobs.dlk"
'

test_expect_success 'the same two-worker run twice gives the same weights' '
	make_project p &&
	dlk train --local --workers 2 -q -f p/dlk.yaml --set training.batch_size=32 >/dev/null 2>err &&
	test "$(weights_sha p/blobs.dlk)" = "$REF2"
'

test_expect_success '1 worker x batch 64 and 2 workers x batch 32: the same loss curve, step by step' '
	# without dropout (whose masks depend on which rank draws them) the runs see the same global
	# batches and average the same gradients: only float summation order may differ
	make_project a && make_project b &&
	dlk train --local -q -f a/dlk.yaml --set model.layers.2.dropout.rate=0 --metrics a/m.jsonl >/dev/null &&
	dlk train --local --workers 2 -q -f b/dlk.yaml --set model.layers.2.dropout.rate=0 \
		--set training.batch_size=32 --metrics b/m.jsonl >/dev/null &&
	grep "\"event\":\"step\"" a/m.jsonl | sed "s/.*\"loss\":\([0-9.e-]*\).*/\1/" >l1 &&
	grep "\"event\":\"step\"" b/m.jsonl | sed "s/.*\"loss\":\([0-9.e-]*\).*/\1/" >l2 &&
	test -s l1 && test "$(wc -l <l1)" = "$(wc -l <l2)" &&
	paste l1 l2 | awk "{ d = \$1 - \$2; if (d < 0) d = -d; if (d > 1e-5 * (\$1 > 0 ? \$1 : -\$1) + 1e-7) { print \"step \" NR \": \" \$1 \" vs \" \$2; bad = 1 } } END { exit bad }"
'

test_expect_success 'with dropout, 1 x 64 and 2 x 32 still reach the same accuracy' '
	a1=$(accuracy "$TEST_TMP/ref1/out.json") && a2=$(accuracy "$TEST_TMP/ref2/out.json") && echo "$a1 $a2" &&
	awk -v a="$a1" -v b="$a2" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02) }"
'

test_expect_success 'four workers: kill -9 one mid-run, the gang restarts from the last checkpoint and ends bit-identical' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=10 "$DLK" train --local --workers 4 -o json -f p/dlk.yaml --set training.batch_size=16 \
		>out.json 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000020 &&
	victim=$(cat /proc/$pid/task/$pid/children | tr " " "\n" | sed -n 3p) && test -n "$victim" &&
	kill -9 "$victim" && wait $pid && cat err &&
	grep_q "worker . was killed by signal 9" err && grep_q "restarting all 4 workers from the last checkpoint (restart 1 of 3)" err &&
	grep_q "resuming run .* from checkpoint" err &&
	test "$(weights_sha p/blobs.dlk)" = "$REF4" &&
	a=$(accuracy out.json) && b=$(accuracy "$TEST_TMP/ref4/out.json") && echo "$a $b" &&
	awk -v a="$a" -v b="$b" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.005) }"
'

test_expect_success 'a worker that fails for good stops the gang with its exit code, without restarts' '
	make_project p && printf "1,2,3\n" >>p/train.csv &&
	test_exit_code 3 dlk train --local --workers 2 -f p/dlk.yaml --set training.batch_size=32 >/dev/null 2>err &&
	cat err && ! grep -q restarting err && grep_q "worker . exited with code 3" err
'

test_expect_success 'the restarts allowed run out' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=10 "$DLK" train --local --workers 2 --max-restarts 0 -f p/dlk.yaml \
		--set training.batch_size=32 >/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 &&
	victim=$(cat /proc/$pid/task/$pid/children | tr " " "\n" | sed -n 2p) && kill -9 "$victim";
	wait $pid; rc=$?; cat err && test $rc = 75 && grep_q "restarts allowed are used up" err
'

test_expect_success 'SIGTERM to the gang stops every worker with a checkpoint; running again resumes' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=15 "$DLK" train --local --workers 2 -f p/dlk.yaml --set training.batch_size=32 \
		>/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 && kill -TERM $pid; wait $pid; rc=$?;
	cat err && test $rc = 75 && grep_q "checkpoint written" err &&
	dlk train --local --workers 2 -f p/dlk.yaml --set training.batch_size=32 >/dev/null 2>err2 && cat err2 &&
	grep_q "resuming run .* from checkpoint" err2 && test "$(weights_sha p/blobs.dlk)" = "$REF2"
'

test_expect_success 'Ctrl-C (SIGINT) to the gang stops it cleanly with a checkpoint, exit 130' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=15 "$DLK" train --local --workers 2 -f p/dlk.yaml --set training.batch_size=32 \
		>/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 && kill -INT $pid; wait $pid; rc=$?;
	cat err && test $rc = 130 && grep_q "stopped by an interrupt" err && grep_q "checkpoint written" err &&
	! grep -q restarting err && test -z "$(cat /proc/$pid/task/$pid/children 2>/dev/null)"
'

test_expect_success 'a stalled worker (SIGSTOP): the watchdog fails the step, the gang restarts and finishes' '
	make_project p &&
	{ DLK_STALL_TIMEOUT=2 DLK_TEST_CHECKPOINT_DELAY_MS=10 "$DLK" train --local --workers 2 -f p/dlk.yaml \
		--set training.batch_size=32 >/dev/null 2>err & pid=$!; } &&
	wait_for_ckpt p step-00000010 &&
	victim=$(cat /proc/$pid/task/$pid/children | tr " " "\n" | sed -n 2p) && kill -STOP "$victim" &&
	wait $pid && cat err && grep_q "restarting all 2 workers" err &&
	test "$(weights_sha p/blobs.dlk)" = "$REF2"
'

test_expect_success 'a rank that never joins fails the rendezvous, named' '
	make_project p &&
	# a port the kernel has just handed out, not one guessed from the pid (others may hold that)
	port=$(node -e "const s = require(\"net\").createServer(); s.listen(0, \"127.0.0.1\", () => { console.log(s.address().port); s.close(); })") &&
	test_exit_code 75 env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DLK_RENDEZVOUS_TIMEOUT=1 \
		"$DLK" train --worker -f p/dlk.yaml >/dev/null 2>err && cat err && grep_q "rank 1" err
'

test_expect_success 'bad worker settings are configuration errors' '
	make_project p &&
	test_exit_code 3 env RANK=x WORLD_SIZE=2 "$DLK" train --worker -f p/dlk.yaml 2>err && cat err && grep_q RANK err &&
	test_exit_code 2 dlk train --worker --workers 2 -f p/dlk.yaml 2>err && grep_q "goes with --local" err &&
	test_exit_code 2 dlk train --local --workers 0 -f p/dlk.yaml 2>err && grep_q "expected 1 to" err
'

test_done
