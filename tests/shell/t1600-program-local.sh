#!/bin/sh
# A user's own program as the workload, here: `dlk train --local --workers 2` of a project with a
# program: section runs a small Python program (no framework) twice over, with dlk's rank and
# world; what rank 0 reports through the progress protocol becomes the run's record (with the
# digest of the code), `dlk status --history` and `dlk report`; a fail code stops the run naming
# the rank and its last line, another failure restarts the gang, which resumes from the
# program's own checkpoint.
. "$(dirname "$0")/../lib.sh"

command -v python3 >/dev/null || { test_missing python3; test_done; }

P=$TEST_TMP/p
mkdir -p "$P/src"
cat >"$P/dlk.yaml" <<'YAML'
name: tiny
data:
  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
program:
  command: python3 train.py
  code: src
  exit_codes: {fail: [3]}
YAML
cat >"$P/src/train.py" <<'PY'
import json, os, sys, time
rank, world = int(os.environ["DLK_RANK"]), int(os.environ["DLK_WORLD_SIZE"])
ckpt = os.path.join(os.environ["DLK_CHECKPOINT_DIR"], "step")
def saved():
    try:
        return int(open(ckpt).read())
    except (OSError, ValueError):
        return 0
start = saved() if rank == 0 else 0
print("rank %d of %d, peers %s, restart %s, from step %d" % (rank, world, os.environ["DLK_PEERS"],
      os.environ["DLK_RESTART_COUNT"], start), flush=True)
fail = os.environ.get("FAIL")
for step in range(start + 1, 7):
    if rank == 0:
        print("DLK-PROGRESS " + json.dumps({"step": step, "epoch": 1, "epochs": 1, "loss": 1.0 / step}))
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(ckpt + ".tmp", ckpt)
    if rank == 1 and fail and step == 3 and os.environ["DLK_RESTART_COUNT"] == "0":
        # rank 0 has saved step 3 before this rank fails: what the restart resumes from
        t = time.time()
        while saved() < 3 and time.time() - t < 30:
            time.sleep(0.01)
        print("ValueError: rank 1 gives up", file=sys.stderr)
        sys.exit(int(fail))
if rank == 0:
    print("DLK-PROGRESS {not json}")
    print("DLK-PROGRESS " + json.dumps({"event": "done", "loss": 0.25, "model": "model.pt",
          "metrics": {"test_loss": 0.3, "f1": 0.8}, "confusion": [[3, 1], [0, 4]]}))
