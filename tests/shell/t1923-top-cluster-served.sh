#!/bin/sh
# dlk top --cluster shows the models dlk serve deployed (Deployments labelled dlk.dev/serve): a
# line per track with its replicas ready/desired and rollout, and the requests, errors and rows
# per second and mean request time their ready pods' /metrics give, read through the API
# server's pod proxy an interval apart; a model whose pods cannot be reached says why. On the
# test API server, whose pod proxy reaches a pod that runs `dlk serve --local` here.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"
export DLK_APISERVER_DLK="$DLK"

blobs_project "$TEST_TMP/p"
dlk train --local -q -f "$TEST_TMP/p/dlk.yaml" >/dev/null 2>&1 || { echo "Bail out! training failed"; exit 1; }

dep() { # NAME REPLICAS READY: a Deployment as dlk serve renders its labels
	printf '{ "apiVersion": "apps/v1", "kind": "Deployment",
	  "metadata": { "name": "%s", "namespace": "default", "generation": 1,
	    "labels": { "app.kubernetes.io/managed-by": "dlk", "dlk.dev/serve": "%s", "dlk.dev/track": "stable" } },
	  "spec": { "replicas": %s, "selector": { "matchLabels": { "dlk.dev/serve": "%s", "dlk.dev/track": "stable" } },
	    "template": { "metadata": { "labels": { "dlk.dev/serve": "%s", "dlk.dev/track": "stable" } },
	      "spec": { "containers": [ { "name": "server", "image": "dlk" } ] } } },
	  "status": { "observedGeneration": 1, "replicas": %s, "updatedReplicas": %s, "readyReplicas": %s, "availableReplicas": %s } }' \
		"$1" "$1" "$2" "$1" "$1" "$2" "$2" "$3" "$3"
}
cat >"$TEST_TMP/scenario.json" <<EOT
{
  "description": "Two served models: blobs (one of two replicas ready, its pod runs dlk serve here) and other (its one pod runs nothing: the pod proxy answers 503).",
  "auth": { "tokens": ["test-token"] },
  "pods": { "blobs-*": { "run": true } },
  "objects": [ $(dep blobs 2 1), $(dep other 1 1),
    { "apiVersion": "v1", "kind": "Pod",
      "metadata": { "name": "other-6f7c9-abcde", "namespace": "default", "labels": { "dlk.dev/serve": "other", "dlk.dev/track": "stable" } },
      "spec": { "containers": [ { "name": "server", "image": "dlk", "ports": [ { "name": "http", "containerPort": 8080 } ] } ] },
      "status": { "phase": "Running", "containerStatuses": [ { "name": "server", "ready": true, "restartCount": 0 } ] } } ]
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"

# blobs's ready pod: dlk serve --local of the trained bundle, reached through the pod proxy
cat >"$TEST_TMP/pod.json" <<EOT
{ "apiVersion": "v1", "kind": "Pod",
  "metadata": { "name": "blobs-5d8f7-x1x2x", "namespace": "default", "labels": { "dlk.dev/serve": "blobs", "dlk.dev/track": "stable" } },
  "spec": { "containers": [ { "name": "server", "image": "dlk",
    "command": ["dlk", "serve", "--local", "--port", "8080", "$TEST_TMP/p/blobs.dlk"],
    "env": [ { "name": "XDG_RUNTIME_DIR", "value": "$XDG_RUNTIME_DIR" } ],
    "ports": [ { "name": "metrics-not", "containerPort": 9999 }, { "name": "http", "containerPort": 8080 } ] } ] } }
EOT
api /api/v1/namespaces/default/pods -X POST -H "Content-Type: application/json" --data-binary @"$TEST_TMP/pod.json" >/dev/null ||
	{ echo "Bail out! cannot create the pod"; exit 1; }
PROXY=/api/v1/namespaces/default/pods/blobs-5d8f7-x1x2x:8080/proxy
i=0
until [ "$(api "$PROXY/v2/health/ready" -o /dev/null -w "%{http_code}")" = 200 ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
# requests through the proxy all the time the tests below sample (2 rows each, one in 4 refused)
(
	n=0
	while [ $n -lt 3000 ]; do
		n=$((n + 1))
		if [ $((n % 4)) -eq 0 ]; then d='"shape":[1,3],"datatype":"FP32","data":[1,2,3]'; else d='"shape":[2,2],"datatype":"FP32","data":[0.5,0.2,1.5,-0.3]'; fi
		api "$PROXY/v2/models/blobs/infer" -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"inputs\":[{\"name\":\"input\",$d}]}" || break
	done
) &
LOAD=$!

test_expect_success 'JSON: each served model'"'"'s replicas and rollout; the rates its ready pods'"'"' /metrics give' '
	dlk top --cluster -o json --interval 1s >c.json 2>err || { cat err; exit 1; }
	jq .served c.json &&
	jq -e ".served | length == 2 and .[0].name == \"blobs\" and .[1].name == \"other\"" c.json &&
	jq -e ".served[0] | .track == \"stable\" and .deployment == \"blobs\" and .ready == 1 and .desired == 2 and
		.rollout == \"Progressing\" and .pods_scraped == 1 and (has(\"metrics\") | not)" c.json &&
	jq -e ".served[0] | .requests_per_s > 0 and .errors_per_s > 0 and .latency_ms > 0 and
		(.rows_per_s - 2 * .requests_per_s | fabs) < 0.2 * .requests_per_s + 0.5" c.json &&
	jq -e ".served[1] | .ready == 1 and .desired == 1 and .rollout == \"Complete\" and .pods_scraped == 0 and
		.requests_per_s == null and .latency_ms == null and
		.metrics == \"the API server'"'"'s pod proxy answered 503 for pod other-6f7c9-abcde: error trying to reach service: pod other-6f7c9-abcde is not running\"" c.json
'

test_expect_success 'piped: a line per served model, why one has no rates; one model by name' '
	dlk top --cluster --interval 0.5s >c.txt 2>err && cat c.txt &&
	grep -q "^SERVED *TRACK *READY *REQ/S *ERR/S *ROWS/S *LATENCY *ROLLOUT$" c.txt &&
	grep -q "^blobs *stable *1/2 *[0-9.]* *[0-9.]* *[0-9.]* *[0-9.]* ms *Progressing" c.txt &&
	grep -q "^other *stable *1/1 *- *- *- *- *Complete$" c.txt &&
	grep -qx "note: other: no request rates: the API server.s pod proxy answered 503 for pod other-6f7c9-abcde: error trying to reach service: pod other-6f7c9-abcde is not running" c.txt &&
	grep -qx "no training jobs running in namespace .default." c.txt &&
	dlk top --cluster -o json --interval 0.2s other >o.json && jq -e "[.served[].name] == [\"other\"]" o.json
'

kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
api /api/v1/namespaces/default/pods/blobs-5d8f7-x1x2x -X DELETE >/dev/null

# a user who may list Jobs and Pods but not Deployments
cat >"$TEST_TMP/forbid.json" <<EOT
{ "auth": { "tokens": ["test-token"] }, "forbid": [ { "verb": "list", "resource": "deployments" } ], "objects": [ $(dep blobs 1 1) ] }
EOT
apiserver_or_fail "$TEST_TMP/forbid.json"
write_kubeconfig "$KUBECONFIG"

test_expect_success 'a user who may not list Deployments still sees the jobs, and a warning why not the served models' '
	dlk top --cluster >f.txt 2>f.err && cat f.txt f.err &&
	grep -qx "no training jobs running in namespace .default." f.txt && ! grep -q "^SERVED" f.txt &&
	test "$(grep -c "served models not shown: .*forbidden" f.err)" = 1 &&
	dlk top --cluster -o json >f.json 2>/dev/null && jq -e ".served == [] and (.served_error | test(\"forbidden\"))" f.json
'

test_done
