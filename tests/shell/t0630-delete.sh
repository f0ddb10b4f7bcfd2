#!/bin/sh
# dlk delete: everything labelled dlk.dev/job=NAME goes, with Background propagation; not found;
# --all asks, refuses without a terminal, and --yes.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

apiserver_project dlk-cli.json

# count PLURAL-PATH NAME: objects labelled with the job's name
count() {
	api "$1?labelSelector=dlk.dev%2Fjob%3D$2" | jq ".items | length"
}
all_kinds="/api/v1/namespaces/default/configmaps /api/v1/namespaces/default/serviceaccounts
/api/v1/namespaces/default/services /api/v1/namespaces/default/pods
/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles
/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings /apis/batch/v1/namespaces/default/jobs"

test_expect_success 'delete removes the job, its pods and everything labelled with it' '
	dlk -f "$PROJ" -q train --set name=forever --set resources.workers=2 >/dev/null &&
	dlk -f "$PROJ" -q train --set name=slow >/dev/null &&
	test "$(count /api/v1/namespaces/default/pods forever)" = 2 &&
	: >"$APISERVER_LOG" &&
	dlk delete forever >out &&
	grep -q "^deleted job .forever. (6 objects)$" out &&
	for p in $all_kinds; do
		test "$(count $p forever)" = 0 || { echo "left in $p"; exit 1; }
	done &&
	jq -r "select(.method == \"DELETE\") | .query" "$APISERVER_LOG" | sort -u >queries &&
	test "$(cat queries)" = "?propagationPolicy=Background" &&
	test "$(count /apis/batch/v1/namespaces/default/jobs slow)" = 1
'

test_expect_success 'a job that does not exist exits 6 naming the namespace' '
	test_exit_code 6 dlk delete nosuch 2>err &&
	grep -q "job .nosuch. not found in namespace .default." err
'

test_expect_success 'several names: the ones that exist go, a missing one still exits 6' '
	dlk -f "$PROJ" -q train --set name=forever >/dev/null &&
	test_exit_code 6 dlk delete nosuch forever >out 2>err &&
	grep -q "nosuch" err && grep -q "deleted job .forever." out &&
	test "$(count /apis/batch/v1/namespaces/default/jobs forever)" = 0
'

test_expect_success '--all without a terminal and without --yes refuses' '
	test_exit_code 2 dlk delete --all </dev/null 2>err &&
	grep -q "refusing" err && grep -q -- "--yes" err &&
	test "$(count /apis/batch/v1/namespaces/default/jobs slow)" = 1
'

test_expect_success '--all --yes deletes every dlk job of the namespace' '
	dlk -f "$PROJ" -q train --set name=nogpu >/dev/null &&
	dlk delete --all --yes </dev/null >out &&
	grep -q "deleted job .slow." out && grep -q "deleted job .nogpu." out &&
	test "$(api "/apis/batch/v1/namespaces/default/jobs" | jq ".items | length")" = 0 &&
	dlk status >out 2>err && grep -q "no dlk jobs" err
'

test_expect_success 'delete needs a name or --all' '
	test_exit_code 2 dlk delete 2>err && grep -q "needs the name of a job" err &&
	test_exit_code 2 dlk delete --all x 2>err
'

test_expect_success 'status, logs and delete complete job names from the cluster' '
	dlk -f "$PROJ" -q train --set name=fo1 >/dev/null && dlk -f "$PROJ" -q train --set name=fo2 >/dev/null &&
	dlk __complete status fo >out && grep -qx fo1 out && grep -qx fo2 out &&
	dlk __complete logs --rank 0 fo >out && grep -qx fo1 out &&
	dlk __complete delete fo1 fo >out && grep -qx fo2 out
'

test_expect_success 'job-name completion is silent when the cluster cannot be asked' '
	dlk __complete delete --kubeconfig=/nonexistent "" >out 2>err && test ! -s out && test ! -s err
'

test_done
