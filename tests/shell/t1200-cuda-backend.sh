#!/bin/sh
# Which compute backend dlk can use here, and exactly why not: `dlk version` and the training
# command's choice of device, against the real CUDA backend (when the toolchain built it) and
# against small fake backend libraries that fail in each way a real one can. None of this needs
# a GPU.
. "$(dirname "$0")/../lib.sh"
BUILD_DIR=$TEST_ROOT/${BUILD:-build}
PLUGIN=$BUILD_DIR/libdlk-cuda.so
CC=${CC:-cc}

# fake backends: each a few lines of C against the real interface (lib/nn/backend.h)
mkdir -p "$TEST_TMP/fake"
cat >"$TEST_TMP/fake/common.h" <<'EOT'
#include <stdio.h>
#include <string.h>
#include "lib/nn/backend.h"
#define EXPORT __attribute__((visibility("default")))
EOT
cat >"$TEST_TMP/fake/nosym.c" <<'EOT'
int not_a_backend(void) { return 1; }
EOT
cat >"$TEST_TMP/fake/oldabi.c" <<'EOT'
#include "common.h"
EXPORT const int dlk_backend_cuda_abi = DLK_BACKEND_ABI - 1;
EOT
cat >"$TEST_TMP/fake/nodriver.c" <<'EOT'
#include "common.h"
EXPORT const int dlk_backend_cuda_abi = DLK_BACKEND_ABI;
EXPORT void dlk_backend_cuda_probe(struct dlk_device_probe *p)
{
	memset(p, 0, sizeof(*p));
	p->runtime = 13000;
	snprintf(p->why, sizeof(p->why), "the NVIDIA driver supports CUDA 12.4 but this backend was built with CUDA 13.0");
	snprintf(p->comm, sizeof(p->comm), "NCCL 2.28.9");
	snprintf(p->blas, sizeof(p->blas), "cuBLAS 13.1.0");
}
EXPORT const struct dlk_backend *dlk_backend_cuda_entry(int device, char *msg, size_t len)
{
	snprintf(msg, len, "device %d: the NVIDIA driver supports CUDA 12.4 but this backend was built with CUDA 13.0", device);
	return NULL;
}
EOT
cat >"$TEST_TMP/fake/needs.c" <<'EOT'
#include "common.h"
extern int cublas_thing(void);
EXPORT const int dlk_backend_cuda_abi = DLK_BACKEND_ABI;
EXPORT int uses(void) { return cublas_thing(); }
EOT
cat >"$TEST_TMP/fake/cublas.c" <<'EOT'
int cublas_thing(void) { return 0; }
EOT
build_fakes() {
	cd "$TEST_TMP/fake" &&
	for f in nosym oldabi nodriver; do
		$CC -shared -fPIC -fvisibility=hidden -I"$TEST_ROOT" -o $f.so $f.c || return 1
	done &&
	# a backend that needs a cuBLAS this machine does not have: link against a stand-in, then remove it
	$CC -shared -fPIC -Wl,-soname,libcublas.so.13 -o libcublas.so.13 cublas.c &&
	$CC -shared -fPIC -fvisibility=hidden -I"$TEST_ROOT" -o needs.so needs.c ./libcublas.so.13 &&
	rm libcublas.so.13
}
(build_fakes) || { echo "Bail out! cannot build the fake backends"; exit 1; }
F=$TEST_TMP/fake

make_project() {
	mkdir -p "$1" &&
	awk -v n=256 'BEGIN { srand(3); for (i = 0; i < n; i++) { c = i % 2; print (c + rand()) "," (rand() - c) "," c } }' \
		>"$1/train.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: tiny
data:
  format: csv
  train: {source: train.csv}
model:
  input: [2]
  layers:
    - dense: {units: 8}
    - relu
    - dense: {units: 2}
training:
  epochs: 1
  batch_size: 32
  threads: 1
resources:
  gpus: ${2:-0}
EOT
}

test_expect_success 'dlk version says whether the CUDA backend is usable, and why not' '
	dlk version >out &&
	grep_q "^cpu: *usable: OpenBLAS" out &&
	grep -E "^cuda: +(usable: [0-9]+ devices?, cuda:0|not usable: .+)" out ||
		{ cat out; exit 1; }
'

