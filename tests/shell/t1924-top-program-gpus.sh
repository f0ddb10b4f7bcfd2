#!/bin/sh
# A user's program publishes no GPU figures of its own: its supervisor samples the GPU of each
# of its processes (CUDA device LOCAL_RANK among those CUDA sees, found by its PCI bus id, not by
# index) and publishes them as dlk's own ranks do. Two processes on one worker
# (procs_per_worker: 2, resources.gpus: 2) under CUDA_VISIBLE_DEVICES=1,0: rank 0 is on NVML's
# GPU 1, rank 1 on GPU 0 (the fake CUDA driver and NVML of tests/fakegpu). The run's progress
# has both, `dlk top` shows a line per rank and GPU (plain and JSON) and warns on the idle one,
# and the program's one metrics endpoint serves both ranks' dlk_gpu_* series; a pod's supervisor
# serves its ranks' series, and rank 0's publishes its GPUs on its Job (the test API server).
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

if ! command -v promtool >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "Bail out! promtool and curl are needed (make test installs them: .ci/deps test)"
	exit 1
fi
mkdir -p "$TEST_TMP/fake"
${CC:-cc} -shared -fPIC -o "$TEST_TMP/fake/libcuda.so" "$TEST_ROOT/tests/fakegpu/cuda.c" &&
${CC:-cc} -shared -fPIC -o "$TEST_TMP/fake/libnvml.so" "$TEST_ROOT/tests/fakegpu/nvml.c" ||
	{ echo "Bail out! cannot build the fake CUDA driver and NVML"; exit 1; }

P=$TEST_TMP/p
mkdir -p "$P"
cat >"$P/dlk.yaml" <<'YAML'
name: gpuprog
data:
  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
resources: {gpus: 2}
program:
  command: sh train.sh
  procs_per_worker: 2
YAML
# each process reports (rank 0's reports are the gang's), then waits for the file "go"
cat >"$P/train.sh" <<'SH'
echo "DLK-PROGRESS {\"step\": 5, \"steps\": 10, \"epoch\": 1, \"epochs\": 2, \"loss\": 0.5}"
i=0
while [ ! -e "$DLK_CHECKPOINT_DIR/../go" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
SH
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DLK_CUDA_DRIVER_LIBRARY=$TEST_TMP/fake/libcuda.so DLK_NVML_LIBRARY=$TEST_TMP/fake/libnvml.so FAKE_NVML_UTIL=2,91 \
	CUDA_VISIBLE_DEVICES=1,0 \
	"$DLK" -f "$P/dlk.yaml" train --local -v --metrics-port "$port" >"$TEST_TMP/train.log" 2>&1 &
TRAIN=$!
i=0
until jq -e '(.gpus | length == 2) and .step == 5' "$P/.dlk/runs/gpuprog/progress" >/dev/null 2>&1; do
	[ $i -lt 600 ] || { echo "# waited 60 s for a progress with step 5 and both GPUs" >&2; break; }
	sleep 0.1; i=$((i + 1))
done

test_expect_success 'the supervisor samples each process'"'"'s GPU (by PCI bus id) into the run'"'"'s progress' '
	cat "$TEST_TMP/train.log" >&2
	grep -q "rank 0: samples GPU 1 (PCI 0000:5b:00.0)" "$TEST_TMP/train.log" &&
	grep -q "rank 1: samples GPU 0 (PCI 0000:3b:00.0)" "$TEST_TMP/train.log" &&
	jq -c . "$P/.dlk/runs/gpuprog/progress" &&
	jq -e ".gpus == [{rank: 0, gpu: 1, utilization: 91, memoryUsed: 21474836480, memoryTotal: 85899345920, smClockMhz: 1755},
		{rank: 1, gpu: 0, utilization: 2, memoryUsed: 10737418240, memoryTotal: 85899345920, powerWatts: 412, smClockMhz: 1755}]
		and .step == 5 and .totalSteps == 10 and .epoch == 1 and .workers == 2" "$P/.dlk/runs/gpuprog/progress"
'

