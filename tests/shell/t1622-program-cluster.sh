#!/bin/sh
# The user's own PyTorch program (`dlk init --example pytorch`) on the real test control plane:
# `dlk train` renders its pods (the code shipped as a ConfigMap named by its digest, mounted
# where the program runs), the supervisor in each pod starts it with torchrun's variables, the
# two ranks meet through the headless Service's names and train with DDP (gloo) on a subset of
# Fashion-MNIST; progress shows in `dlk status`, rank 0 records the run with the code's digest,
# and `dlk logs --run` reads the ranks' output after the pods are gone; a fatal exit code fails
# the Job naming the rank; a rank retried after its peer completed says at once that the gang
# cannot form again; a worker stopped mid-run is restarted and the gang resumes; `dlk scale`
# from 2 to 3 restarts the program at 3 workers, which resumes from its checkpoint; the JAX example's
# 2 processes all-reduce through jax.distributed. The pod runner runs the
# host's file system as the image, so the frameworks' Python stands in for the PyTorch image's.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
test -x "$PY" || test_missing "the frameworks venv (.ci/deps.d/frameworks) is installed"

# the pods' /tmp is their own: the venv is mounted where a framework image keeps its Python,
# wherever this checkout is
cluster_up --mount "$(readlink -f "$TEST_ROOT/.deps/frameworks"):/opt/frameworks"
PODPY=/opt/frameworks/bin/python

PV=$TEST_TMP/pv
hostpath_pv fm "$PV" fm-checkpoints
dlk init --example pytorch "$TEST_TMP/fm" >/dev/null
PROJ=$TEST_TMP/fm/dlk.yaml
# the frameworks' Python (the pods' "image" is this machine's root), a small subset, 2 workers
sed -i "s|command: \[python3, train.py\]|command: [\"$PODPY\", train.py]|; s|args: \[--epochs, \"2\"\]|args: [--epochs, \"2\", --train-samples, \"2000\", --test-samples, \"500\"]|" "$PROJ"
grep -q "train-samples" "$PROJ" || { echo "the example's command did not change"; exit 1; }
ARGS="-f $PROJ --set storage.size=1Gi --set resources.memory=1Gi --set resources.cpu=1"

test_expect_success 'dlk train --wait runs the PyTorch program on 2 workers to the end' '
	dlk train $ARGS --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc"; test $rc = 0 &&
	grep -q "job .fm. succeeded" train.err
'

test_expect_success 'the code went as a ConfigMap named by its digest, and the run records that digest' '
	want=$(kubectl get configmap -l dlk.dev/job=fm -o json |
		jq -r ".items[] | select(.metadata.name | startswith(\"fm-code-\")) | .metadata.annotations[\"dlk.dev/code-sha256\"]") &&
	test -n "$want" &&
	dlk status fm --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.outcome == \"succeeded\"" h.json &&
	test "$(jq -r ".runs[0].run.code_sha256" h.json)" = "$want"
'

test_expect_success 'dlk status shows the job, and the run'"'"'s record what the program reported' '
	dlk status fm >st.out 2>&1; cat st.out &&
	grep -q "^state: *Succeeded" st.out && grep -q "^run: .* succeeded" st.out &&
	dlk status fm --history -o json >h.json && jq -c ".runs[0].metrics" h.json &&
	jq -e ".runs[0].metrics.test_samples == 500 and .runs[0].metrics.test_accuracy > 0.5" h.json &&
	jq -e "(.runs[0].metrics.confusion_matrix | length) == 10 and (.runs[0].metrics.train_loss | type) == \"number\"" h.json &&
	kubectl get job fm -o json | jq -r ".metadata.annotations[\"dlk.dev/metrics\"]" >doc.json && jq -c . doc.json &&
	test "$(jq -c .metrics.test_samples doc.json)" = "$(jq -c .runs[0].metrics.test_samples h.json)" &&
	test "$(jq -c .metrics.test_accuracy doc.json)" = "$(jq -c .runs[0].metrics.test_accuracy h.json)"
'

