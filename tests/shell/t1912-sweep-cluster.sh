#!/bin/sh
# dlk sweep (no --local) against the real control plane: 4 trials of a small Fashion-MNIST
# model, each the Job `dlk train` renders for the project with the trial's learning rate, at
# most 2 at once; ASHA stops the trial whose learning rate cannot learn by deleting its Job, and
# its record in the cluster says "stopped"; the driver killed with kill -9 while Jobs run is run
# again, follows the Jobs still there and runs no trial twice; dlk status SWEEP reads the trials
# from the cluster's run histories.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

fmnist_ready

cluster_up

mkdir -p "$TEST_TMP/data"
idx_head "$FM/train-images-idx3-ubyte.gz" 30000 "$TEST_TMP/data/train-images" &&
idx_head "$FM/train-labels-idx1-ubyte.gz" 30000 "$TEST_TMP/data/train-labels" &&
idx_head "$FM/t10k-images-idx3-ubyte.gz" 1000 "$TEST_TMP/data/test-images" &&
idx_head "$FM/t10k-labels-idx1-ubyte.gz" 1000 "$TEST_TMP/data/test-labels" ||
	{ echo "Bail out! cannot cut the Fashion-MNIST subset"; exit 1; }
hostpath_pv cs-data "$TEST_TMP/data" cs-data
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cs-data}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
YAML
for n in 0 1 2 3; do
	hostpath_pv cs-sweep-$n "$TEST_TMP/pv-$n" cs-sweep-$n-checkpoints
done

