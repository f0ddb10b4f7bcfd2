#!/bin/sh
# A stock framework image (program.image other than dlk's) on the real test control plane: the
# pod's init container, from dlk's image, places a self-contained dlk (the program, the shared
# objects it loaded, its loader) in an emptyDir, and the worker's command is that dlk as the
# supervisor. The program's container has no dlk on its PATH (its PATH leaves out the
# directory where the pod runner's "image" keeps dlk), yet the program's progress makes the run's
# record and a fatal exit code its failure cause.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

project() { # NAME MODE
	mkdir -p "$TEST_TMP/$1" && cat >"$TEST_TMP/$1/dlk.yaml" <<YAML
name: $1
data:
  format: idx
  train:
    images: file:///usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
    labels: file:///usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz
program:
  image: stock/python:3
  command: [sh, -c, 'if command -v dlk >/dev/null; then echo "dlk on PATH"; exit 4; fi; echo "no dlk on PATH \$PATH"; echo "DLK-PROGRESS {\"step\": 5, \"loss\": 0.5}"; if [ "\$MODE" = fail ]; then echo "RuntimeError: out of patience" >&2; exit 3; fi; echo "DLK-PROGRESS {\"event\": \"done\", \"loss\": 0.125}"']
  env: {PATH: /usr/bin:/bin, MODE: $2}
  exit_codes: {fail: [3, 4]}
resources: {workers: 1, cpu: "1", memory: 1Gi}
YAML
}
project good ok
project bad fail

test_expect_success 'the supervisor placed by the init container runs the program and records what it reported' '
	dlk train -f "$TEST_TMP/good/dlk.yaml" --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc"; test $rc = 0 &&
	pod=$(pod_of good 0) &&
	kubectl get pod "$pod" -o json >pod.json &&
	jq -e ".spec.initContainers[0].name == \"dlk-supervisor\" and .spec.containers[0].command[0] == \"/dlk/dlk\"" pod.json &&
	jq -e ".status.initContainerStatuses[0].state.terminated.exitCode == 0" pod.json &&
	kubectl logs "$pod" -c dlk-supervisor >init.log; cat init.log &&
	grep -q "placed dlk with [0-9]* shared objects in ./dlk." init.log &&
	kubectl logs "$pod" -c worker >worker.log; cat worker.log &&
	grep -q "^no dlk on PATH /usr/bin:/bin$" worker.log &&
	dlk status good --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].metrics.train_loss == 0.125" h.json
'

test_expect_success 'its fatal exit code is the failure cause, in the status and the record' '
	dlk train -f "$TEST_TMP/bad/dlk.yaml" --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc"; test $rc != 0 &&
	grep -q "job .bad. failed: rank 0 (pod bad-0-[a-z0-9]*) failed: fatal (exit 3): RuntimeError: out of patience$" train.err &&
	dlk status bad --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.failure == {rank: 0, exit_code: 3, class: \"fatal\", message: \"RuntimeError: out of patience\"}" h.json
'

test_done
