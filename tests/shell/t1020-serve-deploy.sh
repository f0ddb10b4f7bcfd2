#!/bin/sh
# dlk serve NAME against the test API server: what --dry-run prints is what is applied; the
# promotion gate (metrics and confusion matrix, refusal exit code 9, --force); a model from a
# URL pinned by its sha256; a canary beside the served model, promoted and rolled back; --wait
# through a rollout and failing with the pod and the reason; dlk status, logs and delete of a
# served model; and the errors (a bad percent, a missing job or bundle, no claim).
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

apiserver_or_fail serve.json
write_kubeconfig "$KUBECONFIG"

# a small CSV model (16 features, 4 classes) trained here in a second: its bundle gives the run
# document a training job publishes, and the bundle a URL serves
P=$TEST_TMP/proj
mkdir -p "$P"
blobs_csv 1024 1 "$P/train.csv"
blobs_csv 256 2 "$P/test.csv"
cat >"$P/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
  classes: [north, east, south, west]
model:
  input: [16]
  layers:
    - dense: {units: 16}
    - relu
    - dense: {units: 4}
training: {epochs: 2, batch_size: 64, threads: 1}
storage: {size: 1Gi}
serving: {replicas: 3, max_replicas: 6, drain_delay_s: 5, min_accuracy: 0.5}
EOT
(cd "$P" && "$DLK" train --local -q >train.out 2>&1) || { echo "Bail out! training the test model failed"; cat "$P/train.out"; exit 1; }
"$DLK" report -o json "$P/blobs.dlk" | jq -c ".runs[0]" >"$TEST_TMP/run.json" || { echo "Bail out! no run document"; exit 1; }
ACC=$(jq -r .metrics.testAccuracy "$TEST_TMP/run.json")
WSHA=$(jq -r .weights.sha256 "$TEST_TMP/run.json")

# make_job NAME [CLAIM]: a training Job as dlk train makes it, with the run document its rank 0
# published; it succeeds at once (serve.json)
make_job() {
	jq -n --arg name "$1" --arg claim "${2-}" --rawfile run "$TEST_TMP/run.json" '{
		apiVersion: "batch/v1", kind: "Job",
		metadata: {name: $name, labels: {"dlk.dev/job": $name}, annotations: {"dlk.dev/metrics": ($run | rtrimstr("\n"))}},
		spec: {template: {spec: {restartPolicy: "Never", containers: [{name: "worker", image: "dlk:test"}],
			volumes: (if $claim == "" then [] else [{name: "checkpoints", persistentVolumeClaim: {claimName: $claim}}] end)}}}
	}' >"$TEST_TMP/job-$1.json" &&
	api /apis/batch/v1/namespaces/default/jobs -X POST -H "Content-Type: application/json" \
		--data-binary @"$TEST_TMP/job-$1.json" >/dev/null &&
	wait_until 10 sh -c "curl -sS --cacert '$APISERVER_CERTS/ca.crt' -H 'Authorization: Bearer test-token' \
		'$APISERVER_URL/apis/batch/v1/namespaces/default/jobs/$1' | jq -e '.status.conditions[]? | select(.type == \"Complete\")' >/dev/null"
}

# wait_until SECONDS CMD...: polls CMD every 0.1 s
wait_until() {
	_n=$(($1 * 10))
	shift
	while ! "$@"; do
		_n=$((_n - 1))
		[ $_n -gt 0 ] || return 1
		sleep 0.1
	done
}

make_job blobs blobs-checkpoints || { echo "Bail out! cannot create the training job"; exit 1; }
make_job noclaim || { echo "Bail out! cannot create the training job"; exit 1; }
make_job crashy crashy-checkpoints || { echo "Bail out! cannot create the training job"; exit 1; }
make_job nopull nopull-checkpoints || { echo "Bail out! cannot create the training job"; exit 1; }
make_job stuck stuck-checkpoints || { echo "Bail out! cannot create the training job"; exit 1; }
S="-f $P/dlk.yaml"

