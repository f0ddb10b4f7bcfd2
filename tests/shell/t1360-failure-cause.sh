#!/bin/sh
# A failure's cause where any user can read it: the failing worker writes its rank, pod, exit
# class and message as the container's termination message (the file the template names) and as
# the Job's annotation dlk.dev/failure; `dlk status NAME` and the `dlk train --wait` summary read
# them (the pods' messages first, the annotation once the pods are gone) without the history.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

MSG1='{\"rank\":1,\"pod\":\"cfg-1-b7x\",\"class\":\"config\",\"exitCode\":3,\"message\":\"data.train: line 7: oops is not a number\"}'
MSG0='{\"rank\":0,\"pod\":\"cfg-0-a2q\",\"class\":\"restartable\",\"exitCode\":75,\"message\":\"lost rank 1\"}'
cat >"$TEST_TMP/scenario.json" <<EOT
{
  "description": "A Job whose rank 1 fails with a configuration error (rank 0 then loses its peer), and a Job the worker annotates.",
  "auth": { "tokens": ["test-token"] },
  "jobs": {
    "cfg": {
      "pods": [
        { "timeline": [ { "at": 0, "phase": "Running" },
            { "at": 250, "phase": "Failed", "exitCode": 75, "message": "$MSG0" } ] },
        { "timeline": [ { "at": 0, "phase": "Running" },
            { "at": 150, "phase": "Failed", "exitCode": 3, "message": "$MSG1" },
            { "at": 350, "jobCondition": { "type": "Failed", "reason": "PodFailurePolicy", "message": "Container worker for pod default/cfg-1 failed with exit code 3 matching FailJob rule at index 0" } } ] }
      ]
    }
  },
  "objects": [
    { "apiVersion": "batch/v1", "kind": "Job",
      "metadata": { "name": "blobs", "namespace": "default", "labels": { "dlk.dev/job": "blobs" } },
      "spec": { "suspend": true, "completions": 2, "template": { "spec": { "restartPolicy": "Never",
        "containers": [ { "name": "worker", "image": "dlk" } ] } } } },
    { "apiVersion": "v1", "kind": "ConfigMap",
      "metadata": { "name": "blobs-runs", "namespace": "default", "labels": { "dlk.dev/runs": "blobs" } },
      "data": {} }
  ]
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"
dlk init -q "$TEST_TMP/proj" >/dev/null
PROJ=$TEST_TMP/proj/dlk.yaml
PORT=${APISERVER_URL##*:}
SA=$TEST_TMP/sa
mkdir -p "$SA" && printf test-token >"$SA/token" && cp "$APISERVER_CERTS/ca.crt" "$SA/ca.crt" &&
	printf default >"$SA/namespace"

make_project() {
	mkdir -p "$1" &&
	awk 'BEGIN { srand(3); for (i = 0; i < 256; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$1/train.csv" &&
	head -n 50 "$1/train.csv" >"$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 4}
    - dense: {units: 2}
training: {epochs: 1, batch_size: 32, threads: 1}
EOT
}
in_pod() { env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" DLK_SERVICEACCOUNT_DIR="$SA" \
	DLK_JOB_NAME=blobs DLK_NAMESPACE=default DLK_TERMINATION_LOG="$TEST_TMP/term" "$@"; }
UID1=0b6f1a52-4c1e-4f7a-9d0e-5a1c2b3d4e5f

test_expect_success 'the rendered worker names its termination message file and falls back to its log' '
	dlk -f "$PROJ" train --dry-run -o json >dry.json &&
	jq -e ".items[] | select(.kind == \"Job\") | .spec.template.spec.containers[0] |
		.terminationMessagePath == \"/dev/termination-log\" and .terminationMessagePolicy == \"FallbackToLogsOnError\" and
		(.env[] | select(.name == \"DLK_TERMINATION_LOG\") | .value) == \"/dev/termination-log\"" dry.json
'

test_expect_success 'a failing worker writes its cause as the termination message and the Job'"'"'s annotation' '
	make_project "$TEST_TMP/b" && printf "1.0,oops,1\n" >>"$TEST_TMP/b/train.csv" &&
	in_pod DLK_RUN_ID=$UID1 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 POD_NAME=blobs-1-x7k2p \
		"$DLK" train --worker -f "$TEST_TMP/b/dlk.yaml" >/dev/null 2>err
	test $? = 3 && cat err && ! grep -q warning err &&
	test "$(wc -c <"$TEST_TMP/term")" -lt 4096 &&
	jq -e ".rank == 1 and .pod == \"blobs-1-x7k2p\" and .class == \"config\" and .exitCode == 3 and
		(.message | test(\"oops\")) and (.time | test(\"Z$\"))" "$TEST_TMP/term" &&
	api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r ".metadata.annotations[\"dlk.dev/failure\"]" >"$TEST_TMP/ann.json" &&
	test "$(jq -cS . "$TEST_TMP/ann.json")" = "$(jq -cS . "$TEST_TMP/term")"
'

test_expect_success 'a worker that only lost its peer does not hide the cause on the Job' '
	in_pod DLK_RUN_ID=$UID1 RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 POD_NAME=blobs-0-q1 \
		DLK_RENDEZVOUS_TIMEOUT=1 "$DLK" train --worker -f "$TEST_TMP/b/dlk.yaml" --set data.train.source=test.csv \
		>/dev/null 2>err; rc=$?; cat err; cat "$TEST_TMP/term" &&
	test $rc = 75 && jq -e ".rank == 0 and .class == \"restartable\"" "$TEST_TMP/term" &&
	api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r ".metadata.annotations[\"dlk.dev/failure\"]" >ann2.json &&
	cmp "$TEST_TMP/ann.json" ann2.json
'

test_expect_success 'dlk status NAME reads the cause from the Job once the pods are gone' '
	api /apis/batch/v1/namespaces/default/jobs/blobs -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"status\":{\"failed\":1,\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\",\"reason\":\"PodFailurePolicy\",\"message\":\"failed\"}]}}" >/dev/null &&
	dlk status blobs >out && cat out &&
	grep_q "^failure:  *rank 1 (pod blobs-1-x7k2p) failed: config (exit 3): .*oops" out &&
	dlk status blobs -o json >s.json &&
	jq -e ".failure.rank == 1 and .failure.class == \"config\" and .failure.exitCode == 3 and .failure.pod == \"blobs-1-x7k2p\"" s.json
'

test_expect_success 'the --wait summary names the rank, pod, exit class and message of the cause' '
	test_exit_code 1 dlk -f "$PROJ" train --set name=cfg --set resources.workers=2 --wait >out 2>err && cat err &&
	grep_q "job .cfg. failed: rank 1 (pod cfg-1-b7x) failed: config (exit 3): data.train: line 7: oops is not a number" err &&
	grep_q "hint: see what rank 1 printed" err &&
	dlk status cfg -o json | jq -e ".failure.rank == 1 and .failure.class == \"config\""
'

test_expect_success 'a submitted Job passes the project'"'"'s git commit to its workers' '
	mkdir g && cp "$PROJ" g/dlk.yaml && (cd g && git init -q && git add dlk.yaml &&
		git -c user.name=t -c user.email=t@t commit -qm x) && echo "# edited" >>g/dlk.yaml &&
	commit=$(git -C g rev-parse HEAD) &&
	dlk -f g/dlk.yaml train --set name=gitjob >/dev/null &&
	api /apis/batch/v1/namespaces/default/jobs/gitjob >job.json &&
	jq -e ".spec.template.spec.containers[0].env | from_entries | .DLK_GIT_COMMIT == \"$commit\" and .DLK_GIT_DIRTY == \"true\"" job.json
'

test_expect_success 'a cluster run records the commit its Job passed' '
	uid=$(api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r .metadata.uid) &&
	make_project "$TEST_TMP/ok" &&
	in_pod DLK_RUN_ID=$uid DLK_GIT_COMMIT=0123456789abcdef0123456789abcdef01234567 DLK_GIT_DIRTY=false \
		"$DLK" train --worker -f "$TEST_TMP/ok/dlk.yaml" >/dev/null 2>err && cat err &&
	dlk status blobs --run $uid -o json >r.json &&
	jq -e ".run.git_commit == \"0123456789abcdef0123456789abcdef01234567\" and .run.git_dirty == false" r.json
'

test_expect_success 'in a pod, a metrics port that cannot be bound is a warning: training goes on' '
	uid=$(api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r .metadata.uid) &&
	port=$(node -e "const s = require(\"net\").createServer(); s.listen(0, () => { console.log(s.address().port); s.close(); })") &&
	{ node -e "require(\"net\").createServer().listen($port, () => { require(\"fs\").writeFileSync(\"bound\", \"\"); setTimeout(() => process.exit(0), 20000) })" & holder=$!; } &&
	i=0 && until [ -e bound ]; do
		sleep 0.05; i=$((i + 1)); [ $i -lt 600 ] || { echo "the port holder did not listen in 30 s"; kill $holder; exit 1; }
	done &&
	in_pod DLK_RUN_ID=$uid DLK_METRICS_PORT=$port "$DLK" train --worker -f "$TEST_TMP/ok/dlk.yaml" >/dev/null 2>err; rc=$?
	kill $holder; wait $holder; cat err; test $rc = 0 &&
	test "$(grep -c "^warning: rank 0: no metrics (training goes on): cannot serve metrics on every address port $port" err)" = 1
'

test_done
