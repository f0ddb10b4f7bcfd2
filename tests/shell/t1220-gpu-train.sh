#!/bin/sh
# Training on GPUs end to end (part of `make test-gpu`): one GPU against the CPU; two ranks
# sharing one GPU (their gradients go through host memory and the TCP ring); and with two GPUs
# or more, data-parallel training over NCCL against one GPU, the TCP ring against NCCL, and a
# rank killed in the middle (the watchdog, the restartable exit, the gang's restart). Skips,
# saying why, where no CUDA device can be used.
. "$(dirname "$0")/../lib.sh"

dlk version -o json >"$TEST_TMP/v.json" || { echo "Bail out! dlk version failed"; exit 1; }
USABLE=$(jq -r .cudaBackend.usable "$TEST_TMP/v.json")
DEVICES=$(jq -r '.cudaBackend.devices // 0' "$TEST_TMP/v.json")
if [ "$USABLE" != true ]; then
	test_skip "no usable CUDA device: $(jq -r .cudaBackend.why "$TEST_TMP/v.json")"
	test_done
	exit 0
fi

# 4096 training and 1024 test rows of 16 features in 4 classes
make_project() {
	mkdir -p "$1" &&
	blobs_csv 4096 1 "$1/train.csv" &&
	blobs_csv 1024 2 "$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [16]
  layers:
    - dense: {units: 64}
    - relu
    - dropout: {rate: 0.1}
    - dense: {units: 4}
training:
  epochs: 4
  batch_size: 64
  optimizer: {name: adam, lr: 0.01}
  threads: 1
  checkpoint: {every: 20, keep: 2}
resources:
  gpus: 1
EOT
}
accuracy() { jq -r .testAccuracy "$1"; }
loss() { jq -r .trainLoss "$1"; }
# |a - b| <= tol
close_to() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

make_project "$TEST_TMP/cpu" &&
	DLK_DEVICE=cpu dlk train --local -q -o json -f "$TEST_TMP/cpu/dlk.yaml" >"$TEST_TMP/cpu/out.json" 2>"$TEST_TMP/cpu/err" ||
	{ echo "Bail out! the CPU reference run failed"; cat "$TEST_TMP/cpu/err"; exit 1; }
make_project "$TEST_TMP/g1" &&
	DLK_DEVICE=cuda dlk train --local -v -o json -f "$TEST_TMP/g1/dlk.yaml" >"$TEST_TMP/g1/out.json" 2>"$TEST_TMP/g1/err" ||
	{ echo "Bail out! the one-GPU run failed"; cat "$TEST_TMP/g1/err"; exit 1; }

test_expect_success 'one GPU trains to the CPU'"'"'s accuracy and loss' '
	cat "$TEST_TMP/g1/err" && grep_q "computing on cuda:0" "$TEST_TMP/g1/err" &&
	echo "cpu $(accuracy "$TEST_TMP/cpu/out.json") $(loss "$TEST_TMP/cpu/out.json")" &&
	echo "gpu $(accuracy "$TEST_TMP/g1/out.json") $(loss "$TEST_TMP/g1/out.json")" &&
	close_to "$(accuracy "$TEST_TMP/g1/out.json")" "$(accuracy "$TEST_TMP/cpu/out.json")" 0.01 &&
	close_to "$(loss "$TEST_TMP/g1/out.json")" "$(loss "$TEST_TMP/cpu/out.json")" 0.02
'

test_expect_success 'a GPU checkpoint resumes on the GPU and on the CPU' '
	make_project p &&
	DLK_DEVICE=cuda dlk train --local -q -f p/dlk.yaml --set training.epochs=2 >/dev/null 2>err &&
	DLK_DEVICE=cuda dlk train --local -o json -f p/dlk.yaml >out.json 2>err && cat err &&
	grep_q "resuming run .* from checkpoint" err &&
	close_to "$(accuracy out.json)" "$(accuracy "$TEST_TMP/g1/out.json")" 0.01
'

test_expect_success 'two ranks sharing one GPU average their gradients through host memory' '
	make_project p &&
	DLK_DEVICE=cuda CUDA_VISIBLE_DEVICES=0 dlk train --local --workers 2 -v -o json -f p/dlk.yaml \
		--set training.batch_size=32 >out.json 2>err && cat err &&
	grep_q "gradients over the TCP ring" err &&
	close_to "$(accuracy out.json)" "$(accuracy "$TEST_TMP/g1/out.json")" 0.01
'

if [ "$DEVICES" -lt 2 ]; then
	test_skip "NCCL data-parallel tests need 2 GPUs; this machine shows $DEVICES"
	test_done
	exit 0
fi

test_expect_success 'two GPUs over NCCL train like one GPU with the same global batch' '
	make_project p &&
	DLK_DEVICE=cuda dlk train --local --workers 2 -v -o json -f p/dlk.yaml \
		--set training.batch_size=32 >out.json 2>err && cat err &&
	grep_q "gradients over NCCL" err &&
	close_to "$(accuracy out.json)" "$(accuracy "$TEST_TMP/g1/out.json")" 0.01 &&
	close_to "$(loss out.json)" "$(loss "$TEST_TMP/g1/out.json")" 0.02
'

test_expect_success 'DLK_COMM=tcp keeps the gradients on the TCP ring, with the same result' '
	make_project p &&
	DLK_COMM=tcp DLK_DEVICE=cuda dlk train --local --workers 2 -v -o json -f p/dlk.yaml \
		--set training.batch_size=32 >out.json 2>err && cat err &&
	grep_q "gradients over the TCP ring" err &&
	close_to "$(accuracy out.json)" "$(accuracy "$TEST_TMP/g1/out.json")" 0.01
'

test_expect_success 'a rank killed mid-run: NCCL fails restartably, the gang restarts from the checkpoint' '
	make_project p &&
	{ DLK_STALL_TIMEOUT=10 DLK_TEST_CHECKPOINT_DELAY_MS=20 DLK_DEVICE=cuda "$DLK" train --local --workers 2 \
		-o json -f p/dlk.yaml --set training.batch_size=32 >out.json 2>err & pid=$!; } &&
	i=0; while [ ! -d p/.dlk/checkpoints/blobs ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done &&
	victim=$(pgrep -P $pid | tail -n 1) && test -n "$victim" && kill -KILL $victim;
	wait $pid; rc=$?; cat err && test $rc = 0 &&
	grep_q "restart" err && grep_q "resuming run .* from checkpoint" err &&
	close_to "$(accuracy out.json)" "$(accuracy "$TEST_TMP/g1/out.json")" 0.02
'

test_done