test_expect_success '--dry-run prints the serving objects, from the job bundle on its claim' '
	dlk $S serve blobs --dry-run -o json >dry.json 2>gate.err &&
	jq -r ".items[] | .kind + \" \" + .metadata.name" dry.json >kinds &&
	printf "%s\n" "ConfigMap blobs-serving" "Service blobs-serving" "Deployment blobs-serving" \
		"HorizontalPodAutoscaler blobs-serving" "PodDisruptionBudget blobs-serving" >want &&
	diff -u want kinds &&
	jq -e ".items[2] | .spec.template.spec.volumes[] | select(.name == \"model\") | .persistentVolumeClaim.claimName == \"blobs-checkpoints\"" dry.json &&
	jq -e ".items[2].spec.template.spec.containers[0].command | index(\"blobs=/models/blobs.dlk\") != null" dry.json &&
	jq -e ".items[2].metadata.annotations[\"dlk.dev/model-sha256\"] == \"$WSHA\"" dry.json &&
	uid=$(api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r .metadata.uid) &&
	jq -e ".items[2].spec.template.metadata.annotations[\"dlk.dev/model-revision\"] == \"$uid\"" dry.json &&
	jq -e ".items[2].spec.template.spec.containers[0].readinessProbe.httpGet.path == \"/v2/health/ready\"" dry.json &&
	jq -e ".items[2].spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds == 5" dry.json &&
	jq -e ".items[2].spec.template.spec.terminationGracePeriodSeconds == 35" dry.json &&
	jq -e ".items[2].spec.replicas == 3 and .items[3].spec.minReplicas == 3 and .items[3].spec.maxReplicas == 6" dry.json &&
	cat gate.err &&
	grep -q "^model .blobs. from job blobs$" gate.err &&
	grep -q "test accuracy [0-9.]*% on 256 samples" gate.err &&
	grep -q "^  north .*0: " gate.err && grep -q "passes the gate" gate.err
'

test_expect_success '--dry-run prints YAML that parses back to the same objects' '
	dlk $S serve blobs --dry-run -q -o json >dry.json &&
	dlk $S serve blobs --dry-run -q >dry.yaml &&
	python3 -c "import sys, json, yaml; print(json.dumps(list(yaml.safe_load_all(open(\"dry.yaml\")))))" >y.json &&
	jq -S ".items" dry.json >a && jq -S . y.json >b && diff -u a b
'

test_expect_success 'the gate refuses below the minimum accuracy: exit 9, nothing applied' '
	: >"$APISERVER_LOG" &&
	test_exit_code 9 dlk $S serve blobs --min-accuracy 0.999 >out 2>err &&
	cat err && grep -q "error: refusing to deploy .blobs.: its test accuracy [0-9.]*% is below the minimum 99.90%" err &&
	grep -q "hint: .*--force deploys it anyway" err &&
	! grep -q "\"PATCH\"" "$APISERVER_LOG"
'

test_expect_success 'the gate refuses a class whose recall is below serving.min_class_recall' '
	test_exit_code 9 dlk $S serve blobs --set serving.min_class_recall=0.999 2>err &&
	grep -q "refusing to deploy .blobs.: class recall below the minimum 99.90%: north" err
'

test_expect_success '--report writes the model page with the gate decision first' '
	test_exit_code 9 dlk $S serve blobs --min-accuracy 0.999 --report refused.html 2>err &&
	grep -q "^report: refused.html$" err &&
	grep -q "id=\"verdict\"><strong>refused" refused.html && grep -q "below the minimum 99.90%" refused.html &&
	dlk $S serve blobs --dry-run -q --report ok.html >/dev/null &&
	grep -q "id=\"verdict\"><strong>promoted" ok.html
'

test_expect_success '--force deploys what the gate refuses, with a warning' '
	dlk $S serve blobs --min-accuracy 0.999 --force --dry-run -q >/dev/null 2>err &&
	grep -q "warning: deploying .blobs. although its test accuracy" err
