# Shell-level test helpers in git's style. Source it from a tests/shell/t*.sh script:
#   . "$(dirname "$0")/../lib.sh"
#   test_expect_success 'what the user relies on' '
#       dlk init proj && test -f proj/dlk.yaml
#   '
#   test_done
# Each case runs in a subshell inside its own scratch directory under $TEST_TMP and prints one
# TAP line. $DLK is the binary under test (absolute path); `dlk` is a function calling it.
set -u
TEST_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DLK=${DLK:-$TEST_ROOT/dlk}
TEST_NAME=$(basename "$0" .sh)
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlk-$TEST_NAME.XXXXXX")
test_count=0
test_failures=0
test_skipped=0
export NO_COLOR=1 HOME="$TEST_TMP/home" KUBECONFIG="$TEST_TMP/home/.kube/config"
# each test's own runtime directory: the model servers it starts register there (dlk top), not
# beside those of the tests running at the same time
export XDG_RUNTIME_DIR="$TEST_TMP/run"
mkdir -p "$HOME" && mkdir -m 700 -p "$XDG_RUNTIME_DIR"
dlk() { "$DLK" "$@"; }

test_cleanup() { rm -rf "$TEST_TMP"; }
trap test_cleanup EXIT

_run_case() {
	dir="$TEST_TMP/case$test_count"
	mkdir -p "$dir"
	( cd "$dir" && eval "$1" ) >"$TEST_TMP/out" 2>&1
}

test_expect_success() {
	test_count=$((test_count + 1))
	if _run_case "$2"; then
		echo "ok $test_count - $1"
	else
		test_failures=$((test_failures + 1))
		echo "not ok $test_count - $1"
		sed 's/^/#   /' "$TEST_TMP/out" | tail -n 40
	fi
}

test_expect_failure_code() {
	# test_expect_failure_code NAME CODE 'commands; the last one must exit CODE'
	test_count=$((test_count + 1))
	_run_case "$3"
	rc=$?
	if [ "$rc" = "$2" ]; then
		echo "ok $test_count - $1"
	else
		test_failures=$((test_failures + 1))
		echo "not ok $test_count - $1 (exit $rc, wanted $2)"
		sed 's/^/#   /' "$TEST_TMP/out" | tail -n 40
	fi
}

test_skip() {
	test_count=$((test_count + 1))
	test_skipped=$((test_skipped + 1))
	echo "ok $test_count # skip $1"
}

# test_missing WHAT: a component the script needs is missing. `.ci/deps test` (which `make test`
# runs first) installs it, so this is an install failure, never a skip: a failed case naming
# WHAT, then the end of the script.
test_missing() {
	test_count=$((test_count + 1))
	test_failures=$((test_failures + 1))
	echo "not ok $test_count - $1 (run .ci/deps test, which installs it)"
	test_done
	exit 1
}

# long_only WHAT: the script belongs to `make test-long`; without DLK_TEST_LONG=1 it is one skip
# saying what it would do ("set DLK_TEST_LONG=1 (make test-long) to WHAT").
long_only() {
	if [ "${DLK_TEST_LONG:-}" != 1 ]; then
		test_skip "set DLK_TEST_LONG=1 (make test-long) to $1"
		test_done
		exit 0
	fi
}

# fmnist_ready: Fashion-MNIST's four IDX files are in $FM (Debian's dataset-fashion-mnist, which
# .ci/deps installs); else an install failure. Not a case: call it at the top of a script.
FM=/usr/share/datasets/fashion-mnist
fmnist_ready() {
	for f in train-images-idx3 train-labels-idx1 t10k-images-idx3 t10k-labels-idx1; do
		[ -f "$FM/$f-ubyte.gz" ] || test_missing "Fashion-MNIST is installed in $FM (Debian's dataset-fashion-mnist)"
	done
}

# schema_ready: tests/schema's validator can run (`node "$SCHEMA/validate.mjs" FILE`): node and
# its modules, which the first test to need them installs with npm ci. Tests run two at a time
# and npm ci empties node_modules first, so the install and the check are made under one lock.
# Not a case: call it at the top of a script (it ends the script with an install failure).
SCHEMA="$TEST_ROOT/tests/schema"
schema_ready() {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		test_missing 'node and npm are installed'
	fi
	(
		flock 9 || exit 1
		[ -d "$SCHEMA/node_modules/kubernetes-models" ] && [ -d "$SCHEMA/node_modules/yaml" ] && exit 0
		npm ci --prefix "$SCHEMA" --no-audit --no-fund --loglevel=error >"$TEST_TMP/npm.log" 2>&1 ||
			{ sed 's/^/# /' "$TEST_TMP/npm.log"; exit 1; }
	) 9>"$SCHEMA/node_modules.lock" || test_missing "tests/schema's modules (npm ci --prefix tests/schema)"
}

