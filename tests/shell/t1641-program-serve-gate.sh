#!/bin/sh
# The promotion gate of serving.program against the test API server: `dlk serve` of a project
# that serves the user's own server reads the run document its training program's Job published
# (dlk.dev/metrics) and judges it as it judges a bundle's run: the metrics printed, a minimum
# refused naming the metric (exit 9), serving.gate's rules on the program's own metrics, --force;
# a canary of it gated, promoted and rolled back. Without a training run: no minimum deploys
# ungated and says so; a minimum refuses (exit 9) saying how to go on; --force deploys it.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

apiserver_or_fail serve.json
write_kubeconfig "$KUBECONFIG"

# the training program, run here: its confusion matrix is 85% accurate, it reports an f1 of 0.8;
# its run document is the one its rank 0 publishes on the Job (lib/program/supervise.c)
P=$TEST_TMP/proj
mkdir -p "$P"
cat >"$P/dlk.yaml" <<'EOT'
name: echo
data:
  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
program:
  command: [sh, -c, 'echo "DLK-PROGRESS {\"event\": \"done\", \"metrics\": {\"test_loss\": 0.3, \"f1\": 0.8}, \"confusion\": [[40, 10], [5, 45]]}"']
serving:
  port: 8080
  replicas: 2
  program:
    image: stock/python:3
    command: [python3, -m, http.server, "9000"]
    port: 9000
EOT
(cd "$P" && "$DLK" train --local -q >train.out 2>&1) || { echo "Bail out! the training program failed"; cat "$P/train.out"; exit 1; }
"$DLK" report -f "$P/dlk.yaml" -o json echo | jq -c ".runs[0]" >"$TEST_TMP/run.json" &&
	jq -e ".metrics.test_accuracy == 0.85 and .metrics.program.f1 == 0.8" "$TEST_TMP/run.json" >/dev/null ||
	{ echo "Bail out! no run document of the program"; exit 1; }

# make_job NAME [DOC]: the program's training Job as dlk train makes it, with the run document
# its rank 0 published (none without DOC); it succeeds at once (serve.json)
make_job() {
	jq -n --arg name "$1" --arg doc "${2-}" '{
		apiVersion: "batch/v1", kind: "Job",
		metadata: {name: $name, labels: {"dlk.dev/job": $name},
			annotations: (if $doc == "" then {} else {"dlk.dev/metrics": $doc} end)},
		spec: {template: {spec: {restartPolicy: "Never", containers: [{name: "worker", image: "stock/python:3"}]}}}
	}' >"$TEST_TMP/job-$1.json" &&
	api /apis/batch/v1/namespaces/default/jobs -X POST -H "Content-Type: application/json" \
		--data-binary @"$TEST_TMP/job-$1.json" >/dev/null
}
S="-f $P/dlk.yaml"

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

test_expect_success 'no training job and no minimum: the server deploys ungated, and says so' '
	dlk $S serve --dry-run -o json >dry.json 2>err && cat err &&
	grep -q "^server .echo.: no gate (serving sets no minimum) and there is no training job .echo. in namespace .default." err &&
	jq -e "[.items[].kind] | index(\"Deployment\") != null" dry.json
'

test_expect_success 'no training job and a minimum: refused (exit 9) saying how to go on; --force deploys it' '
	: >"$APISERVER_LOG" &&
	test_exit_code 9 dlk $S serve --min-accuracy 0.8 >out 2>err && cat err &&
	grep -q "^error: refusing to deploy .echo.: serving sets a gate, but there is no training job .echo. in namespace .default. whose run it could judge" err &&
	grep -q "^hint: train it first (.dlk train --wait.;.*or deploy it without the gate: .dlk serve echo --force." err &&
	! grep -q "\"PATCH\"" "$APISERVER_LOG" &&
	dlk $S serve --set serving.gate="[{metric: f1, min: 0.5}]" --force --dry-run -q >/dev/null 2>err && cat err &&
	grep -q "^warning: deploying .echo. without its gate although there is no training job .echo." err
'

