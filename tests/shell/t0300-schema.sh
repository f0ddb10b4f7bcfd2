#!/bin/sh
# The objects dlk renders pass the official Kubernetes schemas and the stricter checks of
# tests/schema/validate.mjs (unknown fields, names, labels, images, Indexed Job rules), and
# that validator really rejects what it should.
. "$(dirname "$0")/../lib.sh"

RENDER_TEST="$TEST_ROOT/${BUILD:-build}/tests/unit/test_render_train"
JSON="$TEST_TMP/json"

validate() { node "$SCHEMA/validate.mjs" "$@"; }

# mutate IN OUT 'JavaScript changing o (the parsed JSON array)'
mutate() {
	node -e 'const fs = require("fs"); const o = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
		(new Function("o", process.argv[3]))(o); fs.writeFileSync(process.argv[2], JSON.stringify(o));' "$1" "$2" "$3"
}

# validate_rejects FILE PATTERN: validation fails (exit 1) and says PATTERN
validate_rejects() {
	validate "$1" >out 2>&1
	rc=$?
	cat out
	[ "$rc" = 1 ] || { echo "exit $rc, wanted 1"; return 1; }
	grep_q "$2" out
}

schema_ready
test_expect_success 'schema validator dependencies are installed' '
	test -d "$SCHEMA/node_modules/kubernetes-models" && test -d "$SCHEMA/node_modules/yaml"
'

test_expect_success 'render_train writes the objects of four specs' '
	test -x "$RENDER_TEST" || { echo "build the unit tests first (make test-unit)"; exit 1; } &&
	mkdir -p "$JSON" &&
	DLK_RENDER_JSON_DIR="$JSON" "$RENDER_TEST" >unit.log 2>&1 || { grep -a "^not ok" unit.log; exit 1; }
	for s in cpu-1 gpu-4 claim cron; do test -s "$JSON/$s.json" || exit 1; done
'

test_expect_success 'one CPU worker: every object is valid' '
	validate "$JSON/cpu-1.json" >out && grep_q "ok: 7 objects" out
'

test_expect_success '4 workers x 8 GPUs, product, queue, tolerations, storage size: valid' '
	validate "$JSON/gpu-4.json" >out && grep_q "ok: 8 objects" out
'

test_expect_success 'existing checkpoint claim: valid' '
	validate "$JSON/claim.json" >out && grep_q "ok: 7 objects" out
'

test_expect_success 'schedule renders a valid CronJob' '
	validate "$JSON/cron.json" >out && grep_q "ok: 7 objects" out && grep_q "\"CronJob\"" "$JSON/cron.json"
'

test_expect_success 'render_serving writes the objects of three served models' '
	DLK_RENDER_JSON_DIR="$JSON" "$TEST_ROOT/${BUILD:-build}/tests/unit/test_render_serving" >unit.log 2>&1 ||
		{ grep -a "^not ok" unit.log; exit 1; }
	for s in cpu gpu canary route; do test -s "$JSON/serve-$s.json" || exit 1; done
'

# (the Gateway API's HTTPRoute has no schema in kubernetes-models; test_render_serving checks it)
test_expect_success 'a served model on the CPU, one on GPUs with an autoscaler, a canary (and its Services with a route): valid' '
	validate "$JSON/serve-cpu.json" >out && grep_q "ok: 3 objects" out &&
	validate "$JSON/serve-gpu.json" >out && grep_q "ok: 5 objects" out &&
	validate "$JSON/serve-canary.json" >out && grep_q "ok: 3 objects" out &&
	test -s "$JSON/serve-route.json" &&
	jq "[.[] | select(.kind != \"HTTPRoute\")]" "$JSON/serve-route.json" >route.json &&
	validate route.json >out && grep_q "ok: 4 objects" out
'

