#!/bin/sh
# A stock framework image (program.image other than dlk's) on the real test control plane: the
# pod's init container, from dlk's image, places a self-contained dlk (the program, the shared
# objects it loaded, its loader) in an emptyDir, and the worker's command is that dlk as the
# supervisor. The program's container has no dlk on its PATH (its PATH leaves out the
# directory where the pod runner's "image" keeps dlk), yet its progress shows in `dlk status`
# while it runs and makes the run's record, and a fatal exit code is its failure cause.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

# the program of the first job waits for a file of this directory (mounted in every pod) after
# its first report, so that its progress is seen while it runs
CTL=$TEST_TMP/ctl
mkdir -p "$CTL"
cluster_up --mount "$CTL:/ctl"

project() { # NAME MODE
	program_project "$1" && cat >>"$TEST_TMP/$1/dlk.yaml" <<YAML
program:
  image: stock/python:3
  command: [sh, -c, 'if command -v dlk >/dev/null; then echo "dlk on PATH"; exit 4; fi; echo "no dlk on PATH \$PATH"; echo "DLK-PROGRESS {\"step\": 5, \"steps\": 10, \"epoch\": 1, \"epochs\": 2, \"loss\": 0.5}"; i=0; while [ "\$MODE" = ok ] && [ ! -e /ctl/go ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done; if [ "\$MODE" = fail ]; then echo "RuntimeError: out of patience" >&2; exit 3; fi; echo "DLK-PROGRESS {\"event\": \"done\", \"loss\": 0.125}"']
  env: {PATH: /usr/bin:/bin, MODE: $2}
  exit_codes: {fail: [3, 4]}
resources: {workers: 1, cpu: "1", memory: 1Gi}
YAML
}
project good ok
project bad fail

test_expect_success 'the supervisor placed by the init container runs the program; its progress shows while it runs' '
	dlk train -f "$TEST_TMP/good/dlk.yaml" >train.out 2>train.err || { cat train.out train.err; false; } &&
	wait_until 40 sh -c "\"$DLK\" status good >st.out 2>&1 && grep -q \"^progress: *epoch 1/2 step 5/10 loss 0.5$\" st.out" ||
		{ cat st.out; false; } &&
	cat st.out && touch "$CTL/go" &&
	wait_until 40 sh -c "\"$DLK\" status good 2>&1 | grep -q \"^state: *Succeeded\"" &&
	pod=$(pod_of good 0) &&
	kubectl get pod "$pod" -o json >pod.json &&
	jq -e ".spec.initContainers[0].name == \"dlk-supervisor\" and .spec.containers[0].command[0] == \"/dlk/dlk\"" pod.json &&
	jq -e ".status.initContainerStatuses[0].state.terminated.exitCode == 0" pod.json &&
	kubectl logs "$pod" -c dlk-supervisor >init.log; cat init.log &&
	grep -q "placed dlk with [0-9]* shared objects in ./dlk." init.log &&
	kubectl logs "$pod" -c worker >worker.log; cat worker.log &&
	grep -q "^no dlk on PATH /usr/bin:/bin$" worker.log &&
	wait_until 20 sh -c "\"$DLK\" status good --history -o json >h.json && jq -e \".runs[0].run.outcome == \\\"succeeded\\\"\" h.json >/dev/null" &&
	jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].metrics.train_loss == 0.125" h.json
'

test_expect_success 'its fatal exit code is the failure cause, in the status and the record' '
	dlk train -f "$TEST_TMP/bad/dlk.yaml" --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc"; test $rc != 0 &&
	grep -q "job .bad. failed: rank 0 (pod bad-0-[a-z0-9]*) failed: fatal (exit 3): RuntimeError: out of patience$" train.err &&
	dlk status bad --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.failure == {rank: 0, exit_code: 3, class: \"fatal\", message: \"RuntimeError: out of patience\"}" h.json
'

test_done
