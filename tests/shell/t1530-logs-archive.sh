#!/bin/sh
# Workers' logs kept with their run: a worker whose job has a checkpoint volume archives what it
# writes (timestamped lines, gzip flushed as it goes, a file per attempt) under
# dlk-logs/JOB/ on it, and `dlk logs JOB --run ID` reads the archives back after the pods are
# gone, through a store pod on the claim (the test API server runs the pod's command here), with
# the rank prefixes and the filters of live logs. Rank 0 keeps the folder to the last 20 runs.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

export DLK_APISERVER_DLK="$DLK" DLK_APISERVER_PVC_ROOT="$TEST_TMP/claims"
MOUNT=$TEST_TMP/claims/ckpt
ARCH=$MOUNT/dlk-logs/blobs
mkdir -p "$MOUNT" "$TEST_TMP/p"
awk 'BEGIN { srand(3); for (i = 0; i < 256; i++) { c = int(rand() * 3); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' \
	>"$TEST_TMP/p/train.csv"
cat >"$TEST_TMP/p/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
model:
  input: [2]
  layers: [{dense: {units: 8}}, relu, {dense: {units: 3}}]
training: {epochs: 2, batch_size: 16, threads: 1}
storage: {claim: ckpt, mount: $MOUNT}
EOT

# worker RUN RANK WORLD POD [train options]: one worker of a job, as its pod runs it
worker() {
	run=$1 rank=$2 world=$3 pod=$4
	shift 4
	DLK_LOG_ARCHIVE=$ARCH DLK_RUN_ID=$run POD_NAME=$pod JOB_COMPLETION_INDEX=$rank RANK=$rank WORLD_SIZE=$world \
		MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT exec "$DLK" train --worker -f "$TEST_TMP/p/dlk.yaml" "$@"
}
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

