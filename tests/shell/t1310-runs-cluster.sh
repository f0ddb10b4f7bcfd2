#!/bin/sh
# The run history in the cluster: rank 0 of a training Job records its run (the Job's uid) in
# the ConfigMap NAME-runs through the in-cluster configuration; `dlk status NAME --history`,
# `--run ID` and `dlk report ID` read it with the user's kubeconfig; `dlk delete` keeps it.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

cat >"$TEST_TMP/scenario.json" <<'EOT'
{
  "description": "A training Job and its project's run history, as `dlk train` renders them.",
  "auth": { "tokens": ["test-token"] },
  "objects": [
    { "apiVersion": "batch/v1", "kind": "Job",
      "metadata": { "name": "blobs", "namespace": "default", "labels": { "dlk.dev/job": "blobs" } },
      "spec": { "suspend": true, "template": { "spec": { "restartPolicy": "Never",
        "containers": [ { "name": "worker", "image": "dlk" } ] } } } },
    { "apiVersion": "v1", "kind": "ConfigMap",
      "metadata": { "name": "blobs-runs", "namespace": "default", "labels": { "dlk.dev/runs": "blobs" } },
      "data": {} }
  ]
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"
PORT=${APISERVER_URL##*:}
SA=$TEST_TMP/sa
mkdir -p "$SA" && printf test-token >"$SA/token" && cp "$APISERVER_CERTS/ca.crt" "$SA/ca.crt" &&
	printf default >"$SA/namespace"

make_project() {
	mkdir -p "$1" &&
	awk -v seed="${2:-3}" 'BEGIN { srand(seed); for (i = 0; i < 512; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$1/train.csv" &&
	head -n 100 "$1/train.csv" >"$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 8}
    - relu
    - dense: {units: 2}
training: {epochs: 2, batch_size: 32, threads: 1}
EOT
}
in_pod() { env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" DLK_SERVICEACCOUNT_DIR="$SA" \
	DLK_JOB_NAME=blobs DLK_NAMESPACE=default "$@"; }
UID1=0b6f1a52-4c1e-4f7a-9d0e-5a1c2b3d4e5f
UID2=7c2e9d41-8a3b-4c5d-9e6f-0a1b2c3d4e5f
P=$TEST_TMP/p
make_project "$P"

test_expect_success 'rank 0 records the Job'"'"'s run in the ConfigMap NAME-runs' '
	: >"$APISERVER_LOG" &&
	in_pod DLK_RUN_ID=$UID1 "$DLK" train --worker -f "$P/dlk.yaml" >/dev/null 2>err && cat err &&
	! grep -q warning err &&
	api /api/v1/namespaces/default/configmaps/blobs-runs >cm.json &&
	jq -r ".data[\"$UID1.json\"]" cm.json >rec.json &&
	jq -e ".run.id == \"$UID1\" and .run.outcome == \"succeeded\" and .run.where == \"cluster\"" rec.json &&
	jq -e ".run.job == {\"name\": \"blobs\", \"namespace\": \"default\", \"uid\": \"$UID1\"}" rec.json &&
	jq -e ".run.trigger == \"manual\" and .run.worlds == [1] and .metrics.test_accuracy > 0.5" rec.json &&
	grep "\"method\":\"PATCH\"" "$APISERVER_LOG" | grep -c configmaps/blobs-runs >n && test "$(cat n)" -ge 2
'

test_expect_success 'a second run on other data: the history holds both, with their digests' '
	cp "$P/train.csv" keep.csv && make_project q 9 && cp q/train.csv "$P/train.csv" &&
	in_pod DLK_RUN_ID=$UID2 DLK_TRIGGER=schedule "$DLK" train --worker -f "$P/dlk.yaml" >/dev/null 2>err && cat err &&
	cp keep.csv "$P/train.csv" &&
	dlk status blobs --history >hist && cat hist &&
	test "$(wc -l <hist)" = 3 &&
	head -n 2 hist | tail -n 1 | grep_q "^$(echo $UID2 | cut -c1-8) .* succeeded .* schedule" &&
	tail -n 1 hist | grep_q "^$(echo $UID1 | cut -c1-8) .* succeeded .* manual" &&
	test "$(awk "NR > 1 { print \$9 }" hist | sort -u | wc -l)" = 2 &&
	dlk status blobs --history -o json >h.json &&
	jq -e ".store == \"cluster\" and (.runs | length) == 2 and .runs[0].run.id == \"$UID2\"" h.json &&
	jq -e ".runs[0].run.data[] | select(.split == \"train\") | .sha256 == \"$(sha256sum q/train.csv | cut -d" " -f1)\"" h.json
'

test_expect_success 'a restarted pod of the same Job continues the same run, counted' '
	in_pod DLK_RUN_ID=$UID1 "$DLK" train --worker -f "$P/dlk.yaml" >/dev/null 2>err && cat err &&
	dlk status blobs --run $(echo $UID1 | cut -c1-8) >show && cat show &&
	grep_q "^workers  *1 (1 restart)$" show && grep_q "^where  *cluster: job blobs in namespace default$" show &&
	test "$(dlk status blobs --history -o json | jq ".runs | length")" = 2
'

test_expect_success 'dlk report RUN-ID draws a run of the cluster'"'"'s history' '
	dlk -f "$P/dlk.yaml" report $UID2 -o json >r.json &&
	jq -e ".runs[0].source == {\"kind\": \"run\", \"id\": \"$UID2\", \"store\": \"cluster\"}" r.json &&
	dlk -f "$P/dlk.yaml" report $(echo $UID1 | cut -c1-8) --compare $UID2 -o page.html && test -s page.html
'

UID3=9d3f0a11-2b4c-4d5e-8f60-718293a4b5c6
UID4=ae4f1b22-3c5d-4e6f-9071-8293a4b5c6d7
test_expect_success 'trigger: data-changed trains a run whose data changed, and skips one whose data did not' '
	in_pod DLK_RUN_ID=$UID3 DLK_TRIGGER=schedule "$DLK" train --worker -f "$P/dlk.yaml" --set trigger=data-changed \
		>/dev/null 2>err && cat err &&
	grep_q "trigger data-changed: the data differs from what run $(echo $UID2 | cut -c1-8) trained on: training" err &&
	grep_q "epoch 2/2" err &&
	in_pod DLK_RUN_ID=$UID4 DLK_TRIGGER=schedule "$DLK" train --worker -f "$P/dlk.yaml" --set trigger=data-changed \
		>/dev/null 2>err && cat err &&
	grep_q "trigger data-changed: the data is what run $(echo $UID3 | cut -c1-8) trained on" err && ! grep -q epoch err &&
	dlk status blobs --run $UID4 -o json >r.json &&
	jq -e ".run.outcome == \"skipped\" and .run.reason == \"the data is unchanged since run $UID3\" and .run.trigger == \"schedule\"" r.json &&
	dlk status blobs --history | sed -n 2p | grep_q "^$(echo $UID4 | cut -c1-8) .* skipped .* the data is unchanged since run $UID3$"
'

test_expect_success 'dlk status NAME names the run the Job is, and the cause of its failure' '
	uid=$(api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r .metadata.uid) && test -n "$uid" &&
	make_project b && printf "1.0,oops,1\n" >>b/train.csv &&
	in_pod DLK_RUN_ID=$uid "$DLK" train --worker -f b/dlk.yaml >/dev/null 2>err; test $? = 3 && cat err &&
	dlk status blobs >out && cat out &&
	grep_q "^run:  *$(echo $uid | cut -c1-8) failed (dlk status blobs --run $(echo $uid | cut -c1-8))$" out &&
	grep_q "^cause:  *rank 0, exit 3 (config): .*train.csv.*oops" out &&
	dlk status blobs --history | sed -n 2p | grep_q " failed .* rank 0: .*oops"
'

test_expect_success 'dlk delete removes the job, not the run history' '
	dlk delete blobs >/dev/null 2>err; cat err &&
	test "$(api /apis/batch/v1/namespaces/default/jobs/blobs -o /dev/null -w "%{http_code}")" = 404 &&
	test "$(dlk status blobs --history -o json | jq ".runs | length")" = 5
'

test_expect_success 'a history that cannot be written is one warning; training goes on' '
	api /api/v1/namespaces/default/configmaps/blobs-runs -X DELETE >/dev/null &&
	in_pod DLK_RUN_ID=$UID2 "$DLK" train --worker -f "$P/dlk.yaml" >/dev/null 2>err; rc=$?; cat err &&
	test $rc = 0 && test "$(grep -c "warning: .*run history" err)" = 1 &&
	dlk status blobs --history >out 2>err && test ! -s out && grep_q "no runs of .blobs. in ConfigMap .blobs-runs." err
'

test_done
