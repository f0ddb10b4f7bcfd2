#!/bin/sh
# dlk against a real control plane: a 2-worker Fashion-MNIST job submitted by `dlk train`, made
# into indexed pods by the real Job controller, placed by the real scheduler, run by the pod
# runner; the workers read the data from a claim (pvc://), find rank 0 through the headless
# Service's DNS name, train, publish their progress on their Job under the real RBAC authorizer
# and write the bundle to the checkpoint volume. `dlk train --wait`, `dlk status -w` and `dlk logs -f` watch it at the same time.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

PV=$TEST_TMP/pv
hostpath_pv fashion "$PV" fashion-checkpoints
hostpath_pv nightly "$TEST_TMP/pv-nightly" nightly-checkpoints
dlk init -q "$TEST_TMP/fashion" >/dev/null
PROJ=$TEST_TMP/fashion/dlk.yaml
# one epoch, two workers; the checkpoint claim (made by dlk) binds to the hostPath volume above
set -- -f "$PROJ" --set training.epochs=1 --set resources.workers=2 --set training.threads=1 \
	--set resources.memory=1Gi --set storage.size=1Gi --set training.checkpoint.every=100
ARGS="$*"
# the data on a claim of its own, as a cluster keeps it: pvc://fmnist-data/...
mkdir -p "$TEST_TMP/data"
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$TEST_TMP/data/"
hostpath_pv fmnist-data "$TEST_TMP/data" fmnist-data
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: fmnist-data}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
YAML
d=pvc://fmnist-data
DATA="--set data.train.images=$d/train-images-idx3-ubyte.gz --set data.train.labels=$d/train-labels-idx1-ubyte.gz
	--set data.test.images=$d/t10k-images-idx3-ubyte.gz --set data.test.labels=$d/t10k-labels-idx1-ubyte.gz"

test_expect_success 'dlk train --wait, dlk status -w and dlk logs -f follow one job to its end' '
	dlk train $ARGS $DATA --wait >train.out 2>train.err &
	t=$!
	wait_until 60 sh -c "kubectl get job fashion >/dev/null 2>&1"
	dlk status -w fashion >status.out 2>status.err &
	s=$!
	dlk logs -f fashion >logs.out 2>logs.err &
	l=$!
	wait $t; rt=$?; wait $s; rs=$?; wait $l; rl=$?
	echo "train $rt, status -w $rs, logs -f $rl" &&
	cat train.out train.err &&
	test $rt = 0 && test $rs = 0 && test $rl = 0 &&
	grep -q "job .fashion. submitted to namespace .default. (2 workers)" train.out &&
	grep -q "job .fashion. succeeded" train.err &&
	cat status.out && grep -q Running status.out && grep -q Succeeded status.out &&
	cat logs.out && grep -q "^\[rank 0\] test accuracy: [0-9.]*% (10000 samples)" logs.out &&
	grep -q "^\[rank 0\] model bundle: /checkpoints/fashion.dlk$" logs.out
'

test_expect_success 'the bundle and the checkpoints are on the checkpoint volume' '
	tar tf "$PV/fashion.dlk" >members && grep -q "^model.json$" members && grep -q "^weights.safetensors$" members &&
	tar xOf "$PV/fashion.dlk" model.json >model.json &&
	acc=$(jq -r ".metrics.testAccuracy // .metrics.accuracy" model.json) && echo "accuracy $acc" &&
	awk -v a="$acc" "BEGIN { exit !(a > 0.75) }" &&
	ls "$PV/.dlk/checkpoints/fashion" | grep -q .
'

# The record is written when the run starts and again when it ends, after the other rank exited.
final_record() {
	jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].metrics.test_accuracy > 0.75" h.json
}

test_expect_success 'rank 0 recorded the run (the Job'"'"'s uid) in the ConfigMap fashion-runs, under the worker Role' '
	uid=$(kubectl get job fashion -o jsonpath={.metadata.uid}) && test -n "$uid" &&
	dlk status fashion --history -o json >h.json && jq -c ".runs[].run" h.json &&
	jq -e "(.runs | length) == 1 and .runs[0].run.id == \"$uid\" and .runs[0].run.job.name == \"fashion\"" h.json &&
	jq -e ".runs[0].run.worlds == [2] and .runs[0].run.trigger == \"manual\"" h.json &&
	final_record &&
	dlk status fashion --run "$uid" | grep -q "^run  *$uid$" &&
	dlk -f "$PROJ" report "$uid" -o json | jq -e ".runs[0].source.store == \"cluster\""