test_expect_success 'the Job tells each worker where on the checkpoint volume to archive its log' '
	dlk train --dry-run -f "$TEST_TMP/p/dlk.yaml" -o json | jq -e ".items[] | select(.kind == \"Job\") |
		.spec.template.spec.containers[0].env[] | select(.name == \"DLK_LOG_ARCHIVE\") | .value == \"$ARCH\"" >/dev/null &&
	sed "/^storage:/d" "$TEST_TMP/p/dlk.yaml" >nostorage.yaml &&
	dlk train --dry-run -f nostorage.yaml -o json | jq -e "[.items[] | select(.kind == \"Job\") |
		.spec.template.spec.containers[0].env[] | select(.name == \"DLK_LOG_ARCHIVE\")] | length == 0" >/dev/null
'

test_expect_success 'two workers: each archives its log (gzip, every line stamped), the container log unchanged' '
	{ (worker run-1a 1 2 blobs-1-x -v >out1 2>err1) & } && (worker run-1a 0 2 blobs-0-x >out0 2>err0) && wait &&
	test -f "$ARCH/logs/run-1a_rank-0_blobs-0-x.log.gz" && test -f "$ARCH/logs/run-1a_rank-1_blobs-1-x.log.gz" &&
	grep -q "^training .blobs. on 256 samples" err0 && grep -q "model bundle" out0 &&
	gzip -dc "$ARCH/logs/run-1a_rank-0_blobs-0-x.log.gz" >log0 &&
	grep -q "^20[0-9-]*T[0-9:]*\.[0-9]\{9\}Z training .blobs. on 256 samples" log0 &&
	grep -q "Z model bundle" log0 &&
	test "$(wc -l <log0)" = "$(cat out0 err0 | wc -l)" &&
	! grep -v "^20[0-9-]*T[0-9:.]*Z " log0
'

test_expect_success 'a worker killed mid-run leaves a readable archive; its restart archives to a file of its own' '
	{ (worker run-2b 0 1 blobs-0-y --set training.epochs=1000000 --set training.checkpoint.dir=ck3 >/dev/null 2>werr) & } &&
	n=0 && while [ $n -lt 100 ] && ! gzip -dc "$ARCH/logs/run-2b_rank-0_blobs-0-y.log.gz" 2>/dev/null | grep -q "epoch 3/"; do
		sleep 0.1; n=$((n + 1)); done &&
	{ kill -9 $! || { cat werr; false; }; } && { wait $! 2>/dev/null; true; } &&
	gzip -dc "$ARCH/logs/run-2b_rank-0_blobs-0-y.log.gz" 2>/dev/null | grep -q "epoch 2/1000000" &&
	(worker run-2b 0 1 blobs-0-y --set training.checkpoint.dir=ck3b >/dev/null 2>&1) &&
	test -f "$ARCH/logs/run-2b_rank-0_blobs-0-y.2.log.gz" &&
	gzip -dc "$ARCH/logs/run-2b_rank-0_blobs-0-y.2.log.gz" | grep -q "model bundle"
'

test_expect_success 'rank 0 keeps the archives of the last 20 runs only' '
	for i in $(seq 10 34); do
		printf "" | gzip -c >"$ARCH/logs/old-$i""_rank-0_blobs-0-z.log.gz" &&
		touch -d "@$(( $(date +%s) - 86400 - (40 - i) * 60 ))" "$ARCH/logs/old-$i""_rank-0_blobs-0-z.log.gz" || exit 1
	done &&
	(worker run-3c 0 1 blobs-0-w -v --set training.checkpoint.dir=ck3c >/dev/null 2>err) &&
	grep -q "removed 8 log archives of runs before the last 20" err &&
	test "$(ls "$ARCH/logs" | sed "s/_rank-.*//" | sort -u | wc -l)" = 20 &&
	test -f "$ARCH/logs/run-1a_rank-1_blobs-1-x.log.gz" && test -f "$ARCH/logs/run-2b_rank-0_blobs-0-y.log.gz" &&
	test -f "$ARCH/logs/old-34_rank-0_blobs-0-z.log.gz" && test ! -f "$ARCH/logs/old-17_rank-0_blobs-0-z.log.gz" &&
	test -f "$ARCH/logs/old-18_rank-0_blobs-0-z.log.gz"
'

apiserver_or_fail store-pod.json
write_kubeconfig "$KUBECONFIG"
pods_created() { grep -c '"method":"POST","path":"/api/v1/namespaces/default/pods"' "$APISERVER_LOG" 2>/dev/null || true; }
pods_deleted() { grep -c '"method":"DELETE","path":"/api/v1/namespaces/default/pods/dlk-store-' "$APISERVER_LOG" 2>/dev/null || true; }

test_expect_success 'logs --run reads the archives through a pod on the claim: both ranks, merged, prefixed' '
	cp "$TEST_TMP/p/dlk.yaml" . && c=$(pods_created) && d=$(pods_deleted) &&
	dlk logs blobs --run run-1a >out 2>err &&
	grep -q "^\[rank 0\] training .blobs. on 256 samples" out && grep -q "^\[rank 1\] rank 1 done after 16 steps" out &&
	test "$(grep -c "^\[rank [01]\] " out)" = "$(wc -l <out)" &&
	test "$(wc -l <out)" = $(( $(gzip -dc "$ARCH"/logs/run-1a_*.gz | wc -l) )) &&
	test "$(pods_created)" = $((c + 1)) && test "$(pods_deleted)" = $((d + 1)) &&
	grep -q "/proxy/v1/object/logs/run-1a_rank-1_blobs-1-x.log.gz" "$APISERVER_LOG" &&
	test "$(api /api/v1/namespaces/default/jobs | jq ".items | length")" = 0
'

test_expect_success 'the filters of live logs: --rank, --tail, --timestamps, --since; a prefix of the id' '
	cp "$TEST_TMP/p/dlk.yaml" . &&
	dlk logs blobs --run run-1 --rank 1 >out && ! grep -qv "^\[rank 1\] " out && test -s out &&
	dlk logs blobs --run run-1a --tail 1 >out && test "$(wc -l <out)" = 2 &&
	dlk logs blobs --run run-1a --tail 1 --rank 0 --timestamps >out &&
	grep -q "^\[rank 0\] 20[0-9-]*T[0-9:.]*Z " out && test "$(wc -l <out)" = 1 &&
	dlk logs blobs --run run-1a --since 1h >out && test -s out
'

test_expect_success 'every attempt of a rank, in time order, the killed one whole' '
	cp "$TEST_TMP/p/dlk.yaml" . &&
	dlk logs blobs --run run-2b >out 2>err &&
	! grep -q "ends mid-write" err &&
	grep -n "epoch 1/1000000" out | head -n 1 | cut -d: -f1 >first && grep -n "model bundle" out | cut -d: -f1 >last &&
	test "$(cat first)" -lt "$(cat last)" &&
	grep -q "training .blobs. on 256 samples, no test set (1000000 epochs" out &&
	grep -q "training .blobs. on 256 samples, no test set (2 epochs" out
'

test_expect_success 'an unknown run names the archived ones; an ambiguous prefix; no volume; usage' '
	cp "$TEST_TMP/p/dlk.yaml" . &&
	test_exit_code 6 dlk logs blobs --run nope 2>err &&
	grep -q "no archived log of run .nope." err && grep -q "run-1a" err && grep -q "run-2b" err &&
	test_exit_code 2 dlk logs blobs --run run- 2>err && grep -q "more than one run" err &&
	sed -i "/^storage:/d" dlk.yaml &&
	test_exit_code 3 dlk logs blobs --run run-1a 2>err && grep -q "no checkpoint volume" err &&
	test_exit_code 2 dlk logs blobs --run run-1a -f 2>err && grep -q "does not go with --follow" err &&
	test_exit_code 2 dlk logs blobs --from pvc://ckpt/x 2>err && grep -q "goes with --run" err &&
	dlk logs blobs --run run-1a --from "$ARCH" >out && grep -q "^\[rank 1\] " out
'

test_expect_success 'a job that is gone points at the archive' '
	cp "$TEST_TMP/p/dlk.yaml" . &&
	test_exit_code 6 dlk logs blobs 2>err && grep -q "dlk logs blobs --run ID" err
'

test_done
