#!/bin/sh
# dlk top --cluster against the test API server: a Job whose rank 0 published its progress with
# every rank's step time split, the MFU and every rank's GPU sample; each pod's line shows its
# rank's shares, rank 0's the MFU, a line per pod its GPU, and a rank starved by input and one
# whose GPU is idle are warned about (plain lines and JSON).
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

PROG='{\"epoch\":2,\"epochs\":9,\"step\":40,\"totalSteps\":180,\"loss\":0.5,\"samplesPerSec\":1234,\"updated\":\"2026-01-01T00:00:00Z\",\"workers\":2,\"flopsPerSample\":192,\"flops\":236928,\"peakFlops\":1000000,\"mfu\":0.23693,\"phases\":[{\"rank\":0,\"data\":0.04,\"compute\":0.3,\"allreduce\":0.66},{\"rank\":1,\"data\":0.62,\"compute\":0.3,\"allreduce\":0.08}],\"gpus\":[{\"rank\":0,\"gpu\":0,\"utilization\":88,\"memoryUsed\":21474836480,\"memoryTotal\":85899345920,\"powerWatts\":412,\"smClockMhz\":1755},{\"rank\":1,\"gpu\":0,\"utilization\":3,\"memoryUsed\":1073741824,\"memoryTotal\":85899345920}]}'
pod() {
	printf '{ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "mlp-%s", "namespace": "default",
	  "labels": { "dlk.dev/job": "mlp", "batch.kubernetes.io/job-name": "mlp" },
	  "annotations": { "batch.kubernetes.io/job-completion-index": "%s" } },
	  "spec": { "nodeName": "node-%s", "containers": [ { "name": "worker", "image": "dlk" } ] },
	  "status": { "phase": "Running", "containerStatuses": [ { "name": "worker", "ready": true, "restartCount": 0 } ] } }' "$1" "$1" "$1"
}
cat >"$TEST_TMP/scenario.json" <<EOT
{
  "description": "A training Job of two ranks running, its progress published by rank 0.",
  "auth": { "tokens": ["test-token"] },
  "objects": [ { "apiVersion": "batch/v1", "kind": "Job",
    "metadata": { "name": "mlp", "namespace": "default", "labels": { "dlk.dev/job": "mlp" },
      "annotations": { "dlk.dev/progress": "$PROG" } },
    "spec": { "completions": 2, "parallelism": 2, "completionMode": "Indexed",
      "template": { "spec": { "restartPolicy": "Never", "containers": [ { "name": "worker", "image": "dlk" } ] } } },
    "status": { "active": 2, "ready": 2 } },
    $(pod 0), $(pod 1) ]
}
EOT
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"

test_expect_success 'JSON: each pod has its rank'"'"'s step time shares and GPU; the job its warnings' '
	dlk top --cluster -o json >c.json 2>err || { cat err; exit 1; }
	jq -c ".jobs[0] | {warnings, pods: [.pods[] | {rank, step_time}]}" c.json &&
	jq -e ".jobs[0].pods[0].step_time == {data: 0.04, compute: 0.3, allreduce: 0.66} and
		.jobs[0].pods[1].step_time == {data: 0.62, compute: 0.3, allreduce: 0.08}" c.json &&
	jq -e ".jobs[0].warnings == [\"rank 1'"'"'s GPU 0 is idle (3% used) while the other rank'"'"'s is 88% used: the rank does not compute on it, or waits for the others\",
		\"rank 1 waits for its input 62% of its step time, the other ranks 4%: it is starved by input\"]" c.json &&
	jq -e ".jobs[0].pods[0].gpu == {index: 0, utilization_percent: 88, memory_used_bytes: 21474836480,
		memory_total_bytes: 85899345920, power_watts: 412, sm_clock_mhz: 1755} and
		.jobs[0].pods[1].gpu == {index: 0, utilization_percent: 3, memory_used_bytes: 1073741824, memory_total_bytes: 85899345920}" c.json &&
	jq -e ".jobs[0].progress.mfu == 0.23693" c.json
'

test_expect_success 'piped: a line per pod with its shares, the MFU on rank 0'"'"'s, a line per pod'"'"'s GPU, the warnings below' '
	dlk top --cluster >c.txt 2>err && cat c.txt &&
	grep -q "^JOB *RANK *POD *PHASE *NODE *RESTARTS *PROGRESS *SAMPLES/S *MFU% *DATA% *COMPUTE% *ALLREDUCE%$" c.txt &&
	grep -q "^mlp *0 *mlp-0 *Running *node-0 *0 *epoch 2/9 step 40/180 loss 0.5 *1234 *23.7 *4 *30 *66$" c.txt &&
	grep -q "^mlp *1 *mlp-1 *Running *node-1 *0 *62 *30 *8$" c.txt &&
	grep -qx "warning: mlp: rank 1 waits for its input 62% of its step time, the other ranks 4%: it is starved by input" c.txt &&
	grep -q "^JOB *RANK *POD *GPU *UTIL% *MEMORY *POWER *SM CLOCK$" c.txt &&
	grep -q "^mlp *0 *mlp-0 *0 *88 *21.47 GB / 85.90 GB *412 W *1755 MHz$" c.txt &&
	grep -q "^mlp *1 *mlp-1 *0 *3 *1.07 GB / 85.90 GB *- *-$" c.txt &&
	grep -q "^warning: mlp: rank 1.s GPU 0 is idle (3% used) while the other rank.s is 88% used" c.txt
'

test_expect_success '--sort: the pods by a share, largest first; a key of the runs here is refused with --cluster' '
	dlk top --cluster --sort data -o json | jq -c "[.jobs[0].pods[].rank]" >order && grep -qx "\[1,0\]" order &&
	dlk top --cluster --sort allreduce -o json | jq -c "[.jobs[0].pods[].rank]" >order && grep -qx "\[0,1\]" order &&
	dlk top --cluster --sort data | grep "^mlp " | head -n 1 | grep -q "^mlp *1 " &&
	test_exit_code 2 dlk top --cluster --sort rss 2>err && grep -q "with --cluster the pods sort by rank" err &&
	test_exit_code 2 dlk top --sort bogus 2>err && grep -q "not a column to sort by" err
'

test_done
