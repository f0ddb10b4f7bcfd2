#!/bin/sh
# dlk top shows the runs going on here: the run's process, its CPU use and memory, its progress and
# each rank's step time split (with a warning on a rank starved by input); one sample as plain
# lines or JSON when piped, a view redrawn in place on a terminal (a pseudo-terminal here).
. "$(dirname "$0")/../lib.sh"

P=$TEST_TMP/p
blobs_project "$P" && sed -i "s/epochs: 4/epochs: 100000/; s/every: 4/every: 1000000/" "$P/dlk.yaml" ||
	{ echo "Bail out! cannot write the project"; exit 1; }
"$DLK" -f "$P/dlk.yaml" train --local -q >"$TEST_TMP/train.log" 2>&1 &
TRAIN=$!
# until it trains: its lock names it and its progress (written after its first steps) is there;
# its record ("running") is written before either
i=0; while ! { [ -s "$P/.dlk/runs/blobs/lock" ] && [ -s "$P/.dlk/runs/blobs/progress" ]; }; do
	i=$((i + 1)); [ $i -lt 1200 ] || { echo "Bail out! the run did not start training in 60 s"; cat "$TEST_TMP/train.log"; exit 1; }
	sleep 0.05
done

test_expect_success 'dlk top -o json: the run, its pid, CPU use and memory' '
	(cd "$P" && dlk top -o json --interval 1s) >top.json && cat top.json &&
	jq -e ".runs | length == 1" top.json &&
	jq -e ".runs[0].project == \"blobs\" and .runs[0].pid == $TRAIN and .runs[0].processes >= 1" top.json &&
	jq -e ".runs[0].cpu_percent > 0 and .runs[0].cpu_percent <= 100 * $(nproc) and .runs[0].rss_bytes > 1000000 and .interval_s == 1" top.json &&
	run=$(cat "$P"/.dlk/runs/blobs/*.json | jq -r "select(.run.outcome == \"running\") | .run.id") &&
	jq -e ".runs[0].run == \"$run\"" top.json
'

test_expect_success 'piped: one sample, a header and a line per run; a PROJECT that is not running: none' '
	(cd "$P" && dlk top --interval 0.2s) >out && cat out &&
	test "$(awk "NF == 0 { exit } { n++ } END { print n }" out)" = 2 && head -1 out | grep -q "^PROJECT *RUN *PID *PROCS *CPU% *RSS *SINCE$" &&
	grep -q "^blobs *[0-9a-f]\{8\} *$TRAIN " out && ! grep -q "$(printf "\033")" out &&
	(cd "$P" && dlk top --interval 0.1s other) >out2 && grep -qx "no runs going on here" out2
'

test_expect_success 'on a terminal: redrawn in place until Ctrl-C' '
	command -v script >/dev/null || { echo "script(1) is needed (bsdutils)"; exit 1; }
	(cd "$P" && timeout -s INT 2 script -qfec "$DLK top --interval 0.3s" /dev/null) >tty.out; rc=$?
	test $rc = 0 -o $rc = 124 &&
	test "$(grep -o "$(printf "\033")\[H$(printf "\033")\[J" tty.out | wc -l)" -ge 2 &&
	grep -q "blobs" tty.out
'

# a fake NVML: two GPUs with known figures (the second reports no power), or one whose init fails
mkdir -p "$TEST_TMP/nvml"
cat >"$TEST_TMP/nvml/fake.c" <<'EOT'
#include <stdio.h>
#include <string.h>
struct util { unsigned gpu, memory; };
struct mem { unsigned long long total, free, used; };
int nvmlInit_v2(void) { return FAIL_INIT; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { *d = (void *)(unsigned long)(i + 1); return 0; }
int nvmlDeviceGetName(void *d, char *s, unsigned n) { snprintf(s, n, "Fake H100 %lu", (unsigned long)d); return 0; }
int nvmlDeviceGetUtilizationRates(void *d, struct util *u) { u->gpu = d == (void *)1 ? 87 : 3; u->memory = 40; return 0; }
int nvmlDeviceGetMemoryInfo(void *d, struct mem *m) { m->total = 80000000000ull; m->used = d == (void *)1 ? 61000000000ull : 1000000000ull; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetPowerUsage(void *d, unsigned *mw) { if (d != (void *)1) return 3; *mw = 412345; return 0; }
int nvmlDeviceGetClockInfo(void *d, int type, unsigned *mhz) { (void)d; if (type != 1) return 2; *mhz = 1755; return 0; }
EOT
${CC:-cc} -shared -fPIC -DFAIL_INIT=0 -o "$TEST_TMP/nvml/libfake.so" "$TEST_TMP/nvml/fake.c" &&
${CC:-cc} -shared -fPIC -DFAIL_INIT=9 -o "$TEST_TMP/nvml/libnoinit.so" "$TEST_TMP/nvml/fake.c" ||
	{ echo "Bail out! cannot build the fake NVML"; exit 1; }

test_expect_success 'NVML through a fake library: each GPU'"'"'s utilisation, memory, power and SM clock' '
	(cd "$P" && DLK_NVML_LIBRARY="$TEST_TMP/nvml/libfake.so" dlk top -o json --interval 0.1s) >g.json &&
	jq -e ".nvml == null and (.gpus | length) == 2" g.json &&
	jq -e ".gpus[0] == {index: 0, name: \"Fake H100 1\", utilization_percent: 87, memory_used_bytes: 61000000000,
		memory_total_bytes: 80000000000, power_watts: 412.345, sm_clock_mhz: 1755}" g.json &&
	jq -e ".gpus[1].utilization_percent == 3 and (.gpus[1] | has(\"power_watts\") | not)" g.json &&
	jq -e ".runs[0].project == \"blobs\"" g.json &&
	(cd "$P" && DLK_NVML_LIBRARY="$TEST_TMP/nvml/libfake.so" dlk top --interval 0.1s) >g.txt 2>g.err && cat g.txt &&
	grep -q "^GPU *UTIL% *MEMORY *POWER *SM CLOCK *NAME$" g.txt &&
	grep -q "^0 *87 *61.00 GB / 80.00 GB *412 W *1755 MHz *Fake H100 1$" g.txt &&
	grep -q "^1 *3 *1.00 GB / 80.00 GB *- *1755 MHz *Fake H100 2$" g.txt && ! test -s g.err
'

test_expect_success 'without NVML: why, said once, and the CPU figures still show' '
	(cd "$P" && DLK_NVML_LIBRARY="$TEST_TMP/nvml/none.so" dlk top --interval 0.1s) >n.txt 2>n.err &&
	test "$(grep -c "none.so is not installed" n.err)" = 1 && grep -q "^blobs " n.txt && ! grep -q "^GPU" n.txt &&
	(cd "$P" && DLK_NVML_LIBRARY="$TEST_TMP/nvml/libnoinit.so" dlk top -o json --interval 0.1s) >n.json &&
	jq -e ".gpus == [] and (.nvml | test(\"nvmlInit_v2 failed \\\\(code 9\\\\)\"))" n.json &&
	jq -e ".runs[0].project == \"blobs\"" n.json &&
	(cd "$P" && DLK_NVML_LIBRARY="$TEST_TMP/nvml/none.so" timeout -s INT 1 script -qfec "$DLK top --interval 0.2s" /dev/null) >tty.out;
	test "$(grep -c "none.so is not installed" tty.out)" = 1
'

test_expect_success 'the run'"'"'s progress, and where each rank'"'"'s step time goes (data, compute, all-reduce)' '
	i=0; while [ ! -s "$P/.dlk/runs/blobs/progress" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	(cd "$P" && dlk top -o json --interval 0.1s) >p.json && jq -c ".runs[0] | {progress, warnings}" p.json &&
	jq -e ".runs[0].progress | .epochs == 100000 and .step >= 1 and .samplesPerSec > 0 and (has(\"run\") | not)" p.json &&
	jq -e ".runs[0].progress.phases | length == 1 and .[0].rank == 0 and .[0].compute > 0 and .[0].allreduce == 0 and
		(.[0].data + .[0].compute + .[0].allreduce - 1 | fabs) <= 0.002" p.json &&
	jq -e ".runs[0].warnings | type == \"array\"" p.json &&
	# blobs: dense 2 -> 8, relu, dense 8 -> 2: 2 (16 + 16) FLOPs forward, 3x that a training step
	jq -e ".runs[0].progress | .flopsPerSample == 192 and .flops > 0 and
		((has(\"peakFlops\") | not) or (.mfu - .flops / .peakFlops | fabs) < 1e-4)" p.json &&
	(cd "$P" && dlk top --interval 0.1s) >p.txt && cat p.txt &&
	grep -q "^PROJECT *RANK *EPOCH *STEP *SAMPLES/S *MFU% *DATA% *COMPUTE% *ALLREDUCE%$" p.txt &&
	grep -q "^blobs *0 *[0-9]*/100000 *[0-9]*/[0-9]* *[0-9]* *[0-9.]* *[0-9]* *[0-9]* *0$" p.txt
'

# a run of two ranks whose rank 1 waits for its input: its lock held (by a POSIX lock, as F_OFD_GETLK
# sees it) and its progress written as a run here writes them
S=$P/.dlk/runs/starved
mkdir -p "$S" && id=00000000-0000-4000-8000-00000000abcd &&
printf '{"epoch":2,"epochs":9,"step":40,"totalSteps":180,"loss":0.5,"samplesPerSec":1234,"updated":"2026-01-01T00:00:00Z","workers":2,"phases":[{"rank":0,"data":0.04,"compute":0.3,"allreduce":0.66},{"rank":1,"data":0.62,"compute":0.3,"allreduce":0.08}],"run":"%s"}' \
	"$id" >"$S/progress" &&
"$TEST_ROOT/.deps/frameworks/bin/python" -c '
import fcntl, json, os, signal, socket, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
f = open(sys.argv[1] + "/lock", "w")
fcntl.lockf(f, fcntl.LOCK_EX)
f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "run": sys.argv[2], "since": "2026-01-01T00:00:00Z"}))
f.flush()
open(sys.argv[1] + "/ready", "w").close()
time.sleep(60)' "$S" "$id" &
HOLDER=$!
i=0; while [ ! -f "$S/ready" ]; do
	i=$((i + 1)); [ $i -lt 1200 ] || { echo "Bail out! the lock holder for 'starved' did not start in 60 s"; exit 1; }
	sleep 0.05
