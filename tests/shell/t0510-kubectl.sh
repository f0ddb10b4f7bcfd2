#!/bin/sh
# The real kubectl against the test API server: proof that the server speaks the real protocol
# (discovery, OpenAPI v3 for server-side validation, server-side apply, get, logs, delete).
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

# the kubectl `.ci/deps test` builds with the control plane (tests/cluster), not whatever is on PATH
cluster_src=$TEST_ROOT/tests/cluster cluster_top=$TEST_ROOT
. "$cluster_src/env.sh"
[ -x "$K8S_BIN/kubectl" ] || { echo "Bail out! $K8S_BIN/kubectl is missing: run '.ci/deps test'"; exit 1; }
PATH=$K8S_BIN:$PATH
export PATH
start_apiserver basic.json || test_missing 'the test API server starts (node and openssl)'
write_kubeconfig "$KUBECONFIG"
cat >"$TEST_TMP/objects.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: train-config
data:
  epochs: "3"
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels: {app.kubernetes.io/managed-by: dlk}
spec:
  completions: 1
  completionMode: Indexed
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.example/dlk:1
YAML

test_expect_success 'kubectl get pods: an empty namespace' '
	kubectl get pods >out 2>err &&
	grep -q "No resources found in default namespace" err
'

test_expect_success 'kubectl apply --server-side: a ConfigMap and a Job' '
	kubectl apply --server-side -f "$TEST_TMP/objects.yaml" >out &&
	grep -q "configmap/train-config serverside-applied" out &&
	grep -q "job.batch/train serverside-applied" out &&
	grep -q "fieldManager=kubectl&fieldValidation=Strict" "$APISERVER_LOG"
'

test_expect_success 'kubectl apply --server-side again: the same objects, no conflict' '
	kubectl apply --server-side -f "$TEST_TMP/objects.yaml" >out &&
	grep -q "job.batch/train serverside-applied" out
'

test_expect_success 'kubectl get job NAME -o json' '
	kubectl get job train -o json >job.json &&
	grep -q "\"kind\": \"Job\"" job.json &&
	grep -q "\"name\": \"train\"" job.json &&
	grep -q "\"uid\": " job.json &&
	grep -q "\"app.kubernetes.io/managed-by\": \"dlk\"" job.json
'

test_expect_success 'kubectl get pods: the Job made its pod' '
	kubectl get pods -o name >pods &&
	grep -q "^pod/train-0-" pods &&
	kubectl get pods >table &&
	grep -q "^NAME  *READY  *STATUS  *RESTARTS  *AGE$" table &&
	grep -q "^train-0-[0-9a-f]*  *[01]/1 " table
'

test_expect_success 'kubectl get -A: the table across namespaces' '
	printf "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: elsewhere, namespace: other}\n" |
		kubectl apply --server-side -f - >/dev/null &&
	kubectl get configmaps -A >table &&
	grep -q "^NAMESPACE  *NAME  *AGE$" table &&
	grep -q "^default  *train-config  " table && grep -q "^other  *elsewhere  " table &&
	kubectl get jobs -A -o name | grep -qx job.batch/train
'

test_expect_success 'kubectl logs POD' '
	pod=$(kubectl get pods -o name | head -n 1) &&
	# the test API server plays the pod'"'"'s log lines on timers (the last 50 ms after it starts,
	# later on a loaded machine): until its last line is there, 10 s at most
	i=0 && until kubectl logs "$pod" >log 2>err && grep -qx "done" log; do
		sleep 0.1; i=$((i + 1)); [ $i -lt 100 ] || { echo "no line "done" in 10 s"; cat log err; exit 1; }
	done &&
	grep -qx "step 1 loss 2.30" log && grep -qx "done" log
'

test_expect_success 'kubectl get job: completed with its progress annotation' '
	i=0 && while ! kubectl get job train -o jsonpath="{.status.succeeded}" | grep -qx 1 && [ $i -lt 30 ]; do
		sleep 0.1; i=$((i + 1)); done &&
	kubectl get job train -o jsonpath="{.status.conditions[*].type}" >conds &&
	grep -q Complete conds &&
	kubectl get job train >table &&
	grep -q "^train  *Complete  *1/1 " table &&
	kubectl get job train -o jsonpath="{.metadata.annotations.dlk\.dev/progress}" | grep -qx 1.0
'

test_expect_success 'kubectl delete job NAME takes its pods along' '
	kubectl delete job train >out &&
	grep -q "job.batch \"train\" deleted" out &&
	kubectl get pods -o name >pods && ! grep -q . pods &&
	test_must_fail kubectl get job train 2>err &&
	grep -q "NotFound" err
'

test_expect_success 'kubectl with a wrong token gets a real 401' '
	write_kubeconfig bad.kubeconfig "token: nope" &&
	test_must_fail kubectl --kubeconfig bad.kubeconfig get pods 2>err &&
	grep -qi "unauthorized" err
'

test_done
