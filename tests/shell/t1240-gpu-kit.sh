#!/bin/sh
# The GPU kit (kit/build.sh, what `make gpu-kit` runs; docs/gpu-kit.md) rehearsed without a GPU:
# built from this build tree, moved to another folder and run in a clean environment (env -i, a
# PATH of /usr/bin:/bin, no build tree), it runs to the end, reports every check as skipped with
# the reason, writes its results and summary, and every carried program finds every library it
# links inside the kit, through the carried dynamic loader. A kit with a library missing fails.
# Part of `make test-gpu` too: on a machine with a driver the no-driver case is skipped, the rest
# still guards the kit.
. "$(dirname "$0")/../lib.sh"
BUILD_DIR=$TEST_ROOT/${BUILD:-build}
[ -f "$BUILD_DIR/kit-cuda/libdlk-cuda.so" ] ||
	test_missing "the CUDA backend '$BUILD_DIR/kit-cuda/libdlk-cuda.so' (the CUDA toolchain; make all builds it)"
command -v xz >/dev/null || test_missing "xz (Debian's xz-utils)"

# A sanitized build's kit is larger (ASan's runtime, programs built at -O1): the upload's limit
# is for `make gpu-kit`, which refuses SANITIZE=1; here the rest is rehearsed with those programs,
# compressed least (--fast: the compression is most of this test's time, and its size is not
# the one that travels).
max=60 how="--max-mib 60"
ldd "$BUILD_DIR/dlk" | grep -q libasan && max=1024 how=--fast
# built in one folder, run from another: nothing may point back at the first
sh "$TEST_ROOT/kit/build.sh" $how "$BUILD_DIR" "$TEST_TMP/built" >"$TEST_TMP/build.out" 2>&1 ||
	{ echo "Bail out! kit/build.sh failed"; cat "$TEST_TMP/build.out"; exit 1; }
mkdir -p "$TEST_TMP/elsewhere" && mv "$TEST_TMP/built" "$TEST_TMP/elsewhere/kit" ||
	{ echo "Bail out! cannot move the kit"; exit 1; }
KIT=$TEST_TMP/elsewhere/kit
mkdir -p "$TEST_TMP/home"
# the kit as a fresh machine runs it: no variable of this one, the system's PATH only
kit_run() { env -i PATH=/usr/bin:/bin HOME="$TEST_TMP/home" "$KIT/run" "$@"; }
have_driver() { [ -e /dev/nvidiactl ] || /sbin/ldconfig -p 2>/dev/null | grep -q "libcuda\.so\.1 "; }

test_expect_success 'the kit says its size and that it fits the upload' '
	grep_q "^gpu kit: .*, [0-9.]* MiB ([0-9]* bytes; at most $max MiB)$" "$TEST_TMP/build.out"
'