# idx_head SRC N OUT: the first N records of an IDX file (gzip-compressed, as Debian's
# dataset-fashion-mnist ships them), written uncompressed: a subset of Fashion-MNIST.
idx_head() {
	python3 -c '
import gzip, struct, sys
src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = gzip.open(src).read()
magic = struct.unpack(">I", d[:4])[0]
nd = magic & 0xff
dims = list(struct.unpack(">" + "I" * nd, d[4:4 + 4 * nd]))
per = 1
for x in dims[1:]:
    per *= x
dims[0] = n
open(out, "wb").write(struct.pack(">I", magic) + struct.pack(">" + "I" * nd, *dims) + d[4 + 4 * nd:4 + 4 * nd + n * per])
' "$@"
}

# blobs_csv N SEED OUT: N rows of 16 features and a class 0-3 (four Gaussian blobs a small dense
# model separates in a second), drawn from SEED, written as CSV to OUT.
blobs_csv() {
	awk -v n="$1" -v seed="$2" 'BEGIN {
	srand(seed)
	for (i = 0; i < n; i++) {
		c = int(rand() * 4); line = ""
		for (j = 0; j < 16; j++) {
			# Box-Muller: a unit normal around a class- and feature-dependent centre
			u = rand(); v = rand(); if (u < 1e-9) u = 1e-9
			x = sqrt(-2 * log(u)) * cos(6.283185307 * v) + ((c * 7 + j) % 5) * 0.5
			line = line sprintf("%.4f,", x)
		}
		print line c
	}
}' >"$3"
}

# sweep_project DIR NTRAIN NTEST: `dlk init --example sweep DIR`, its data cut to the first NTRAIN
# training and NTEST test images of Fashion-MNIST (files beside dlk.yaml, which names them).
# Bails out when that cannot be done (a test's set-up, not a case).
sweep_project() {
	fm=/usr/share/datasets/fashion-mnist
	dlk init -q --example sweep "$1" >/dev/null || { echo "Bail out! dlk init --example sweep failed"; exit 1; }
	idx_head "$fm/train-images-idx3-ubyte.gz" "$2" "$1/train-images" &&
	idx_head "$fm/train-labels-idx1-ubyte.gz" "$2" "$1/train-labels" &&
	idx_head "$fm/t10k-images-idx3-ubyte.gz" "$3" "$1/test-images" &&
	idx_head "$fm/t10k-labels-idx1-ubyte.gz" "$3" "$1/test-labels" &&
	sed -i "s|file://$fm/train-images-idx3-ubyte.gz|train-images|; s|file://$fm/train-labels-idx1-ubyte.gz|train-labels|;
		s|file://$fm/t10k-images-idx3-ubyte.gz|test-images|; s|file://$fm/t10k-labels-idx1-ubyte.gz|test-labels|" \
		"$1/dlk.yaml" || { echo "Bail out! cannot cut the Fashion-MNIST subset"; exit 1; }
}

# Helpers usable inside cases.
test_must_fail() { "$@"; rc=$?; [ $rc -ne 0 ] && [ $rc -lt 128 ]; }
test_exit_code() { want=$1; shift; "$@"; rc=$?; [ "$rc" = "$want" ] || { echo "exit $rc, wanted $want" >&2; return 1; }; }
grep_q() { grep -q -- "$@" || { echo "no match for '$1' in ${2:-stdin}:" >&2; cat "${2:-/dev/null}" >&2; return 1; }; }

test_done() {
	echo "1..$test_count"
	[ "$test_failures" = 0 ]
}

# wait_for_glob PATTERN [TENTHS]: waits (20 s, or TENTHS tenths of a second) until a path
# matching the shell pattern exists (a run's checkpoints sit in a directory named by its id).

# blobs_project DIR [SEED]: a small project of two separable blobs (1024 training rows, 200 test
# rows, a CSV each) that trains in a second with checkpoints every 4 steps, for the tests of runs,
# their history and their lock.
blobs_project() {
	mkdir -p "$1" &&
	awk -v seed="${2:-3}" 'BEGIN { srand(seed); for (i = 0; i < 1024; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$1/train.csv" &&
	head -n 200 "$1/train.csv" >"$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 8}
    - relu
    - dense: {units: 2}
training: {epochs: 4, batch_size: 32, threads: 1, checkpoint: {every: 4, keep: 2}}
EOT
}

# serve_local LOG ARGS...: starts `dlk serve --local --port 0 ARGS...` in the background, its log
# in LOG (removed first: a new server truncates it only once it runs), waits until it is ready,
# else bails out showing the log; sets SRV (its pid), PORT and URL
serve_local() {
	_log=$1
	shift
	rm -f "$_log"
	"$DLK" serve --local --port 0 "$@" 2>"$_log" &
	SRV=$!
	_i=0
	until grep -q "^ready:" "$_log" 2>/dev/null; do
		_i=$((_i + 1))
		if [ $_i -gt 600 ] || ! kill -0 $SRV 2>/dev/null; then echo "Bail out! dlk serve did not start"; cat "$_log"; exit 1; fi
		sleep 0.05
	done
	PORT=$(sed -n 's/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$_log")
	URL=http://127.0.0.1:$PORT
}

wait_for_glob() {
	_i=0
	while ! ls -d $1 >/dev/null 2>&1 && [ $_i -lt "${2:-200}" ]; do sleep 0.1; _i=$((_i + 1)); done
	ls -d $1 >/dev/null 2>&1
}
