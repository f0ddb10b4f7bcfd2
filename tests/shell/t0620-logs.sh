#!/bin/sh
# dlk logs: every rank merged with [rank N] prefixes, --rank, --tail, --previous, -f across a
# pod that is replaced.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

apiserver_project dlk-cli.json
dlk -f "$PROJ" -q train --set name=ok --set resources.workers=2 --wait >/dev/null 2>&1

test_expect_success 'logs merges the ranks in time order, each line prefixed' '
	dlk logs ok >out &&
	cat >want <<-\EOT &&
	[rank 1] rank1 starting
	[rank 0] rank0 step 1 loss 2.30
	[rank 1] rank1 step 1 loss 2.31
	[rank 0] rank0 done
	EOT
	diff -u want out
'

test_expect_success 'no colour when stdout is not a terminal' '
	NO_COLOR= dlk logs ok >out && ! grep -q "$(printf "\033")" out
'

test_expect_success 'on a terminal the rank prefixes are coloured, unless NO_COLOR' '
	NO_COLOR= script -qc "\"$DLK\" logs --rank 1 ok" /dev/null >out </dev/null &&
	grep -q "$(printf "\033")\[[0-9;]*m\[rank 1\]$(printf "\033")\[0m rank1 starting" out &&
	NO_COLOR=1 script -qc "\"$DLK\" logs --rank 1 ok" /dev/null >out </dev/null &&
	grep -q "^\[rank 1\] rank1 starting" out && ! grep -q "$(printf "\033")" out
'

test_expect_success '--rank shows one rank, --tail its last lines' '
	dlk logs --rank 1 ok >out &&
	test "$(cat out)" = "$(printf "[rank 1] rank1 starting\n[rank 1] rank1 step 1 loss 2.31")" &&
	dlk logs --tail 1 ok >out &&
	test "$(cat out)" = "$(printf "[rank 1] rank1 step 1 loss 2.31\n[rank 0] rank0 done")"
'

test_expect_success '--timestamps keeps the kubelet'\''s times' '
	dlk logs --rank 0 --timestamps ok >out &&
	grep -q "^\[rank 0\] 20[0-9-]*T[0-9:.]*Z rank0 done$" out
'

test_expect_success 'a rank out of range is a usage error; a missing job exits 6' '
	test_exit_code 2 dlk logs --rank 2 ok 2>err && grep -q "ranks 0 to 1" err &&
	test_exit_code 6 dlk logs nosuch 2>err && grep -q "job .nosuch. not found in namespace .default." err
'

test_expect_success 'a rank whose pod has not started is named, not an error' '
	dlk -f "$PROJ" -q train --set name=nogpu >/dev/null &&
	dlk logs nogpu >out 2>err && test ! -s out && grep -q "rank 0: pod .nogpu-0-.* has not started" err
'

test_expect_success '-f follows until the job ends' '
	dlk -f "$PROJ" -q train --set name=ok --set resources.workers=2 --replace >/dev/null &&
	dlk logs -f ok >out &&
	grep -q "^\[rank 0\] rank0 done$" out && grep -q "^\[rank 1\] rank1 step 1 loss 2.31$" out
'

# The test server does not replace failed pods itself: the replacement is a second Job whose pod
# carries the same dlk.dev/job label and completion index, which is all dlk looks at.
retry_job() {
	cat <<-JSON
	{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "restart-retry", "namespace": "default"},
	 "spec": {"completions": 1, "completionMode": "Indexed", "template": {
	   "metadata": {"labels": {"dlk.dev/job": "restart"}},
	   "spec": {"restartPolicy": "Never", "containers": [{"name": "worker", "image": "dlk"}]}}}}
	JSON
}

test_expect_success '-f picks up a new pod for a rank that restarted' '
	dlk -f "$PROJ" -q train --set name=restart >/dev/null &&
	"$DLK" logs -f restart >out 2>err &
	pid=$! &&
	# once the line of the first pod is shown (its Job completes 2.5 s after it starts), the new pod
	i=0 && until grep -q "first pod line" out; do
		sleep 0.05; i=$((i + 1)); [ $i -lt 200 ] || { echo "logs -f showed no line in 10 s"; cat err; exit 1; }
	done &&
	retry_job | api /apis/batch/v1/namespaces/default/jobs -o /dev/null \
		-H "Content-Type: application/json" --data-binary @- &&
	wait $pid &&
	test "$(cat out)" = "$(printf "[rank 0] first pod line\n[rank 0] second pod line")"
'

test_expect_success '--previous shows the container before its restart' '
	dlk -f "$PROJ" -q train --set name=flaky >/dev/null &&
	i=0 && until dlk status flaky 2>/dev/null | grep -q "^0 .* Running "; do
		sleep 0.05; i=$((i + 1)); [ $i -lt 200 ] || { echo "the pod of flaky did not run in 10 s"; exit 1; }
	done &&
	dlk logs --previous flaky >out &&
	test "$(cat out)" = "[rank 0] previous run: CUDA error: out of memory" &&
	dlk logs flaky >out && test "$(cat out)" = "[rank 0] second try" &&
	dlk status flaky >out && grep -q "^0 .* Running *1 *1 Error$" out
'

test_expect_success 'when no rank has what was asked for, logs fails' '
	test_exit_code 1 dlk logs --previous ok 2>err && grep -q "previous terminated container" err
'

test_done
