#!/bin/sh
# A crash is not the end of a run, and two runs never share one project: whether a local run
# still goes on is the lock its process holds on .dlk/runs/NAME/lock, never its pid. A run killed
# with SIGKILL (left a zombie, or its pid taken by another process, or its gang's parent or one
# rank killed) is continued by the next invocation; a run that really goes on keeps a second one
# out, naming itself.
. "$(dirname "$0")/../lib.sh"

command -v perl >/dev/null || test_missing "perl (a parent that never reaps its child)"
command -v pgrep >/dev/null || test_missing "pgrep (procps)"
command -v jq >/dev/null || test_missing "jq"

make_project() { blobs_project "$@"; }
# the newest checkpoint directory of the project's run, once it holds a step
ckpts() { ls -td "$1"/.dlk/checkpoints/blobs/*/ 2>/dev/null | head -1 | sed "s,/$,,"; }
wait_ckpt() {
	i=0; while ! ls "$(ckpts "$1")" 2>/dev/null | grep -q step-; do
		sleep 0.05; i=$((i + 1)); test $i -lt 600 || { echo "no checkpoint in $1"; return 1; }
	done
}
# the state letter of a process (Z: a zombie), "gone" when there is none
state() { test -r /proc/$1/stat && sed "s/.*) //" /proc/$1/stat | cut -d" " -f1 || echo gone; }
# until every pid given has ended (gone, or a zombie: a zombie holds no file)
wait_ended() {
	for p in "$@"; do
		i=0; while s=$(state $p) && test "$s" != gone && test "$s" != Z; do
			sleep 0.05; i=$((i + 1)); test $i -lt 600 || { echo "process $p lives on ($s)"; return 1; }
		done
	done
}
records() { ls "$1/.dlk/runs/blobs" | grep -c "\.json$"; }
rec() { ls "$1"/.dlk/runs/blobs/*.json; }

# a checkpoint takes 300 ms longer: the run lasts seconds, long enough to be caught in the middle
SLOW=300

test_expect_success 'a run killed with SIGKILL and left a zombie is continued from its checkpoint, not started anew' '
	make_project p &&
	# a parent that never waits: its child, once killed, stays a zombie
	{ DLK_TEST_CHECKPOINT_DELAY_MS=$SLOW perl -e "defined(my \$p = fork) or die; if (!\$p) { exec @ARGV; exit 127 }
		open(my \$f, \">\", \"child.pid\") or die; print \$f \"\$p\\n\"; close \$f; sleep 600" \
		"$DLK" train --local -f p/dlk.yaml >/dev/null 2>err1 & parent=$!; } &&
	wait_ckpt p &&
	child=$(cat child.pid) &&
	kill -KILL $child &&
	i=0; while test "$(state $child)" != Z; do sleep 0.05; i=$((i + 1)); test $i -lt 200 || break; done;
	id=$(jq -r .run.id "$(rec p)") &&
	jq -e ".run.outcome == \"running\" and .run.pid == $child" "$(rec p)" &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err; rc=$?; cat err
	still=$(state $child); kill $parent
	test $rc = 0 && test "$still" = Z &&
	grep_q "resuming run $(echo $id | cut -c1-8) from checkpoint .*step-0*[1-9]" err &&
	test "$(records p)" = 1 &&
	jq -e ".run.id == \"$id\" and .run.outcome == \"succeeded\" and .run.restarts == 1" "$(rec p)"
'

test_expect_success 'a record whose pid is alive but another process'"'"'s is a crashed run, continued' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=$SLOW "$DLK" train --local -f p/dlk.yaml >/dev/null 2>err1 & pid=$!; } &&
	wait_ckpt p &&
	kill -KILL $pid; wait $pid
	# the pid taken again: this shell, alive, on this host
	r=$(rec p) && jq ".run.pid = $$" "$r" >r.json && mv r.json "$r" &&
	jq -e ".run.outcome == \"running\" and .run.host == \"$(hostname)\"" "$r" &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "resuming run $(jq -r .run.id "$r" | cut -c1-8) from checkpoint .*step-0*[1-9]" err &&
	test "$(records p)" = 1 && jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1" "$r"
'

test_expect_success 'a second run while the first goes on is refused naming it, --fresh too; the first run goes on untouched' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=$SLOW "$DLK" train --local -f p/dlk.yaml >/dev/null 2>err1 & pid=$!; } &&
	wait_ckpt p &&
	r=$(rec p) && id=$(jq -r .run.id "$r") && cp "$r" before.json &&
	test_exit_code 1 dlk train --local -f p/dlk.yaml 2>err; cat err &&
	grep_q "^error: .blobs. is being trained by run $(echo $id | cut -c1-8) (pid $pid on .$(hostname)., since 20[0-9-]*T[0-9:.]*Z): two runs never share one project$" err &&
	grep_q "^hint: .*kill -INT $pid" err &&
	test_exit_code 1 dlk train --local --fresh -f p/dlk.yaml 2>err && cat err &&
	grep_q "is being trained by run $(echo $id | cut -c1-8) (pid $pid" err &&
	test_exit_code 1 dlk train --local --workers 2 -f p/dlk.yaml 2>err &&
	grep_q "is being trained by run $(echo $id | cut -c1-8)" err &&
	test_exit_code 1 dlk train --local --if-data-changed -f p/dlk.yaml 2>err &&
	grep_q "is being trained by run $(echo $id | cut -c1-8)" err &&
	test "$(records p)" = 1 && cmp before.json "$r" && ! test -e p/blobs.dlk &&
	test "$(state $pid)" != gone &&
	kill -TERM $pid; wait $pid; test $? = 75 &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "resuming run $(echo $id | cut -c1-8) from checkpoint" err &&
	test "$(records p)" = 1 && jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1" "$r"
'

test_expect_success 'the gang'"'"'s parent killed with SIGKILL: its workers end with it, the next invocation continues the run' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=$SLOW "$DLK" train --local --workers 2 -f p/dlk.yaml >/dev/null 2>err1 & pid=$!; } &&
	wait_ckpt p &&
	workers=$(pgrep -P $pid) && test $(echo $workers | wc -w) = 2 &&
	kill -KILL $pid; wait $pid
	wait_ended $workers &&
	r=$(rec p) && id=$(jq -r .run.id "$r") && jq -e ".run.outcome == \"running\"" "$r" &&
	dlk train --local --workers 2 -f p/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "resuming run $(echo $id | cut -c1-8) from checkpoint .*step-0*[1-9]" err &&
	test "$(records p)" = 1 && jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1 and .run.worlds == [2]" "$r"
'

test_expect_success 'one rank of --workers 2 killed with SIGKILL, no restart left: the run fails restartable; the next invocation continues it' '
	make_project p &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=$SLOW "$DLK" train --local --workers 2 --max-restarts 0 -f p/dlk.yaml >/dev/null 2>err1 & pid=$!; } &&
	wait_ckpt p &&
	w=$(pgrep -P $pid | tail -n 1) && test -n "$w" &&
	kill -KILL $w; wait $pid; test $? = 75 &&
	r=$(rec p) && id=$(jq -r .run.id "$r") &&
	jq -e ".run.outcome == \"failed\" and .run.failure.class == \"signal\"" "$r" &&
	dlk train --local --workers 2 -f p/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "resuming run $(echo $id | cut -c1-8) from checkpoint .*step-0*[1-9]" err &&
	test "$(records p)" = 1 && jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1" "$r"
'

test_done
