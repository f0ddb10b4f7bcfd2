#!/bin/sh
# DLK_PROGRESS_FILE: a program whose output is not its own (a library prints there, a launcher
# swallows it) appends its DLK-PROGRESS lines to the file dlk names in its environment; the
# supervisor tails it as it reads the output. Each process has its own file; rank 0 speaks for
# the gang; a bad line is warned about once and the run goes on; the reports written there make
# the run's record. A restarted gang's processes get fresh files. DLK_DATA_DIR: the files of a
# versioned dataset (data.dataset of data.store) placed, verified, where the program reads them.
. "$(dirname "$0")/../lib.sh"

command -v python3 >/dev/null || { test_missing python3; test_done; }

P=$TEST_TMP/p
mkdir -p "$P/src"
cat >"$P/dlk.yaml" <<'YAML'
name: pf
data:
  train: {images: /d/train-images.gz, labels: /d/train-labels.gz}
program:
  command: python3 train.py
  code: src
YAML
cat >"$P/src/train.py" <<'PY'
import json, os, sys
rank = int(os.environ["DLK_RANK"])
path = os.environ["DLK_PROGRESS_FILE"]
print("rank %d writes its reports to %s" % (rank, os.path.basename(path)), flush=True)
def report(**fields):
    with open(path, "a") as f:
        f.write("DLK-PROGRESS " + json.dumps(fields) + "\n")
restart = int(os.environ["DLK_RESTART_COUNT"])
with open(path) as f:
    print("rank %d finds %d lines in its file at restart %d" % (rank, len(f.readlines()), restart), flush=True)
if rank == 1:
    # rank 0 speaks for the gang: what another rank reports is not the run's
    report(event="done", loss=99.0)
    sys.exit(0)
for step in range(1, 4):
    report(step=step, epoch=1, epochs=1, loss=1.0 / step)
with open(path, "a") as f:
    f.write("a line of its own, not a report\n")
    f.write("DLK-PROGRESS [1, 2]\n")
if restart == 0 and os.environ.get("FAIL"):
    sys.exit(1)
report(event="done", loss=0.25, model="model.pt",
       metrics={"test_loss": 0.3, "f1": 0.8}, confusion=[[3, 1], [0, 4]])
PY
newest() { ls -t "$P"/.dlk/runs/pf/*.json | head -n 1; }

test_expect_success 'each process gets a file of its own, and rank 0'"'"'s reports there make the record' '
	mkdir -p "$TEST_TMP/tmpd" &&
	env TMPDIR="$TEST_TMP/tmpd" "$DLK" train --local --workers 2 -f "$P/dlk.yaml" >out 2>err; rc=$?; cat err; test $rc = 0 &&
	grep_q "^\[rank 0\] rank 0 writes its reports to progress-0$" err &&
	grep_q "^\[rank 1\] rank 1 writes its reports to progress-1$" err &&
	grep_q "^\[rank 0\] rank 0 finds 0 lines in its file at restart 0$" err &&
	! grep -q "a line of its own" err &&
	test "$(grep -c "warning: a progress line was ignored" err)" = 1 &&
	rec=$(newest) &&
	jq -e ".run.outcome == \"succeeded\" and .metrics.train_loss == 0.25 and .metrics.test_accuracy == 0.875" "$rec" &&
	jq -e ".metrics.program.f1 == 0.8 and .provenance.model == \"model.pt\"" "$rec"
'

test_expect_success 'the files and their directory (under TMPDIR) are gone after the run' '
	ls -A "$TEST_TMP/tmpd" >left && cat left && test ! -s left
'

test_expect_success 'a restarted gang'"'"'s processes start with empty files' '
	env FAIL=1 "$DLK" train --local --workers 2 -f "$P/dlk.yaml" >out 2>err; rc=$?; cat err; test $rc = 0 &&
	grep_q "^\[rank 0\] rank 0 finds 0 lines in its file at restart 1$" err &&
	rec=$(newest) &&
	jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1 and .metrics.train_loss == 0.25" "$rec"
'

# a versioned dataset in a directory store, which a program reads as files
mkdir -p "$TEST_TMP/ds/sub" && printf 'a,b\n1,2\n' >"$TEST_TMP/ds/train.csv" && printf 'hello\n' >"$TEST_TMP/ds/sub/note.txt"
mkdir -p "$TEST_TMP/dp"
cat >"$TEST_TMP/dp/dlk.yaml" <<YAML
name: dsp
data:
  format: csv
  dataset: tiny@v1
  store: $TEST_TMP/store
  train: {source: train.csv}
program:
  command: [sh, -c, 'echo "data in \$DLK_DATA_DIR"; cat "\$DLK_DATA_DIR/train.csv" "\$DLK_DATA_DIR/sub/note.txt"']
YAML

test_expect_success 'DLK_DATA_DIR holds the files of data.dataset, fetched and verified' '
	dlk data push -q "$TEST_TMP/ds" --to "$TEST_TMP/store" --tag tiny@v1 >id.out 2>err && cat err &&
	id=$(sed -n "s/^sha256:\([0-9a-f]*\).*/\1/p" id.out | head -n 1) && test -n "$id" &&
	dlk train --local -f "$TEST_TMP/dp/dlk.yaml" >out 2>err; rc=$?; cat err; test $rc = 0 &&
	grep_q "dataset sha256:$(echo "$id" | cut -c1-12): 2 files, .* (DLK_DATA_DIR)" err &&
	grep_q "^\[rank 0\] data in $TEST_TMP/dp/.dlk/data/$id$" err &&
	grep_q "^\[rank 0\] 1,2$" err && grep_q "^\[rank 0\] hello$" err &&
	rec=$(ls -t "$TEST_TMP"/dp/.dlk/runs/dsp/*.json | head -n 1) &&
	jq -e ".run.data == [{split: \"dataset\", url: \"$TEST_TMP/store (tiny@v1)\", sha256: \"$id\"}]" "$rec" &&
	jq -e ".provenance.dataset == {id: \"sha256:$id\", tag: \"tiny@v1\", store: \"$TEST_TMP/store\"}" "$rec" &&
	dlk impact --local "sha256:$id" -f "$TEST_TMP/dp/dlk.yaml" >impact.out 2>&1; cat impact.out; grep -q "$(jq -r .run.id "$rec" | cut -c1-8)" impact.out
'

test_expect_success 'DLK_DATA_DIR is absolute when dlk.yaml is named by a relative path' '
	cd "$TEST_TMP" && dlk train --local -f dp/dlk.yaml >out 2>err; rc=$?; cat err; test $rc = 0 &&
	grep_q "^\[rank 0\] data in $TEST_TMP/dp/.dlk/data/[0-9a-f]*$" err && grep_q "^\[rank 0\] hello$" err
'

test_expect_success 'a dataset the store does not have stops the run before the program starts' '
	sed -i "s/tiny@v1/tiny@v9/" "$TEST_TMP/dp/dlk.yaml" &&
	dlk train --local -f "$TEST_TMP/dp/dlk.yaml" >out 2>err; rc=$?; cat err; test $rc != 0 &&
	grep_q "tiny@v9" err && ! grep -q "data in" err
'

test_done