'

test_expect_success 'deploying applies what --dry-run prints, in order, and --wait waits for the rollout' '
	dlk $S serve blobs --dry-run -q -o json >dry.json &&
	: >"$APISERVER_LOG" &&
	dlk $S serve blobs --wait >out 2>err &&
	cat out err &&
	grep -q "model .blobs. deployed to namespace .default. (3 replicas): http://blobs-serving.default:8080/v2/models/blobs" out &&
	grep -q "rolled out: 3/3 replicas ready" err &&
	jq -r "select(.method == \"PATCH\") | .path" "$APISERVER_LOG" >order &&
	test "$(wc -l <order)" = 5 && head -n 1 order | grep -q /configmaps/blobs-serving &&
	grep -q "/apis/apps/v1/namespaces/default/deployments/blobs-serving" order &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving >dep.json &&
	jq -S ".items[2].spec" dry.json >want.spec && jq -S ".spec | del(.template.spec.restartPolicy)" dep.json >got.spec &&
	diff -u want.spec got.spec &&
	jq -e ".status.readyReplicas == 3" dep.json
'

test_expect_success 'dlk status lists the served model beside the training jobs' '
	dlk status >out && cat out &&
	grep -q "^NAME .*STATE" out && grep -q "^blobs .*Succeeded" out &&
	grep -q "^SERVED *READY *MODEL *ACCURACY *CANARY *STATUS$" out &&
	grep -q "^blobs *3/3 *$(echo $WSHA | cut -c1-12) *[0-9.]*% *-$" out &&
	dlk status -o json >s.json &&
	jq -e ".served[0] | .name == \"blobs\" and .ready == 3 and .desired == 3 and .modelSha256 == \"$WSHA\" and .canary == null and .rollout == \"Complete\"" s.json &&
	jq -e ".jobs | map(.name) | index(\"blobs\") != null" s.json
'

test_expect_success 'dlk logs NAME shows the served model pods, tagged with their names' '
	dlk logs --served blobs >out && cat out &&
	test "$(grep -c "^\[blobs-serving-[a-z0-9]*-[a-z0-9]*\] ready: 1 model on port 8080$" out)" = 3
'

test_expect_success 'a canary of 25% is one replica beside the three stable ones' '
	dlk $S serve blobs --canary 25 --wait >out 2>err && cat out err &&
	grep -q "canary: 1 replica beside 3 stable: 25% of the traffic (asked 25%)" err &&
	grep -q "canary of .blobs. deployed" out && grep -q "dlk serve blobs --promote" out &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving-canary >c.json &&
	jq -e ".spec.replicas == 1 and .spec.selector.matchLabels[\"dlk.dev/track\"] == \"canary\" and .metadata.annotations[\"dlk.dev/canary-percent\"] == \"25\"" c.json &&
	jq -e ".spec.template.spec.volumes[] | select(.name == \"spec\") | .configMap.name == \"blobs-serving-canary\"" c.json &&
	api /api/v1/namespaces/default/services/blobs-serving >svc.json &&
	jq -e ".spec.selector == {\"dlk.dev/serve\": \"blobs\"}" svc.json &&
	dlk status >st && cat st && grep -q "^blobs *3/3 .* 25% 1/1 " st &&
	dlk status blobs >one && cat one && grep -q "^state: *Succeeded" one &&
	grep -q "^served: *blobs (namespace default), Service blobs-serving$" one &&
	grep -q "^stable: *3/3 ready, model $(echo $WSHA | cut -c1-12) from job blobs, test accuracy [0-9.]*%$" one &&
	grep -q "^canary: *1/1 ready, model .* 25% of the traffic$" one &&
	test "$(grep -c "^blobs-serving-[a-z0-9-]* *stable *Running *yes *0" one)" = 3 &&
	grep -q "^blobs-serving-canary-[a-z0-9-]* *canary *Running *yes" one &&
	dlk $S serve blobs --dry-run -q 2>err >/dev/null && grep -q "warning: a canary of .blobs. runs beside the model deployed now; finish it" err &&
	dlk status -o json | jq -e ".served[0].canary.percent == 25 and .served[0].canary.ready == 1"
