#!/bin/sh
# serving.program on the real test control plane: `dlk serve --wait` deploys the user's own
# server (here Python's http.server, from an image without dlk) instead of a dlk bundle; the real
# Deployment controller rolls it out, the EndpointSlice controller puts its pods behind dlk's
# Service on the server's port, and a client pod gets the server's answer from each pod.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

command -v python3 >/dev/null || { test_missing python3; test_done; }
cluster_up

mkdir -p "$TEST_TMP/p"
cat >"$TEST_TMP/p/dlk.yaml" <<'YAML'
name: echo
data:
  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
program:
  command: [python3, train.py]
serving:
  port: 8080
  replicas: 2
  cpu: "1"
  memory: 512Mi
  program:
    image: stock/python:3
    command: [sh, -c, 'mkdir -p /tmp/www && echo "hello from $POD_NAME ($GREETING)" >/tmp/www/index.html && exec python3 -m http.server 9000 --directory /tmp/www']
    env: {GREETING: hi}
    port: 9000
    ready_path: /index.html
YAML

test_expect_success 'dlk serve --wait rolls out the user'"'"'s server behind dlk'"'"'s Service' '
	dlk serve -f "$TEST_TMP/p/dlk.yaml" --wait >out 2>err; rc=$?
	cat out err && test $rc = 0 &&
	grep -q "server .echo. deployed to namespace .default. (2 replicas)" out &&
	kubectl get deployment echo-serving -o json >dep.json &&
	jq -e ".spec.template.spec.containers[0].image == \"stock/python:3\" and .spec.template.spec.containers[0].ports[0].containerPort == 9000" dep.json &&
	jq -e ".spec.template.spec.containers[0].readinessProbe.httpGet.path == \"/index.html\"" dep.json &&
	test "$(kubectl get deployment echo-serving -o jsonpath={.status.readyReplicas})" = 2 &&
	kubectl get pods -l dlk.dev/serve=echo -o jsonpath="{range .items[*]}{.status.podIP}{\"\n\"}{end}" | sort >ips &&
	test "$(wc -l <ips)" = 2 &&
	wait_until 30 sh -c "kubectl get endpointslices -l kubernetes.io/service-name=echo-serving -o json |
		jq -r \".items[].endpoints[]? | select(.conditions.ready) | .addresses[0]\" | sort >eps && cmp -s eps ips" &&
	kubectl get endpointslices -l kubernetes.io/service-name=echo-serving -o json |
		jq -e ".items[0].ports[0] | .name == \"http\" and .port == 9000"
'

test_expect_success 'a client pod gets the server'"'"'s answer from each pod' '
	for ip in $(cat ips); do
		n=client-$(echo $ip | tr . -)
		cat >client.yaml <<YAML || exit 1
apiVersion: v1
kind: Pod
metadata:
  name: $n
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: debian
    command: ["sh", "-c", "curl -sSf http://$ip:9000/"]
YAML
		kubectl apply -f client.yaml >/dev/null &&
		wait_until 60 sh -c "kubectl get pod $n -o jsonpath={.status.phase} | grep -Eq \"Succeeded|Failed\"" &&
		kubectl logs $n >"resp-$ip" && cat "resp-$ip" &&
		grep -q "^hello from echo-serving-[a-z0-9-]* (hi)$" "resp-$ip" || exit 1
	done
'

test_done
