#!/bin/sh
# Versioned data and logs in a real cluster (tests/cluster: the real control plane, the pod
# runner): an S3 server (the Versity S3 Gateway) runs as a pod behind a Service, a 2-worker job
# trains from a dataset in it through a hostPath node cache, one worker is stopped mid-run and
# the Job restarts it: the new pod reads the dataset from the node cache (the server's access log
# shows no second download). Then the job is deleted, pods and all, and its workers' archived
# logs (every attempt) are read back with the run id that `dlk lineage` prints from the bundle.
# A program (program:) reads the same dataset through DLK_DATA_DIR, and its run records it.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

start_s3 || { echo "Bail out! cannot start the S3 server"; exit 1; }
cluster_up
trap 'stop_s3; cluster_down; test_cleanup' EXIT
S3=s3://data/sets
POD_LOG=$S3_DIR/pod-access.log

# the dataset: 4096 rows of 8 features, 3 classes, pushed from here (the laptop's server)
mkdir -p "$TEST_TMP/blobs"
awk 'BEGIN { srand(7); for (i = 0; i < 4096; i++) { c = int(rand() * 3); l = "";
	for (j = 0; j < 8; j++) l = l sprintf("%.3f,", rand() + c * 0.7 + (j % 3) * 0.1); print l c } }' \
	>"$TEST_TMP/blobs/train.csv"
head -n 512 "$TEST_TMP/blobs/train.csv" >"$TEST_TMP/blobs/test.csv"

# the same bucket directory served in the cluster: a pod and its (headless) Service
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: s3, labels: {app: s3}}
spec:
  containers:
  - name: s3
    image: versitygw
    command: ["/opt/s3/$(basename "$S3_BIN")", "--port", ":7070", "--access", "$AWS_ACCESS_KEY_ID", "--secret", "$AWS_SECRET_ACCESS_KEY",
              "--region", "us-east-1", "--access-log", "$POD_LOG", "posix", "--sidecar", "$S3_DIR/meta", "$S3_ROOT"]
    volumeMounts: [{name: s3, mountPath: "$S3_DIR"}, {name: bin, mountPath: /opt/s3, readOnly: true}]
  # the "image": the server's binary (a pod's /tmp is its own, so a checkout under /tmp is not seen)
  volumes: [{name: s3, hostPath: {path: "$S3_DIR"}}, {name: bin, hostPath: {path: "$(dirname "$S3_BIN")"}}]
---
apiVersion: v1
kind: Service
metadata: {name: s3}
spec:
  clusterIP: None   # the pod runner has no kube-proxy: the name resolves to the pod
  selector: {app: s3}
  ports: [{port: 7070}]
---
apiVersion: v1
kind: Secret
metadata: {name: s3-creds}
stringData:
  AWS_ACCESS_KEY_ID: "$AWS_ACCESS_KEY_ID"
  AWS_SECRET_ACCESS_KEY: "$AWS_SECRET_ACCESS_KEY"
  AWS_REGION: us-east-1
  AWS_ENDPOINT_URL: http://s3.default.svc.cluster.local:7070
YAML
# the checkpoint volume: the user's claim (dlk delete leaves it), on a hostPath volume
PV=$TEST_TMP/pv
hostpath_pv blobs-ckpt "$PV" blobs-ckpt
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: blobs-ckpt}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
YAML
mkdir -p "$TEST_TMP/p"
cat >"$TEST_TMP/p/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  dataset: blobs@v1
  store: $S3
  store_secret: s3-creds
  node_cache: {volume: hostPath, host_path: $TEST_TMP/nodecache}
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [8]
  layers: [{dense: {units: 32}}, relu, {dense: {units: 3}}]
training: {epochs: 40, batch_size: 16, threads: 1, checkpoint: {every: 100}}
resources: {workers: 2, memory: 1Gi}
storage: {claim: blobs-ckpt, mount: /checkpoints}
EOT
objects() { grep -c " s3_GetObject [^ ]*/sha256/" "$POD_LOG" 2>/dev/null || true; }

test_expect_success 'the dataset is pushed, and the cluster'"'"'s S3 server serves it' '
	dlk data push "$TEST_TMP/blobs" --to $S3 --tag blobs@v1 -q >"$TEST_TMP/id" && test -s "$TEST_TMP/id" &&
	kubectl wait --for=condition=Ready pod/s3 --timeout=60s >/dev/null
'

