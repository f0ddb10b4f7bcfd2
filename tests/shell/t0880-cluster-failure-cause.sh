#!/bin/sh
# A failure's cause against the real control plane: the failing worker's termination message
# (the file the Job's template names, which the node reads into the pod's status) and the Job's
# annotation dlk.dev/failure, written under the Job's own least-privilege Role, are what `dlk
# train --wait` and `dlk status` name, the annotation still once the pods are gone.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

dlk init -q --templates "$TEST_TMP/p" >/dev/null
# rank 1 of this project's job is given an epoch count the project file refuses: a configuration
# error (3), which the podFailurePolicy fails the job on at once
sed -i 's|command: \["dlk", "train", "--worker", "-f", "/etc/dlk/dlk.yaml"\]|command: ["sh", "-c", "if [ \\"$RANK\\" = 1 ]; then exec dlk train --worker -f /etc/dlk/dlk.yaml --set training.epochs=0; fi; exec dlk train --worker -f /etc/dlk/dlk.yaml"]|' \
	"$TEST_TMP/p/templates/_jobspec.yaml"

test_expect_success 'dlk train --wait names the rank, pod, exit class and message of the cause' '
	grep -q "training.epochs=0" "$TEST_TMP/p/templates/_jobspec.yaml" &&
	test_exit_code 1 dlk train -f "$TEST_TMP/p/dlk.yaml" --set name=cause --set resources.workers=2 \
		--set training.epochs=1 --set training.threads=1 --set resources.memory=1Gi --wait >out 2>err &&
	cat out err &&
	grep -q "job .cause. failed: rank 1 (pod cause-1-[a-z0-9]*) failed: config (exit 3): .*training.epochs" err
'

test_expect_success 'the pod'"'"'s termination message and the Job'"'"'s annotation hold the cause' '
	pod=$(pod_of cause 1) && test -n "$pod" &&
	kubectl get pod "$pod" -o jsonpath="{.status.containerStatuses[0].state.terminated.message}" >msg.json &&
	cat msg.json && echo &&
	jq -e ".rank == 1 and .pod == \"$pod\" and .class == \"config\" and .exitCode == 3 and (.message | test(\"training.epochs\"))" msg.json &&
	kubectl get job cause -o jsonpath="{.metadata.annotations.dlk\.dev/failure}" >ann.json &&
	jq -e ".rank == 1 and .class == \"config\"" ann.json
'

test_expect_success 'dlk status reads the cause from the Job once the pods are gone' '
	kubectl delete pods -l batch.kubernetes.io/job-name=cause --wait=true >/dev/null &&
	test -z "$(pod_of cause 1)" &&
	dlk status cause >out && cat out &&
	grep -q "^failure: *rank 1 (pod cause-1-[a-z0-9]*) failed: config (exit 3): .*training.epochs" out &&
	dlk status cause -o json | jq -e ".failure.rank == 1 and .failure.class == \"config\""
'

test_done
