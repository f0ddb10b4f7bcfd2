# Shell helpers for tests that need an S3-compatible server: the Versity S3 Gateway that
# `.ci/deps test` builds (.ci/deps.d/versitygw), on loopback, over a directory of $TEST_TMP, with
# its S3 access log. Source after tests/lib.sh, then call start_s3 at the top level of the script
# (not inside a case: the EXIT trap that stops the server is set here):
#   . "$TEST_ROOT/tests/s3/lib.sh"
#   start_s3 || { echo "cannot start the S3 server"; exit 1; }
# It sets and exports AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL,
# creates the bucket "data", and sets S3_ROOT (the bucket directories), S3_LOG (the access log:
# one line per request, with the operation, e.g. s3_PutObject, s3_UploadPart).
S3_VERSION=1.8.0
S3_BIN=$TEST_ROOT/.deps/versitygw-$S3_VERSION/bin/versitygw
S3_PID=
S3_DIR=$TEST_TMP/s3
S3_ROOT=$S3_DIR/root
S3_LOG=$S3_DIR/access.log

stop_s3() {
	if [ -n "$S3_PID" ]; then
		kill "$S3_PID" 2>/dev/null
		wait "$S3_PID" 2>/dev/null
		S3_PID=
	fi
}
trap 'stop_s3; test_cleanup' EXIT
trap 'exit 130' INT TERM

# A port nothing listens on now (the server could lose it to another process: start_s3 retries).
_free_port() {
	node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

start_s3() {
	[ -x "$S3_BIN" ] || { echo "error: $S3_BIN is missing: run '.ci/deps test'" >&2; return 1; }
	mkdir -p "$S3_ROOT/data" "$S3_DIR/meta"
	export AWS_ACCESS_KEY_ID=AKIDLKTEST AWS_SECRET_ACCESS_KEY=dlk-test-secret-key AWS_REGION=us-east-1
	unset AWS_SESSION_TOKEN AWS_DEFAULT_REGION AWS_ENDPOINT_URL_S3
	for _try in 1 2 3; do
		_port=$(_free_port) || return 1
		"$S3_BIN" --port "127.0.0.1:$_port" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
			--region us-east-1 --access-log "$S3_LOG" posix --sidecar "$S3_DIR/meta" "$S3_ROOT" \
			>"$S3_DIR/server.log" 2>&1 &
		S3_PID=$!
		export AWS_ENDPOINT_URL=http://127.0.0.1:$_port
		_i=0
		while [ $_i -lt 100 ]; do
			if curl -s -o /dev/null "$AWS_ENDPOINT_URL/" 2>/dev/null; then
				return 0
			fi
			kill -0 "$S3_PID" 2>/dev/null || break
			sleep 0.1
			_i=$((_i + 1))
		done
		stop_s3
	done
	cat "$S3_DIR/server.log" >&2
	return 1
}

# s3_ops OP: how many requests of operation OP (PutObject, GetObject, UploadPart...) the access
# log shows so far.
s3_ops() {
	grep -c " s3_$1 " "$S3_LOG" 2>/dev/null || true
}

# s3_in_cluster: the same bucket directory served in the test cluster (tests/cluster/lib.sh first):
# a pod "s3" and its headless Service (the pod runner has no kube-proxy: the name resolves to the
# pod), and a Secret "s3-creds" with the AWS_* variables that reach it from a pod.
s3_in_cluster() {
	kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: s3, labels: {app: s3}}
spec:
  containers:
  - name: s3
    image: versitygw
    command: ["/opt/s3/$(basename "$S3_BIN")", "--port", ":7070", "--access", "$AWS_ACCESS_KEY_ID", "--secret", "$AWS_SECRET_ACCESS_KEY",
              "--region", "us-east-1", "posix", "--sidecar", "$S3_DIR/meta", "$S3_ROOT"]
    volumeMounts: [{name: s3, mountPath: "$S3_DIR"}, {name: bin, mountPath: /opt/s3, readOnly: true}]
  volumes: [{name: s3, hostPath: {path: "$S3_DIR"}}, {name: bin, hostPath: {path: "$(dirname "$S3_BIN")"}}]
---
apiVersion: v1
kind: Service
metadata: {name: s3}
spec:
  clusterIP: None
  selector: {app: s3}
  ports: [{port: 7070}]
---
apiVersion: v1
kind: Secret
metadata: {name: s3-creds}
stringData:
  AWS_ACCESS_KEY_ID: "$AWS_ACCESS_KEY_ID"
  AWS_SECRET_ACCESS_KEY: "$AWS_SECRET_ACCESS_KEY"
  AWS_REGION: us-east-1
  AWS_ENDPOINT_URL: http://s3.default.svc.cluster.local:7070
YAML
}
