#!/bin/sh
# The real control plane of tests/cluster/ and its pod runner: what the other t08xx tests stand
# on. A pod the real scheduler binds runs as a local process with the environment, hostname,
# service-account token, DNS and exit code a kubelet would give it, and its log is read through
# the API server.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

cluster_up

test_expect_success 'the cluster has CPU nodes and a tainted GPU node, all Ready' '
	kubectl get nodes -o jsonpath="{range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\n\"}{end}" >nodes &&
	cat nodes && test "$(grep -c " True$" nodes)" = 3 &&
	test "$(kubectl get node gpu-0 -o jsonpath="{.status.allocatable.nvidia\.com/gpu}")" = 8 &&
	test "$(kubectl get node gpu-0 -o jsonpath="{.metadata.labels.nvidia\.com/gpu\.product}")" = NVIDIA-H100-80GB-HBM3 &&
	test "$(kubectl get node gpu-0 -o jsonpath="{.spec.taints[0].key}")" = nvidia.com/gpu
'

test_expect_success 'the API server and kubectl report the release go.mod pins, as a release build does' '
	want=v$(sed -n "s/^[[:space:]]*k8s.io\/kubernetes v\([0-9.]*\)$/\1/p" "$TEST_ROOT/tests/cluster/go.mod" | head -n 1) &&
	kubectl get --raw /version >version.json && cat version.json &&
	jq -e --arg v "$want" ".gitVersion == \$v and .major == \"1\" and (.minor | startswith(\"36\")) and .gitTreeState == \"clean\"" \
		version.json &&
	kubectl version -o json >both.json && cat both.json &&
	jq -e --arg v "$want" ".clientVersion.gitVersion == \$v and .serverVersion.gitVersion == \$v" both.json &&
	case $want in v1.36.*) ;; *) echo "go.mod pins $want, not 1.36"; exit 1 ;; esac
'

test_expect_success 'nothing the cluster started listens beyond loopback' '
	for f in "$CLUSTER"/pids/*.pid; do
		pid=$(cat "$f") && ls -l /proc/$pid/fd 2>/dev/null | sed -n "s/.*socket:\[\([0-9]*\)\]/\1/p"
	done >inodes &&
	test -s inodes &&
	cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 >sockets &&
	awk "NR == FNR { mine[\$1] = 1; next } (\$10 in mine) && (\$4 == \"0A\" || FILENAME ~ /udp/) { print \$2 }" \
		inodes sockets >listening &&
	cat listening && test -s listening &&
	! grep -v -e "^0100007F:" -e "^00000000000000000000000001000000:" listening
'

cat >"$TEST_TMP/probe.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: probe
  labels: {app: probe}
  annotations: {note: "hello there"}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: debian
    command: ["sh", "-c"]
    args:
    - |
      echo "name=$MY_NAME note=$MY_NOTE ip=$MY_IP host=$(hostname) node=$MY_NODE cpu=$MY_CPU"
      echo "expanded=$(EXPANDED)"
      echo "api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
      sa=/var/run/secrets/kubernetes.io/serviceaccount
      echo "namespace=$(cat $sa/namespace)"
      curl -sS --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" -H "Content-Type: application/json" \
        -X POST -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' \
        https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews | tr -d " \n" | grep -o '"username":"[^"]*"'
      echo "the end" >/dev/termination-log
      exit 3
    env:
    - {name: MY_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: MY_NOTE, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['note']"}}}
    - {name: MY_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: MY_NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: MY_CPU, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
    - {name: EXPANDED, value: "$(MY_NAME)-x"}
    resources:
      limits: {cpu: "2", memory: 1Gi}
YAML

test_expect_success 'a bound pod runs with the downward API, its token and the service address' '
	kubectl apply -f "$TEST_TMP/probe.yaml" &&
	wait_until 60 sh -c "kubectl get pod probe -o jsonpath={.status.phase} | grep -q Failed" &&
	kubectl logs probe >log && cat log &&
	ip=$(kubectl get pod probe -o jsonpath={.status.podIP}) && node=$(kubectl get pod probe -o jsonpath={.spec.nodeName}) &&
	grep -q "^name=probe note=hello there ip=$ip host=probe node=$node cpu=2$" log &&
	case $ip in 10.244.*) ;; *) false ;; esac &&
	grep -q "^expanded=probe-x$" log &&
	grep -q "^api=10.0.0.1:443$" log &&
	grep -q "^namespace=default$" log &&
	grep -q "\"username\":\"system:serviceaccount:default:default\"" log
'

test_expect_success 'the exit code and the termination message reach the container status' '
	kubectl get pod probe -o jsonpath="{.status.containerStatuses[0].state.terminated.exitCode} {.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.message}" >state &&
	cat state && test "$(cat state)" = "3 Error the end"
'

cat >"$TEST_TMP/peers.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: peers}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: peers}
---
apiVersion: v1
kind: Pod
metadata:
  name: peer-a
  labels: {app: peers}
spec:
  hostname: alpha
  subdomain: peers
  restartPolicy: Never
  containers:
  - name: main
    image: debian
    command: ["sh", "-c", "trap 'echo got TERM; exit 75' TERM; echo up; sleep 300 & wait"]
---
apiVersion: v1
kind: Pod
metadata:
  name: peer-b
  labels: {app: peers}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: debian
    command: ["sh", "-c", "until getent hosts alpha.peers; do sleep 0.2; done; getent hosts alpha.peers.default.svc.cluster.local; getent hosts no-such-host.peers || echo no-such-host unknown"]
YAML

test_expect_success 'pods resolve each other by <hostname>.<subdomain> through the headless Service' '
	kubectl apply -f "$TEST_TMP/peers.yaml" &&
	wait_until 60 sh -c "kubectl get pod peer-b -o jsonpath={.status.phase} | grep -q Succeeded" &&
	ip=$(kubectl get pod peer-a -o jsonpath={.status.podIP}) &&
	kubectl logs peer-b >log && cat log &&
	grep -q "^$ip  *alpha.peers.default.svc.cluster.local" log &&
	grep -q "^no-such-host unknown$" log
'

test_expect_success 'logs -f ends when the container does' '
	kubectl logs -f peer-b >log && grep -q "no-such-host unknown" log
'

test_expect_success 'deleting a running pod sends SIGTERM; its exit is reported before the pod goes' '
	kubectl logs -f peer-a >follow.log &
	f=$!
	kubectl get pod peer-a --watch -o jsonpath="{.status.containerStatuses[0].state.terminated.exitCode}{\"\n\"}" >watch.log &
	w=$!
	wait_until 30 grep -q "^up$" follow.log &&
	kubectl delete pod peer-a --timeout=60s ;
	rc=$?; wait $f; kill $w; test $rc = 0 &&
	cat watch.log && grep -q "^75$" watch.log &&
	grep -q "got TERM" follow.log
'

test_done
