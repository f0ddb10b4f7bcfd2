#!/bin/sh
# What goes wrong, against the real control plane: a job the real scheduler cannot place (and
# places once a node fits), a worker stopped mid-run that the real podFailurePolicy restarts and
# that resumes from its checkpoint, a configuration error that fails the job at once, a rank
# retried after its peer completed (which says at once that the gang cannot form again), and the
# states of all of them as kubectl and dlk see them.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

dlk init -q "$TEST_TMP/fashion" >/dev/null
PROJ=$TEST_TMP/fashion/dlk.yaml
set -- -f "$PROJ" --set training.epochs=1 --set training.threads=1 --set resources.memory=1Gi
ARGS="$*"

test_expect_success 'a job asking for more GPUs than any node has shows the scheduler'"'"'s reason' '
	dlk train $ARGS --set name=big --set resources.gpus=12 >out &&
	unschedulable() { dlk status big >status.out 2>&1 && grep -q Insufficient status.out; } &&
	wait_until 60 unschedulable &&
	cat status.out &&
	grep -q "^state: *Pending" status.out &&
	grep -q "^reason: *rank 0 unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu" status.out &&
	test_exit_code 7 dlk train $ARGS --set name=big2 --set resources.gpus=12 --timeout 5s 2>err &&
	cat err && grep -q "Pending, 0/1 workers ready: rank 0 unschedulable: 0/3 nodes are available: .*Insufficient nvidia.com/gpu" err &&
	dlk delete big2 >/dev/null
'

test_expect_success 'a GPU node with enough GPUs, added later, lets it run' '
	"$TEST_ROOT/tests/cluster/add-node" "$CLUSTER" gpu-big --gpus 16 >/dev/null &&
	kubectl wait --for=condition=Ready node/gpu-big --timeout=60s &&
	kubectl wait --for=condition=Complete job/big --timeout=180s &&
	dlk status big >out && cat out &&
	grep -q "^state: *Succeeded" out && grep -q "^0 *big-0-[a-z0-9]* *gpu-big *Succeeded" out
'

PV=$TEST_TMP/pv
hostpath_pv resume "$PV" resume-checkpoints

