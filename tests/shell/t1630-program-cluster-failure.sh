#!/bin/sh
# A program's fatal exit code on the real test control plane, without PyTorch: rank 1 of a
# 2-worker program exits with a code its exit_codes declare fatal. The failure the pod publishes
# (termination message, the Job's annotation) names the program's class ("fatal"), not dlk's
# own name of that number ("config"); the run's record in the cluster ends "failed" with the
# rank and the program's last line (rank 0, stopped by the Job's podFailurePolicy, reads the
# cause from the Job); the archived log lines carry their rank once. A rank that runs out of
# retries with an exit code that is not fatal fails the Job at once (maxFailedIndexes: 0), and
# the rank still running stops with it rather than waiting for a peer that never comes.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

PV=$TEST_TMP/pv
hostpath_pv bad "$PV" bad-checkpoints
program_project bad
cat >>"$TEST_TMP/bad/dlk.yaml" <<'YAML'
program:
  command: [sh, -c, 'echo "hello from node $DLK_NODE_RANK"; if [ "$DLK_NODE_RANK" = 1 ]; then echo "ValueError: rank 1 cannot go on" >&2; exit 3; fi; exec sleep 60']
  exit_codes: {fail: [3]}
resources: {workers: 2, cpu: "1", memory: 1Gi}
storage: {size: 1Gi}
YAML

test_expect_success 'a fatal exit code fails the job; the failure is the program'"'"'s, not dlk'"'"'s config' '
	dlk train -f "$TEST_TMP/bad/dlk.yaml" --wait >train.out 2>train.err; rc=$?
	cat train.out train.err; echo "exit $rc"; test $rc != 0 &&
	dlk status bad >st.out 2>&1; cat st.out &&
	grep -q "^failure: *rank 1 (pod bad-1-[a-z0-9]*) failed: fatal (exit 3): ValueError: rank 1 cannot go on$" st.out &&
	! grep -q "config" st.out &&
	kubectl get job bad -o jsonpath="{.metadata.annotations.dlk\.dev/failure}" >ann.json && cat ann.json && echo &&
	jq -e ".class == \"fatal\" and .exitCode == 3 and .rank == 1" ann.json
'

test_expect_success 'the run'"'"'s record ends failed with the rank and its cause' '
	wait_until 45 sh -c "\"$DLK\" status bad --history -o json >h.json 2>/dev/null && jq -e \".runs[0].run.outcome == \\\"failed\\\"\" h.json >/dev/null" ||
		{ jq -c ".runs[0].run" h.json; false; } &&
	jq -c ".runs[0].run" h.json &&
	jq -e ".runs[0].run.failure == {rank: 1, exit_code: 3, class: \"fatal\", message: \"ValueError: rank 1 cannot go on\"}" h.json
'

test_expect_success 'archived log lines carry their rank once' '
	uid=$(kubectl get job bad -o jsonpath={.metadata.uid}) &&
	dlk delete bad --yes >/dev/null &&
	wait_until 30 sh -c "! kubectl get pods -l dlk.dev/job=bad -o name | grep -q ." &&
	dlk logs bad --run "$uid" --from "$PV/dlk-logs/bad" >logs.out 2>logs.err; cat logs.err logs.out &&
	grep -q "^\[rank 1\] ValueError: rank 1 cannot go on$" logs.out &&
	grep -q "^\[rank 1\] hello from node 1$" logs.out &&
	! grep -q "\[rank [0-9]*\] \[rank" logs.out
'

program_project lost
cat >>"$TEST_TMP/lost/dlk.yaml" <<'YAML'
program:
  command: [sh, -c, 'if [ "$DLK_NODE_RANK" = 1 ]; then echo "rank 1 gives up" >&2; exit 42; fi; echo "rank 0 waits"; exec sleep 600']
resources: {workers: 2, cpu: "1", memory: 1Gi, backoff_limit_per_index: 0}
YAML

test_expect_success 'a rank out of retries fails the job at once; rank 0, still running, stops with it' '
	dlk train -f "$TEST_TMP/lost/dlk.yaml" --timeout 120s >lost.out 2>lost.err; rc=$?
	cat lost.out lost.err; echo "exit $rc"; test $rc = 1 &&
	# the controller marks the job to fail at once, stops rank 0, then marks it failed
	failed() { kubectl get job lost -o json >lost.json &&
		jq -e ".status.conditions[] | select(.type == \"Failed\" and .status == \"True\") | .reason == \"MaxFailedIndexesExceeded\"" lost.json; } &&
	wait_until 60 failed || { jq -c .status lost.json; kubectl get pods -l dlk.dev/job=lost; false; } &&
	jq -e ".status.failedIndexes == \"1\" and (.status.succeeded // 0) == 0" lost.json &&
	! kubectl get pods -l dlk.dev/job=lost --field-selector=status.phase=Running -o name | grep -q .
'

test_done
