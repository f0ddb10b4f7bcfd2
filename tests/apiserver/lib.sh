# Shell helpers for tests that talk to the test API server. Source after tests/lib.sh:
#   . "$TEST_ROOT/tests/apiserver/lib.sh"
#   start_apiserver basic.json || test_missing 'node'
# or, for a script that runs dlk's cluster commands: apiserver_project dlk-cli.json
# The server is killed when the script exits (the EXIT trap also removes $TEST_TMP).
APISERVER_PID=
APISERVER_URL=
APISERVER_LOG="$TEST_TMP/apiserver-requests.log"
APISERVER_CERTS="$TEST_TMP/certs"

stop_apiserver() {
	if [ -n "$APISERVER_PID" ]; then
		kill "$APISERVER_PID" 2>/dev/null
		wait "$APISERVER_PID" 2>/dev/null
		APISERVER_PID=
	fi
}
trap 'stop_apiserver; test_cleanup' EXIT
trap 'exit 130' INT TERM

# start_apiserver SCENARIO: starts the server, sets APISERVER_URL; fails when node or openssl
# is missing or the server does not come up. Call it at the top level of a script, never inside
# a test case: a case runs in a subshell, where the EXIT trap that stops the server is not set.
start_apiserver() {
	command -v node >/dev/null 2>&1 && command -v openssl >/dev/null 2>&1 || return 1
	[ -d "$APISERVER_CERTS" ] || sh "$TEST_ROOT/tests/apiserver/gen-certs.sh" "$APISERVER_CERTS" || return 1
	stop_apiserver
	: >"$TEST_TMP/apiserver.url"
	node "$TEST_ROOT/tests/apiserver/server.js" --certs "$APISERVER_CERTS" --scenario "$1" \
		--log "$APISERVER_LOG" >"$TEST_TMP/apiserver.url" 2>"$TEST_TMP/apiserver.err" &
	APISERVER_PID=$!
	i=0
	while [ ! -s "$TEST_TMP/apiserver.url" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	APISERVER_URL=$(head -n 1 "$TEST_TMP/apiserver.url")
	[ -n "$APISERVER_URL" ]
}

# write_kubeconfig FILE [USER-YAML]: a kubeconfig for the running server (token auth by default).
write_kubeconfig() {
	mkdir -p "$(dirname "$1")"
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $APISERVER_URL
    certificate-authority: $APISERVER_CERTS/ca.crt
users:
- name: tester
  user:
    ${2:-token: test-token}
contexts:
- name: test
  context: {cluster: test, user: tester, namespace: default}
current-context: test
KC
}

# apiserver_or_fail SCENARIO: start_apiserver, or fail the whole script when it cannot run.
apiserver_or_fail() {
	start_apiserver "$1" || test_missing 'the test API server starts (node and openssl)'
}

# apiserver_project SCENARIO: the server (or a skipped script), $KUBECONFIG pointing at it, and
# a project from `dlk init` in $PROJ.
apiserver_project() {
	apiserver_or_fail "$1"
	write_kubeconfig "$KUBECONFIG"
	dlk init -q "$TEST_TMP/proj" >/dev/null
	PROJ=$TEST_TMP/proj/dlk.yaml
}

# api PATH [CURL-ARGS...]: a request to the test server as the test user, with curl (no kubectl).
api() {
	_path=$1
	shift
	curl -sS --cacert "$APISERVER_CERTS/ca.crt" -H "Authorization: Bearer test-token" "$@" "$APISERVER_URL$_path"
}