test_expect_success 'dlk top -o json: the processes'"'"' GPUs, and the idle one warned about' '
	(cd "$P" && dlk top -o json --interval 0.1s) >t.json && jq -c ".runs[0] | {gpus: .progress.gpus, warnings}" t.json &&
	jq -e ".runs[0].project == \"gpuprog\" and (.runs[0].progress.gpus | length == 2 and .[0].gpu == 1 and .[1].gpu == 0)" t.json &&
	jq -e ".runs[0].warnings | index(\"rank 1'"'"'s GPU 0 is idle (2% used) while the other rank'"'"'s is 91% used: the rank does not compute on it, or waits for the others\")" t.json
'

test_expect_success 'piped: a line per rank and its GPU, the warning below' '
	(cd "$P" && dlk top --interval 0.1s) >t.txt && cat t.txt &&
	grep -q "^PROJECT *RANK *GPU *UTIL% *MEMORY *POWER *SM CLOCK$" t.txt &&
	grep -q "^gpuprog *0 *1 *91 *21.47 GB / 85.90 GB *- *1755 MHz$" t.txt &&
	grep -q "^gpuprog *1 *0 *2 *10.74 GB / 85.90 GB *412 W *1755 MHz$" t.txt &&
	grep -q "^warning: gpuprog: rank 1.s GPU 0 is idle (2% used) while the other rank.s is 91% used" t.txt
'

test_expect_success 'the program'"'"'s metrics endpoint serves both ranks'"'"' GPU series' '
	curl -sf "http://127.0.0.1:$port/metrics" >m.txt && grep "^dlk_gpu" m.txt &&
	grep -qx "dlk_gpu_utilization{rank=\"0\",gpu=\"1\"} 0.91000000000000003" m.txt &&
	grep -qx "dlk_gpu_utilization{rank=\"1\",gpu=\"0\"} 0.02" m.txt &&
	grep -qx "dlk_gpu_memory_used_bytes{rank=\"0\",gpu=\"1\"} 21474836480" m.txt &&
	grep -qx "dlk_gpu_memory_used_bytes{rank=\"1\",gpu=\"0\"} 10737418240" m.txt &&
	grep -qx "dlk_gpu_power_watts{rank=\"1\",gpu=\"0\"} 412" m.txt &&
	! grep -q "^dlk_gpu_power_watts{rank=\"0\"" m.txt &&
	grep -qx "dlk_gpu_sm_clock_hertz{rank=\"0\",gpu=\"1\"} 1755000000" m.txt &&
	grep -qx "dlk_gpu_sm_clock_hertz{rank=\"1\",gpu=\"0\"} 1755000000" m.txt &&
	promtool check metrics <m.txt
'

touch "$P/.dlk/checkpoints/gpuprog/go"
wait $TRAIN
rc=$?
test_expect_success 'the run ends well, its last progress with the GPUs sampled at the end' '
	test $rc = 0 && jq -e ".gpus | length == 2" "$P/.dlk/runs/gpuprog/progress"
'

# a pod (dlk train --worker) of node 1 of 2, one process a GPU (procs_per_worker: 0): ranks 2 and 3,
# each on the GPU its local rank gives it, on the pod's metrics port
Q=$TEST_TMP/q
mkdir -p "$Q" && cp "$P/train.sh" "$Q/" &&
	sed "s/procs_per_worker: 2/procs_per_worker: 0/" "$P/dlk.yaml" >"$Q/dlk.yaml"
qport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$Q" && RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 DLK_METRICS_PORT=$qport \
	DLK_CUDA_DRIVER_LIBRARY=$TEST_TMP/fake/libcuda.so DLK_NVML_LIBRARY=$TEST_TMP/fake/libnvml.so FAKE_NVML_UTIL=30,60 \
	CUDA_VISIBLE_DEVICES=1,0 "$DLK" -f dlk.yaml train --worker -v >"$TEST_TMP/pod.log" 2>&1) &
POD=$!
i=0
until curl -sf "http://127.0.0.1:$qport/metrics" 2>/dev/null | grep -q "^dlk_gpu_utilization{rank=\"3\""; do
	[ $i -lt 600 ] || { echo "# waited 60 s for the pod's metrics to have rank 3's GPU" >&2; break; }
	sleep 0.1; i=$((i + 1))
