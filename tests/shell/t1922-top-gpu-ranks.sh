#!/bin/sh
# Each rank samples the GPU it uses through NVML, found by the PCI bus id CUDA gives its device
# (not by index): a local gang of two whose CUDA_VISIBLE_DEVICES=1,0 puts rank 0 on NVML's GPU 1
# and rank 1 on GPU 0 (a fake CUDA driver and a fake NVML that answer per device). Rank 0
# gathers the samples into the progress; dlk top shows a line per rank and GPU (plain and JSON)
# and warns on the rank whose GPU is idle while the other's computes; each rank's metrics
# endpoint serves its GPU's series. A run of one rank samples its GPU as well.
. "$(dirname "$0")/../lib.sh"

mkdir -p "$TEST_TMP/fake"
${CC:-cc} -shared -fPIC -o "$TEST_TMP/fake/libcuda.so" "$TEST_ROOT/tests/fakegpu/cuda.c" &&
${CC:-cc} -shared -fPIC -o "$TEST_TMP/fake/libnvml.so" "$TEST_ROOT/tests/fakegpu/nvml.c" ||
	{ echo "Bail out! cannot build the fake CUDA driver and NVML"; exit 1; }

free_port() {
	node -e '
		const net = require("net");
		const tryOne = () => { const s = net.createServer(); s.listen(0, "127.0.0.1", () => {
			const p = s.address().port, t = net.createServer();
			t.once("error", () => { s.close(tryOne); });
			t.listen(p + 1, "127.0.0.1", () => { t.close(); s.close(); console.log(p); }); }); };
		tryOne();'
}

P=$TEST_TMP/p
blobs_project "$P" && sed -i "s/epochs: 4/epochs: 100000/; s/every: 4/every: 1000000/" "$P/dlk.yaml" &&
	printf 'resources: {gpus: 1}\n' >>"$P/dlk.yaml" || { echo "Bail out! cannot write the project"; exit 1; }
PORT=$(free_port)
DLK_CUDA_DRIVER_LIBRARY=$TEST_TMP/fake/libcuda.so DLK_NVML_LIBRARY=$TEST_TMP/fake/libnvml.so FAKE_NVML_UTIL=2,91 \
	CUDA_VISIBLE_DEVICES=1,0 DLK_DEVICE=cpu \
	"$DLK" -f "$P/dlk.yaml" train --local --workers 2 -v --metrics-port "$PORT" >"$TEST_TMP/train.log" 2>&1 &
TRAIN=$!
# until rank 0 wrote a progress with both ranks' GPUs
i=0
until jq -e '.gpus | length == 2' "$P/.dlk/runs/blobs/progress" >/dev/null 2>&1; do
	[ $i -lt 600 ] || { echo "# waited 60 s for a progress with both ranks' GPUs" >&2; break; }
	sleep 0.1; i=$((i + 1))
done

test_expect_success 'each rank samples the GPU CUDA gives it (by PCI bus id), rank 0 gathers them' '
	cat "$TEST_TMP/train.log" >&2
	grep -q "rank 0: samples GPU 1 (PCI 0000:5b:00.0)" "$TEST_TMP/train.log" &&
	grep -q "rank 1: samples GPU 0 (PCI 0000:3b:00.0)" "$TEST_TMP/train.log" &&
	jq -c .gpus "$P/.dlk/runs/blobs/progress" &&
	jq -e ".gpus == [{rank: 0, gpu: 1, utilization: 91, memoryUsed: 21474836480, memoryTotal: 85899345920, smClockMhz: 1755},
		{rank: 1, gpu: 0, utilization: 2, memoryUsed: 10737418240, memoryTotal: 85899345920, powerWatts: 412, smClockMhz: 1755}]" \
		"$P/.dlk/runs/blobs/progress"
'

test_expect_success 'dlk top -o json: the ranks'"'"' GPUs, and the idle one warned about' '
	(cd "$P" && dlk top -o json --interval 0.1s) >t.json && jq -c ".runs[0] | {gpus: .progress.gpus, warnings}" t.json &&
	jq -e ".runs[0].progress.gpus | length == 2 and .[0].gpu == 1 and .[1].gpu == 0" t.json &&
	jq -e ".runs[0].warnings | index(\"rank 1'"'"'s GPU 0 is idle (2% used) while the other rank'"'"'s is 91% used: the rank does not compute on it, or waits for the others\")" t.json
'

test_expect_success 'piped: a line per rank and its GPU, the warning below' '
	(cd "$P" && dlk top --interval 0.1s) >t.txt && cat t.txt &&
	grep -q "^PROJECT *RANK *GPU *UTIL% *MEMORY *POWER *SM CLOCK$" t.txt &&
	grep -q "^blobs *0 *1 *91 *21.47 GB / 85.90 GB *- *1755 MHz$" t.txt &&
	grep -q "^blobs *1 *0 *2 *10.74 GB / 85.90 GB *412 W *1755 MHz$" t.txt &&
	grep -q "^warning: blobs: rank 1.s GPU 0 is idle (2% used) while the other rank.s is 91% used" t.txt
'

test_expect_success 'each rank'"'"'s metrics endpoint serves its GPU'"'"'s series' '
	curl -sf "http://127.0.0.1:$PORT/metrics" >m0.txt && curl -sf "http://127.0.0.1:$((PORT + 1))/metrics" >m1.txt &&
	grep "^dlk_gpu" m0.txt m1.txt &&
	grep -qx "dlk_gpu_utilization{rank=\"0\",gpu=\"1\"} 0.91000000000000003" m0.txt &&
	grep -qx "dlk_gpu_memory_used_bytes{rank=\"0\",gpu=\"1\"} 21474836480" m0.txt &&
	grep -qx "dlk_gpu_memory_total_bytes{rank=\"0\",gpu=\"1\"} 85899345920" m0.txt &&
	grep -qx "dlk_gpu_sm_clock_hertz{rank=\"0\",gpu=\"1\"} 1755000000" m0.txt && ! grep -q "^dlk_gpu_power_watts" m0.txt &&
	grep -qx "dlk_gpu_utilization{rank=\"1\",gpu=\"0\"} 0.02" m1.txt &&
	grep -qx "dlk_gpu_power_watts{rank=\"1\",gpu=\"0\"} 412" m1.txt &&
	promtool check metrics <m0.txt && promtool check metrics <m1.txt
'

kill -INT $TRAIN; wait $TRAIN

test_expect_success 'a run of one rank samples its GPU too, the end included' '
	rm -f "$P/.dlk/runs/blobs/progress" &&
	DLK_CUDA_DRIVER_LIBRARY=$TEST_TMP/fake/libcuda.so DLK_NVML_LIBRARY=$TEST_TMP/fake/libnvml.so FAKE_NVML_UTIL=40,70 \
		CUDA_VISIBLE_DEVICES=1 DLK_DEVICE=cpu dlk -f "$P/dlk.yaml" train --local --fresh -q --set training.epochs=1 &&
	jq -c .gpus "$P/.dlk/runs/blobs/progress" &&
	jq -e ".step == .totalSteps and .gpus == [{rank: 0, gpu: 1, utilization: 70, memoryUsed: 21474836480,
		memoryTotal: 85899345920, smClockMhz: 1755}]" "$P/.dlk/runs/blobs/progress"
'

test_done
