#!/bin/sh
# pvc:// data stores from a laptop: dlk starts a short-lived pod that mounts the claim and runs
# `dlk data serve`, reaches it through the API server's pod proxy and deletes it. The test API
# server runs the pod's command here (its "claim" is a directory of the test) and proxies to it;
# its request log shows the pod created, proxied to and deleted. A pod that cannot start, a proxy
# the user may not use, and what a worker does (read the mounted claim in place) are covered too.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

export DLK_APISERVER_DLK="$DLK" DLK_APISERVER_PVC_ROOT="$TEST_TMP/claims"
mkdir -p "$TEST_TMP/claims/datasets" "$TEST_TMP/data"
apiserver_or_fail store-pod.json
write_kubeconfig "$KUBECONFIG"
printf 'x,y\n1,2\n' >"$TEST_TMP/data/a.csv"
head -c 20000000 /dev/urandom >"$TEST_TMP/data/big.bin"
STORE=pvc://datasets/team/sets
CLAIM=$TEST_TMP/claims/datasets/team/sets

pods_created() { grep -c '"method":"POST","path":"/api/v1/namespaces/default/pods"' "$APISERVER_LOG" 2>/dev/null || true; }
pods_deleted() { grep -c '"method":"DELETE","path":"/api/v1/namespaces/default/pods/dlk-store-' "$APISERVER_LOG" 2>/dev/null || true; }

