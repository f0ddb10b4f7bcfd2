#!/bin/sh
# dlk serve against a real control plane: a small model trained by `dlk train --wait` (its data
# and its bundle on claims), then `dlk serve --wait` renders and applies the serving objects;
# the real Deployment and ReplicaSet controllers make the pods, the pod runner runs
# `dlk serve --worker` in them, the EndpointSlice controller puts them behind the Service; a
# client pod sends KServe V2 requests through to them, and the answers are the ones
# `dlk serve --local` gives for the same bundle. Then status, logs, and delete leaving nothing.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

mkdir -p "$TEST_TMP/data" "$TEST_TMP/proj"
blobs_csv 1024 1 "$TEST_TMP/data/train.csv"
blobs_csv 256 2 "$TEST_TMP/data/test.csv"
hostpath_pv blobs-data "$TEST_TMP/data" blobs-data
PV=$TEST_TMP/pv
hostpath_pv blobs "$PV" blobs-checkpoints
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: blobs-data}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
YAML
cat >"$TEST_TMP/proj/dlk.yaml" <<'EOT'
name: blobs
data:
  format: csv
  train: {source: pvc://blobs-data/train.csv}
  test: {source: pvc://blobs-data/test.csv}
  classes: [north, east, south, west]
model:
  input: [16]
  layers:
    - dense: {units: 16}
    - relu
    - dense: {units: 4}
training: {epochs: 3, batch_size: 64, threads: 1}
resources: {cpu: 1, memory: 1Gi}
storage: {size: 1Gi}
serving: {replicas: 2, cpu: 1, memory: 1Gi, min_accuracy: 0.4, threads: 1, workers: 1, http_threads: 1}
EOT
S="-f $TEST_TMP/proj/dlk.yaml"

# the request: four rows of the test set
head -n 4 "$TEST_TMP/data/test.csv" | awk -F, '{ r = "["; for (i = 1; i <= 16; i++) r = r (i > 1 ? "," : "") $i; rows = rows (NR > 1 ? "," : "") r "]" }
	END { printf "{\"id\":\"t0830\",\"inputs\":[{\"name\":\"input\",\"shape\":[4,16],\"datatype\":\"FP32\",\"data\":[%s]}]}\n", rows }' >"$TEST_TMP/req.json"

test_expect_success 'the model trains on the cluster; its bundle is on its claim' '
	dlk $S train --wait >out 2>err || { cat out err; exit 1; } &&
	test -s "$PV/blobs.dlk"
'

test_expect_success 'dlk serve --wait: the gate passes, the Deployment rolls out, its pods serve' '
	dlk $S serve --wait >out 2>err; rc=$?
	cat out err && test $rc = 0 &&
	grep -q "model .blobs. from job blobs" err && grep -q "passes the gate" err &&
	grep -q "model .blobs. deployed to namespace .default. (2 replicas)" out &&
	grep -q "rolled out: 2/2 replicas ready" err &&
	test "$(kubectl get deployment blobs-serving -o jsonpath={.status.readyReplicas})" = 2 &&
	kubectl get pods -l dlk.dev/serve=blobs -o jsonpath="{range .items[*]}{.metadata.name} {.status.phase}{\"\n\"}{end}" >pods &&
	cat pods && test "$(grep -c " Running$" pods)" = 2
'

test_expect_success 'the Service has both pods as ready endpoints on the http port' '
	kubectl get pods -l dlk.dev/serve=blobs -o jsonpath="{range .items[*]}{.status.podIP}{\"\n\"}{end}" | sort >ips &&
	wait_until 30 sh -c "kubectl get endpointslices -l kubernetes.io/service-name=blobs-serving -o json |
		jq -r \".items[].endpoints[]? | select(.conditions.ready) | .addresses[0]\" | sort >eps && cmp -s eps ips" &&
	kubectl get endpointslices -l kubernetes.io/service-name=blobs-serving -o json |
		jq -e ".items[0].ports[0] | .name == \"http\" and .port == 8080"
'

test_expect_success 'a client pod gets V2 answers from each serving pod, equal to dlk serve --local' '
	for ip in $(cat ips); do
		cat >client.yaml <<YAML || exit 1
apiVersion: v1
kind: Pod
metadata:
  name: client-$(echo $ip | tr . -)
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: debian
    command: ["sh", "-c", "curl -sSf http://$ip:8080/v2/health/ready && echo READY && curl -sSf -H \"Content-Type: application/json\" -d @/etc/req/req.json http://$ip:8080/v2/models/blobs/infer"]
    volumeMounts: [{name: req, mountPath: /etc/req}]
  volumes: [{name: req, configMap: {name: req}}]
YAML
		kubectl create configmap req --from-file=req.json="$TEST_TMP/req.json" >/dev/null 2>&1
		kubectl apply -f client.yaml >/dev/null &&
		wait_until 60 sh -c "kubectl get pod client-$(echo $ip | tr . -) -o jsonpath={.status.phase} | grep -Eq \"Succeeded|Failed\"" &&
		kubectl logs client-$(echo $ip | tr . -) >"resp-$ip" && cat "resp-$ip" &&
		grep -q "^READY" "resp-$ip" || exit 1
	done &&
	"$DLK" serve --local --port 0 "$PV/blobs.dlk" 2>local.log &
	l=$!
	wait_until 30 grep -q "^ready:" local.log &&
	port=$(sed -n "s/.*127.0.0.1:\([0-9]*\).*/\1/p" local.log | head -n 1) &&
	curl -sSf -H "Content-Type: application/json" -d @"$TEST_TMP/req.json" "http://127.0.0.1:$port/v2/models/blobs/infer" >local.json
	r=$?
	kill $l; wait $l
	test $r = 0 &&
	jq -S ".outputs" local.json >want &&
	for ip in $(cat ips); do
		sed 1d "resp-$ip" | jq -S ".outputs" >got && diff -u want got &&
		sed 1d "resp-$ip" | jq -e ".id == \"t0830\" and .model_name == \"blobs\"" || exit 1
	done
'

test_expect_success 'dlk status lists the served model; dlk logs --served shows its pods' '
	sha=$(tar xOf "$PV/blobs.dlk" model.json | jq -r ".weights.sha256 // empty") && test -n "$sha" &&
	dlk status >out && cat out &&
	grep -q "^blobs *2/2 *$(echo $sha | cut -c1-12) *[0-9.]*% *-" out &&
	dlk status -o json | jq -e ".served[0] | .name == \"blobs\" and .ready == 2 and .rollout == \"Complete\"" &&
	dlk logs --served blobs >logs && cat logs &&
	test "$(grep -c "^\[blobs-serving-[a-z0-9]*-[a-z0-9]*\] ready: 1 model on port 8080" logs)" = 2
'

test_expect_success 'a pod that cannot load its bundle fails the rollout, naming the pod and why' '
	mv "$PV/blobs.dlk" "$PV/blobs.dlk.away" &&
	test_exit_code 1 dlk $S serve --set serving.max_batch=32 --wait --timeout 120s >out 2>err; rc=$?
	mv "$PV/blobs.dlk.away" "$PV/blobs.dlk"
	cat err && test $rc = 0 &&
	grep -q "error: the rollout of .blobs. (stable) failed: pod .blobs-serving-[a-z0-9-]*.: .*the server exited with code 3 (Error): .*cannot open bundle ./models/blobs.dlk." err &&
	kubectl get pods -l dlk.dev/serve=blobs -o wide &&
	wait_until 30 sh -c "test \"\$(kubectl get deployment blobs-serving -o jsonpath={.status.readyReplicas})\" = 2"
'

test_expect_success 'dlk delete --served removes the served model; its pods drain and go' '
	dlk delete --served blobs >out && cat out && grep -q "deleted served model .blobs. (4 objects)" out &&
	wait_until 60 sh -c "test -z \"\$(kubectl get pods -l dlk.dev/serve=blobs -o name)\"" &&
	test -z "$(kubectl get deployments,replicasets,services,configmaps,poddisruptionbudgets -l dlk.dev/serve=blobs -o name)" &&
	kubectl get job blobs -o name
'

test_done