test_expect_success 'every carried program finds every library inside the kit, through the carried loader' '
	mkdir -p unpacked && for f in "$KIT"/lib/*; do
		case "$f" in
		*.xz) xz -dc "$f" >unpacked/$(basename "$f" .xz) ;;
		*) cp "$f" unpacked/ ;;
		esac
	done &&
	# the loader lists no shared object with a library missing: this machine'"'"'s cuBLAS stands in
	# for the target'"'"'s, after the kit
	blas=$(ldd "$BUILD_DIR/libdlk-cuda.so" | awk "\$1 == \"libcublas.so.13\" { print \$3 }") && test -n "$blas" &&
	for f in "$KIT"/bin/* unpacked/libdlk-cuda.so; do
		env -i "$PWD/unpacked/ld-linux-x86-64.so.2" --library-path "$PWD/unpacked:$(dirname "$blas")" --list "$f" >list ||
			{ echo "$f:"; cat list; exit 1; }
		grep -q "libc.so.6 => $PWD/unpacked/libc.so.6" list || { echo "$f: not the kit'"'"'s libc:"; cat list; exit 1; }
		# the CUDA libraries are the target machine'"'"'s: found there, never carried
		grep -v -E "^[[:space:]]*(linux-vdso|libcublas(Lt)?\.so|libcuda\.so|libnccl\.so)" list |
			grep "=>" | grep -v "=> $PWD/unpacked/" >outside
		test ! -s outside || { echo "$f:"; cat outside; exit 1; }
		! grep "not found" list || exit 1
	done &&
	! ls "$KIT"/lib | grep -E "^lib(cublas|cublasLt|nccl|cuda)\.so"
'

if have_driver; then
	test_skip 'without a driver, kit/run skips every GPU check with the reason (this machine has a driver)'
else
	test_expect_success 'without a driver, kit/run runs every check to the end and skips each with the reason' '
		(cd "$TEST_TMP/home" && kit_run --out res >"$TEST_TMP/run.out" 2>&1); rc=$?
		cat "$TEST_TMP/run.out" && test $rc = 3 &&
		R=$TEST_TMP/home/res &&
		jq -e "[.checks[].name] == [\"kit\", \"facts\", \"ops\", \"grads\", \"pool\", \"train-mlp\", \"train-cnn\", \"gpt\", \"bench\", \"nccl\"]" $R/results.json &&
		jq -e ".checks[0].status == \"pass\" and ([.checks[1:][] | select(.status != \"skip\")] == [])" $R/results.json &&
		jq -e "[.checks[1:][] | select(.reason | startswith(\"no NVIDIA driver: libcuda.so.1 is not on this machine\") | not)] == []" \
			$R/results.json &&
		jq -e ".gpu_checks_ran == false and .quick == false and .budget_s == 480 and .libraries.driver == null
			and .counts == {pass: 1, skip: 9}" $R/results.json &&
		grep_q "^no GPU check ran: no NVIDIA driver: libcuda.so.1 is not on this machine" $R/summary.txt &&
		grep_q "^train-cnn  skip .*no NVIDIA driver" $R/summary.txt &&
		grep_q "^1 pass, 9 skip$" $R/summary.txt &&
		for c in kit facts ops grads pool train-mlp train-cnn gpt bench nccl; do test -f $R/logs/$c.log || exit 1; done &&
		grep_q "^ok [0-9]* # skip " $R/logs/ops.log
	'

	test_expect_success '--quick leaves the CNN out and says so, under its own budget' '
		(cd "$TEST_TMP/home" && kit_run --quick --out quick >/dev/null 2>&1); test $? = 3 &&
		jq -e ".quick == true and .budget_s == 120" "$TEST_TMP/home/quick/results.json" &&
		jq -e ".checks[] | select(.name == \"train-cnn\") | .reason | startswith(\"not under --quick\")" \
			"$TEST_TMP/home/quick/results.json"
	'
fi

test_expect_success 'a kit that lost a library fails its first check, names the library and still runs to the end' '
	cp -r "$KIT" broken && rm broken/lib/libyaml-0.so.2.xz && k=$PWD/broken &&
	(cd "$TEST_TMP/home" && env -i PATH=/usr/bin:/bin HOME="$TEST_TMP/home" "$k/run" --out broken \
		>"$TEST_TMP/broken.out" 2>&1); rc=$?
	cat "$TEST_TMP/broken.out" && test $rc = 1 &&
	jq -e ".checks[0] | .name == \"kit\" and .status == \"fail\" and (.reason | contains(\"libyaml-0.so.2\"))" \
		"$TEST_TMP/home/broken/results.json" &&
	jq -e "[.checks[].name] | length == 10" "$TEST_TMP/home/broken/results.json" &&
	grep_q "^kit        fail" "$TEST_TMP/home/broken/summary.txt"
'

test_expect_failure_code 'an unknown argument is a usage error' 2 '
	kit_run --fast 2>err || { rc=$?; grep_q "error: unknown argument .--fast." err && exit $rc; }
'

test_done