test_expect_success 'serving objects that do not fit together are rejected' '
	mutate "$JSON/serve-gpu.json" bad.json "const d = o.find(x => x.kind === \"Deployment\"); d.spec.template.spec.containers[0].readinessProbe.httpGet.port = \"web\"; d.spec.selector.matchLabels[\"dlk.dev/track\"] = \"canary\"; o.find(x => x.kind === \"PodDisruptionBudget\").spec.selector.matchLabels[\"dlk.dev/serve\"] = \"other\"" &&
	validate_rejects bad.json "readinessProbe/httpGet/port: no container port named .web." &&
	grep_q "the selector does not match the pod template" out &&
	grep_q "PodDisruptionBudget/fashion-serving: /spec/selector: selects the pods of no workload" out &&
	mutate "$JSON/serve-cpu.json" bad.json "const d = o.find(x => x.kind === \"Deployment\"); d.spec.template.spec.terminationGracePeriodSeconds = 3; o.find(x => x.kind === \"Service\").spec.ports[0].targetPort = \"htp\"" &&
	validate_rejects bad.json "the preStop sleep (5 s) does not end before the grace period (3 s)" &&
	grep_q "no selected container has a port named .htp." out &&
	mutate "$JSON/serve-gpu.json" bad.json "o.find(x => x.kind === \"HorizontalPodAutoscaler\").spec.scaleTargetRef.name = \"other\"" &&
	validate_rejects bad.json "no Deployment .other. among the objects"
'

test_expect_success 'objects are read from stdin too' '
	validate <"$JSON/gpu-4.json" >out && grep_q "ok: 8 objects" out
'

test_expect_success 'a misspelled field in a container is rejected' '
	mutate "$JSON/gpu-4.json" bad.json "o[o.length - 1].spec.template.spec.containers[0].imagePullPolicyy = \"Always\"" &&
	validate_rejects bad.json "Job/big-train: /spec/template/spec/containers/0/imagePullPolicyy: unknown field"
'

test_expect_success 'a misspelled top-level spec field is rejected' '
	mutate "$JSON/cpu-1.json" bad.json "o[o.length - 1].spec.paralelism = 1" &&
	validate_rejects bad.json "/spec/paralelism: unknown field"
'

test_expect_success 'a wrong type is rejected by the schema' '
	mutate "$JSON/cpu-1.json" bad.json "o[o.length - 1].spec.completions = \"one\"" &&
	validate_rejects bad.json "/spec/completions: must be integer"
'

test_expect_success 'a name that is not DNS-1123 is rejected' '
	mutate "$JSON/cpu-1.json" bad.json "o[0].metadata.name = \"Bad_Name\"" &&
	validate_rejects bad.json "ConfigMap/Bad_Name: /metadata/name: .Bad_Name. is not a valid name"
'

test_expect_success 'a bad label value and a bad image are rejected' '
	mutate "$JSON/cpu-1.json" bad.json "o[1].metadata.labels.team = \"a b\"; o[o.length - 1].spec.template.spec.containers[0].image = \"Reg/Image::1\"" &&
	validate_rejects bad.json "label value .a b." &&
	grep_q "is not a valid image reference" out
'

test_expect_success 'Indexed Job rules: completions == parallelism, restartPolicy Never' '
	mutate "$JSON/gpu-4.json" bad.json "const j = o[o.length - 1].spec; j.parallelism = 2; j.template.spec.restartPolicy = \"OnFailure\"" &&
	validate_rejects bad.json "completions (4) and parallelism (2) must be equal" &&
	grep_q "backoffLimitPerIndex: requires template.spec.restartPolicy Never" out &&
	grep_q "podFailurePolicy: requires template.spec.restartPolicy Never" out
'

test_expect_success 'a Job whose subdomain has no headless Service is rejected' '
	mutate "$JSON/cpu-1.json" bad.json "const s = o.find(x => x.kind === \"Service\"); delete s.spec.clusterIP; s.spec.publishNotReadyAddresses = false" &&
	validate_rejects bad.json "Service .mnist. is not headless" &&
	grep_q "publishNotReadyAddresses: true" out &&
	mutate "$JSON/cpu-1.json" bad.json "o.splice(o.findIndex(x => x.kind === \"Service\"), 1)" &&
	validate_rejects bad.json "no Service .mnist. among the objects"
'

test_expect_success 'a successPolicy without Indexed completion is rejected' '
	mutate "$JSON/cron.json" bad.json "delete o[o.length - 1].spec.jobTemplate.spec.completionMode" &&
	validate_rejects bad.json "successPolicy: requires completionMode Indexed"
'

test_expect_success 'a CronJob schedule that is not cron is rejected' '
	mutate "$JSON/cron.json" bad.json "o[o.length - 1].spec.schedule = \"every day\"" &&
	validate_rejects bad.json "is not a five-field cron schedule"
'

test_expect_failure_code 'input that is not JSON is a usage error' 2 '
	echo "kind: Job" >bad.yaml && validate bad.yaml
'

test_done
