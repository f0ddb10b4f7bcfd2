#!/bin/sh
# What a local run says about itself is true and the same everywhere: Ctrl-C exits 130 with the
# command that resumes it; the bundle names the run that made it (dlk lineage); one training
# time in one format on the terminal, in the history and on the report page; a run here records
# no container image; -q prints the result, not the table; a table writes percentages one way.
. "$(dirname "$0")/../lib.sh"

make_project() { blobs_project "$1" 5; }
n_ckpts() { ls -d "$1"/.dlk/checkpoints/blobs/*/step-* 2>/dev/null | wc -l; }
newest_run() { dlk status blobs --history --local -f "$1/dlk.yaml" -o json | jq -r ".runs[0].run.id"; }
# starts a run of project $1 in the background (options after it), waits for its first
# checkpoint (one more than there were) and sends it SIGINT; its exit code in $rc, its stderr in err
interrupt() {
	p=$1; shift; before=$(n_ckpts "$p")
	{ DLK_TEST_CHECKPOINT_DELAY_MS=30 "$DLK" train --local -f "$p/dlk.yaml" "$@" >/dev/null 2>err & pid=$!; } &&
	i=0; while [ "$(n_ckpts "$p")" -le "$before" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done &&
	kill -INT $pid; wait $pid; rc=$?; cat err
}

test_expect_success 'Ctrl-C of a run here exits 130, and its hint resumes it' '
	make_project p && interrupt p &&
	test $rc = 130 && grep_q "stopped by an interrupt after [0-9]* steps; checkpoint written" err &&
	grep_q "run the same command again to resume from it" err &&
	id=$(newest_run p | cut -c1-8) &&
	dlk train --local -f p/dlk.yaml >/dev/null 2>err && cat err && grep_q "resuming run $id from checkpoint" err
'

test_expect_success 'Ctrl-C of a --fresh run: the hint is the command that resumes it, which does' '
	make_project f && dlk train --local -q -f f/dlk.yaml >/dev/null 2>&1 &&
	interrupt f --fresh &&
	test $rc = 130 && grep_q "checkpoint written" err &&
	grep_q "run the same command without --fresh to resume from it" err &&
	! grep -q "run the same command again" err &&
	id=$(newest_run f | cut -c1-8) &&
	dlk train --local -f f/dlk.yaml >/dev/null 2>err && cat err && grep_q "resuming run $id from checkpoint" err
'

test_expect_success 'the bundle names the run that made it; lineage shows it' '
	make_project l && dlk train --local -q -f l/dlk.yaml >/dev/null 2>&1 &&
	id=$(newest_run l) && test -n "$id" &&
	tar -xOf l/blobs.dlk model.json | jq -e ".provenance.run_id == \"$id\"" &&
	dlk lineage l/blobs.dlk >out && cat out && grep_q "^run          $id\$" out &&
	jq -e ".run.bundle.path == \"l/.dlk/runs/blobs/$id.dlk\"" l/.dlk/runs/blobs/$id.json
'

test_expect_success 'each run keeps its bundle where its record says; NAME.dlk is the newest run'"'"'s' '
	make_project b && dlk train --local -q -f b/dlk.yaml >/dev/null 2>&1 && first=$(newest_run b) &&
	dlk train --local -q -f b/dlk.yaml --set training.seed=9 >/dev/null 2>&1 && second=$(newest_run b) &&
	test "$first" != "$second" &&
	for id in $first $second; do
		rec=b/.dlk/runs/blobs/$id.json && path=$(jq -r .run.bundle.path $rec) &&
		test "$path" = "b/.dlk/runs/blobs/$id.dlk" &&
		test "$(sha256sum <"$path" | cut -d" " -f1)" = "$(jq -r .run.bundle.sha256 $rec)" || return 1
	done &&
	cmp b/blobs.dlk b/.dlk/runs/blobs/$second.dlk && ! cmp -s b/blobs.dlk b/.dlk/runs/blobs/$first.dlk &&
	dlk lineage b/.dlk/runs/blobs/$first.dlk | grep_q "^run          $first\$"
'

test_expect_success 'one training time, one format: the terminal, the history and the report page agree' '
	make_project t && dlk train --local -f t/dlk.yaml >/dev/null 2>err && cat err &&
	took=$(sed -n "s/^trained 4 epochs in \([^ ]*\) (.*/\1/p" err) && test -n "$took" &&
	echo "$took" | grep_q "^[0-9.]*s\$\|^[0-9]*m[0-9][0-9]s\$" &&
	id=$(newest_run t) &&
	dlk status blobs --run "$id" --local -f t/dlk.yaml >show && cat show &&
	grep_q "^training  *$took (the training loop, resumes included)\$" show &&
	grep_q "^time  *.* UTC (wall [0-9.]*s)\$" show &&
	(cd t && dlk report "$id" -o page.html) && grep_q "id=\"fig-time\"><dt>training time</dt><dd>$took<" t/page.html &&
	dlk status blobs --run "$id" --compare "$id" --local -f t/dlk.yaml >cmp && cat cmp &&
	grep_q "^  training time  *$took  *$took\$" cmp
'

test_expect_success 'a run here records no container image, in its record and its bundle alike' '
	make_project t && dlk train --local -q -f t/dlk.yaml >/dev/null 2>&1 &&
	id=$(newest_run t) &&
	jq -e ".run.image == null" t/.dlk/runs/blobs/$id.json &&
	tar -xOf t/blobs.dlk model.json | jq -e ".provenance.image == null" &&
	dlk lineage t/blobs.dlk | grep_q "^image        (not recorded)\$" &&
	dlk status blobs --history --local -o wide -f t/dlk.yaml >hist && cat hist &&
	! grep -q "cuda\|dlk:" hist &&
	dlk status blobs --run "$id" --local -f t/dlk.yaml | grep_q "^dlk  *[^ ]*, image none (trained here)\$"
'

test_expect_success '-q prints the result, not the confusion matrix; precision is written as recall is' '
	make_project q && dlk train --local -q -f q/dlk.yaml >out 2>err && cat out &&
	grep_q "^test accuracy: [0-9.]*% (200 samples)" out && grep_q "^model bundle: " out &&
	! grep -q "confusion matrix" out && ! grep -q "^precision" out &&
	dlk train --local -f q/dlk.yaml >out 2>/dev/null && cat out &&
	grep_q "^precision  *[0-9.]*%  *[0-9.]*%\$" out && grep_q "recall\$" out && ! grep -q "(%)" out
'

test_done
