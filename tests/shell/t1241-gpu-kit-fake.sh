#!/bin/sh
# The GPU kit's own paths, against a fake NVIDIA driver (a libcuda.so.1 of a few lines that says
# CUDA 13.0 and finds no device, or an old CUDA 12.4) and a fake python3 whose site-packages are
# the CUDA wheels '.ci/deps' installed: kit/run finds the driver where LD_LIBRARY_PATH names it,
# finds cuBLAS, cuBLASLt and NCCL among the Python's nvidia packages, says which and their
# versions, the backend loads them, and the results JSON and the summary say it all; with no
# CUDA libraries anywhere it says so in one line. No GPU needed.
. "$(dirname "$0")/../lib.sh"
BUILD_DIR=$TEST_ROOT/${BUILD:-build}
CC=${CC:-cc}
[ -f "$BUILD_DIR/kit-cuda/libdlk-cuda.so" ] ||
	test_missing "the CUDA backend '$BUILD_DIR/kit-cuda/libdlk-cuda.so' (the CUDA toolchain; make all builds it)"
WHEELS=$(ls -d "$TEST_ROOT"/.deps/cuda-*/ 2>/dev/null | tail -n 1)
[ -n "$WHEELS" ] && [ -e "$WHEELS/nvidia/cu13/lib/libcublas.so.13" ] || test_missing "the CUDA wheels in .deps/cuda-*"
WHEELS=${WHEELS%/}
BLAS_VER=$(ls -d "$WHEELS"/nvidia_cublas-*.dist-info | sed 's/.*nvidia_cublas-\(.*\)\.dist-info/\1/')
NCCL_VER=$(ls -d "$WHEELS"/nvidia_nccl_cu13-*.dist-info | sed 's/.*nvidia_nccl_cu13-\(.*\)\.dist-info/\1/')

sh "$TEST_ROOT/kit/build.sh" --fast "$BUILD_DIR" "$TEST_TMP/kit" >"$TEST_TMP/build.out" 2>&1 ||
	{ echo "Bail out! kit/build.sh failed"; cat "$TEST_TMP/build.out"; exit 1; }
KIT=$TEST_TMP/kit

# the fake driver: what the CUDA runtime asks of libcuda.so.1 before it looks for a device
fake_driver() {
	mkdir -p "$TEST_TMP/drv$1" &&
	printf 'int cuDriverGetVersion(int *v) { *v = %s; return 0; }\nint cuInit(unsigned f) { (void)f; return 100; }\n' \
		"$1" >"$TEST_TMP/drv$1/cuda.c" &&
	$CC -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$TEST_TMP/drv$1/libcuda.so.1" "$TEST_TMP/drv$1/cuda.c"
}
(fake_driver 13000 && fake_driver 12040) || { echo "Bail out! cannot build the fake driver"; exit 1; }
# a python3 without PyTorch whose only site-packages folder is $SITE
mkdir -p "$TEST_TMP/bin"
cat >"$TEST_TMP/bin/python3" <<'EOT'
#!/bin/sh
case "$*" in
*sys.path*) echo "$SITE" ;;
*) echo "ModuleNotFoundError: No module named 'torch'" >&2; exit 1 ;;
esac
EOT
chmod +x "$TEST_TMP/bin/python3"
kit_run() {
	drv=$1 site=$2
	shift 2
	env -i PATH="$TEST_TMP/bin:/usr/bin:/bin" HOME="$TEST_TMP/home" SITE="$site" LD_LIBRARY_PATH="$TEST_TMP/drv$drv" \
		"$KIT/run" "$@"
}

test_expect_success 'the driver, cuBLAS and NCCL of a Python'"'"'s wheels are found and named with their versions' '
	kit_run 13000 "$WHEELS" --out res >out 2>&1; rc=$?
	cat out && test $rc = 3 &&
	jq -e --arg d "$TEST_TMP/drv13000/libcuda.so.1" --arg w "$WHEELS" --arg bv "$BLAS_VER" --arg nv "$NCCL_VER" "
		.libraries.driver == \$d and
		.libraries.cublas.found and .libraries.cublas.version == \$bv and .libraries.cublas.dir == \"\(\$w)/nvidia/cu13/lib\" and
		(.libraries.cublas.source | startswith(\"Python wheels in \")) and
		.libraries.nccl.found and .libraries.nccl.version == \$nv and .libraries.nccl.path == \"\(\$w)/nvidia/nccl/lib/libnccl.so.2\"" \
		res/results.json &&
	grep_q "^cuBLAS/cuBLASLt $BLAS_VER from Python wheels in $WHEELS ($WHEELS/nvidia/cu13/lib)$" res/summary.txt &&
	grep_q "^NCCL $NCCL_VER from Python wheels in $WHEELS ($WHEELS/nvidia/nccl/lib/libnccl.so.2)$" res/summary.txt &&
	grep_q "^driver: $TEST_TMP/drv13000/libcuda.so.1$" res/summary.txt
'

test_expect_success 'the backend loads them: the device facts name the driver'"'"'s CUDA, cuBLAS and NCCL' '
	kit_run 13000 "$WHEELS" --quick --out res >/dev/null 2>&1; test $? = 3 &&
	jq -e "(.checks[] | select(.name == \"facts\")) as \$f | \$f.status == \"skip\" and
		\$f.details.driver_cuda == \"13.0\" and (\$f.details.cublas_loaded | startswith(\"cuBLAS 13.\")) and
		\$f.details.nccl_loaded == \"NCCL $NCCL_VER\" and \$f.details.usable == false" res/results.json &&
	jq -e "[.checks[1:][] | select(.name != \"train-cnn\") | select(.status != \"skip\" or .reason != \"no CUDA device is visible\")] == []" \
		res/results.json &&
	grep_q "^dlk sees: 0 device(s), none, driver CUDA 13.0, cuBLAS 13\.[0-9]*\.[0-9]*, NCCL $NCCL_VER$" res/summary.txt &&
	grep_q "^no GPU check ran: no CUDA device is visible$" res/summary.txt &&
	grep_q "^ops        skip" res/summary.txt
'

test_expect_success 'a driver too old for the backend is the reason every GPU check gives' '
	kit_run 12040 "$WHEELS" --quick --out res >/dev/null 2>&1; test $? = 3 &&
	grep_q "^no GPU check ran: the NVIDIA driver supports CUDA 12.4 but this backend was built with CUDA 13.0" res/summary.txt &&
	jq -e "[.checks[1:][] | select(.name != \"train-cnn\") |
		select(.status != \"skip\" or (.reason | startswith(\"the NVIDIA driver supports CUDA 12.4\") | not))] == []" res/results.json
'

test_expect_success 'no cuBLAS and no NCCL anywhere: one line each says so, and the checks still end' '
	mkdir empty-site &&
	kit_run 13000 "$PWD/empty-site" --quick --out res >out 2>&1; rc=$?
	cat out && test $rc = 3 &&
	grep_q "^no cuBLAS 13 (libcublas.so.13 with libcublasLt.so.13) in the system CUDA, the linker cache or any Python" res/summary.txt &&
	grep_q "^no NCCL (libnccl.so.2) in the system CUDA, the linker cache or any Python" res/summary.txt &&
	jq -e ".libraries.cublas.found == false and .libraries.nccl.found == false" res/results.json &&
	jq -e "(.checks[] | select(.name == \"facts\")) as \$f | \$f.status == \"skip\" and (\$f.reason | test(\"libcublas.so.13\"))" \
		res/results.json &&
	jq -e "[.checks[].name] | length == 10" res/results.json
'

test_done
