#!/bin/sh
# Rank 0 of a training Job publishes its progress on its own Job (annotation dlk.dev/progress)
# through the in-cluster configuration: rate-limited, and a failure never stops training.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

cat >"$TEST_TMP/scenario.json" <<'EOT'
{
  "description": "A training Job exists; nothing else happens.",
  "auth": { "tokens": ["test-token"] },
  "objects": [ { "apiVersion": "batch/v1", "kind": "Job",
    "metadata": { "name": "blobs", "namespace": "default" },
    "spec": { "suspend": true, "template": { "spec": { "restartPolicy": "Never",
      "containers": [ { "name": "worker", "image": "dlk" } ] } } } } ]
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
PORT=${APISERVER_URL##*:}
SA=$TEST_TMP/sa
mkdir -p "$SA" && printf test-token >"$SA/token" && cp "$APISERVER_CERTS/ca.crt" "$SA/ca.crt" &&
	printf default >"$SA/namespace"

make_project() {
	mkdir -p "$1" &&
	awk 'BEGIN { srand(3); for (i = 0; i < 512; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$1/train.csv" &&
	cp "$1/train.csv" "$1/test.csv" &&
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
training: {epochs: 3, batch_size: 32, threads: 1}
EOT
}
in_pod() { env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" DLK_SERVICEACCOUNT_DIR="$SA" "$@"; }

test_expect_success 'the worker patches its Job with its progress, rate-limited' '
	make_project p && : >"$APISERVER_LOG" &&
	in_pod DLK_JOB_NAME=blobs "$DLK" train --worker -f p/dlk.yaml >out 2>err && cat err &&
	! grep -q warning err &&
	grep "\"method\":\"PATCH\"" "$APISERVER_LOG" >patches && cat patches &&
	grep_q "/apis/batch/v1/namespaces/default/jobs/blobs" patches &&
	grep_q "merge-patch+json" patches &&
	# start, epochs, the end, and the run document of the bundle once it is written
	n=$(wc -l <patches) && test "$n" -ge 5 && test "$n" -le 6 &&
	curl -sf --cacert "$SA/ca.crt" -H "Authorization: Bearer test-token" \
		"$APISERVER_URL/apis/batch/v1/namespaces/default/jobs/blobs" >job.json &&
	tr -d "\\\\" <job.json | grep -o "dlk.dev/progress\": *\"{[^}]*}" >progress && cat progress &&
	grep_q "\"epoch\":3,\"epochs\":3,\"step\":48,\"totalSteps\":48" progress &&
	grep_q "\"accuracy\":0\.[0-9]" progress && grep_q "\"samplesPerSec\":" progress &&
	jq -r ".metadata.annotations[\"dlk.dev/metrics\"]" job.json | jq -e ".weights.sha256 | test(\"^[0-9a-f]{64}$\")" &&
	grep_q "\"updated\":\"20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]*Z\"" progress
'

test_expect_success 'a progress patch that fails is warned about once and training goes on' '
	make_project p &&
	in_pod DLK_JOB_NAME=no-such-job "$DLK" train --worker -f p/dlk.yaml >out 2>err && cat err &&
	test "$(grep -c "warning: cannot publish progress on job .no-such-job." err)" = 1 &&
	grep_q "model bundle" out
'

test_expect_success 'no service account: one warning, training goes on' '
	make_project p &&
	in_pod DLK_JOB_NAME=blobs DLK_SERVICEACCOUNT_DIR="$TEST_TMP/none" "$DLK" train --worker -f p/dlk.yaml >out 2>err &&
	cat err && test "$(grep -c "warning: progress will not be published" err)" = 1 && grep_q "model bundle" out
'

test_expect_success 'outside a cluster nothing is published' '
	make_project p && : >"$APISERVER_LOG" &&
	env DLK_JOB_NAME=blobs "$DLK" train --worker -f p/dlk.yaml >out 2>err && ! grep -q warning err &&
	! grep -q PATCH "$APISERVER_LOG"
'

test_done
