#!/bin/sh
# dlk top shows the runs going on here: the run's process, its CPU use and memory; one sample as
# plain lines or JSON when piped, a view redrawn in place on a terminal (a pseudo-terminal here).
. "$(dirname "$0")/../lib.sh"

P=$TEST_TMP/p
blobs_project "$P" && sed -i "s/epochs: 4/epochs: 100000/; s/every: 4/every: 1000000/" "$P/dlk.yaml" ||
	{ echo "Bail out! cannot write the project"; exit 1; }
"$DLK" -f "$P/dlk.yaml" train --local -q >"$TEST_TMP/train.log" 2>&1 &
TRAIN=$!
i=0; while [ ! -s "$P/.dlk/runs/blobs/lock" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.5

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
	test "$(wc -l <out)" = 2 && head -1 out | grep -q "^PROJECT *RUN *PID *PROCS *CPU% *RSS *SINCE$" &&
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

kill -INT $TRAIN; wait $TRAIN

test_expect_success 'the run ended: dlk top shows none' '
	(cd "$P" && dlk top -o json --interval 0.1s) >top.json && jq -e ".runs == []" top.json
'

test_done