test_expect_success 'a training job that published no run document is no run to judge' '
	make_job echo &&
	test_exit_code 9 dlk $S serve --min-accuracy 0.8 2>err && cat err &&
	grep -q "refusing to deploy .echo.: serving sets a gate, but training job .echo. has published no run document" err &&
	api /apis/batch/v1/namespaces/default/jobs/echo -X DELETE >/dev/null &&
	wait_until 10 sh -c "api /apis/batch/v1/namespaces/default/jobs/echo | jq -e \".code == 404\" >/dev/null"
'

test_expect_success 'the program'"'"'s run is judged: its metrics shown, a minimum refused naming the metric' '
	make_job echo "$(cat "$TEST_TMP/run.json")" &&
	test_exit_code 9 dlk $S serve --min-accuracy 0.9 >out 2>err && cat err &&
	grep -q "^model .echo. from job echo$" err && grep -q "test accuracy 85.00% on 100 samples, test loss 0.3000" err &&
	grep -q "error: refusing to deploy .echo.: its test accuracy 85.00% is below the minimum 90.00%" err &&
	test_exit_code 9 dlk $S serve --set serving.gate="[{metric: f1, min: 0.9}]" 2>err; cat err &&
	grep -q "refusing to deploy .echo.: its test f1 0.8000 is below the minimum 0.9" err &&
	test_exit_code 9 dlk $S serve --set serving.gate="[{metric: auc, min: 0.9}]" 2>err; cat err &&
	grep -q "refusing to deploy .echo.: it has no recorded test metric .auc." err &&
	dlk $S serve --min-accuracy 0.9 --force --dry-run -q >/dev/null 2>err; cat err &&
	grep -q "warning: deploying .echo. although its test accuracy 85.00% is below the minimum 90.00% (--force)" err
'

test_expect_success 'passing the gate deploys the server, the job named as its source' '
	dlk $S serve --set serving.gate="[{metric: f1, min: 0.75}]" --min-accuracy 0.8 --wait >out 2>err && cat out err &&
	grep -q "passes the gate (minimum accuracy 80.00%" err && grep -q "passes serving.gate.s 1 rule" err &&
	grep -q "^server .echo. deployed to namespace .default. (2 replicas)" out &&
	api /apis/apps/v1/namespaces/default/deployments/echo-serving >dep.json &&
	jq -e ".metadata.annotations[\"dlk.dev/model-source\"] == \"job echo\" and .spec.template.spec.containers[0].image == \"stock/python:3\"" dep.json &&
	test "$(jq -r ".spec.template.metadata.annotations[\"dlk.dev/model-revision\"]" dep.json)" = "$(api /apis/batch/v1/namespaces/default/jobs/echo | jq -r .metadata.uid)"
'

test_expect_success 'a canary of the server is gated too, then promoted; another rolled back' '
	test_exit_code 9 dlk $S serve --canary 50 --min-accuracy 0.9 2>err; cat err &&
	grep -q "refusing to deploy .echo.: its test accuracy" err &&
	api /apis/apps/v1/namespaces/default/deployments/echo-serving-canary | jq -e ".code == 404" &&
	dlk $S serve --canary 50 --min-accuracy 0.8 --set serving.program.command="[python3, -m, http.server, \"9001\"]" --wait >out 2>err &&
	cat out err && grep -q "canary of .echo. deployed" out &&
	dlk serve echo --promote --wait >out 2>err && cat out err &&
	grep -q "^promoted .echo.: the canary.s server serves all the traffic$" out &&
	api /apis/apps/v1/namespaces/default/deployments/echo-serving >s.json &&
	jq -e ".spec.template.spec.containers[0].command | index(\"9001\") != null" s.json &&
	api /apis/apps/v1/namespaces/default/deployments/echo-serving-canary | jq -e ".code == 404" &&
	dlk $S serve --canary 50 --wait -q >/dev/null 2>&1 &&
	dlk serve echo --rollback >out && grep -q "rolled back .echo." out &&
	api /apis/apps/v1/namespaces/default/deployments/echo-serving-canary | jq -e ".code == 404"
'

test_done