test_expect_success 'dlk logs --run reads both ranks after the pods are gone' '
	uid=$(kubectl get job fm -o jsonpath={.metadata.uid}) &&
	dlk delete fm --yes >/dev/null &&
	wait_until 30 sh -c "! kubectl get pods -l dlk.dev/job=fm -o name | grep -q ." &&
	test_exit_code 6 dlk logs fm 2>err &&
	ls "$PV/dlk-logs/fm/logs" >archived && cat archived &&
	grep -q "^${uid}_rank-0_fm-0-" archived && grep -q "^${uid}_rank-1_fm-1-" archived &&
	dlk logs fm --run "$uid" --from "$PV/dlk-logs/fm" >logs.out 2>logs.err; cat logs.err logs.out &&
	grep -q "^\[rank 0\].* final loss [0-9.]*$" logs.out
'

# a program whose rank 1 exits with a code its project declares fatal
program_project bad
cat >>"$TEST_TMP/bad/dlk.yaml" <<'YAML'
program:
  command: [sh, -c, 'if [ "$DLK_NODE_RANK" = 1 ]; then echo "ValueError: rank 1 cannot go on" >&2; exit 3; fi; exec sleep 60']
  exit_codes: {fail: [3]}
resources: {workers: 2, cpu: "1", memory: 1Gi}
YAML

test_expect_success 'an exit code declared fatal fails the job at once, naming the rank' '
	dlk train -f "$TEST_TMP/bad/dlk.yaml" --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc"; test $rc != 0 &&
	grep -q "job .bad. failed: rank 1 (pod bad-1-[a-z0-9]*) failed: fatal (exit 3): ValueError: rank 1 cannot go on$" train.err &&
	wait_until 90 sh -c "kubectl get job bad -o json | jq -e \"[.status.conditions[]? | select(.type == \\\"Failed\\\" and .status == \\\"True\\\" and .reason == \\\"PodFailurePolicy\\\")] | length == 1\" >/dev/null" &&
	dlk status bad >st.out 2>&1; cat st.out &&
	grep -q "^state: *Failed" st.out && grep -Eq "^1 .*Failed .* 3 " st.out &&
	grep -q "^failure: *rank 1 " st.out
'

# a program whose rank 0 fails after rank 1 has completed: its retry cannot meet rank 1 again
# (its pod is done and its name no longer published), and says so at once instead of waiting
# for the name; with one retry allowed, the Job fails within seconds and the record says why
PV4=$TEST_TMP/pv4
hostpath_pv late "$PV4" late-checkpoints
program_project late
cat >>"$TEST_TMP/late/dlk.yaml" <<'YAML'
program:
  command: [sh, -c, 'd=$DLK_CHECKPOINT_DIR; if [ "$DLK_NODE_RANK" = 1 ]; then until [ -e $d/started ]; do sleep 0.2; done; touch $d/done1; exit 0; fi; touch $d/started; until [ -e $d/done1 ]; do sleep 0.2; done; sleep 3; echo "RuntimeError: rank 0 failed at the end" >&2; exit 1']
resources: {workers: 2, cpu: "1", memory: 1Gi, backoff_limit_per_index: 1}
storage: {size: 1Gi}
YAML

test_expect_success 'a rank that fails after its peers completed: its retry says the gang cannot form again' '
	start=$(date +%s)
	dlk train -f "$TEST_TMP/late/dlk.yaml" --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc after $(($(date +%s) - start)) s"; test $rc != 0 &&
	grep -q "rank 0 exited with code 1 (Error): RuntimeError: rank 0 failed at the end; waiting for its retry (1 of 1)" train.err &&
	grep -q "job .late. failed: rank 0 (pod late-0-[a-z0-9]*) failed: restartable (exit 75): 1 of the other 1 ranks have already completed (the Job.s completedIndexes: 1), so the gang cannot form again and rank 0 cannot resume; its earlier attempt failed: RuntimeError: rank 0 failed at the end$" train.err &&
	test $(($(date +%s) - start)) -lt 240 &&
	dlk status late --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.outcome == \"failed\"" h.json &&
	jq -r ".runs[0].run.failure.message // .runs[0].run.error // empty" h.json | grep -q "cannot form again"
'

# a longer run of the same program, so that a worker can be stopped after its first checkpoint
PV2=$TEST_TMP/pv2
hostpath_pv again "$PV2" again-checkpoints

