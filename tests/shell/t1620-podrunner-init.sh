#!/bin/sh
# The test cluster's pod runner runs init containers as a kubelet does: in order, each to
# completion before the next and before the app containers; a native sidecar (an init container
# with restartPolicy Always) started in its turn, running beside the app container and stopped
# after it ends; a failed init container fails a restartPolicy Never pod before any app container
# starts, and is run again under OnFailure; initContainerStatuses and the Initialized condition
# as a kubelet reports them.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

phase() { test "$(kubectl get pod "$1" -o jsonpath='{.status.phase}')" = "$2"; }
field() { kubectl get pod "$1" -o jsonpath="$2"; }

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: inits}
spec:
  restartPolicy: Never
  volumes: [{name: shared, emptyDir: {}}]
  initContainers:
  - name: first
    image: busybox
    command: [sh, -c, 'echo first >>/shared/order; sleep 1; echo first-done >>/shared/order']
    volumeMounts: [{name: shared, mountPath: /shared}]
  - name: side
    image: busybox
    restartPolicy: Always
    command: [sh, -c, 'trap "echo side-stopped >>/shared/order; exit 0" TERM; echo side >>/shared/order; while :; do sleep 0.1; done']
    volumeMounts: [{name: shared, mountPath: /shared}]
  - name: second
    image: busybox
    command: [sh, -c, 'sleep 0.5; echo second >>/shared/order']
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'echo main >>/shared/order; sleep 1; echo main-done >>/shared/order']
    volumeMounts: [{name: shared, mountPath: /shared}]
YAML

test_expect_success 'init containers run in order, each to completion, then the app container' '
	wait_until 60 phase inits Succeeded &&
	cat "$(pod_dir inits)/volumes/shared/order" >order &&
	cat order &&
	printf "first\nfirst-done\nside\nsecond\nmain\nmain-done\nside-stopped\n" >want &&
	diff -u want order
'

test_expect_success 'initContainerStatuses and the Initialized condition as a kubelet reports them' '
	field inits "{range .status.initContainerStatuses[*]}{.name} {.state.terminated.reason} {.state.terminated.exitCode} {.ready}{\"\n\"}{end}" >init.st &&
	cat init.st &&
	printf "first Completed 0 true\nside Completed 0 false\nsecond Completed 0 true\n" >want &&
	diff -u want init.st &&
	test "$(field inits "{.status.conditions[?(@.type==\"Initialized\")].status}")" = True &&
	test "$(field inits "{.status.containerStatuses[0].state.terminated.exitCode}")" = 0
'

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: badinit}
spec:
  restartPolicy: Never
  initContainers:
  - name: bad
    image: busybox
    command: [sh, -c, 'echo cannot set up >&2; exit 3']
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'echo should not run; exit 0']
YAML

test_expect_success 'a failed init container fails a restartPolicy Never pod; the app container never starts' '
	wait_until 60 phase badinit Failed &&
	test "$(field badinit "{.status.initContainerStatuses[0].state.terminated.exitCode}")" = 3 &&
	test "$(field badinit "{.status.conditions[?(@.type==\"Initialized\")].status}")" = False &&
	test "$(field badinit "{.status.conditions[?(@.type==\"Initialized\")].reason}")" = ContainersNotInitialized &&
	test "$(field badinit "{.status.containerStatuses[0].state.waiting.reason}")" = PodInitializing &&
	kubectl logs badinit -c bad >bad.log 2>&1 && grep -q "cannot set up" bad.log
'

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: retryinit}
spec:
  restartPolicy: OnFailure
  volumes: [{name: shared, emptyDir: {}}]
  initContainers:
  - name: flaky
    image: busybox
    command: [sh, -c, 'if [ -e /shared/tried ]; then exit 0; fi; touch /shared/tried; exit 1']
    volumeMounts: [{name: shared, mountPath: /shared}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'exit 0']
YAML

test_expect_success 'under OnFailure a failed init container runs again, then the app container' '
	wait_until 60 phase retryinit Succeeded &&
	test "$(field retryinit "{.status.initContainerStatuses[0].restartCount}")" = 1 &&
	test "$(field retryinit "{.status.initContainerStatuses[0].state.terminated.exitCode}")" = 0 &&
	test "$(field retryinit "{.status.initContainerStatuses[0].lastState.terminated.exitCode}")" = 1
'

kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: side
    image: busybox
    restartPolicy: Always
    command: [sh, -c, 'trap "" TERM; while :; do sleep 0.1; done']
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'exit 0']
YAML

test_expect_success 'a sidecar that ignores SIGTERM is killed after the grace period; the pod succeeds' '
	{ wait_until 60 phase stubborn Succeeded || { kubectl get pod stubborn -o yaml; false; }; } &&
	field stubborn "{.status.initContainerStatuses[0].state}" && echo &&
	test "$(field stubborn "{.status.initContainerStatuses[0].state.terminated.exitCode}")" = 137
'

test_done