if [ -f "$PLUGIN" ]; then
	test_expect_success 'the built backend loads, says what it was built for and finds NCCL' '
		dlk version >out &&
		grep_q "^           $PLUGIN: CUDA 13\.[0-9] for sm_80 sm_90 + PTX compute_90, cuBLAS 13\." out &&
		grep_q "^nccl: *NCCL 2\.[0-9]*\.[0-9]*$" out &&
		dlk version -o json >j && jq -e ".cudaBackend.backendLoaded and (.cudaBackend.library == \"$PLUGIN\")
			and (.cudaBackend.nccl | startswith(\"NCCL 2.\")) and (.cudaAvailable == .cudaBackend.usable)" j
	'
	if [ -e /dev/nvidiactl ] || ldconfig -p 2>/dev/null | grep -q "libcuda\.so\.1 "; then
		test_skip 'without a driver, the reason is the missing libcuda.so.1 (this machine has a driver)'
	else
		test_expect_success 'without a driver, the reason is the missing libcuda.so.1' '
			dlk version >out &&
			grep_q "^cuda: *not usable: no NVIDIA driver: libcuda.so.1 is not on this machine" out &&
			dlk version -o json >j && jq -e ".cudaBackend.usable == false and
				(.cudaBackend.why | startswith(\"no NVIDIA driver\")) and .cudaBackend.driverCuda == \"none\"" j
		'
	fi
	test_expect_success 'NCCL that cannot be loaded is named with the reason' '
		DLK_NCCL_LIB=/nonexistent/libnccl.so.2 dlk version >out &&
		grep_q "^nccl: *cannot load NCCL ./nonexistent/libnccl.so.2.: " out
	'
else
	test_expect_success 'an unbuilt backend is named as not built' '
		dlk version >out && grep_q "^cuda: *not usable: no CUDA backend: " out
	'
fi

test_expect_success 'a backend library that is not there is named' '
	DLK_CUDA_LIB=/nonexistent/libdlk-cuda.so dlk version >out &&
	grep_q "^cuda: *not usable: no CUDA backend: ./nonexistent/libdlk-cuda.so. does not exist$" out
'

test_expect_success 'a backend that needs a library this machine lacks names the library' '
	DLK_CUDA_LIB=$F/needs.so dlk version >out &&
	grep_q "^cuda: *not usable: cannot load the CUDA backend .$F/needs.so.: libcublas.so.13: cannot open shared object file" out
'

test_expect_success 'a library that is not a dlk backend is refused' '
	DLK_CUDA_LIB=$F/nosym.so dlk version >out &&
	grep_q "not usable: .$F/nosym.so. has no symbol .dlk_backend_cuda_abi.: not a CUDA backend of this dlk" out
'

test_expect_success 'a backend built for another interface version is refused before it is called' '
	DLK_CUDA_LIB=$F/oldabi.so dlk version >out &&
	abi=$(sed -n "s/^#define DLK_BACKEND_ABI \([0-9][0-9]*\)$/\1/p" "$TEST_ROOT/lib/nn/backend.h") &&
	test -n "$abi" &&
	grep_q "not usable: the CUDA backend .$F/oldabi.so. was built for backend ABI $((abi - 1)), this dlk has $abi" out
'

test_expect_success 'the backend'"'"'s own reason (an old driver) is shown as it gives it' '
	DLK_CUDA_LIB=$F/nodriver.so dlk version >out &&
	grep_q "^cuda: *not usable: the NVIDIA driver supports CUDA 12.4 but this backend was built with CUDA 13.0$" out &&
	grep_q "^nccl: *NCCL 2.28.9$" out
'

test_expect_success 'a project without GPUs trains on the CPU, whatever the machine has' '
	make_project p 0 && DLK_CUDA_LIB=$F/nodriver.so dlk train --local -v -f p/dlk.yaml >out 2>err &&
	grep_q "computing on cpu" err && ! grep -q "training on the CPU" err
'

test_expect_success 'GPUs asked for but none usable here: it trains on the CPU and says why' '
	make_project p 1 && DLK_CUDA_LIB=$F/nodriver.so dlk train --local -f p/dlk.yaml >out 2>err &&
	grep_q "training on the CPU: the CUDA backend cannot run here: the NVIDIA driver supports CUDA 12.4" err &&
	test -f p/tiny.dlk
'

test_expect_failure_code 'DLK_DEVICE=cuda where CUDA cannot run fails with the reason and what to do' 3 '
	make_project p 0 && DLK_DEVICE=cuda DLK_CUDA_LIB=$F/nodriver.so dlk train --local -f p/dlk.yaml 2>err ||
	{ rc=$?; grep_q "error: the CUDA backend cannot run here: the NVIDIA driver supports CUDA 12.4" err &&
	  grep_q "hint: .dlk version. shows what the CUDA backend finds here" err && exit $rc; }
'

test_expect_failure_code 'a worker in a pod that was given GPUs does not quietly train on the CPU' 3 '
	make_project p 1 &&
	KUBERNETES_SERVICE_HOST=10.0.0.1 DLK_CUDA_LIB=$F/needs.so dlk train --worker -f p/dlk.yaml 2>err ||
	{ rc=$?; grep_q "libcublas.so.13: cannot open shared object file" err && exit $rc; }
'

test_expect_success 'DLK_DEVICE=cpu overrides the project'"'"'s GPUs' '
	make_project p 1 && DLK_DEVICE=cpu DLK_CUDA_LIB=$F/needs.so dlk train --local -v -f p/dlk.yaml 2>err &&
	grep_q "computing on cpu" err
'

test_expect_failure_code 'a bad DLK_DEVICE is named' 3 '
	make_project p 0 && DLK_DEVICE=tpu dlk train --local -f p/dlk.yaml 2>err ||
	{ rc=$?; grep_q "DLK_DEVICE: expected auto, cpu or cuda, not .tpu." err && exit $rc; }
'

test_expect_success 'the default image is the CUDA image when the project asks for GPUs' '
	make_project p 0 && dlk train --dry-run -o json -f p/dlk.yaml >cpu.json &&
	dlk train --dry-run -o json -f p/dlk.yaml --set resources.gpus=2 >gpu.json &&
	jq -e "[.items[] | select(.kind == \"Job\")][0].spec.template.spec.containers[0].image == \"dlk:$(dlk version -o json | jq -r .version)\"" cpu.json &&
	jq -e "[.items[] | select(.kind == \"Job\")][0].spec.template.spec.containers[0].image | endswith(\"-cuda\")" gpu.json
'

# weights of a bundle: the sha256 model.json records
weights_sha() { tar -xOf "$1" model.json | tr -d ' \t\n' | sed 's/.*"weights":{[^}]*"sha256":"\([0-9a-f]*\)".*/\1/'; }

test_expect_success 'a pod given 2 GPUs runs a rank per GPU: 2 pods are the 4 ranks of --workers 4' '
	make_project ref 2 && sed -i "s/epochs: 1/epochs: 2/" ref/dlk.yaml &&
	DLK_DEVICE=cpu dlk train --local --workers 4 -q -f ref/dlk.yaml --set training.batch_size=8 >/dev/null 2>err ||
		{ cat err; exit 1; }
	cp -r ref pods && rm -rf pods/.dlk pods/tiny.dlk &&
	port=$(awk "BEGIN { srand(); print 20000 + int(rand() * 20000) }") &&
	for pod in 0 1; do
		# a worker writes its bundle in its working directory, as in a pod without a volume
		(cd pods && exec env -u LOCAL_RANK KUBERNETES_SERVICE_HOST=10.0.0.1 JOB_COMPLETION_INDEX=$pod WORLD_SIZE=2 \
			MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DLK_DEVICE=cpu \
			"$DLK" train --worker -v -f dlk.yaml --set training.batch_size=8) >out$pod 2>err$pod &
		eval pid$pod=\$!
	done
	wait $pid0; rc0=$?; wait $pid1; rc1=$?
	cat err0 err1 && test $rc0 = 0 && test $rc1 = 0 &&
	grep_q "^\[rank 0\] training .tiny. on 256 samples, no test set (2 epochs, 4 workers x batch 8" err0 &&
	grep_q "^\[rank 2\] .*rank 2 done after 16 steps" err1 && grep_q "^\[rank 3\] .*rank 3 done" err1 &&
	test "$(weights_sha pods/tiny.dlk)" = "$(weights_sha ref/tiny.dlk)"
'

test_done
