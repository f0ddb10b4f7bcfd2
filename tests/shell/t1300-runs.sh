#!/bin/sh
# The local run history: every `dlk train --local` is a run with an id and a record in
# .dlk/runs/NAME; a finished run is never reported again, an interrupted one is continued;
# `dlk status NAME --history --local` lists the runs, `--run ID` shows one, `dlk report ID`
# draws one, with the digests of the data each run trained on.
. "$(dirname "$0")/../lib.sh"

make_project() { blobs_project "$@"; }
sha() { sha256sum "$1" | cut -d" " -f1; }
ckpts() { ls -td "$1"/.dlk/checkpoints/blobs/*/ 2>/dev/null | head -1 | sed "s,/$,,"; }

# One project, three runs: a finished one, one stopped by SIGTERM and continued, one on other data.
P=$TEST_TMP/p
make_project "$P" && dlk train --local -q -f "$P/dlk.yaml" >/dev/null 2>"$TEST_TMP/err1" ||
	{ echo "Bail out! the first run failed"; cat "$TEST_TMP/err1"; exit 1; }
TRAIN1=$(sha "$P/train.csv")

test_expect_success 'a run has an id and a record that says what it did' '
	ls "$P/.dlk/runs/blobs" >recs && test "$(grep -c "\.json$" recs)" = 1 &&
	rec="$P/.dlk/runs/blobs/$(grep "\.json$" recs | head -n 1)" &&
	jq -e ".format == \"dlk-run\" and .run.outcome == \"succeeded\" and .run.project == \"blobs\"" "$rec" &&
	jq -e ".run.worlds == [1] and .run.restarts == 0 and .run.where == \"local\" and .run.trigger == \"manual\"" "$rec" &&
	jq -e ".run.data[] | select(.split == \"train\") | .sha256 == \"$TRAIN1\"" "$rec" &&
	jq -e "(.run.spec_sha256 | test(\"^[0-9a-f]{64}$\")) and (.run.bundle.sha256 | test(\"^[0-9a-f]{64}$\"))" "$rec" &&
	test "$(jq -r .run.bundle.sha256 "$rec")" = "$(sha "$P/blobs.dlk")" &&
	jq -e ".metrics.confusion_matrix | length == 2" "$rec" &&
	jq -e "(.run.started_at | test(\"Z$\")) and (.run.finished_at >= .run.started_at)" "$rec"
'

test_expect_success 'a second run after a finished one trains again, as a new run' '
	dlk train --local -f "$P/dlk.yaml" >/dev/null 2>err && cat err &&
	! grep -q "nothing left to train" err && grep_q "epoch 4/4" err &&
	test "$(ls "$P/.dlk/runs/blobs" | grep -c "\.json$")" = 2
'

test_expect_success 'SIGTERM interrupts a run; the next invocation continues it, saying so' '
	n=$(ls "$P/.dlk/checkpoints/blobs" | wc -l) &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=30 "$DLK" train --local -f "$P/dlk.yaml" >/dev/null 2>err & pid=$!; } &&
	i=0; while ! { test "$(ls "$P/.dlk/checkpoints/blobs" | wc -l)" -gt "$n" && ls "$(ckpts "$P")" | grep -q step-; }; do
		sleep 0.05; i=$((i + 1)); test $i -lt 400 || exit 1
	done &&
	kill -TERM $pid; wait $pid; test $? = 75 &&
	dlk status blobs --history --local -f "$P/dlk.yaml" >hist && cat hist &&
	head -n 2 hist | tail -n 1 | grep_q "interrupted .*stopped by SIGTERM" &&
	id=$(head -n 2 hist | tail -n 1 | cut -c1-8) &&
	dlk train --local -f "$P/dlk.yaml" >/dev/null 2>err && cat err &&
	grep_q "resuming run $id from checkpoint" err &&
	rec=$(ls "$P"/.dlk/runs/blobs/$id*.json) &&
	jq -e ".run.outcome == \"succeeded\" and .run.restarts == 1 and (.run.failure == null)" "$rec" &&
	test "$(ls "$P/.dlk/runs/blobs" | grep -c "\.json$")" = 3
'

test_expect_success 'a run on other data records the other digest' '
	cp "$P/train.csv" keep.csv && make_project q 7 && cp q/train.csv "$P/train.csv" &&
	dlk train --local -q -f "$P/dlk.yaml" >/dev/null 2>&1 &&
	newest=$(dlk status blobs --history --local -f "$P/dlk.yaml" -o json | jq -r ".runs[0].run.data[] | select(.split == \"train\") | .sha256") &&
	test "$newest" = "$(sha "$P/train.csv")" && test "$newest" != "$TRAIN1" &&
	cp keep.csv "$P/train.csv"
'

test_expect_success 'the history lists every run, newest first, with the fingerprint of its data' '
	dlk status blobs --history --local -f "$P/dlk.yaml" >hist && cat hist &&
	test "$(wc -l <hist)" = 5 &&
	head -n 1 hist | grep_q "^RUN  *STARTED (UTC)  *WALL  *OUTCOME  *WORKERS  *RESTARTS  *ACCURACY  *DATA  *TRIGGER  *REASON$" &&
	test "$(grep -c " succeeded " hist)" = 4 &&
	test "$(awk "NR > 1 { print \$9 }" hist | sort -u | wc -l)" = 2 &&
	dlk status blobs --history --local -f "$P/dlk.yaml" -o json >h.json &&
	jq -e ".project == \"blobs\" and .store == \"local\" and .dropped == 0 and (.runs | length) == 4" h.json &&
	jq -e "[.runs[].run.started_at] == ([.runs[].run.started_at] | sort | reverse)" h.json &&
	jq -e "[.runs[] | .run.data[] | select(.split == \"train\") | .sha256] | map(select(. == \"$TRAIN1\")) | length == 3" h.json &&
	dlk status blobs --history --local -f "$P/dlk.yaml" -o wide | head -n 1 | grep_q "SPEC  *COMMIT  *IMAGE  *GPU TIME  *CPU TIME  *COST  *REASON$"
'

test_expect_success '--run shows one run by a prefix of its id; -o json is its record' '
	id=$(dlk status blobs --history --local -f "$P/dlk.yaml" -o json | jq -r ".runs[1].run.id") &&
	dlk status blobs --run "$(echo $id | cut -c1-6)" --local -f "$P/dlk.yaml" >show && cat show &&
	grep_q "^run  *$id$" show && grep_q "^outcome  *succeeded$" show &&
	grep_q "^workers  *1 (1 restart)$" show && grep_q "sha256:$TRAIN1" show &&
	grep_q "^metrics  *test accuracy [0-9.]*%" show && grep_q "dlk report $(echo $id | cut -c1-8)" show &&
	dlk status blobs --run "$id" --local -f "$P/dlk.yaml" -o json | jq -e ".run.id == \"$id\" and .run.restarts == 1"
'

test_expect_success 'an unknown or ambiguous run id is a clear error' '
	test_exit_code 6 dlk status blobs --run ffffffff --local -f "$P/dlk.yaml" 2>err && cat err &&
	grep_q "no run .ffffffff. in the local history of .blobs." err && grep_q "history --local" err &&
	test_exit_code 2 dlk status blobs --history -w 2>err && grep_q "one project" err &&
	test_exit_code 2 dlk status blobs --local 2>err && grep_q "goes with --history or --run" err &&
	test_exit_code 2 dlk status blobs --history --run x 2>err
'

test_expect_success '--run A --compare B sets two runs side by side, the differences marked' '
	ids=$(dlk status blobs --history --local -f "$P/dlk.yaml" -o json | jq -r ".runs[].run.id") &&
	a=$(echo "$ids" | sed -n 1p) && b=$(echo "$ids" | sed -n 2p) &&
	dlk status blobs --run "$a" --compare "$b" --local -f "$P/dlk.yaml" >cmp 2>err && cat cmp err &&
	grep_q "^\* train data  *[0-9a-f]\{12\}  *[0-9a-f]\{12\}$" cmp &&
	grep_q "^  test data " cmp && grep_q "^  outcome  *succeeded  *succeeded$" cmp &&
	grep_q "dlk report $(echo $a | cut -c1-8) --compare $(echo $b | cut -c1-8)" err &&
	dlk status blobs --run "$a" --compare "$b" --local -f "$P/dlk.yaml" -o json >cmp.json &&
	jq -e "(.runs | length) == 2 and (.differ | index(\"train data\")) != null and (.differ | index(\"outcome\")) == null" cmp.json &&
	test_exit_code 2 dlk status blobs --compare "$b" --local -f "$P/dlk.yaml" 2>err && grep_q "goes with --run" err
'

test_expect_success 'dlk report RUN-ID draws a run of the local history; --compare sets another beside it' '
	cd "$P" && ids=$(dlk status blobs --history --local -o json | jq -r ".runs[].run.id") &&
	a=$(echo "$ids" | sed -n 1p) && b=$(echo "$ids" | sed -n 2p) &&
	dlk report "$a" -o json >r.json &&
	jq -e ".runs[0].source.kind == \"run\" and .runs[0].source.id == \"$a\" and .runs[0].source.store == \"local\"" r.json &&
	jq -e ".runs[0].metrics.test_accuracy > 0.5" r.json &&
	dlk report "$(echo $b | cut -c1-8)" --compare "$a" -o page.html 2>err && cat err && test -s page.html &&
	grep_q "run $b" page.html && grep_q "run $a" page.html
'

test_expect_success 'a run id that no history holds, and no cluster: says where it looked' '
	cd "$P" && test_exit_code 6 dlk report deadbeef-0000 2>err; cat err;
	grep_q "deadbeef-0000" err
'

test_expect_success 'within a project directory the history, a run and the report need no name' '
	dlk status blobs --history --local -f "$P/dlk.yaml" >want &&
	(cd "$P" && dlk status --history --local) >hist && diff -u want hist &&
	a=$(dlk status blobs --history --local -f "$P/dlk.yaml" -o json | jq -r ".runs[0].run.id") &&
	(cd "$P" && dlk status --run "$a" --local -o json) | jq -e ".run.id == \"$a\"" &&
	(cd "$P" && dlk report -o json) >r.json &&
	jq -e ".runs[0].source.kind == \"bundle\"" r.json &&
	test "$(jq -r ".runs[0].weights.sha256" r.json)" = "$(tar -xOf "$P/blobs.dlk" model.json | jq -r .weights.sha256)" &&
	(cd "$P" && dlk report blobs -o json) >r2.json && diff -u r.json r2.json &&
	rm -f "$P/blobs.html" && (cd "$P" && dlk report -q) && test -s "$P/blobs.html"
'

test_expect_success 'without its bundle, NAME is the newest run trained here; with no project file, says what to give' '
	mkdir nob && cp "$P/dlk.yaml" nob/ && cp -r "$P/.dlk" nob/ &&
	a=$(dlk status blobs --history --local -f nob/dlk.yaml -o json | jq -r ".runs[0].run.id") &&
	(cd nob && dlk report blobs -o json) | jq -e ".runs[0].source.kind == \"run\" and .runs[0].source.id == \"$a\"" &&
	(cd nob && dlk report -o json) | jq -e ".runs[0].source.id == \"$a\"" &&
	mkdir none && (cd none && test_exit_code 2 dlk status --history --local 2>err && cat err &&
		grep_q "no project NAME given, and no project file .dlk.yaml. here" err &&
		test_exit_code 2 dlk report 2>err && cat err && grep_q "no run .* given, and no project file" err)
'

test_expect_success 'a damaged record is left out with a warning, not a failure' '
	cp -r "$P" d && printf "{\"format\": \"dlk-run\", \"version\": 1, \"run\": {\"id\": 5}}" >d/.dlk/runs/blobs/bad.json &&
	dlk status blobs --history --local -f d/dlk.yaml >hist 2>err && cat err hist &&
	grep_q "1 record in the local history .* could not be read and is left out" err && test "$(wc -l <hist)" = 5
'

test_expect_success 'a project kept in git: the record names its commit and whether the tree was dirty' '
	make_project g && cd g && git init -q && git add dlk.yaml train.csv test.csv &&
	git -c user.name=t -c user.email=t@t commit -qm one && head=$(git rev-parse HEAD) &&
	dlk train --local -q >/dev/null 2>&1 && echo "# more" >>dlk.yaml &&
	dlk train --local -q >/dev/null 2>&1 &&
	dlk status blobs --history --local -o json >h.json &&
	jq -e ".runs[1].run.git_commit == \"$head\" and .runs[1].run.git_dirty == false" h.json &&
	jq -e ".runs[0].run.git_commit == \"$head\" and .runs[0].run.git_dirty == true" h.json &&
	dlk status blobs --run $(jq -r ".runs[0].run.id" h.json) --local | grep_q "^commit  *$head (dirty tree)$"
'

test_expect_success 'an interrupted run continues at another worker count with its global batch, or is refused when it does not split' '
	make_project w &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=30 "$DLK" train --local --workers 2 -f w/dlk.yaml >/dev/null 2>err & pid=$!; } &&
	i=0; while ! ls "$(ckpts w)" 2>/dev/null | grep -q step-; do sleep 0.05; i=$((i + 1)); test $i -lt 400 || exit 1; done &&
	kill -TERM $pid; wait $pid; test $? = 75 &&
	test_exit_code 3 dlk train --local --workers 3 -f w/dlk.yaml 2>err && cat err &&
	grep_q "run [0-9a-f]\{8\} (checkpoint at step [0-9]*): cannot go on at 3 workers: the run.s global batch of 64 (2 workers x 32)" err &&
	dlk train --local -f w/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "resuming run [0-9a-f]\{8\} from checkpoint [0-9]* at 1 worker (was 2), batch 64 per worker, global 64" err &&
	dlk status blobs --history --local -f w/dlk.yaml -o json | jq -e "(.runs | length) == 1 and .runs[0].run.restarts == 1 and .runs[0].run.worlds == [2, 1]"
'

test_expect_success '--if-data-changed: unchanged data is a skipped run and exit 10; changed data trains' '
	make_project c && dlk train --local -q -f c/dlk.yaml >/dev/null 2>&1 &&
	test_exit_code 10 dlk train --local --if-data-changed -f c/dlk.yaml >out 2>err && cat err &&
	grep_q "the data is what run [0-9a-f]\{8\} trained on" err && ! grep -q epoch err &&
	dlk status blobs --history --local -f c/dlk.yaml -o json >h.json &&
	jq -e ".runs[0].run.outcome == \"skipped\" and .runs[0].run.trigger == \"data-changed\"" h.json &&
	jq -e ".runs[0].run.reason == (\"the data is unchanged since run \" + .runs[1].run.id)" h.json &&
	dlk status blobs --history --local -f c/dlk.yaml | sed -n 2p | grep_q " skipped .* the data is unchanged since run " &&
	echo "0.5,0.5,1" >>c/train.csv &&
	dlk train --local --if-data-changed -f c/dlk.yaml >/dev/null 2>err && cat err &&
	grep_q "the data differs from what run [0-9a-f]\{8\} trained on: training" err &&
	dlk status blobs --history --local -f c/dlk.yaml -o json | jq -e ".runs[0].run.outcome == \"succeeded\" and .runs[0].run.trigger == \"data-changed\"" &&
	test_exit_code 2 dlk train --if-data-changed -f c/dlk.yaml 2>err
'

# stdout a terminal of COLUMNS columns (script(1) gives the command one; with no terminal of its
# own to copy, its width is unknown and dlk reads COLUMNS)
on_tty() {
	cols=$1 && shift &&
	COLUMNS=$cols script -qc "$*" /dev/null </dev/null | tr -d "\r"
}
longest() { LC_ALL=C.UTF-8 wc -L <"$1"; }

test_expect_success 'on a terminal the history fits its width, the reason cut with "…"; piped, nothing is cut' '
	command -v script >/dev/null || test_missing "script(1)" &&
	make_project c && dlk train --local -q -f c/dlk.yaml >/dev/null 2>&1 &&
	test_exit_code 10 dlk train --local -q --if-data-changed -f c/dlk.yaml >/dev/null 2>&1 &&
	id=$(dlk status blobs --history --local -f c/dlk.yaml -o json | jq -r ".runs[1].run.id") &&
	dlk status blobs --history --local -f c/dlk.yaml >piped && cat piped &&
	test "$(longest piped)" -gt 130 && grep_q "the data is unchanged since run $id$" piped && ! grep -q "…" piped &&
	on_tty 130 "\"$DLK\" status blobs --history --local -f c/dlk.yaml" >tty && cat tty &&
	test "$(wc -l <tty)" = "$(wc -l <piped)" && test "$(longest tty)" -le 130 &&
	sed -n 2p tty | grep_q " skipped .* the data is[a-z ]*…$" &&
	head -n 1 tty | grep_q "TRIGGER  *REASON$" &&
	on_tty 400 "\"$DLK\" status blobs --history --local -f c/dlk.yaml" >wide && diff -u piped wide
'

test_expect_success 'a reason read from a record cannot move the cursor: control characters are shown escaped' '
	mkdir esc && cp "$P/dlk.yaml" esc/ && cp -r "$P/.dlk" esc/ &&
	f=$(ls esc/.dlk/runs/blobs/*.json | head -n 1) &&
	jq ".run.reason = \"bad \u001b[31mred\tend\"" "$f" >x && mv x "$f" &&
	dlk status blobs --history --local -f esc/dlk.yaml >hist && cat hist &&
	grep -q "bad \\\\e\[31mred\\\\tend$" hist && ! grep -q "$(printf "\033")" hist
'

test_expect_success 'a project with no runs says so' '
	make_project e && dlk status blobs --history --local -f e/dlk.yaml >out 2>err && cat err &&
	test ! -s out && grep_q "no runs of .blobs. in the local history" err
'

test_done