'

test_expect_success 'the Job controller made one pod per rank; each ran on a node and succeeded' '
	kubectl get pods -l batch.kubernetes.io/job-name=fashion \
		-o jsonpath="{range .items[*]}{.metadata.labels.batch\.kubernetes\.io/job-completion-index} {.spec.hostname} {.spec.nodeName} {.status.phase} {.status.containerStatuses[0].state.terminated.exitCode}{\"\n\"}{end}" |
		sort >pods && cat pods &&
	test "$(wc -l <pods)" = 2 &&
	grep -q "^0 fashion-0 [a-z0-9-]* Succeeded 0$" pods && grep -q "^1 fashion-1 [a-z0-9-]* Succeeded 0$" pods &&
	test "$(kubectl get job fashion -o jsonpath="{.status.conditions[?(@.type==\"Complete\")].status}")" = True
'

test_expect_success 'rank 0 published its progress on its own Job' '
	kubectl get job fashion -o jsonpath="{.metadata.annotations.dlk\.dev/progress}" >progress && cat progress &&
	grep -q "\"epoch\":1,\"epochs\":1,\"step\":235,\"totalSteps\":235" progress &&
	grep -q "\"accuracy\":0\.[0-9]" progress
'

test_expect_success 'dlk status shows the ranks, their nodes and the progress' '
	dlk status fashion >out && cat out &&
	grep -q "^state: *Succeeded" out && grep -q "^progress: *epoch 1/1 step 235/235" out &&
	grep -q "^0 *fashion-0-[a-z0-9]* *cpu-[01] *Succeeded" out && grep -q "^1 *fashion-1-[a-z0-9]* *cpu-[01] *Succeeded" out
'

# The last lines of rank 0 are the bundle (standard output) and the summary (standard error): two
# streams, so either may come last.
test_expect_success 'dlk logs merges the ranks, with the kubelet timestamps on request' '
	dlk logs fashion >out && grep -q "^\[rank 0\] training .fashion. on 60000 samples (1 epochs, 2 workers x batch 128, adam)$" out &&
	dlk logs --timestamps --tail 2 --rank 0 fashion >out && cat out &&
	grep -q "^\[rank 0\] 20[0-9-]*T[0-9:.]*Z model bundle: /checkpoints/fashion.dlk$" out
'

test_expect_success 'the worker token may patch its own Job, and nothing else' '
	pod=$(pod_of fashion 0) &&
	tok=$(cat "$(pod_dir "$pod")"/volumes/kube-api-access-*/token) && test -n "$tok" &&
	token_kubeconfig worker.kc "$tok" &&
	w() { kubectl --kubeconfig worker.kc "$@"; } &&
	refused() { if w "$@" >/dev/null 2>err; then echo "allowed: $*"; return 1; fi; cat err; grep -qi forbidden err; } &&
	test "$(w auth whoami -o jsonpath={.status.userInfo.username})" = system:serviceaccount:default:fashion &&
	w get job fashion -o name &&
	w patch job fashion --type merge -p "{\"metadata\":{\"annotations\":{\"t0810\":\"own job\"}}}" &&
	w get configmap fashion-spec -o name &&
	w get configmap fashion-runs -o name &&
	refused patch configmap fashion-spec --type merge -p "{\"data\":{\"x\":\"y\"}}" &&
	kubectl create job other --image=busybox -- true &&
	kubectl create secret generic secret-data --from-literal=k=v &&
	refused patch job other --type merge -p "{\"metadata\":{\"annotations\":{\"x\":\"y\"}}}" &&
	refused get job other &&
	refused get secret secret-data &&
	refused get secrets &&
	refused delete job fashion &&
	refused create configmap mine --from-literal=a=b &&
	refused get pods &&
	kubectl delete job other --cascade=background && kubectl delete secret secret-data
'

test_expect_success 'kubectl and dlk status -o json agree on the job state' '
	dlk status -o json >dlk.json && kubectl get jobs -o json >kubectl.json &&
	jq -r ".jobs[] | .name + \" \" + .state" dlk.json | sort >dlk.states &&
	jq -r ".items[] | select(.metadata.labels[\"dlk.dev/job\"] != null) | .metadata.name + \" \" +
		(if any(.status.conditions[]?; .type == \"Complete\" and .status == \"True\") then \"Succeeded\"
		 elif any(.status.conditions[]?; .type == \"Failed\" and .status == \"True\") then \"Failed\"
		 else \"other\" end)" kubectl.json | sort >kubectl.states &&
	cat dlk.states && diff -u dlk.states kubectl.states
'

test_expect_success 'dlk delete leaves nothing behind but the run history' '
	dlk delete fashion >out && cat out &&
	gone() {
		for k in jobs pods services endpointslices configmaps serviceaccounts roles rolebindings persistentvolumeclaims; do
			kubectl get $k -l dlk.dev/job=fashion -o name
		done >left 2>&1
		! test -s left
	} &&
	wait_until 60 gone &&
	test_must_fail kubectl get job fashion 2>/dev/null &&
	test "$(kubectl get pods -o name | grep -c fashion)" = 0 &&
	kubectl get configmap fashion-runs -o name
'

# `schedule:` makes a CronJob; its runs are Jobs of other names, owned by it. A run triggered
# the way `kubectl create job --from=cronjob/NAME` does it trains; `dlk status NAME`, the list
# and `dlk logs NAME` follow it under the project's name.
test_expect_success 'schedule: creates a real CronJob, and a triggered run trains and reports its progress' '
	dlk train $ARGS --set name=nightly --set "schedule=0 3 * * *" --wait >out 2>err && cat out err &&
	grep -q "no run starts now, so --wait has nothing to wait for" err &&
	dlk status nightly >out && cat out && grep -q "^runs: *none yet" out &&
	test "$(kubectl get cronjob nightly -o jsonpath="{.spec.schedule} {.spec.concurrencyPolicy}")" = "0 3 * * * Forbid" &&
	kubectl create job --from=cronjob/nightly nightly-now &&
	kubectl wait --for=condition=Complete job/nightly-now --timeout=180s &&
	kubectl get job nightly-now -o jsonpath="{.metadata.annotations.dlk\.dev/progress}" >progress && cat progress &&
	grep -q "\"epoch\":1,\"epochs\":1,\"step\":235,\"totalSteps\":235" progress &&
	dlk status >out && cat out && grep -q "^nightly *Succeeded *0/2 *0 *epoch 1/1 step 235/235" out &&
	! grep -q "^nightly-now" out &&
	dlk status nightly >out && cat out &&
	grep -q "^schedule: *0 3 \* \* \*$" out &&
	grep -q "^nightly-now *Succeeded *0/2 *0 *epoch 1/1 step 235/235" out &&
	grep -q "^job: *nightly-now (namespace " out &&
	grep -q "^1 *nightly-now-1-[a-z0-9]* .* Succeeded *0 *0 Completed$" out &&
	dlk status nightly -o json >s.json &&
	jq -e ".cronJob.schedule == \"0 3 * * *\" and .runs[0].name == \"nightly-now\" and .runs[0].state == \"Succeeded\"" s.json &&
	dlk logs nightly --rank 0 --tail 2 >log 2>err && cat log err &&
	grep -q "run .nightly-now. of scheduled training .nightly. (the latest; it has ended)" err &&
	grep -q "^\[rank 0\] model bundle: /checkpoints/nightly.dlk$" log &&
	kubectl logs -l batch.kubernetes.io/job-name=nightly-now,batch.kubernetes.io/job-completion-index=0 --tail=2 >log &&
	cat log && grep -q "^model bundle: /checkpoints/nightly.dlk$" log &&
	tar tf "$TEST_TMP/pv-nightly/nightly.dlk" | grep -q "^model.json$" &&
	dlk status nightly --history -o json >h.json &&
	jq -e "(.runs | length) == 1 and .runs[0].run.trigger == \"schedule\" and .runs[0].run.job.name == \"nightly-now\"" h.json &&
	jq -e ".runs[0].run.id == \"$(kubectl get job nightly-now -o jsonpath={.metadata.uid})\"" h.json &&
	final_record
'

test_expect_success 'dlk delete of a scheduled job removes the CronJob and its runs' '
	dlk delete nightly &&
	gone() {
		for k in cronjobs jobs pods configmaps serviceaccounts roles rolebindings persistentvolumeclaims; do
			kubectl get $k -l dlk.dev/job=nightly -o name
		done >left 2>&1
		! test -s left
	} &&
	wait_until 60 gone
'

test_done