PY
# the code digest is the id of the code directory's manifest: computed here independently
code_digest() {
	( cd "$1" && { printf 'dlk-dataset 1\n'; find . -type f | sed 's,^\./,,' | LC_ALL=C sort | while read -r f; do
		printf '%s %s %s\n' "$(sha256sum "$f" | cut -d" " -f1)" "$(stat -c %s "$f")" "$f"; done; } | sha256sum | cut -d" " -f1 )
}
newest() { ls -t "$P"/.dlk/runs/tiny/*.json | head -n 1; }

test_expect_success 'dlk train --local --workers 2 runs the program as ranks 0 and 1 of 2' '
	dlk train --local --workers 2 -f "$P/dlk.yaml" >out 2>err && cat err &&
	grep_q "^\[rank 0\] rank 0 of 2, peers 127.0.0.1,127.0.0.1, restart 0, from step 0" err &&
	grep_q "^\[rank 1\] rank 1 of 2" err &&
	! grep -q "DLK-PROGRESS {\"" err &&
	grep_q "\[rank 0\] warning: a progress line was ignored: expected one JSON object after the prefix" err &&
	test "$(grep -c "warning: a progress line" err)" = 1
'

test_expect_success 'the record has the code digest and what rank 0 reported' '
	rec=$(newest) &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [2] and .run.restarts == 0" "$rec" &&
	test "$(jq -r .run.code_sha256 "$rec")" = "$(code_digest "$P/src")" &&
	jq -e ".metrics.train_loss == 0.25 and .metrics.test_loss == 0.3 and .metrics.test_samples == 8" "$rec" &&
	jq -e ".metrics.test_accuracy == 0.875 and .metrics.confusion_matrix == [[3, 1], [0, 4]]" "$rec" &&
	jq -e ".metrics.recall == [0.75, 1] and .metrics.program.f1 == 0.8" "$rec" &&
	jq -e ".provenance.model == \"model.pt\" and .provenance.framework == \"none\"" "$rec"
'

test_expect_success 'dlk status --history and dlk report show the program run' '
	dlk status --history --local -f "$P/dlk.yaml" >hist &&
	grep_q "succeeded   2 .*87.50%" hist &&
	id=$(jq -r .run.id "$(newest)") &&
	dlk report "$id" -f "$P/dlk.yaml" -o report.html >/dev/null &&
	grep_q "87.5" report.html
'

test_expect_success 'a fail code stops the run at once, naming the rank and its last line' '
	test_exit_code 3 env FAIL=3 "$DLK" train --local --workers 2 -f "$P/dlk.yaml" >out 2>err; cat err &&
	grep_q "error: worker 1 exited with code 3; the other workers were stopped; its last line: ValueError: rank 1 gives up" err &&
	! grep -q restarting err &&
	jq -e ".run.outcome == \"failed\" and .run.failure.rank == 1 and .run.failure.exit_code == 3" "$(newest)" &&
	jq -e ".run.failure.message == \"ValueError: rank 1 gives up\"" "$(newest)" &&
	# the program'"'"'s 3 is what its exit_codes say, not dlk'"'"'s own "config"
	jq -e ".run.failure.class == \"fatal\"" "$(newest)"
'

test_expect_success 'another failure restarts the gang, which resumes from the program checkpoint' '
	dlk train --local --workers 2 -f "$P/dlk.yaml" --fresh >out 2>err0 &&
	FAIL=1 "$DLK" train --local --workers 2 -f "$P/dlk.yaml" --fresh >out 2>err; cat err &&
	grep_q "warning: worker 1 exited with code 1; restarting all 2 workers" err &&
	grep_q "^\[rank 0\] rank 0 of 2, peers 127.0.0.1,127.0.0.1, restart 1, from step [3-6]" err &&
	jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1" "$(newest)"
'

test_expect_success 'a program that is not there fails at once (127, a default fail code) and says so' '
	sed -e "s/command: python3 train.py/command: no-such-program-dlk/" -e "/exit_codes/d" "$P/dlk.yaml" >"$P/missing.yaml" &&
	test_exit_code 127 "$DLK" train --local -f "$P/missing.yaml" >out 2>err; cat err &&
	grep_q "cannot run .no-such-program-dlk.: No such file or directory" err &&
	! grep -q restarting err
'

# a process that runs (not gone, nor a zombie its new parent has not reaped yet)
running() { st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [ "${st#Z}" = "$st" ]; }

# A rank that starts a process of its own (a multiprocessing server, a loader's workers) and exits
# leaves it holding the rank's output: the gang still ends with its ranks, what the rank left in
# its process group is stopped, and one that left the group is no longer read (with a warning).
test_expect_success 'what a rank leaves behind holding its output does not keep the run going' '
	cat >"$P/left.yaml" <<-EOT &&
	name: left
	data:
	  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
	program:
	  command: [sh, -c, "sleep 300 & echo \$! >\"$TEST_TMP/left.\$DLK_RANK\"; echo rank \$DLK_RANK done"]
	EOT
	"$DLK" train --local --workers 2 -f "$P/left.yaml" >out 2>err; rc=$?; cat err; test $rc = 0 &&
	grep_q "^\[rank 1\] rank 1 done" err &&
	for r in 0 1; do pid=$(cat "$TEST_TMP/left.$r") && ! running "$pid" || return 1; done
'

test_expect_success 'a process that left the rank'"'"'s group is given up after a few seconds, and said' '
	cat >"$P/away.yaml" <<-EOT &&
	name: away
	data:
	  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
	program:
	  command: [sh, -c, "setsid sleep 300 & echo \$! >\"$TEST_TMP/away.\$DLK_RANK\"; exit 0"]
	EOT
	"$DLK" train --local -f "$P/away.yaml" >out 2>err; rc=$?; cat err
	pid=$(cat "$TEST_TMP/away.0"); kill "$pid" 2>/dev/null
	test $rc = 0 &&
	grep_q "warning: rank 0 exited [0-9]* s ago, but a process it started still holds its output" err
'

# A stop (SIGTERM, Ctrl-C) that comes while a failed generation winds down (rank 0 failed with a
# code that restarts once rank 1 is ready, rank 1 takes its time to go) stops the run: it is not
# restarted.
test_expect_success 'a stop asked while a failed generation ends stops the run instead of restarting it' '
	cat >"$P/stop.yaml" <<-EOT &&
	name: stop
	data:
	  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
	program:
	  command: [sh, -c, "if [ \$DLK_RANK = 0 ]; then while [ ! -f $TEST_TMP/ready ]; do sleep 0.05; done; exit 1; fi; trap \"echo >$TEST_TMP/asked\" TERM; echo >$TEST_TMP/ready; i=0; while [ \$i -lt 200 ]; do sleep 0.1; i=\$((i+1)); done"]
	EOT
	rm -f "$TEST_TMP/asked" "$TEST_TMP/ready" &&
	{ "$DLK" train --local --workers 2 -f "$P/stop.yaml" >out 2>err & pid=$!; } &&
	i=0; while [ ! -f "$TEST_TMP/asked" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done &&
	kill -TERM $pid; wait $pid; rc=$?; cat err
	test $rc = 75 && ! grep -q restarting err &&
	jq -e ".run.outcome == \"interrupted\"" "$(ls -t "$P"/.dlk/runs/stop/*.json | head -n 1)"
'

test_done
