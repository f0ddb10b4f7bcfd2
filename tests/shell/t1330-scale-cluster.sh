#!/bin/sh
# Elastic workers in a cluster, against the test API server: `dlk scale NAME --workers N` patches
# the Indexed Job's completions and parallelism together and refuses what cannot be resized;
# a worker takes its world size from the Job (not the pod's stale WORLD_SIZE); rank 0 sees the
# resize while it trains, every rank stops with a checkpoint and exits 76 (which the template's
# podFailurePolicy ignores); the pods that start again re-form the gang at the new size from
# that checkpoint with the same global batch, and the run's record lists both sizes.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

PROJECT_YAML='name: blobs
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
training: {epochs: 40, batch_size: 32, threads: 1, checkpoint: {every: 2, keep: 2}}'
# the same project as the spec ConfigMap `dlk train` renders holds it
SPEC_JSON=$(printf '%s\n' "$PROJECT_YAML" | jq -Rs .)

job() { # job NAME COMPLETIONS PARALLELISM [MODE] [SUSPEND]
	printf '{ "apiVersion": "batch/v1", "kind": "Job", "metadata": { "name": "%s", "namespace": "default", "labels": { "dlk.dev/job": "%s" } },
	  "spec": { %s "completions": %s, "parallelism": %s, "suspend": %s, "template": { "spec": { "restartPolicy": "Never",
	  "containers": [ { "name": "worker", "image": "dlk" } ] } } } }' "$1" "$1" \
		"$(test "${4:-Indexed}" = NonIndexed || echo '"completionMode": "Indexed",')" "$2" "$3" "${5:-false}"
}
spec_cm() { printf '{ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "%s-spec", "namespace": "default" }, "data": { "dlk.yaml": %s } }' "$1" "$SPEC_JSON"; }

