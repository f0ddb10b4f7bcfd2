#!/bin/sh
# dlk status: the table, one job in detail, the pending reason, -o json, -w.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

apiserver_project dlk-cli.json
submit() { dlk -f "$PROJ" -q train --set name="$1" --set resources.workers="${2:-1}" >/dev/null; }

# eventually CMD...: until CMD succeeds (the test API server plays a pod's timeline a moment after
# the Job is made, later on a loaded machine), 10 s at most
eventually() {
	_i=0
	until "$@" >/dev/null 2>&1; do
		_i=$((_i + 1)); [ $_i -lt 100 ] || { echo "still not true after 10 s: $*" >&2; return 1; }
		sleep 0.1
	done
}
# has_reason NAME TEXT: dlk status NAME gives a reason starting with TEXT
has_reason() { dlk status "$1" | grep -q "^reason: *$2"; }
# in_state NAME STATE [OPTIONS]: dlk status [OPTIONS] lists NAME in STATE (with -A, in every namespace)
in_state() { n=$1 st=$2; shift 2; dlk status "$@" | awk -v n="$n" -v s="$st" '$1 == n && $2 != s { bad = 1 } $2 == n && $3 != s { bad = 1 }
	$1 == n || $2 == n { seen = 1 } END { exit !(seen && !bad) }'; }
# row NAME: the job's row of the table, columns separated by single blanks
row() { awk -v n="$1" '$1 == n' out | tr -s " "; }

test_expect_success 'no jobs yet says so' '
	dlk status >out 2>err && test ! -s out && grep -q "no dlk jobs or served models in namespace .default." err
'

test_expect_success 'an unschedulable job is Pending, with the scheduler'\''s reason' '
	submit nogpu && eventually has_reason nogpu "rank 0 unschedulable" &&
	dlk status >out &&
	head -n 1 out | grep -q "^NAME *STATE *WORKERS *GPUS *PROGRESS *AGE$" &&
	row nogpu | grep -q "^nogpu Pending 0/1 0 - " &&
	dlk status nogpu >out &&
	grep -q "^state: *Pending$" out &&
	grep -q "^reason: *rank 0 unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.$" out
'

test_expect_success 'a pod that cannot pull its image says so' '
	submit badimage && eventually has_reason badimage "rank 0: ImagePullBackOff" &&
	dlk status badimage >out &&
	grep -q "^state: *Pending$" out &&
	grep -q "^reason: *rank 0: ImagePullBackOff: Back-off pulling image" out
'

test_expect_success 'a job Kueue has not admitted is Suspended, naming the queue' '
	printf "%s" "{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\",
	  \"metadata\": {\"name\": \"queued\", \"labels\": {\"dlk.dev/job\": \"queued\", \"kueue.x-k8s.io/queue-name\": \"gpu-queue\"}},
	  \"spec\": {\"suspend\": true, \"completions\": 2, \"parallelism\": 2, \"completionMode\": \"Indexed\",
	    \"template\": {\"spec\": {\"restartPolicy\": \"Never\", \"containers\": [{\"name\": \"worker\", \"image\": \"dlk\",
	      \"resources\": {\"limits\": {\"nvidia.com/gpu\": 4}}}]}}}}" |
	api /apis/batch/v1/namespaces/default/jobs -o /dev/null \
		-H "Content-Type: application/json" --data-binary @- &&
	dlk status >out && row queued | grep -q "^queued Suspended 0/2 8 - " &&
	dlk status queued >out &&
	grep -q "^reason: *suspended: not admitted by Kueue yet (queue .gpu-queue.)$" out &&
	grep -q "^gpus: *8 (4 per worker)$" out &&
	dlk delete queued >/dev/null
'

test_expect_success 'a job whose workers all run is Running' '
	submit forever && eventually in_state forever Running &&
	dlk status >out && row forever | grep -q "^forever Running 1/1 0 - "
'

test_expect_success 'a finished job is Succeeded and shows the published progress' '
	dlk -f "$PROJ" -q train --set name=ok --set resources.workers=2 --wait >/dev/null 2>&1 &&
	dlk status >out && row ok | grep -q "^ok Succeeded 0/2 0 epoch 2/2 step 940/940 loss 0.3512 " &&
	dlk status ok >out &&
	grep -q "^metrics: *accuracy 0.8731 samples/s 5400$" out &&
	grep -q "^0 *ok-0-[0-9a-f]* *- *Succeeded *0 *0 Completed$" out
'

test_expect_success 'a failed job is Failed, naming the rank that failed' '
	test_exit_code 1 dlk -f "$PROJ" -q train --set name=oom --set resources.workers=2 --wait >/dev/null 2>&1 &&
	dlk status >out && row oom | grep -q "^oom Failed 1/2 " &&
	dlk status oom >out &&
	grep -q "^failure: *rank 1 exited with code 137 (OOMKilled)$" out &&
	grep -q "^1 *oom-1-[0-9a-f]* *- *Failed *0 *137 OOMKilled$" out
'

test_expect_success '-o wide adds accuracy, throughput and the reason' '
	dlk status -o wide >out &&
	head -n 1 out | grep -q "ACCURACY *SAMPLES/S *REASON$" &&
	row ok | grep -q " 0.8731 5400 -$" && row oom | grep -q "rank 1 exited with code 137 (OOMKilled)$"
'

test_expect_success '-o json is data a script can read' '
	dlk status -o json >out &&
	test "$(jq -r ".jobs[] | select(.name == \"ok\") | .state" out)" = Succeeded &&
	test "$(jq -r ".jobs[] | select(.name == \"nogpu\") | .state" out)" = Pending &&
	test "$(jq -r ".jobs[] | select(.name == \"ok\") | .progress.accuracy" out)" = 0.8731 &&
	test "$(jq -r ".jobs[] | select(.name == \"oom\") | .ranks[1].reason" out)" = OOMKilled &&
	dlk status -o json oom >one &&
	test "$(jq -r .workers.total one)" = 2 && test "$(jq -r .ranks[1].exitCode one)" = 137
'

test_expect_success '--context picks the context, and with it the namespace' '
	cat >two.kc <<-EOT &&
	apiVersion: v1
	kind: Config
	clusters:
	- name: test
	  cluster: {server: "$APISERVER_URL", certificate-authority: "$APISERVER_CERTS/ca.crt"}
	users:
	- name: tester
	  user: {token: test-token}
	contexts:
	- name: test
	  context: {cluster: test, user: tester, namespace: default}
	- name: team
	  context: {cluster: test, user: tester, namespace: team-b}
	current-context: test
	EOT
	dlk --kubeconfig two.kc --context team -f "$PROJ" -q train --set name=forever >/dev/null &&
	dlk --kubeconfig two.kc --context team status >out &&
	row forever | grep -Eq "^forever (Pending|Running) " && test "$(wc -l <out)" = 2 &&
	test_exit_code 6 dlk --kubeconfig two.kc --context team status ok 2>err &&
	grep -q "namespace .team-b." err &&
	dlk --kubeconfig two.kc status ok >/dev/null
'

test_expect_success 'a job that does not exist exits 6 naming the namespace' '
	test_exit_code 6 dlk status nosuch 2>err &&
	grep -q "job .nosuch. not found in namespace .default." err
'

test_expect_success '-w follows a job from Running to Succeeded, then ends' '
	dlk -f "$PROJ" -q train --set name=slow --replace >/dev/null &&
	dlk status -w slow >out &&
	grep -q "^progress: *epoch 1/2$" out &&
	grep -q "^state: *Running$" out && tail -n 12 out | grep -q "^state: *Succeeded$" &&
	awk "/^state:/ { print \$2 }" out | uniq >states &&
	test "$(tail -n 1 states)" = Succeeded
'

test_expect_success '-w watches, it does not poll' '
	: >"$APISERVER_LOG" &&
	dlk -f "$PROJ" -q train --set name=ok --set resources.workers=2 --replace >/dev/null &&
	: >"$APISERVER_LOG" &&
	dlk status -w ok >/dev/null &&
	test "$(jq -r "select(.path == \"/apis/batch/v1/namespaces/default/jobs/ok\") | .method" "$APISERVER_LOG" | wc -l)" -eq 0 &&
	jq -r .query "$APISERVER_LOG" | grep -q "watch=1"
'

test_expect_success '-w without a name keeps the table current until Ctrl-C' '
	dlk delete slow >/dev/null;
	"$DLK" status -w >out 2>err &
	pid=$! &&
	sleep 0.3 && submit slow && i=0 &&
	while ! awk "\$1 == \"slow\" && \$2 == \"Succeeded\"" out | grep -q . && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done &&
	kill -INT $pid && wait $pid;
	test $? = 0 &&
	awk "\$1 == \"slow\" { print \$2 }" out | uniq >states &&
	grep -q Running states && test "$(tail -n 1 states)" = Succeeded
'

test_expect_success '-A lists every namespace, each job with its own pods' '
	dlk -f "$PROJ" -q train --set name=forever --replace >/dev/null &&
	dlk -n team-b -f "$PROJ" -q train --set name=forever --set resources.workers=2 --replace >/dev/null &&
	eventually in_state forever Running -A && eventually in_state forever Running -n team-b &&
	dlk status -A >out &&
	head -n 1 out | grep -q "^NAMESPACE *NAME *STATE *WORKERS *GPUS *PROGRESS *AGE$" &&
	awk "\$1 == \"default\" && \$2 == \"forever\"" out | tr -s " " | grep -q "^default forever Running 1/1 " &&
	awk "\$1 == \"team-b\" && \$2 == \"forever\"" out | tr -s " " | grep -q "^team-b forever Running 2/2 " &&
	dlk status >out && test "$(row forever)" != "" && row forever | grep -q "^forever Running 1/1 " &&
	dlk status -A -o json >out.json &&
	test "$(jq -r "[.jobs[] | select(.name == \"forever\") | .namespace] | sort | join(\",\")" out.json)" = default,team-b &&
	test_exit_code 2 dlk status -A forever 2>err && grep -q "takes no NAME" err &&
	jq -r "select(.query | test(\"labelSelector\")) | .path" "$APISERVER_LOG" | grep -qx /apis/batch/v1/jobs
'

test_done