# grid order: trials 0 and 1 learn and reach epoch 1 first; trial 2 (lr 1e-7 cannot learn)
# reaches it behind them and is stopped there (rungs below 4 epochs: epoch 1 only). An epoch
# takes about a second: the driver looks at the Jobs twice a second, and a trial's stop must
# come before its last epoch ends.
mkdir -p "$TEST_TMP/p"
P=$TEST_TMP/p/dlk.yaml
cat >"$P" <<'YAML'
name: cs
data:
  format: idx
  train: {images: pvc://cs-data/train-images, labels: pvc://cs-data/train-labels}
  test: {images: pvc://cs-data/test-images, labels: pvc://cs-data/test-labels}
model:
  input: [1, 28, 28]
  layers: [flatten, {dense: {units: 256}}, relu, {dense: {units: 10}}]
  loss: softmax_cross_entropy
training:
  epochs: 4
  batch_size: 64
  threads: 1
  optimizer: {name: adam, lr: 0.001}
  seed: 1
  checkpoint: {every: 1000}
resources: {workers: 1, gpus: 0, cpu: "1", memory: 1Gi}
storage: {size: 1Gi}
sweep:
  method: grid
  metric: accuracy
  trials: 4
  parallel: 2
  parameters:
    training.optimizer.lr: [0.003, 0.002, 0.0000001, 0.001]
  early_stopping: {method: asha, at: epochs, min: 1, reduction_factor: 4}
YAML

# the most trial Jobs that were unfinished at once, sampled until the file "stop" appears
count_active() {
	max=0
	while [ ! -f stop ]; do
		n=$(kubectl get jobs -o json 2>/dev/null | jq '[.items[] | select(.metadata.name | startswith("cs-sweep-"))
			| select([.status.conditions[]? | select(.status == "True") | .type]
				| (index("Complete") or index("Failed")) | not)] | length')
		[ -n "$n" ] && [ "$n" -gt "$max" ] && max=$n && echo "$max" >max
		sleep 0.1
	done
}

test_expect_success 'a sweep driver killed with kill -9 while its Jobs run, run again, ends the sweep' '
	cd "$TEST_TMP" && echo 0 >max && rm -f stop &&
	{ count_active & c=$!; } &&
	{ "$DLK" -f "$P" sweep -q >out1 2>err1 & pid=$!; } &&
	# its pod, not only its Job: the Job controller creates the pod a moment after the Job (on a
	# loaded machine, after dlk top below had looked), and dlk top must see one
	wait_until 60 sh -c "kubectl get pods -l batch.kubernetes.io/job-name=cs-sweep-0 -o name 2>/dev/null | grep -q ." &&
	kill -9 $pid && { wait $pid; true; } &&
	kubectl get jobs &&
	# the Jobs the dead driver left, as dlk top --cluster sees them (JSON, and piped lines)
	"$DLK" top --cluster -o json >top.json 2>top.err && "$DLK" top --cluster cs-sweep-0 >top.txt 2>>top.err &&
	"$DLK" -f "$P" sweep -o json >out2 2>err2; rc=$?
	touch stop; wait $c
	cat err1 err2 && test $rc = 0 &&
	grep -q "trial 0 continues: training.optimizer.lr=0.003 (its Job is still there: following it)" err2 &&
	echo "most Jobs at once: $(cat max)" && test "$(cat max)" -le 2 && test "$(cat max)" -ge 1
'

test_expect_success 'ASHA stopped the trial that cannot learn; its record in the cluster says stopped' '
	cd "$TEST_TMP" &&
	jq -e ".trials | length == 4" out2 &&
	jq -r ".trials[] | \"\(.trial) \(.outcome) \(.value) \(.stopped_at)\"" out2 &&
	jq -e ".trials[] | select(.trial == 2) | .outcome == \"stopped\" and .stopped_at == 1 and .value < 0.3" out2 &&
	jq -e "[.trials[] | select(.outcome == \"succeeded\")] | length >= 1" out2 &&
	best=$(jq ".best.value" out2) && echo "best $best" &&
	jq -e ".best.value > 0.6 and ([.trials[] | select(.outcome == \"stopped\") | .value < $best] | all)" out2 &&
	grep -q "trial 2 stops at epoch 1: accuracy 0.[0-2][0-9]* is not in the top 1/4 there" err2 &&
	kubectl get configmap cs-sweep-2-runs -o json | jq -r ".data | to_entries[] | .value" |
		jq -e -s "length == 1 and .[0].run.outcome == \"stopped\" and (.[0].run.reason | test(\"ASHA\")) and .[0].run.sweep.trial == 2" &&
	test_must_fail kubectl get job cs-sweep-2
'

test_expect_success 'no trial ran twice: one run each, the Job that the first driver started' '
	for n in 0 1 2 3; do
		kubectl get configmap cs-sweep-$n-runs -o json | jq -r ".data | to_entries[] | .value" | jq -s length >count &&
		echo "trial $n: $(cat count) run(s)" && test "$(cat count)" = 1 || return 1
	done
'

test_expect_success 'a trial record says what the Job held: 1 worker, 1 CPU reserved for its wall time, no GPU' '
	kubectl get configmap cs-sweep-0-runs -o json | jq -r ".data | to_entries[] | .value" | jq .run.usage >u.json &&
	cat u.json &&
	jq -e ".workers == 1 and .gpus_per_worker == 0 and .gpu_seconds == 0 and .cpus_per_worker == 1 and .wall_seconds > 0
		and ((.cpu_reserved_seconds - .wall_seconds) | fabs < 1e-6) and .cpu_seconds > 0
		and (.cpu_seconds_per_rank | length == 1)" u.json
'

test_expect_success 'dlk top --cluster showed the trial Jobs running on without their driver, a line per pod' '
	cd "$TEST_TMP" && cat top.json top.txt top.err &&
	jq -e ".namespace == \"default\" and ([.jobs[].job] | index(\"cs-sweep-0\") != null)
		and ([.jobs[].job | select(startswith(\"cs-sweep-\"))] | length <= 2)" top.json &&
	jq -e ".jobs[] | select(.job == \"cs-sweep-0\") | (.state | IN(\"Pending\", \"Running\"))
		and (.pods | length == 1) and (.pods[0].rank == 0) and (.pods[0].phase | IN(\"Pending\", \"Running\"))
		and (.pods[0].restarts == 0)" top.json &&
	head -n 1 top.txt | grep -q "^JOB  *RANK  *POD  *PHASE  *NODE  *RESTARTS  *PROGRESS  *SAMPLES/S  *MFU%  *DATA%  *COMPUTE%  *ALLREDUCE%$" &&
	test "$(wc -l <top.txt)" = 2 && sed -n 2p top.txt | grep -q "^cs-sweep-0  *0  *cs-sweep-0-0-[a-z0-9]*  *\(Pending\|Running\) "
'

test_expect_success 'dlk status SWEEP lists the trials from the cluster, best first' '
	DLK_PRICE_CPU_HOUR=3600 "$DLK" -f "$P" status cs-sweep >status.out 2>status.err; cat status.out status.err &&
	head -n 2 status.out | tail -n 1 | grep -q "succeeded" &&
	grep -q "stopped" status.out &&
	grep -q "^best: trial [0-9], .* on the claim of job cs-sweep-[0-9] (dlk serve cs-sweep-[0-9])$" status.out &&
	grep -q "^used: GPU time 0.00 h, CPU time [0-9.]* h, cost [0-9.]*$" status.out &&
	"$DLK" -f "$P" status cs-sweep -o json | jq -e ".trials | length == 4"
'

test_done