test_expect_success 'a worker stopped mid-run is restarted and the gang resumes from the program'"'"'s checkpoint' '
	dlk train $ARGS --set name=again --set program.args=[--epochs,8,--train-samples,6000,--test-samples,500] --timeout 420s \
		--wait >out 2>err &
	t=$!
	wait_until 150 sh -c "find \"$PV2\" -name checkpoint.pt | grep -q ." || { kill $t; exit 1; }
	victim=$(pod_of again 1) && test -n "$victim" &&
	kubectl delete pod "$victim" --wait=false >/dev/null &&
	wait $t; rc=$?
	cat out err; echo "exit $rc"; test $rc = 0 &&
	uid=$(kubectl get job again -o jsonpath={.metadata.uid}) &&
	dlk logs again --run "$uid" --from "$PV2/dlk-logs/again" >logs.out 2>&1; grep -v DLK-PROGRESS logs.out &&
	grep -q "resumed from epoch [1-7]" logs.out &&
	dlk status again --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].run.restarts >= 1" h.json
'

# dlk scale of the program, 2 -> 3: a program does not change size while it runs, so dlk scale
# restarts its pods at the new size (evicted: no failure counted) and it resumes from its own
# checkpoint; the third rank trains, the record lists both sizes
PV3=$TEST_TMP/pv3
hostpath_pv grow "$PV3" grow-checkpoints

test_expect_success 'dlk scale 2 -> 3 restarts the program at 3 workers, resuming from its checkpoint' '
	dlk train $ARGS --set name=grow --set program.args=[--epochs,10,--train-samples,3000,--test-samples,300] --timeout 420s \
		--wait >out 2>err &
	t=$!
	wait_until 150 sh -c "find \"$PV3\" -name checkpoint.pt | grep -q ." || { kill $t; exit 1; }
	dlk scale grow --workers 3 --wait --timeout 240s -o json >scale.json 2>scale.err; src=$?
	wait $t; rc=$?
	cat scale.err scale.json out err; echo "scale $src, train $rc"; test $src = 0 && test $rc = 0 &&
	jq -e ".from == 2 and .workers == 3 and .how == \"restarted\" and .running == true" scale.json &&
	grep -q "restarting its 2 pods at 3 workers" scale.err &&
	uid=$(kubectl get job grow -o jsonpath={.metadata.uid}) &&
	dlk logs grow --run "$uid" --from "$PV3/dlk-logs/grow" >logs.out 2>&1; grep -v DLK-PROGRESS logs.out &&
	grep -q "^\[rank 0\] the job has 3 workers now (the pod was made for 2): training with 3$" logs.out &&
	grep -q "^\[rank 0\] resumed from epoch [1-9]$" logs.out &&
	ls "$PV3/dlk-logs/grow/logs" | grep -q "^${uid}_rank-2_grow-2-" &&
	dlk status grow --history -o json >h.json && jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].run.worlds[0] == 2 and .runs[0].run.worlds[-1] == 3" h.json
'

# the JAX example (jax.distributed) as 2 pods: the coordinator address dlk renders is rank 0's
# name, which the supervisor waits to resolve; one all-reduce over the processes
dlk init --example jax "$TEST_TMP/jx" >/dev/null
sed -i "s|command: \[python3, train.py\]|command: [\"$PODPY\", train.py]|" "$TEST_TMP/jx/dlk.yaml"
grep -q "$PODPY" "$TEST_TMP/jx/dlk.yaml" || { echo "the JAX example's command did not change"; exit 1; }

test_expect_success 'a JAX program of 2 pods all-reduces the label sum through jax.distributed' '
	dlk train -f "$TEST_TMP/jx/dlk.yaml" --set resources.cpu=1 --set resources.memory=1Gi --wait >out 2>err; rc=$?
	cat out err; echo "exit $rc"; test $rc = 0 &&
	want=$("$PY" -c "import gzip; print(sum(gzip.open(\"/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz\").read()[8:]))") &&
	for r in 0 1; do
		kubectl logs "$(pod_of jx $r)" >log$r 2>&1; grep -v DLK-PROGRESS log$r | tail -n 3
		grep -q "rank $r of 2: local sum [0-9]*, all-reduced sum $want, expected $want" log$r || return 1
	done &&
	dlk status jx --history -o json >h.json &&
	jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].metrics.program.label_sum == $want and
		.runs[0].provenance.framework == \"jax\"" h.json
'

test_done