test_expect_success 'a worker stopped mid-run exits 75; podFailurePolicy restarts it and the job resumes from its checkpoint' '
	kubectl get pods -l batch.kubernetes.io/job-name=resume --watch -o jsonpath="{.metadata.name} {.status.phase} {.status.containerStatuses[0].state.terminated.exitCode}{\"\n\"}" >watch.log &
	w=$!
	dlk train $ARGS --set name=resume --set resources.workers=2 --set training.epochs=2 \
		--set training.checkpoint.every=50 --set storage.size=1Gi --wait >out 2>err &
	t=$!
	first=""
	started() { first=$(pod_of resume 0) && test -n "$first" && kubectl logs "$first" 2>/dev/null | grep -q "step 1[0-9][0-9]/235"; } &&
	wait_until 120 started || exit 1
	kubectl logs -f "$first" >first.log &
	l=$!
	kubectl delete pod "$first" --wait=false &&
	wait $t; rc=$?; wait $l; kill $w; cat out err; test $rc = 0 &&
	grep -q "job .resume. succeeded" err &&
	cat watch.log && grep -q "^$first Failed 75$" watch.log &&
	grep -q "training stopped by SIGTERM after [0-9]* steps; checkpoint written" first.log &&
	again=$(pod_of resume 0) && test "$again" != "$first" &&
	kubectl logs "$again" >log && cat log &&
	grep -q "resuming run [0-9a-f]* from checkpoint ./checkpoints/.dlk/checkpoints/resume/[0-9a-f-]*/step-" log &&
	test "$(kubectl get job resume -o jsonpath="{.status.conditions[?(@.type==\"Complete\")].status}")" = True &&
	test "$(kubectl get job resume -o jsonpath={.status.failed})" = 2
'

dlk init -q --templates "$TEST_TMP/broken" >/dev/null
# rank 1 of this project's job is started with an option dlk does not know: a usage error (2)
sed -i 's|command: \["dlk", "train", "--worker", "-f", "/etc/dlk/dlk.yaml"\]|command: ["sh", "-c", "if [ \\"$RANK\\" = 1 ]; then exec dlk train --worker --no-such-option; fi; exec dlk train --worker -f /etc/dlk/dlk.yaml"]|' \
	"$TEST_TMP/broken/templates/_jobspec.yaml"

test_expect_success 'a worker exiting 2 fails the job at once, and --wait names the rank' '
	grep -q "no-such-option" "$TEST_TMP/broken/templates/_jobspec.yaml" &&
	test_exit_code 1 dlk train -f "$TEST_TMP/broken/dlk.yaml" --set name=broken --set resources.workers=2 \
		--set training.epochs=1 --set resources.memory=1Gi --wait >out 2>err &&
	cat out err &&
	grep -q "job .broken. failed: rank 1 exited with code 2" err &&
	kubectl wait --for=condition=Failed job/broken --timeout=60s &&
	kubectl get job broken -o jsonpath="{.status.conditions[?(@.type==\"Failed\")].reason} {.status.conditions[?(@.type==\"Failed\")].message}" >reason &&
	cat reason && grep -q "^PodFailurePolicy Container worker for pod default/broken-1-[a-z0-9]* failed with exit code 2 matching FailJob rule at index 1$" reason
'

# rank 0 fails after the training, writing its bundle (a directory stands where the file goes),
# when rank 1 has completed: its retry cannot form the gang again and says so at once (with the
# first attempt's cause) instead of waiting out the rendezvous; the run's record says it too
PV2=$TEST_TMP/pv2
hostpath_pv late "$PV2" late-checkpoints
mkdir -p "$PV2/late.dlk"

test_expect_success 'a rank retried after its peer completed fails at once: the gang cannot form again' '
	start=$(date +%s)
	test_exit_code 1 dlk train $ARGS --set name=late --set resources.workers=2 \
		--set resources.backoff_limit_per_index=1 --set storage.size=1Gi --wait >out 2>err &&
	cat out err && took=$(($(date +%s) - start)) && echo "$took s" && test $took -lt 240 &&
	grep -q "rank 0 exited with code 1 (Error): cannot rename .*late.dlk.: Is a directory; waiting for its retry (1 of 1)" err &&
	grep -q "job .late. failed: rank 0 (pod late-0-[a-z0-9]*) failed: restartable (exit 75): 1 of the other 1 ranks have already completed (the Job.s completedIndexes: 1), so the gang cannot form again and rank 0 cannot resume; its earlier attempt failed: cannot rename .*: Is a directory$" err &&
	dlk status late --history -o json >h.json && jq -c ".runs[0].run.failure" h.json &&
	jq -e ".runs[0].run.outcome == \"failed\" and (.runs[0].run.failure.message | test(\"cannot form again.*Is a directory\"))" h.json
'

test_expect_success 'kubectl and dlk status -o json agree on every job'"'"'s state' '
	dlk train $ARGS --set name=waiting --set resources.gpus=1 --set resources.gpu_product=NVIDIA-B200 >/dev/null &&
	wait_until 60 sh -c "kubectl get events --field-selector reason=FailedScheduling -o name | grep -q ." &&
	dlk status -o json >dlk.json && kubectl get jobs -o json >kubectl.json &&
	jq -r ".jobs[] | .name + \" \" + .state" dlk.json | sort >dlk.states &&
	jq -r ".items[] | select(.metadata.labels[\"dlk.dev/job\"] != null) | .metadata.name + \" \" +
		(if any(.status.conditions[]?; .type == \"Complete\" and .status == \"True\") then \"Succeeded\"
		 elif any(.status.conditions[]?; .type == \"Failed\" and .status == \"True\") then \"Failed\"
		 elif (.status.active // 0) > 0 and (.status.ready // 0) > 0 then \"Running\"
		 else \"Pending\" end)" kubectl.json | sort >kubectl.states &&
	cat kubectl.states && diff -u dlk.states kubectl.states &&
	grep -q "^big Succeeded$" dlk.states && grep -q "^resume Succeeded$" dlk.states &&
	grep -q "^broken Failed$" dlk.states && grep -q "^waiting Pending$" dlk.states &&
	while read -r name state; do
		test "$(dlk status "$name" -o json | jq -r .state)" = "$state" || exit 1
	done <dlk.states
'

test_done