'

test_expect_success '--rollback removes the canary; the stable track is untouched' '
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving | jq -r .metadata.resourceVersion >rv1 &&
	dlk serve blobs --rollback >out && cat out && grep -q "rolled back .blobs." out &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving-canary >gone.json; jq -e ".code == 404" gone.json &&
	api /api/v1/namespaces/default/configmaps/blobs-serving-canary | jq -e ".code == 404" &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving | jq -e ".status.readyReplicas == 3" &&
	test_exit_code 6 dlk serve blobs --rollback 2>err && grep -q "has no canary" err
'

test_expect_success '--promote makes the canary model the stable one, then removes the canary' '
	python3 -m http.server 0 --bind 127.0.0.1 --directory "$P" >http.out 2>&1 &
	h=$! &&
	wait_until 10 grep -q "port" http.out; port=$(sed -n "s/.*port \([0-9]*\).*/\1/p" http.out) &&
	sha=$(sha256sum "$P/blobs.dlk" | cut -d" " -f1) &&
	dlk $S serve blobs --canary 10 --model "http://127.0.0.1:$port/blobs.dlk" --sha256 "$sha" --wait >out 2>err; r=$?
	kill $h; wait $h 2>/dev/null
	cat out err && test $r = 0 &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving-canary >c.json &&
	jq -e ".spec.template.spec.containers[0].command | index(\"blobs=http://127.0.0.1:$port/blobs.dlk\") != null" c.json &&
	jq -e ".spec.template.spec.containers[0].command | index(\"$sha\") != null" c.json &&
	dlk serve blobs --promote --wait >out 2>err && cat out err &&
	grep -q "promoted .blobs.: model $(echo $WSHA | cut -c1-12) serves all the traffic" out &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving >s.json &&
	jq -e ".spec.template.spec.containers[0].command | index(\"blobs=http://127.0.0.1:$port/blobs.dlk\") != null" s.json &&
	jq -e ".spec.selector.matchLabels[\"dlk.dev/track\"] == \"stable\" and .metadata.labels[\"dlk.dev/track\"] == \"stable\"" s.json &&
	jq -e ".metadata.annotations[\"dlk.dev/model-source\"] == \"http://127.0.0.1:$port/blobs.dlk\"" s.json &&
	jq -e ".spec.template.spec.volumes[] | select(.name == \"spec\") | .configMap.name == \"blobs-serving\"" s.json &&
	jq -e ".status.readyReplicas == 3 and .status.updatedReplicas == 3" s.json &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving-canary | jq -e ".code == 404"
'

test_expect_success '--wait fails naming the pod and the reason when the server keeps crashing' '
	test_exit_code 1 dlk $S serve crashy --wait >out 2>err && cat err &&
	grep -q "error: the rollout of .crashy. (stable) failed: pod .crashy-serving-[a-z0-9]*-[a-z0-9]*.: CrashLoopBackOff: the server exited with code 3 (Error)" err &&
	grep -q "hint: see what it printed: .dlk logs crashy." err &&
	dlk logs --served crashy | grep -q "bad bundle" &&
	dlk delete --job crashy >out && grep -q "deleted job .crashy." out && ! grep -q served out &&
	dlk __complete logs cr >c && grep -qx crashy c &&
	dlk status crashy >one && cat one && grep -q "^rollout: *failed, pod crashy-serving-.*: CrashLoopBackOff: the server exited with code 3" one &&
	dlk status -o json crashy | jq -e ".tracks[0].rollout == \"Failed\" and (.pods | length) == 3" &&
	dlk logs crashy | grep -q "bad bundle"
'