done

test_expect_success 'a rank starved by input while the other computes is warned about' '
	(cd "$P" && dlk top -o json --interval 0.1s starved) >s.json && cat s.json &&
	jq -e ".runs[0].pid == $HOLDER and .runs[0].warnings == [\"rank 1 waits for its input 62% of its step time, the other ranks 4%: it is starved by input\"]" s.json &&
	(cd "$P" && dlk top --interval 0.1s starved) >s.txt && cat s.txt &&
	grep -q "^starved *0 *2/9 *40/180 *1234 *- *4 *30 *66$" s.txt && grep -q "^starved *1 *2/9 *40/180 *1234 *- *62 *30 *8$" s.txt &&
	grep -qx "warning: starved: rank 1 waits for its input 62% of its step time, the other ranks 4%: it is starved by input" s.txt &&
	sed "s/\"run\":\"[^\"]*\"/\"run\":\"another\"/" "$S/progress" >"$S/p2" && mv "$S/p2" "$S/progress" &&
	(cd "$P" && dlk top -o json --interval 0.1s starved) >o.json &&
	jq -e ".runs[0] | has(\"progress\") or has(\"warnings\") | not" o.json
'
kill $HOLDER; wait $HOLDER

kill -INT $TRAIN; wait $TRAIN

test_expect_success 'the run ended: dlk top shows none; its record and dlk status have its MFU' '
	(cd "$P" && dlk top -o json --interval 0.1s) >top.json && jq -e ".runs == []" top.json &&
	rec=$(ls "$P"/.dlk/runs/blobs/*.json) && jq -c .run.mfu "$rec" &&
	jq -e ".run.outcome == \"interrupted\" and .run.mfu.flops_per_sample == 192 and .run.mfu.flops_per_second > 0" "$rec" &&
	(cd "$P" && dlk status --local --run "$(jq -r .run.id "$rec")") >st.txt && grep "^MFU " st.txt &&
	if jq -e ".run.mfu.peak" "$rec" >/dev/null; then
		grep -q "^MFU  *[0-9.]*% ([0-9.]* [kMGT]*FLOP/s of a peak of [0-9.]* [kMGT]*FLOP/s; CPU: [0-9]* thread" st.txt
	else
		grep -q "^MFU  *- ([0-9.]* [kMGT]*FLOP/s; the device.s peak is not known)" st.txt
	fi
'

test_done