test_expect_success 'two workers read the dataset once; a worker stopped mid-run is restarted and reads it from the node cache' '
	dlk train -f "$TEST_TMP/p/dlk.yaml" --wait >train.out 2>train.err &
	t=$!
	first=""
	started() { first=$(pod_of blobs 0) && test -n "$first" && kubectl logs "$first" 2>/dev/null | grep -q "epoch 3/40"; } &&
	wait_until 120 started || { kill $t; cat train.err; kubectl get pods -o wide; exit 1; }
	kubectl logs "$first" >first.log && cat first.log | head -n 3 &&
	grep -q "^dataset sha256:$(sed "s/sha256://" "$TEST_TMP/id" | cut -c1-12): 2 files, .*fetched from $S3" first.log &&
	test "$(objects)" = 2 &&
	kubectl delete pod "$first" --wait=false >/dev/null &&
	wait $t; rc=$?; cat train.out train.err; test $rc = 0 &&
	again=$(pod_of blobs 0) && test "$again" != "$first" &&
	kubectl logs "$again" >again.log && head -n 3 again.log &&
	grep -q "2 files, \(.*\): \1 from the node cache, 0 B fetched" again.log &&
	test "$(objects)" = 2 &&
	echo "$first" >"$TEST_TMP/first"
'

test_expect_success 'the bundle names the dataset and the run; after dlk delete its logs are read from the archive' '
	dlk lineage "$PV/blobs.dlk" >lineage && cat lineage &&
	grep -q "^dataset      $(cat "$TEST_TMP/id") (blobs@v1)$" lineage &&
	run=$(sed -n "s/^run  *//p" lineage) && test "$run" = "$(kubectl get job blobs -o jsonpath={.metadata.uid})" &&
	dlk delete blobs >/dev/null &&
	wait_until 60 sh -c "test -z \"\$(kubectl get pods -o name -l batch.kubernetes.io/job-name=blobs)\"" &&
	test_exit_code 6 dlk logs blobs 2>err && grep -q -- "--run ID" err &&
	ls "$PV/dlk-logs/blobs/logs" &&
	dlk logs blobs --run "$run" --from "$PV/dlk-logs/blobs" >logs.out 2>logs.err &&
	grep -q "^\[rank 0\] training .blobs. on 4096 samples" logs.out &&
	grep -q "^\[rank 0\] error: training stopped by SIGTERM" logs.out &&
	grep -q "^\[rank 0\] resuming .*from checkpoint" logs.out &&
	grep -q "^\[rank 0\] model bundle: /checkpoints/blobs.dlk" logs.out &&
	test -f "$PV/dlk-logs/blobs/logs/${run}_rank-0_$(cat "$TEST_TMP/first").log.gz" &&
	test "$(ls "$PV/dlk-logs/blobs/logs" | grep -c "_rank-1_")" -ge 1
'

# the user's own program reads the same dataset as files (DLK_DATA_DIR): its pod fetches them
# from the cluster's S3 server through the node cache (already there: no download), verified,
# and the run's record in the cluster names the dataset by its id
mkdir -p "$TEST_TMP/prog"
cat >"$TEST_TMP/prog/dlk.yaml" <<EOT
name: dsprog
data:
  format: csv
  dataset: blobs@v1
  store: $S3
  store_secret: s3-creds
  node_cache: {volume: hostPath, host_path: $TEST_TMP/nodecache}
  train: {source: train.csv}
program:
  command: [sh, -c, 'echo "data in \$DLK_DATA_DIR"; wc -l <"\$DLK_DATA_DIR/train.csv"; sha256sum "\$DLK_DATA_DIR/test.csv"']
resources: {workers: 1, memory: 256Mi}
EOT

test_expect_success 'a program in a pod reads the dataset through DLK_DATA_DIR; its run records the dataset' '
	id=$(sed "s/^sha256://" "$TEST_TMP/id") &&
	dlk train -f "$TEST_TMP/prog/dlk.yaml" --wait >out 2>err; rc=$?; cat out err; test $rc = 0 &&
	pod=$(pod_of dsprog 0) && kubectl logs "$pod" >p.log && cat p.log &&
	grep -q "^dataset sha256:$(echo "$id" | cut -c1-12): 2 files, .* in [^ ]*/datasets/$id (DLK_DATA_DIR)$" p.log &&
	grep -q "^data in [^ ]*/datasets/$id$" p.log &&
	grep -q "^4096$" p.log &&
	grep -q "^$(sha256sum <"$TEST_TMP/blobs/test.csv" | cut -c1-64)  " p.log &&
	test "$(objects)" = 2 &&
	dlk status dsprog --history -o json -f "$TEST_TMP/prog/dlk.yaml" >h.json && jq -c ".runs[0].run.data" h.json &&
	jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].run.data == [{split: \"dataset\", url: \"$S3 (blobs@v1)\", sha256: \"$id\"}]" h.json &&
	jq -e ".runs[0].provenance.dataset.id == \"sha256:$id\"" h.json &&
	dlk impact "sha256:$id" -f "$TEST_TMP/prog/dlk.yaml" >impact.out 2>&1; cat impact.out &&
	grep -q "$(jq -r ".runs[0].run.id" h.json | cut -c1-8)" impact.out
'

test_done