test_expect_success '--wait names an image that cannot be pulled; --timeout gives up with exit 7' '
	test_exit_code 1 dlk $S serve nopull --wait 2>err && cat err &&
	grep -q "pod .nopull-serving-[a-z0-9]*-[a-z0-9]*.: ImagePullBackOff: Back-off pulling image" err &&
	dlk status >st && cat st && grep -q "^nopull .*ImagePullBackOff" st &&
	dlk $S serve blobs --set serving.replicas=4 >/dev/null 2>&1 &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving | jq -e ".spec.replicas == 3" &&
	api /apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/blobs-serving | jq -e ".spec.minReplicas == 4" &&
	dlk delete --served nopull >/dev/null &&
	test_exit_code 7 dlk $S serve stuck --timeout 2s >out 2>err && cat err &&
	grep -q "error: .stuck. (stable) did not roll out within 2s (0/3 replicas ready, 3/3 updated)" err &&
	grep -q "hint: the rollout goes on" err &&
	dlk delete --served stuck >/dev/null
'

test_expect_success 'a pod fetches a model from a URL and checks its pin before it loads it' '
	python3 -m http.server 0 --bind 127.0.0.1 --directory "$P" >http.out 2>&1 &
	h=$! &&
	wait_until 10 grep -q "port" http.out; port=$(sed -n "s/.*port \([0-9]*\).*/\1/p" http.out) &&
	sha=$(sha256sum "$P/blobs.dlk" | cut -d" " -f1) &&
	mkdir cache && cd cache &&
	test_exit_code 3 "$DLK" serve --local --port 0 "blobs=http://127.0.0.1:$port/blobs.dlk" --sha256 $WSHA 2>bad.err &&
	grep -q "sha256 mismatch" bad.err && ! grep -q "^ready:" bad.err &&
	{ "$DLK" serve --local --port 0 "blobs=http://127.0.0.1:$port/blobs.dlk" --sha256 $sha 2>good.err & s=$!; } &&
	wait_until 20 grep -q "^ready:" good.err; r=$?
	kill $s 2>/dev/null; wait $s; kill $h; wait $h 2>/dev/null
	cat good.err && test $r = 0 && grep -q "matches its pin" good.err
'

test_expect_success 'errors: a bad percent, no job, a job without a claim, a URL without a pin, no canary base' '
	test_exit_code 2 dlk $S serve blobs --canary 0 2>err && grep -q "canary: expected 1 to 99, not 0" err &&
	test_exit_code 2 dlk $S serve blobs --canary 150 &&
	test_exit_code 2 dlk $S serve blobs --canary ten &&
	test_exit_code 2 dlk $S serve blobs --min-accuracy 2 2>err && grep -q "expected a number in \[0, 1\]" err &&
	test_exit_code 6 dlk $S serve nosuch 2>err && cat err &&
	grep -q "no training job .nosuch. in namespace .default.: no bundle to deploy" err &&
	test_exit_code 6 dlk $S serve noclaim 2>err && grep -q "kept its bundle inside its pod" err &&
	test_exit_code 2 dlk $S serve blobs --model https://example.invalid/b.dlk 2>err && grep -q "needs --sha256" err &&
	test_exit_code 2 dlk $S serve blobs --model file:///x.dlk --sha256 $WSHA 2>err && grep -q "https:// URL" err &&
	test_exit_code 2 dlk $S serve blobs --sha256 XYZ 2>err && grep -q "64 lowercase hex" err &&
	test_exit_code 6 dlk $S serve noclaim --canary 10 --force 2>err && cat err &&
	test_exit_code 2 dlk $S serve a b 2>err && grep -q "one model name" err &&
	test_exit_code 2 dlk $S serve Blobs 2>err && grep -q "cannot name a served model" err &&
	test_exit_code 2 dlk $S serve blobs --port 1 2>err
'

