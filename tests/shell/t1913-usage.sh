#!/bin/sh
# What a run used, in its record: a local gang of 2 records each rank's CPU seconds (measured by
# the gang), its wall time, workers and GPU-seconds; prices in the environment turn it into a cost
# in dlk status RUN, the wide history (with a total) and the history's JSON; a price that is not
# a number is refused naming the variable.
. "$(dirname "$0")/../lib.sh"

blobs_project "$TEST_TMP/p"
P=$TEST_TMP/p/dlk.yaml

test_expect_success 'a 2-worker run records its wall time, workers, GPU-seconds and each rank CPU seconds' '
	dlk train --local -q --workers 2 -f "$P" >/dev/null &&
	dlk status blobs --history --local -f "$P" -o json >"$TEST_TMP/h.json" &&
	jq ".runs[0].run.usage" "$TEST_TMP/h.json" &&
	jq -e ".runs[0].run.usage | .workers == 2 and .gpus_per_worker == 0 and .gpu_seconds == 0 and .wall_seconds > 0
		and (.cpu_seconds_per_rank | length == 2 and all(. > 0))
		and ((.cpu_seconds - (.cpu_seconds_per_rank | add)) | fabs < 1e-6)
		and (has(\"cpu_reserved_seconds\") | not)" "$TEST_TMP/h.json" &&
	# the wall time is within the span the record gives the run
	jq -e ".runs[0].run | (.finished_at | sub(\"\\\\.[0-9]+Z$\"; \"Z\") | fromdate) - (.started_at | sub(\"\\\\.[0-9]+Z$\"; \"Z\") | fromdate) + 1.01 >= .usage.wall_seconds" "$TEST_TMP/h.json"
'

test_expect_success 'with prices the run, the wide history and its total show the cost; JSON sums it' '
	id=$(jq -r ".runs[0].run.id" "$TEST_TMP/h.json") &&
	cpu=$(dlk status blobs --history --local -f "$P" -o json | jq ".runs[0].run.usage.cpu_seconds") &&
	# 3600 per CPU-hour: the cost is the CPU seconds the run used (a run here reserves none)
	want=$(awk -v c="$cpu" "BEGIN { printf(c < 1 ? \"%.4f\" : \"%.2f\", c) }") &&
	DLK_PRICE_CPU_HOUR=3600 DLK_PRICE_GPU_HOUR=2 DLK_PRICE_CURRENCY=EUR dlk status blobs --run "$id" --local -f "$P" >show &&
	cat show &&
	grep_q "^GPU time  *0.0 s (0 GPUs x 2 workers x wall [0-9.]* s)$" show &&
	grep_q "^CPU time  *[0-9.]* s used (rank 0 [0-9.]* s, rank 1 [0-9.]* s)$" show &&
	grep_q "^cost  *$want EUR (DLK_PRICE_GPU_HOUR 2, DLK_PRICE_CPU_HOUR 3600 per hour)$" show &&
	DLK_PRICE_CPU_HOUR=3600 dlk status blobs --history --local -f "$P" -o wide >wide 2>note &&
	cat wide note &&
	head -n 1 wide | grep_q "GPU TIME  *CPU TIME  *COST  *REASON$" &&
	sed -n 2p wide | grep_q " $want\( \|$\)" &&
	grep_q "^total of 1 run: GPU time 0.0 s; CPU time [0-9.]* s used; cost $want$" note &&
	DLK_PRICE_CPU_HOUR=3600 dlk status blobs --history --local -f "$P" -o json >priced.json &&
	jq -e ".usage.runs == 1 and ((.usage.cost - $cpu) | fabs < 1e-6) and .usage.currency == \"\"" priced.json &&
	# without a price: no cost anywhere
	dlk status blobs --history --local -f "$P" -o json | jq -e ".usage | has(\"cost\") | not" &&
	dlk status blobs --run "$id" --local -f "$P" >plain && ! grep -q "^cost" plain
'

test_expect_success 'a price that is not a number is refused, naming the variable' '
	DLK_PRICE_GPU_HOUR=cheap test_exit_code 3 dlk status blobs --history --local -f "$P" 2>err &&
	cat err && grep_q "DLK_PRICE_GPU_HOUR: .cheap. is not a price" err &&
	DLK_PRICE_CPU_HOUR=-2 test_exit_code 3 dlk status blobs --history --local -f "$P" -o wide 2>err &&
	grep_q "DLK_PRICE_CPU_HOUR: .-2. is not a price" err
'

test_done