cat >"$TEST_TMP/scenario.json" <<EOT
{
  "description": "Training Jobs in every state dlk scale meets, and the run history of project blobs.",
  "auth": { "tokens": ["test-token"] },
  "objects": [
    $(job blobs 2 2), $(spec_cm blobs),
    $(job w 1 1), $(spec_cm w),
    $(job done 2 2), $(job plain 2 2 NonIndexed), $(job held 2 2 Indexed true), $(job uneven 2 1),
    { "apiVersion": "batch/v1", "kind": "CronJob", "metadata": { "name": "nightly", "namespace": "default" },
      "spec": { "schedule": "0 3 * * *", "jobTemplate": { "spec": { "template": { "spec": { "restartPolicy": "Never",
        "containers": [ { "name": "worker", "image": "dlk" } ] } } } } } },
    { "apiVersion": "v1", "kind": "ConfigMap",
      "metadata": { "name": "blobs-runs", "namespace": "default", "labels": { "dlk.dev/runs": "blobs" } }, "data": {} }
  ],
  "jobs": {
    "done": { "timeline": [ { "at": 0, "phase": "Running" }, { "at": 50, "phase": "Succeeded", "exitCode": 0 } ] },
    "*": { "timeline": [ { "at": 0, "phase": "Running" } ] }
  }
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"
PORT=${APISERVER_URL##*:}
SA=$TEST_TMP/sa
mkdir -p "$SA" && printf test-token >"$SA/token" && cp "$APISERVER_CERTS/ca.crt" "$SA/ca.crt" &&
	printf default >"$SA/namespace"
IN_POD="KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$PORT DLK_SERVICEACCOUNT_DIR=$SA DLK_NAMESPACE=default"
# shellcheck disable=SC2086
in_pod() { env $IN_POD "$@"; }
size() { api "/apis/batch/v1/namespaces/default/jobs/$1" | jq -c "[.spec.completions, .spec.parallelism]"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

P=$TEST_TMP/p
mkdir -p "$P" &&
	awk 'BEGIN { srand(3); for (i = 0; i < 512; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$P/train.csv" &&
	head -n 100 "$P/train.csv" >"$P/test.csv" && printf '%s\n' "$PROJECT_YAML" >"$P/dlk.yaml"
# the server plays the pods' timelines from the start: let them run
i=0; while [ "$(api /apis/batch/v1/namespaces/default/jobs/done | jq -r ".status.succeeded // 0")" -lt 2 ]; do
	i=$((i + 1)); [ $i -lt 600 ] || { echo "Bail out! the test API server did not play job 'done' to its end in 60 s"; exit 1; }
	sleep 0.1; done

test_expect_success 'dlk scale patches completions and parallelism together, and says so' '
	: >"$APISERVER_LOG" &&
	dlk scale blobs --workers 4 >out 2>err && cat out err &&
	test "$(size blobs)" = "[4,4]" &&
	grep_q "^job .blobs. scaled from 2 to 4 workers; the gang re-forms at the new size from its next checkpoint$" out &&
	grep "\"method\":\"PATCH\"" "$APISERVER_LOG" >patches && test "$(wc -l <patches)" = 1 &&
	grep_q "jobs/blobs" patches &&
	dlk scale blobs --workers 2 -q >out && test ! -s out && test "$(size blobs)" = "[2,2]" &&
	dlk scale blobs --workers 2 >out && grep_q "has 2 workers already" out
'

test_expect_success '-o json says the job, the sizes and whether it was waited for' '
	dlk scale blobs --workers 1 -o json >out.json && cat out.json &&
	jq -e ". == {\"job\": \"blobs\", \"namespace\": \"default\", \"from\": 2, \"workers\": 1, \"running\": false, \"how\": \"resized\"}" out.json &&
	dlk scale blobs --workers 2 -q
'

test_expect_success 'refused: no --workers, a size that does not split the global batch, one past the limit' '
	test_exit_code 2 dlk scale blobs 2>err && grep_q "needs --workers N, at least 1" err &&
	test_exit_code 2 dlk scale blobs --workers 0 2>err && grep_q "needs --workers N, at least 1" err &&
	test_exit_code 3 dlk scale blobs --workers 3 2>err && cat err &&
	grep_q "job .blobs. cannot train at 3 workers: its global batch of 32 does not split into 3 equal batches" err &&
	grep_q "choose a worker count that divides 32 (it has 2 now)" err &&
	test_exit_code 2 dlk scale blobs --workers 5000 2>err && grep_q "more than the 4096 workers" err &&
	test "$(size blobs)" = "[2,2]"
'

test_expect_success 'refused, naming why: a CronJob, not Indexed, not running, finished, unequal sizes, missing' '
	test_exit_code 3 dlk scale nightly --workers 2 2>err && grep_q "is a CronJob: its runs are Jobs of their own" err &&
	test_exit_code 3 dlk scale plain --workers 1 2>err && grep_q "job .plain. is not an Indexed Job" err &&
	test_exit_code 3 dlk scale held --workers 1 2>err && grep_q "job .held. is Suspended, not running" err &&
	test_exit_code 3 dlk scale done --workers 1 2>err && grep_q "job .done. is Succeeded, not running" err &&
	test_exit_code 3 dlk scale uneven --workers 1 2>err && grep_q "completions 2 and parallelism 1" err &&
	test_exit_code 6 dlk scale nosuch --workers 1 2>err && grep_q "job .nosuch. not found in namespace .default." err &&
	test "$(size plain)" = "[2,2]" && test "$(size held)" = "[2,2]"
'

UID1=5e1f2a33-4d6e-4f70-8a1b-2c3d4e5f6a7b
test_expect_success 'a worker trains at the Job'"'"'s size, not the WORLD_SIZE its pod was made with' '
	in_pod DLK_JOB_NAME=w DLK_RUN_ID=0f0f0f0f-0000-4000-8000-000000000001 WORLD_SIZE=2 RANK=0 \
		"$DLK" train --worker -f "$P/dlk.yaml" --set training.epochs=1 >/dev/null 2>err && cat err &&
	grep_q "the job has 1 worker now (the pod was made for 2): training with 1" err &&
	in_pod DLK_JOB_NAME=w WORLD_SIZE=2 RANK=1 "$DLK" train --worker -f "$P/dlk.yaml" 2>err; test $? = 75 &&
	grep_q "rank 1 is outside the job.s 1 worker: it was scaled down" err
'

test_expect_success 'dlk scale 1 -> 2 while it trains: rank 0 stops with a checkpoint; the gang re-forms at 2 from it' '
	cd "$P" && mp=$(free_port) &&
	{ in_pod DLK_JOB_NAME=w DLK_RUN_ID=$UID1 WORLD_SIZE=1 RANK=0 DLK_RESIZE_POLL=1 DLK_TEST_CHECKPOINT_DELAY_MS=50 \
		"$DLK" train --worker -f dlk.yaml >/dev/null 2>err0 & pid=$!; } &&
	i=0; while ! ls -d checkpoints/$UID1/step-* >/dev/null 2>&1 && ! ls -d .dlk/checkpoints/blobs/$UID1/step-* >/dev/null 2>&1; do
		sleep 0.1; i=$((i + 1)); test $i -lt 600 || { echo "no checkpoint after 60 s"; cat err0 e0 2>/dev/null; exit 1; }; done &&
	{ dlk scale w --workers 2 --wait --timeout 120s -o json >scale.json 2>scale.err & spid=$!; } &&
	wait $pid; rc=$?; cat err0; test $rc = 76 &&
	grep_q "the job was resized to 2 workers: stopped after [0-9]* steps with a checkpoint, to go on at the new size" err0 &&
	api /api/v1/namespaces/default/configmaps/blobs-runs | jq -r ".data[\"$UID1.json\"]" >rec.json &&
	jq -e ".run.outcome == \"interrupted\" and .run.worlds == [1]" rec.json &&
	{ in_pod DLK_JOB_NAME=w DLK_RUN_ID=$UID1 WORLD_SIZE=1 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$mp \
		"$DLK" train --worker -f dlk.yaml >/dev/null 2>err1 & p1=$!; } &&
	in_pod DLK_JOB_NAME=w DLK_RUN_ID=$UID1 WORLD_SIZE=1 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$mp \
		"$DLK" train --worker -f dlk.yaml >/dev/null 2>err2; rc=$?; wait $p1; rc1=$?; cat err2 err1; test $rc = 0 && test $rc1 = 0 &&
	grep_q "resuming run $(echo $UID1 | cut -c1-8) from checkpoint [0-9]* at 2 workers (was 1), batch 16 per worker, global 32$" err2 &&
	wait $spid; rc=$?; cat scale.err scale.json; test $rc = 0 &&
	jq -e ".job == \"w\" and .from == 1 and .workers == 2 and .running == true and .step > 0" scale.json &&
	api /api/v1/namespaces/default/configmaps/blobs-runs | jq -r ".data[\"$UID1.json\"]" >rec.json &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [1, 2] and .run.restarts == 1" rec.json &&
	jq -e "[.history.events[] | [.event, .world]] == [[\"start\", 1], [\"resume\", 2]]" rec.json &&
	dlk status blobs --run $(echo $UID1 | cut -c1-8) | grep_q "^workers  *1,2 (resized) (1 restart)$"
'

UID2=6f2a3b44-5e7f-4081-9b2c-3d4e5f6a7b8c
test_expect_success 'scaled 2 -> 1: the pod past the new size gets SIGTERM; the rest stop as for a resize, not a lost peer' '
	cd "$P" && mp=$(free_port) && test "$(size w)" = "[2,2]" &&
	{ env $IN_POD DLK_JOB_NAME=w DLK_RUN_ID=$UID2 WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$mp \
		DLK_RESIZE_POLL=3600 "$DLK" train --worker -f dlk.yaml >/dev/null 2>e1 & p1=$!; } &&
	{ in_pod DLK_JOB_NAME=w DLK_RUN_ID=$UID2 WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$mp \
		DLK_RESIZE_POLL=3600 DLK_TEST_CHECKPOINT_DELAY_MS=50 "$DLK" train --worker -f dlk.yaml >/dev/null 2>e0 & p0=$!; } &&
	i=0; while ! ls -d .dlk/checkpoints/blobs/$UID2/step-* >/dev/null 2>&1 && ! ls -d checkpoints/$UID2/step-* >/dev/null 2>&1; do
		sleep 0.1; i=$((i + 1)); test $i -lt 600 || { echo "no checkpoint after 60 s"; cat err0 e0 2>/dev/null; exit 1; }; done &&
	dlk scale w --workers 1 -q && kill -TERM $p1 &&
	wait $p0; rc0=$?; wait $p1; rc1=$?; echo "rc $rc0 $rc1"; grep -v "epoch" e0 e1; test $rc0 = 76 && test $rc1 = 76 &&
	grep_q "the job was resized to 1 workers: stopped after [0-9]* steps with a checkpoint" e0 &&
	in_pod DLK_JOB_NAME=w DLK_RUN_ID=$UID2 WORLD_SIZE=2 RANK=0 "$DLK" train --worker -f dlk.yaml \
		>/dev/null 2>e2; rc=$?; grep -v " step " e2; test $rc = 0 &&
	grep_q "resuming run $(echo $UID2 | cut -c1-8) from checkpoint [0-9]* at 1 worker (was 2), batch 64 per worker, global 64$" e2 &&
	api /api/v1/namespaces/default/configmaps/blobs-runs | jq -r ".data[\"$UID2.json\"]" | jq -e ".run.worlds == [2, 1]"
'

test_expect_success 'the rendered Job ignores the resize exit in its podFailurePolicy' '
	dlk train --dry-run -f "$P/dlk.yaml" -o json >objs.json &&
	jq -e "[.items[] | select(.kind == \"Job\") | .spec.podFailurePolicy.rules[] | select(.action == \"Ignore\" and .onExitCodes.values == [76])] | length == 1" objs.json &&
	jq -e ".items[] | select(.kind == \"Job\") | .spec.completions == .spec.parallelism and .spec.completionMode == \"Indexed\"" objs.json
'

test_done
