#!/bin/sh
# Elastic workers against the real control plane: `dlk scale` resizes a running 2-worker job to
# 3 (the real API server accepts completions and parallelism changed together, the real Job
# controller starts the third pod), rank 0 sees it, every rank stops with a checkpoint on the
# claim and exits 76, which the real podFailurePolicy ignores; the replacement pods read the
# Job's size, re-form the gang at 3 and finish from the checkpoint with the same global batch;
# the run's record in the cluster lists both sizes.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

# rank 0 reads the Job's size every second (DLK_RESIZE_POLL, 10 by default), through the user's
# own template override: on a fast machine the whole run takes less than the default period
dlk init -q --templates "$TEST_TMP/fashion" >/dev/null
sed -i "s/^      env:\$/      env:\n      - name: DLK_RESIZE_POLL\n        value: \"1\"/" "$TEST_TMP/fashion/templates/_jobspec.yaml"
grep -q "name: DLK_RESIZE_POLL" "$TEST_TMP/fashion/templates/_jobspec.yaml" || { echo "cannot set DLK_RESIZE_POLL in the template" >&2; exit 1; }
PROJ=$TEST_TMP/fashion/dlk.yaml
PV=$TEST_TMP/pv
hostpath_pv elastic "$PV" elastic-checkpoints

test_expect_success 'a running 2-worker job scaled to 3 re-forms at 3 from its checkpoint and finishes' '
	kubectl get pods -l batch.kubernetes.io/job-name=elastic --watch -o jsonpath="{.metadata.name} {.status.phase} {.status.containerStatuses[0].state.terminated.exitCode}{\"\n\"}" >watch.log &
	w=$!
	dlk train -f "$PROJ" --set name=elastic --set resources.workers=2 --set training.batch_size=96 \
		--set training.epochs=12 --set training.threads=1 --set resources.memory=1Gi \
		--set training.checkpoint.every=50 --set storage.size=1Gi >out 2>err &&
	first=""
	started() { first=$(pod_of elastic 0) && test -n "$first" && kubectl logs "$first" 2>/dev/null | grep -q "^epoch 2/12"; } &&
	wait_until 240 started || { kill $w; exit 1; }
	kubectl logs -f "$first" >first.log &
	l=$!
	dlk scale elastic --workers 3 --wait --timeout 300s -o json >scale.json 2>scale.err; rc=$?; cat scale.err scale.json
	test $rc = 0 || { kill $w $l; cat watch.log; kubectl get job elastic -o yaml; kubectl get pods -o wide; for p in $(kubectl get pods -o name); do echo "== $p"; kubectl logs $p | grep -v " step " | tail -5; done; exit 1; }
	kubectl wait --for=condition=Complete job/elastic --timeout=600s; rc=$?; wait $l; kill $w; test $rc = 0 &&
	jq -e ".from == 2 and .workers == 3 and .running == true" scale.json &&
	test "$(kubectl get job elastic -o jsonpath="{.spec.completions} {.spec.parallelism}")" = "3 3" &&
	cat first.log | grep -v " step " &&
	grep -q "the job was resized to 3 workers: stopped after [0-9]* steps with a checkpoint, to go on at the new size" first.log &&
	cat watch.log && grep -q "^$first Failed 76$" watch.log &&
	again=$(pod_of elastic 0) && test "$again" != "$first" &&
	kubectl logs "$again" >log && grep -v " step " log &&
	grep -q "the job has 3 workers now (the pod was made for 2): training with 3" log &&
	grep -q "resuming run [0-9a-f]* from checkpoint [0-9]* at 3 workers (was 2), batch 64 per worker, global 192$" log &&
	uid=$(kubectl get job elastic -o jsonpath={.metadata.uid}) &&
	dlk status elastic --run "$uid" -o json >rec.json &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [2, 3]" rec.json &&
	jq -e "[.history.events[] | [.event, .world]] == [[\"start\", 2], [\"resume\", 3]]" rec.json &&
	jq -e ".metrics.test_accuracy > 0.7" rec.json
'

test_done
