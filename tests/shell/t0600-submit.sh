#!/bin/sh
# dlk train without a mode flag: submit to the (test) API server, conflicts, --replace, --wait,
# --timeout, and the exit codes CI scripts rely on.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

apiserver_project dlk-cli.json

test_expect_success 'submit applies what --dry-run prints, in order, by server-side apply' '
	dlk -f "$PROJ" train --set name=ok --set resources.workers=2 --dry-run -o json >dry.json &&
	: >"$APISERVER_LOG" &&
	dlk -f "$PROJ" train --set name=ok --set resources.workers=2 >out 2>err &&
	grep -q "job .ok. submitted to namespace .default. (2 workers)" out &&
	grep -q "dlk status ok" out && grep -q "dlk logs -f ok" out &&
	n=$(jq ".items | length" dry.json) && test "$n" -ge 5 &&
	i=0 && while [ $i -lt "$n" ]; do
		jq ".items[$i]" dry.json >want.json &&
		kind=$(jq -r .kind want.json) && name=$(jq -r .metadata.name want.json) &&
		case $kind in
		ConfigMap) p=/api/v1/namespaces/default/configmaps ;;
		ServiceAccount) p=/api/v1/namespaces/default/serviceaccounts ;;
		Service) p=/api/v1/namespaces/default/services ;;
		PersistentVolumeClaim) p=/api/v1/namespaces/default/persistentvolumeclaims ;;
		Role) p=/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles ;;
		RoleBinding) p=/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings ;;
		Job) p=/apis/batch/v1/namespaces/default/jobs ;;
		*) echo "unexpected kind $kind"; exit 1 ;;
		esac &&
		api "$p/$name" >got.json &&
		node -e "
			const fs = require(\"fs\");
			const want = JSON.parse(fs.readFileSync(\"want.json\")), got = JSON.parse(fs.readFileSync(\"got.json\"));
			const sub = (w, g, at) => {
				if (w === null || typeof w !== \"object\") { if (w !== g) throw new Error(at + \": \" + JSON.stringify(g) + \" != \" + JSON.stringify(w)); return; }
				if (typeof g !== \"object\" || g === null || Array.isArray(w) !== Array.isArray(g)) throw new Error(at + \": missing\");
				if (Array.isArray(w) && w.length !== g.length) throw new Error(at + \": length\");
				for (const k of Object.keys(w)) sub(w[k], g[k], at + \".\" + k);
			};
			sub(want, got, \"$kind/$name\");
		" || exit 1
		i=$((i + 1))
	done &&
	jq -r "select(.method == \"PATCH\") | .query + \" \" + .headers[\"content-type\"]" "$APISERVER_LOG" >patches &&
	test "$(wc -l <patches)" -eq "$((n - 1))" &&
	! grep -v "fieldManager=dlk.*application/apply-patch+yaml" patches &&
	jq -r "select(.method == \"POST\") | .path" "$APISERVER_LOG" >posts &&
	test "$(cat posts)" = /api/v1/namespaces/default/configmaps &&
	jq -r "select(.method == \"PATCH\") | .path" "$APISERVER_LOG" >order &&
	head -n 1 order | grep -q /configmaps/ && tail -n 1 order | grep -q /jobs/ok
'

test_expect_success 're-submitting an existing job exits 8 and offers --replace' '
	test_exit_code 8 dlk -f "$PROJ" train --set name=ok --set resources.workers=2 >out 2>err &&
	grep -q "job .ok. already exists in namespace .default." err &&
	grep -q -- "--replace" err
'

test_expect_success '--replace deletes the old job (Background), waits for it to go, submits again' '
	old=$(api /apis/batch/v1/namespaces/default/jobs/ok | jq -r .metadata.uid) &&
	: >"$APISERVER_LOG" &&
	dlk -f "$PROJ" train --set name=ok --set resources.workers=2 --replace >out 2>err &&
	grep -q "submitted" out &&
	jq -r "select(.method == \"DELETE\") | .path + .query" "$APISERVER_LOG" >deletes &&
	grep -q "/jobs/ok?propagationPolicy=Background" deletes &&
	grep -q "/configmaps/" deletes &&
	new=$(api /apis/batch/v1/namespaces/default/jobs/ok | jq -r .metadata.uid) &&
	test -n "$new" && test "$new" != null && test "$old" != "$new"
'

test_expect_success '--wait exits 0 when the job succeeds' '
	dlk -f "$PROJ" train --set name=ok --set resources.workers=2 --replace --wait >out 2>err &&
	grep -q "job .ok. succeeded" err
'

test_expect_success '--wait exits 1 when a rank fails, naming the rank, exit code and reason' '
	test_exit_code 1 dlk -f "$PROJ" train --set name=oom --set resources.workers=2 --wait >out 2>err &&
	grep -q "job .oom. failed: rank 1 exited with code 137 (OOMKilled)" err &&
	grep -q "hint: rank 1 ran out of memory" err
'

test_expect_success '--timeout exits 7 and leaves the job running' '
	test_exit_code 7 dlk -f "$PROJ" train --set name=forever --timeout 1s >out 2>err &&
	grep -q "did not end within 1s" err && grep -q "keeps running" err &&
	test "$(api /apis/batch/v1/namespaces/default/jobs/forever | jq -r .metadata.name)" = forever
'

test_expect_success '--follow streams the logs while waiting' '
	dlk -f "$PROJ" train --set name=ok --set resources.workers=2 --replace --follow >out 2>err &&
	grep -q "^\[rank 0\] rank0 done$" out && grep -q "^\[rank 1\] rank1 starting$" out
'

test_expect_success 'waiting on a job that cannot schedule says why' '
	test_exit_code 7 dlk -f "$PROJ" train --set name=nogpu --timeout 1s >out 2>err &&
	grep -q "Pending, 0/1 workers ready: rank 0 unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu." err
'

test_expect_success 'Ctrl-C stops waiting, keeps the job and says how to watch again' '
	rc=none;
	"$DLK" -f "$PROJ" train --set name=forever --replace --wait >out 2>err &
	pid=$! &&
	i=0 && while ! grep -q Running err 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done &&
	kill -INT $pid &&
	{ (sleep 10; kill $pid 2>/dev/null) & } && dog=$! &&
	{ wait $pid; rc=$?; kill $dog 2>/dev/null; } ; test "$rc" = 130 &&
	grep -q "stopped waiting; job .forever. keeps running" err &&
	grep -q "dlk status -w forever" err &&
	test "$(api /apis/batch/v1/namespaces/default/jobs/forever | jq -r .metadata.name)" = forever
'

test_expect_success '-n submits to another namespace, and the hints say -n' '
	dlk -n team-a -f "$PROJ" train --set name=ok --set resources.workers=2 >out &&
	grep -q "submitted to namespace .team-a." out && grep -q "dlk status -n team-a ok" out &&
	test "$(api /apis/batch/v1/namespaces/team-a/jobs/ok | jq -r .metadata.namespace)" = team-a &&
	test "$(api /api/v1/namespaces/team-a/configmaps | jq "[.items[] | select(.metadata.labels[\"dlk.dev/job\"] == \"ok\")] | length")" = 1
'

test_expect_success '-vv shows each request, never the token' '
	dlk -vv -f "$PROJ" train --set name=verbose >out 2>err &&
	grep -q "^PATCH https://127.0.0.1:[0-9]*/apis/batch/v1/namespaces/default/jobs/verbose?fieldManager=dlk&force=true 201" err &&
	! grep -q test-token err
'

test_expect_success '-q prints only the name, -o json the stored objects' '
	dlk -q -f "$PROJ" train --set name=quiet >out 2>err && test "$(cat out)" = quiet && test ! -s err &&
	dlk -o json -f "$PROJ" train --set name=json >out &&
	test "$(jq -r ".items[-1].kind" out)" = Job && test "$(jq -r ".items[-1].metadata.uid" out)" != null
'

test_expect_success 'a bad --timeout is a usage error' '
	test_exit_code 2 dlk -f "$PROJ" train --set name=x --timeout soon 2>err &&
	grep -q "not a duration" err
'

test_expect_success 'a cluster that cannot be reached exits 4' '
	sed "s#server: .*#server: https://127.0.0.1:1#" "$KUBECONFIG" >closed.kc &&
	test_exit_code 4 dlk --kubeconfig closed.kc -f "$PROJ" train --set name=nowhere 2>err &&
	grep -q "cannot reach the API server" err
'

test_expect_success 'credentials the server refuses exit 5, naming the user' '
	sed "s/token: test-token/token: expired-token/" "$KUBECONFIG" >bad.kc &&
	test_exit_code 5 dlk --kubeconfig bad.kc -f "$PROJ" train --set name=denied 2>err &&
	grep -q "Unauthorized" err && grep -q "user .tester." err && ! grep -q expired-token err
'

# a server that lets alice read but not create Jobs
cat >"$TEST_TMP/forbid.json" <<'JSON'
{ "auth": { "tokens": ["test-token"], "tokenUsers": { "test-token": "alice" } },
  "forbid": [ { "verb": "patch", "resource": "jobs" } ] }
JSON
start_apiserver "$TEST_TMP/forbid.json" && write_kubeconfig "$KUBECONFIG"

test_expect_success 'a forbidden submit exits 5 and names the user' '
	test_exit_code 5 dlk -f "$PROJ" train --set name=nope 2>err &&
	grep -q "Forbidden" err && grep -q "alice" err
'

test_done