test_expect_success 'push through a store pod: the objects land on the claim, the pod is deleted' '
	c=$(pods_created) && d=$(pods_deleted) &&
	dlk data push "$TEST_TMP/data" --to $STORE --tag sets@v1 >out 2>err &&
	id=$(sed -n "s/^sha256://p" out) && [ ${#id} = 64 ] &&
	test -f "$CLAIM/datasets/$id" && test -f "$CLAIM/tags/sets@v1" &&
	cmp "$CLAIM/sha256/$(sha256sum <"$TEST_TMP/data/big.bin" | cut -c1-64)" "$TEST_TMP/data/big.bin" &&
	test "$(pods_created)" = $((c + 1)) && test "$(pods_deleted)" = $((d + 1)) &&
	grep -q "/pods/dlk-store-[0-9a-f]*:8080/proxy/v1/upload/sha256/" "$APISERVER_LOG" &&
	! ls "$CLAIM/.uploads/"*.part 2>/dev/null &&
	echo "$id" >"$TEST_TMP/id"
'

test_expect_success 'the pod is the template: the claim mounted, dlk data serve on it, a token, a deadline' '
	{ api "/api/v1/namespaces/default/pods?watch=1&resourceVersion=1&timeoutSeconds=4" >events & } &&
	sleep 0.5 && dlk data ls --from $STORE >/dev/null && wait &&
	grep "\"ADDED\"" events | head -n 1 | jq .object >pod.json &&
	jq -e ".spec.containers[0].command == [\"dlk\", \"data\", \"serve\", \"/mnt/pvc/datasets/team/sets\",
		\"--listen\", \":8080\", \"--idle\", \"10m\"]" pod.json >/dev/null &&
	jq -e ".spec.volumes[0].persistentVolumeClaim.claimName == \"datasets\" and
		.spec.containers[0].volumeMounts[0].mountPath == \"/mnt/pvc/datasets\" and
		(.spec.containers[0].env[0].value | test(\"^[0-9a-f]{64}$\")) and
		.spec.activeDeadlineSeconds == 3600 and .spec.restartPolicy == \"Never\"" pod.json >/dev/null &&
	grep -q "\"DELETED\"" events
'

test_expect_success 'ls, show and get read the claim through the pod' '
	dlk data ls --from $STORE | grep -q "^sha256:$(cut -c1-12 "$TEST_TMP/id") .*sets@v1" &&
	dlk data show sets@v1 --from $STORE | grep -q " big.bin$" &&
	dlk data get sets@v1 --from $STORE out 2>err &&
	cmp out/big.bin "$TEST_TMP/data/big.bin" && cmp out/a.csv "$TEST_TMP/data/a.csv"
'

test_expect_success 'pushing again sends nothing but the questions' '
	n=$(grep -c "/proxy/v1/upload/" "$APISERVER_LOG" || true) &&
	dlk data push "$TEST_TMP/data" --to $STORE 2>err >/dev/null && grep -q "nothing uploaded" err &&
	test "$(grep -c "/proxy/v1/upload/" "$APISERVER_LOG")" = "$n"
'

test_expect_success 'an upload cut off is continued from what the store staged' '
	mkdir more && head -c 20000000 /dev/urandom >more/c.bin &&
	h=$(sha256sum <more/c.bin | cut -c1-64) &&
	kh=$(printf "sha256/%s" "$h" | sha256sum | cut -c1-16) &&
	mkdir -p "$CLAIM/.uploads" && head -c 10000000 more/c.bin >"$CLAIM/.uploads/$kh-$h.part" &&
	dlk data push more --to $STORE 2>err >/dev/null &&
	grep -q "continued an interrupted upload: 10.0 MB" err &&
	cmp "$CLAIM/sha256/$h" more/c.bin
'

test_expect_success 'a corrupted object on the claim is named' '
	h=$(sha256sum <"$TEST_TMP/data/a.csv" | cut -c1-64) && cp "$CLAIM/sha256/$h" saved &&
	printf "z" >>"$CLAIM/sha256/$h" &&
	test_exit_code 3 dlk data get sets@v1 --from $STORE bad 2>err; rc=$?
	cp saved "$CLAIM/sha256/$h" && test $rc = 0 && grep -q "$STORE/sha256/$h. is corrupted" err
'

test_expect_success 'a corrupted object of the right size: the pod hashes it, the next push replaces it' '
	h=$(sha256sum <"$TEST_TMP/data/a.csv" | cut -c1-64) &&
	printf "X" | dd of="$CLAIM/sha256/$h" bs=1 seek=0 conv=notrunc 2>/dev/null &&
	test_exit_code 3 dlk data get sets@v1 --from $STORE bad2 2>err && grep -q "sha256/$h. is corrupted" err &&
	dlk data push "$TEST_TMP/data" --to $STORE 2>err >/dev/null && grep -q "uploaded 1 " err &&
	grep "/proxy/v1/stat/sha256/$h\"" "$APISERVER_LOG" | grep -q "\"query\":\"?hash=1\"" &&
	cmp "$CLAIM/sha256/$h" "$TEST_TMP/data/a.csv"
'

test_expect_success 'a FIFO on the claim where an object should be exits 3 and hangs nothing' '
	h=$(sha256sum <"$TEST_TMP/data/a.csv" | cut -c1-64) && mv "$CLAIM/sha256/$h" saved2 &&
	mkfifo "$CLAIM/sha256/$h" &&
	test_exit_code 3 timeout 120 "$DLK" data get sets@v1 --from $STORE bad3 2>err; rc=$?
	rm -f "$CLAIM/sha256/$h" && mv saved2 "$CLAIM/sha256/$h" && test $rc = 0 &&
	grep -q "is corrupted: not a regular file" err && ! ls bad3/*.part 2>/dev/null
'

test_expect_success 'a worker reads a pvc:// store in place, on its mounted claim' '
	cat >dlk.yaml <<EOT &&
name: sets
data:
  format: csv
  dataset: sets@v1
  store: $STORE
  train: {source: a.csv}
model:
  input: [1]
  layers: [{dense: {units: 3}}]
training: {epochs: 1, batch_size: 1, threads: 1}
EOT
	dlk train --dry-run >objs.yaml &&
	grep -q "dataset: {id: \"sha256:$(cat "$TEST_TMP/id")\", tag: \"sets@v1\"}" objs.yaml &&
	dlk train --dry-run -o json | jq -e ".items[] | select(.kind == \"Job\") | .spec.template.spec |
		([.volumes[] | select(.persistentVolumeClaim.claimName == \"datasets\")] | length) == 1 and
		([.containers[0].volumeMounts[] | select(.mountPath == \"/mnt/pvc/datasets\" and .readOnly)] | length) == 1" \
		>/dev/null &&
	DLK_PVC_ROOT="$TEST_TMP/claims" JOB_COMPLETION_INDEX=0 WORLD_SIZE=1 RANK=0 \
		dlk train --worker --set data.dataset=sha256:$(cat "$TEST_TMP/id") >out 2>err &&
	grep -q "read in place from $STORE" err
'

# a user who may not use the pod proxy, then a claim that does not exist
stop_apiserver
apiserver_or_fail store-pod-forbidden.json
write_kubeconfig "$KUBECONFIG"

test_expect_success 'no pod proxy for this user: a clear error, and the pod is not left behind' '
	test_exit_code 5 dlk data ls --from $STORE 2>err &&
	grep -q "forbidden" err && grep -q "pods/proxy" err &&
	api "/api/v1/namespaces/default/pods" | jq -e ".items | length == 0" >/dev/null
'

stop_apiserver
apiserver_or_fail store-pod-pending.json
write_kubeconfig "$KUBECONFIG"

test_expect_success 'a pod that cannot start says why, and is deleted' '
	DLK_STORE_POD_TIMEOUT=2 test_exit_code 7 dlk data ls --from $STORE 2>err &&
	grep -q "did not start within 2 s: FailedScheduling: 0/3 nodes are available: persistentvolumeclaim .datasets. not found" err &&
	api "/api/v1/namespaces/default/pods" | jq -e ".items | length == 0" >/dev/null
'

test_done