done
test_expect_success 'in a pod: the supervisor serves the GPU series of the pod'"'"'s ranks (2 and 3 of 4)' '
	curl -sf "http://127.0.0.1:$qport/metrics" >q.txt; cat "$TEST_TMP/pod.log" >&2; grep "^dlk_gpu_util" q.txt &&
	grep -qx "dlk_gpu_utilization{rank=\"2\",gpu=\"1\"} 0.59999999999999998" q.txt &&
	grep -qx "dlk_gpu_utilization{rank=\"3\",gpu=\"0\"} 0.29999999999999999" q.txt &&
	test "$(grep -c "^dlk_gpu_utilization" q.txt)" = 2 &&
	grep -q "rank 3: samples GPU 0 (PCI 0000:3b:00.0)" "$TEST_TMP/pod.log"
'
mkdir -p "$Q/.dlk/checkpoints/gpuprog" && touch "$Q/.dlk/checkpoints/gpuprog/go"
wait $POD

# rank 0's pod (of 1) on the test API server: its processes' GPUs in the Job's progress annotation
cat >"$TEST_TMP/scenario.json" <<'EOT'
{
  "description": "A training Job of a program exists; nothing else happens.",
  "auth": { "tokens": ["test-token"] },
  "objects": [ { "apiVersion": "batch/v1", "kind": "Job",
    "metadata": { "name": "gpuprog", "namespace": "default" },
    "spec": { "suspend": true, "template": { "spec": { "restartPolicy": "Never",
      "containers": [ { "name": "worker", "image": "dlk" } ] } } } } ]
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
SA=$TEST_TMP/sa
mkdir -p "$SA" && printf test-token >"$SA/token" && cp "$APISERVER_CERTS/ca.crt" "$SA/ca.crt" && printf default >"$SA/namespace"
R=$TEST_TMP/r
mkdir -p "$R" && cp "$Q/dlk.yaml" "$R/" &&
	printf 'sleep 0.3\necho "DLK-PROGRESS {\\"event\\": \\"epoch\\", \\"epoch\\": 1, \\"epochs\\": 1, \\"step\\": 5, \\"steps\\": 5}"\n' >"$R/train.sh"
test_expect_success 'rank 0'"'"'s pod publishes its processes'"'"' GPUs in the Job'"'"'s progress' '
	(cd "$R" && env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="${APISERVER_URL##*:}" DLK_SERVICEACCOUNT_DIR="$SA" \
		DLK_JOB_NAME=gpuprog RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
		DLK_CUDA_DRIVER_LIBRARY=$TEST_TMP/fake/libcuda.so DLK_NVML_LIBRARY=$TEST_TMP/fake/libnvml.so FAKE_NVML_UTIL=30,60 \
		CUDA_VISIBLE_DEVICES=1,0 "$DLK" -f dlk.yaml train --worker) >r.out 2>&1; cat r.out &&
	curl -sf --cacert "$SA/ca.crt" -H "Authorization: Bearer test-token" \
		"$APISERVER_URL/apis/batch/v1/namespaces/default/jobs/gpuprog" >job.json &&
	jq -r ".metadata.annotations[\"dlk.dev/progress\"]" job.json >progress.json && cat progress.json &&
	jq -e ".step == 5 and .epoch == 1 and ([.gpus[] | [.rank, .gpu, .utilization]] == [[0, 1, 60], [1, 0, 30]])" progress.json
'

test_expect_success 'program.env setting CUDA_VISIBLE_DEVICES: no samples, and -v says why' '
	printf "  env: {CUDA_VISIBLE_DEVICES: \"0\"}\n" >>"$P/dlk.yaml" && rm -f "$P/.dlk/runs/gpuprog/progress" &&
	touch "$P/.dlk/checkpoints/gpuprog/go" &&
	DLK_CUDA_DRIVER_LIBRARY=$TEST_TMP/fake/libcuda.so DLK_NVML_LIBRARY=$TEST_TMP/fake/libnvml.so \
		dlk -f "$P/dlk.yaml" train --local -v >out.txt 2>&1; cat out.txt &&
	grep -q "no GPU figures of the program.s processes: program.env sets CUDA_VISIBLE_DEVICES" out.txt &&
	! grep -q "samples GPU" out.txt
'

test_done