test_expect_success 'dlk delete NAME removes the served model and its pods; --served spares the job' '
	dlk delete --served blobs >out && cat out &&
	grep -q "deleted served model .blobs. (5 objects)" out &&
	api "/api/v1/namespaces/default/pods?labelSelector=dlk.dev/serve%3Dblobs" | jq -e ".items | length == 0" &&
	api /apis/batch/v1/namespaces/default/jobs/blobs | jq -e ".metadata.name == \"blobs\"" &&
	test_exit_code 6 dlk delete --served blobs 2>err && grep -q "served model .blobs. not found" err &&
	dlk delete crashy >out && cat out && ! grep -q "deleted job" out && grep -q "deleted served model .crashy." out &&
	dlk status -o json >s.json && jq .served s.json && jq -e ".served == []" s.json
'

test_expect_success 'serving.gateway on a cluster without the Gateway API: a warning, no route' '
	dlk $S serve blobs --set serving.gateway=public --dry-run -o json >dry.json 2>err &&
	grep -q "warning: serving.gateway is .public. but the cluster does not serve the Gateway API" err &&
	! jq -e ".items[] | select(.kind == \"HTTPRoute\")" dry.json
'

# the same server, serving the Gateway API too: a canary is an HTTPRoute weight
apiserver_or_fail serve-gateway.json
write_kubeconfig "$KUBECONFIG"
make_job blobs blobs-checkpoints || { echo "Bail out! cannot create the training job"; exit 1; }
G="$S --set serving.gateway=infra/public"

test_expect_success 'with serving.gateway and the Gateway API: a Service per track and an HTTPRoute' '
	dlk $G serve blobs --wait >out 2>err || { cat out err; exit 1; } &&
	api /apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/blobs-serving >route.json &&
	jq -e ".spec.parentRefs == [{\"name\": \"public\", \"namespace\": \"infra\"}]" route.json &&
	jq -e ".spec.rules[0].backendRefs == [{\"name\": \"blobs-serving-stable\", \"port\": 8080, \"weight\": 100}]" route.json &&
	api /api/v1/namespaces/default/services/blobs-serving-stable |
		jq -e ".spec.selector == {\"dlk.dev/serve\": \"blobs\", \"dlk.dev/track\": \"stable\"}"
'

test_expect_success 'a canary through the route: weights 80/20, its own Service, a replica' '
	dlk $G serve blobs --canary 20 --wait >out 2>err && cat err &&
	grep -q "canary: 1 replica beside 3 stable; the HTTPRoute sends it 20% of the traffic" err &&
	api /apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/blobs-serving >route.json &&
	jq -e "[.spec.rules[0].backendRefs[] | .name + \" \" + (.weight | tostring)] == [\"blobs-serving-stable 80\", \"blobs-serving-canary 20\"]" route.json &&
	api /api/v1/namespaces/default/services/blobs-serving-canary | jq -e ".spec.selector[\"dlk.dev/track\"] == \"canary\"" &&
	dlk status -o json | jq -e ".served[0].canary.percent == 20"
'

test_expect_success '--promote sends all the traffic to the stable track again, then removes the canary' '
	dlk serve blobs --promote --wait >out 2>err && cat out err &&
	api /apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/blobs-serving >route.json &&
	jq -e ".spec.rules[0].backendRefs == [{\"name\": \"blobs-serving-stable\", \"port\": 8080, \"weight\": 100}]" route.json &&
	api /api/v1/namespaces/default/services/blobs-serving-canary | jq -e ".code == 404" &&
	api /apis/apps/v1/namespaces/default/deployments/blobs-serving-canary | jq -e ".code == 404"
'

test_expect_success '--rollback through the route, and delete removes the route too' '
	dlk $G serve blobs --canary 50 >/dev/null 2>&1 &&
	api /apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/blobs-serving | jq -e ".spec.rules[0].backendRefs | length == 2" &&
	dlk serve blobs --rollback >out && grep -q "rolled back" out &&
	api /apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/blobs-serving >route.json &&
	jq -e ".spec.rules[0].backendRefs | length == 1" route.json &&
	dlk delete --served blobs >out && cat out && grep -q "deleted served model .blobs. (7 objects)" out &&
	api /apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/blobs-serving | jq -e ".code == 404"
'

test_done
