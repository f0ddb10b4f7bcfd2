#!/bin/sh
# The test API server itself: TLS, auth, Status errors, discovery, scenarios, faults.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

command -v curl >/dev/null 2>&1 || test_missing 'curl is installed'
start_apiserver training.json || test_missing 'the test API server starts (node and openssl)'
api() { curl -sS --cacert "$APISERVER_CERTS/ca.crt" -H 'Authorization: Bearer test-token' "$@"; }
JOB='{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"pair"},"spec":{"completions":2,"parallelism":2,"completionMode":"Indexed","template":{"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"x"}]}}}}'

test_expect_success 'prints its https URL on an ephemeral port' '
	echo "$APISERVER_URL" | grep -q "^https://127.0.0.1:[0-9][0-9]*$"
'

test_expect_success 'rejects a request without credentials with a 401 Status' '
	curl -sS --cacert "$APISERVER_CERTS/ca.crt" -o out -w "%{http_code}" "$APISERVER_URL/api/v1/namespaces/default/pods" >code &&
	grep -qx 401 code && grep -q "\"reason\":\"Unauthorized\"" out && grep -q "\"kind\":\"Status\"" out
'

test_expect_success 'accepts a client certificate signed by its CA' '
	curl -sS --cacert "$APISERVER_CERTS/ca.crt" --cert "$APISERVER_CERTS/client.crt" --key "$APISERVER_CERTS/client.key" \
		-o out -w "%{http_code}" "$APISERVER_URL/api/v1/namespaces/default/pods" >code &&
	grep -qx 200 code && grep -q "\"kind\":\"PodList\"" out
'

test_expect_success 'serves discovery for v1, batch/v1 and rbac.authorization.k8s.io/v1' '
	api "$APISERVER_URL/api" | grep -q "\"versions\":\[\"v1\"\]" &&
	api "$APISERVER_URL/apis" >groups && grep -q "\"batch/v1\"" groups && grep -q "rbac.authorization.k8s.io/v1" groups &&
	api "$APISERVER_URL/apis/batch/v1" | grep -q "\"kind\":\"Job\"" &&
	api "$APISERVER_URL/api/v1" | grep -q "\"name\":\"pods/log\""
'

test_expect_success 'a created Job gets indexed pods and events' '
	api -X POST -H "Content-Type: application/json" "$APISERVER_URL/apis/batch/v1/namespaces/sh/jobs" -d "$JOB" >created &&
	grep -q "\"uid\"" created &&
	api "$APISERVER_URL/api/v1/namespaces/sh/pods?labelSelector=job-name%3Dpair" >pods &&
	grep -q "\"name\":\"pair-0-" pods && grep -q "\"name\":\"pair-1-" pods &&
	grep -q "\"batch.kubernetes.io/job-completion-index\":\"1\"" pods &&
	api "$APISERVER_URL/api/v1/namespaces/sh/events?fieldSelector=involvedObject.name%3Dpair" | grep -q SuccessfulCreate
'

test_expect_success 'creating it again is a 409 AlreadyExists' '
	api -o out -w "%{http_code}" -X POST -H "Content-Type: application/json" "$APISERVER_URL/apis/batch/v1/namespaces/sh/jobs" \
		-d "$JOB" >code &&
	grep -qx 409 code && grep -q "\"reason\":\"AlreadyExists\"" out
'

test_expect_success 'deleting a Job without propagationPolicy warns and orphans its pods' '
	api -D headers -o /dev/null -X DELETE "$APISERVER_URL/apis/batch/v1/namespaces/sh/jobs/pair" &&
	grep -qi "^warning: 299 - \"child pods are preserved by default" headers &&
	api "$APISERVER_URL/api/v1/namespaces/sh/pods?labelSelector=job-name%3Dpair" | grep -q "\"name\":\"pair-0-"
'

test_expect_success 'a too-old resourceVersion on a watch ends in an ERROR event with code 410' '
	api -X POST "$APISERVER_URL/_test/compact" >/dev/null &&
	api --max-time 5 "$APISERVER_URL/api/v1/namespaces/sh/pods?watch=1&resourceVersion=1" >events &&
	grep -q "\"type\":\"ERROR\".*\"code\":410" events
'

test_expect_success 'the scenario can come from DLK_APISERVER_SCENARIO' '
	DLK_APISERVER_SCENARIO=faults.json node "$TEST_ROOT/tests/apiserver/server.js" --certs "$APISERVER_CERTS" >url 2>err &
	pid=$!
	i=0; while [ ! -s url ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	api -o out -w "%{http_code}" "$(cat url)/api/v1/namespaces/default/configmaps/always500" >code
	kill $pid; wait $pid
	grep -qx 500 code && grep -q "etcdserver: request timed out" out
'

# servers are started here, at the top level, where the EXIT trap can stop them (a case runs in
# a subshell)
start_apiserver faults.json
test_expect_success 'a 429 fault carries Retry-After, and passes' '
	api -D headers -o out "$APISERVER_URL/api/v1/namespaces/default/configmaps/flaky429" &&
	grep -qi "^retry-after: 1" headers && grep -q "\"reason\":\"TooManyRequests\"" out &&
	api -o out -w "%{http_code}" "$APISERVER_URL/api/v1/namespaces/default/configmaps/flaky429" >code && grep -qx 200 code
'

test_expect_success 'a bad scenario file is refused with a message' '
	echo "{ not json" >bad.json &&
	! node "$TEST_ROOT/tests/apiserver/server.js" --certs "$APISERVER_CERTS" --scenario "$PWD/bad.json" >out 2>err &&
	grep -q "scenario" err
'

test_done
