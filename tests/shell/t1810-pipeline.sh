#!/bin/sh
# dlk pipeline run --local: the example pipeline (prepare.py -> dlk train -> dlk predict ->
# gate.py) plus a stage on a dataset of its own runs here; a second run reuses every stage;
# changing one input's tag, or the training params, re-runs exactly the stages downstream; a
# failing stage blocks its descendants and the exit code says so; status (-o json), logs,
# lineage and impact follow the stages. Every case works in $TEST_TMP/p, left by the one before.
. "$(dirname "$0")/../lib.sh"

fmnist_ready
command -v python3 >/dev/null 2>&1 || test_missing "python3 is installed"
command -v jq >/dev/null 2>&1 || test_missing "jq is installed"
command -v flock >/dev/null 2>&1 || test_missing "flock (util-linux) is installed"

# the stages that ran and those reused, from a run's notes: "prepare,train|count"
ran() { sed -n "s/^stage \([a-z]*\): runs (key .*/\1/p" "$1" | sort | paste -sd, -; }
reused() { sed -n "s/^stage \([a-z]*\): reused (key .*/\1/p" "$1" | sort | paste -sd, -; }

test_expect_success 'setup: the example, raw Fashion-MNIST and a second input in a store' '
	cd "$TEST_TMP" &&
	dlk init -q --example pipeline p && cd p &&
	test -f dlk-pipeline.yaml && test -f prepare.py && test -f gate.py &&
	dlk data push -q "$FM" --to ./store --tag fashion-raw@v1 >raw1.id &&
	mkdir notes && echo one >notes/a && dlk data push -q notes --to ./store --tag notes@v1 >/dev/null &&
	cat >count.sh <<\EOF_SH &&
wc -c <"$DLK_INPUT_NOTES/a" >"$DLK_OUTPUT/count"
EOF_SH
	printf "  count:\n    inputs: {notes: notes@v1}\n    run: [sh, count.sh]\n" >>dlk-pipeline.yaml
'

test_expect_success 'the first run runs every stage in dependency order; status says succeeded' '
	cd "$TEST_TMP/p" &&
	dlk pipeline run --local >out 2>err1 && cat err1 &&
	test "$(ran err1)" = "count,gate,predict,prepare,train" &&
	sed -n "s/^stage \([a-z]*\): runs.*/\1/p" err1 | paste -sd" " - | grep_q "^prepare train predict gate" &&
	dlk pipeline status -o json >st1.json &&
	test "$(jq -r "[.stages[].state] | unique | join(\",\")" st1.json)" = succeeded &&
	test "$(jq -r ".stages | length" st1.json)" = 5 &&
	dlk pipeline status >st1.txt && grep_q "^train  *train  *succeeded  *fashion-train " st1.txt &&
	dlk pipeline logs gate >gate.log && grep_q "^gate: accuracy 0\.[0-9]* on 2000 samples" gate.log &&
	dlk data get -q fashion-gate@latest --from ./store g && jq -e ".samples == 2000" g/report.json
'

test_expect_success 'a second run reuses every stage and names the run that made each output' '
	cd "$TEST_TMP/p" &&
	dlk pipeline run --local -o json >run2.json 2>err2 && cat err2 &&
	test "$(jq -r "[.stages[].state] | unique | join(\",\")" run2.json)" = reused &&
	test -z "$(ran err2)" && test "$(reused err2)" = "count,gate,predict,prepare,train" &&
	dlk pipeline status -o json >st2.json &&
	test "$(jq -r "[.stages[].state] | unique | join(\",\")" st2.json)" = reused &&
	jq -r ".stages[] | .name + \" \" + .run_id + \" \" + .output_id" st1.json >made &&
	jq -r ".stages[] | .name + \" \" + .reused_from_run + \" \" + .output_id" st2.json >reused &&
	diff made reused &&
	run=$(jq -r ".stages[] | select(.name == \"train\") | .run_id" st1.json) &&
	grep_q "^stage train: reused (key [0-9a-f]*): fashion-train sha256:[0-9a-f]* from run $run\$" err2
'

test_expect_success 'the keys are tags in the store: a checkout without this one'"'"'s state reuses every stage' '
	cd "$TEST_TMP/p" &&
	mv .dlk/pipelines pipelines.away &&
	dlk pipeline run --local 2>err2b && cat err2b &&
	test -z "$(ran err2b)" && test "$(reused err2b)" = "count,gate,predict,prepare,train" &&
	run=$(jq -r ".stages[] | select(.name == \"prepare\") | .run_id" st1.json) &&
	grep_q "^stage prepare: reused (key [0-9a-f]*): fashion-small sha256:[0-9a-f]* from run $run\$" err2b &&
	key=$(jq -r ".stages[] | select(.name == \"prepare\") | .key" st1.json) &&
	dlk data show "fashion-small@key-$key" --from ./store >/dev/null &&
	rm -rf .dlk/pipelines && mv pipelines.away .dlk/pipelines
'

test_expect_success 'changing one input'"'"'s tag re-runs exactly the stages below it (--dry-run says so first)' '
	cd "$TEST_TMP/p" &&
	echo two >notes/a && dlk data push -q notes --to ./store --tag notes@v2 >/dev/null &&
	sed "s/notes@v1/notes@v2/" dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	dlk pipeline run --dry-run 2>dry && cat dry &&
	grep_q "^stage count: would run (key" dry && test "$(reused dry)" = "gate,predict,prepare,train" &&
	dlk pipeline run --local 2>err3 && cat err3 &&
	test "$(ran err3)" = count && test "$(reused err3)" = "gate,predict,prepare,train" &&
	mkdir raw2 && cp "$FM"/* raw2/ &&
	cp "$FM/train-images-idx3-ubyte.gz" raw2/t10k-images-idx3-ubyte.gz &&
	cp "$FM/train-labels-idx1-ubyte.gz" raw2/t10k-labels-idx1-ubyte.gz &&
	dlk data push -q raw2 --to ./store --tag fashion-raw@v2 >raw2.id &&
	sed "s/fashion-raw@v1/fashion-raw@v2/" dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	dlk pipeline run --local 2>err4 && cat err4 &&
	test "$(ran err4)" = "gate,predict,prepare,train" && test "$(reused err4)" = count
'

test_expect_success 'changing the training params re-runs train and what follows, not prepare' '
	cd "$TEST_TMP/p" &&
	sed "s/training.epochs: 1 /training.epochs: 2 /" dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	grep_q "training.epochs: 2 " dlk-pipeline.yaml &&
	dlk pipeline run --local 2>err5 && cat err5 &&
	test "$(ran err5)" = "gate,predict,train" && test "$(reused err5)" = "count,prepare"
'

test_expect_success 'a failing stage blocks its descendants, names them and exits 1; fixed, the run goes on' '
	cd "$TEST_TMP/p" &&
	cp dlk-pipeline.yaml good.yaml &&
	sed "s/training.epochs: 2 /training.epochs: lots /" good.yaml >dlk-pipeline.yaml &&
	test_exit_code 1 dlk pipeline run --local 2>err6; cat err6 &&
	grep_q "^warning: stage train: failed, exit code 3: error: --set training.epochs=lots" err6 &&
	grep_q "^warning: stage predict: not run: its input stage .train. failed" err6 &&
	grep_q "^warning: stage gate: not run: its input stage .predict. did not run" err6 &&
	grep_q "^error: pipeline fashion: stage train failed; not run: predict, gate" err6 &&
	dlk pipeline status -o json >st6.json &&
	test "$(jq -r ".stages[] | .name + \"=\" + .state" st6.json | sort | paste -sd" " -)" = \
		"count=reused gate=blocked predict=blocked prepare=reused train=failed" &&
	jq -e ".stages[] | select(.name == \"train\") | .exit_code == 3" st6.json &&
	dlk pipeline logs train >train.log && grep_q "training.epochs" train.log &&
	cp good.yaml dlk-pipeline.yaml &&
	dlk pipeline run --local 2>err7 && cat err7 &&
	test -z "$(ran err7)" && test "$(reused err7)" = "count,gate,predict,prepare,train" &&
	dlk pipeline run --local prepare 2>err7b && test "$(reused err7b)" = prepare &&
	dlk pipeline status -o json >st7.json &&
	test "$(jq -r "[.stages[].state] | unique | join(\",\")" st7.json)" = reused
'

test_expect_success '--parallel 2 runs independent stages at once; the stage after them waits for both' '
	cd "$TEST_TMP/p" && mkdir meet &&
	cat >meet.sh <<\EOF_SH &&
# each of the two stages waits for the other: they can only both finish when they run at once
touch "$MEET/$1"; i=0
while [ ! -e "$MEET/$2" ]; do i=$((i + 1)); [ $i -le 600 ] || exit 1; sleep 0.1; done
echo "$1 met $2" >"$DLK_OUTPUT/seen"
EOF_SH
	cat >after.sh <<\EOF_SH &&
cat "$DLK_INPUT_L/seen" "$DLK_INPUT_R/seen" >"$DLK_OUTPUT/both"
EOF_SH
	cat >meet.yaml <<\EOF_Y &&
name: meet
store: ./store
stages:
  after:
    inputs: {l: left, r: right}
    run: [sh, after.sh]
  left:
    inputs: {n: notes@v1}
    run: [sh, meet.sh, left, right]
  right:
    inputs: {n: notes@v1}
    run: [sh, meet.sh, right, left]
EOF_Y
	MEET=$PWD/meet dlk pipeline run --local --parallel 2 --pipeline meet.yaml 2>err8 && cat err8 &&
	test "$(ran err8)" = "after,left,right" &&
	dlk data get -q meet-after@latest --from ./store m &&
	printf "left met right\nright met left\n" >want && diff want m/both
'

test_expect_success 'a second run of the pipeline while one holds its lock is refused' '
	cd "$TEST_TMP/p" &&
	test_exit_code 1 flock .dlk/pipelines/fashion/lock "$DLK" pipeline run --local 2>err9; cat err9 &&
	grep_q "^error: pipeline fashion is running here already" err9 &&
	dlk pipeline run --dry-run 2>dry9 && test "$(reused dry9)" = "count,gate,predict,prepare,train"
'

test_expect_success 'a run killed in the middle, run again, goes on from the stage it was in' '
	cd "$TEST_TMP/p" &&
	cat >killer.sh <<\EOF_SH &&
# the first time, kill the dlk that runs this stage, as a lost terminal or a node would
if [ ! -e killed-once ]; then touch killed-once; kill -TERM $PPID; exec sleep 30; fi
echo survived >"$DLK_OUTPUT/second"
EOF_SH
	cat >kill.yaml <<\EOF_Y &&
name: kill
store: ./store
stages:
  first:
    inputs: {notes: notes@v1}
    run: [sh, count.sh]
  second:
    inputs: {f: first}
    run: [sh, killer.sh]
  third:
    inputs: {s: second}
    run: [sh, after-kill.sh]
EOF_Y
	echo "cat \"\$DLK_INPUT_S/second\" >\"\$DLK_OUTPUT/third\"" >after-kill.sh &&
	test_exit_code 143 "$DLK" pipeline run --local --pipeline kill.yaml 2>err10; cat err10 &&
	test "$(ran err10)" = "first,second" &&
	dlk pipeline run --local --pipeline kill.yaml 2>err11 && cat err11 &&
	test "$(reused err11)" = first && test "$(ran err11)" = "second,third" &&
	dlk data get -q kill-third@latest --from ./store k && test "$(cat k/third)" = survived
'

# A stage that takes its time to end after SIGTERM (a training writing its checkpoint): the run
# started again must not clear its work directory under it nor start the stage beside it (a train
# stage's run lock would refuse the new one); it once did, within milliseconds of the kill.
test_expect_success 'a run killed while a stage takes 2 s to end: run again, it waits for that stage first' '
	cd "$TEST_TMP/p" &&
	cat >linger.sh <<\EOF_SH &&
if [ ! -e lingered-once ]; then
	touch lingered-once && echo $$ >linger.pid
	trap "sleep 2; echo late >\"\$DLK_OUTPUT/late\"; exit 0" TERM
	kill -TERM $PPID
	while :; do sleep 0.1; done
fi
# (ended, it may stay a zombie a while: its parent died, init reaps it)
state=$(sed -n "s/^State:[[:space:]]*\(.\).*/\1/p" /proc/"$(cat linger.pid)"/status 2>/dev/null)
if [ -n "$state" ] && [ "$state" != Z ]; then echo "the stage of the killed run still runs" >&2; exit 1; fi
echo fresh >"$DLK_OUTPUT/second"
EOF_SH
	cat >linger.yaml <<\EOF_Y &&
name: linger
store: ./store
stages:
  first:
    inputs: {notes: notes@v1}
    run: [sh, count.sh]
  second:
    inputs: {f: first}
    run: [sh, linger.sh]
EOF_Y
	test_exit_code 143 "$DLK" pipeline run --local --pipeline linger.yaml 2>err10b; cat err10b &&
	dlk pipeline run --local --pipeline linger.yaml 2>err11b; rc=$?; cat err11b .dlk/pipelines/linger/logs/second.log &&
	test $rc = 0 && grep_q "^pipeline linger: waiting for the stages of a run that was cut off to end" err11b &&
	test "$(ran err11b)" = second &&
	dlk data get -q linger-second@latest --from ./store l && test "$(cat l/second)" = fresh && test ! -e l/late
'

test_expect_success 'a stage whose output cannot be a dataset fails, naming why, and blocks the stage below' '
	cd "$TEST_TMP/p" &&
	cat >badout.yaml <<\EOF_Y &&
name: badout
store: ./store
stages:
  s:
    inputs: {notes: notes@v1}
    run: [sh, -c, "ln -s / $DLK_OUTPUT/root"]
  t:
    inputs: {s: s}
    run: [sh, count.sh]
EOF_Y
	test_exit_code 1 dlk pipeline run --local --pipeline badout.yaml 2>err12; cat err12 &&
	grep_q "^warning: stage s: failed, its output .badout-s.: .*root" err12 &&
	grep_q "^warning: stage t: not run: its input stage .s. failed" err12
'

test_expect_success 'lineage follows the predictions through the stages to the raw data; impact finds the runs' '
	cd "$TEST_TMP/p" &&
	dlk lineage fashion-preds@latest --from ./store >lin && cat lin &&
	grep_q "^made by  *dlk predict" lin &&
	grep_q "^made by  *dlk pipeline fashion, stage prepare" lin &&
	grep_q "^input  *$(cat raw2.id) (fashion-raw@v2)" lin &&
	grep_q "^dataset  *$(cat raw2.id) (pushed from files)" lin &&
	dlk lineage fashion-train@latest --from ./store >lint && cat lint &&
	grep_q "^made by  *dlk pipeline fashion, stage train" lint &&
	trun=$(sed -n "s/^run  *//p" lint | sed -n 2p) &&
	ls .dlk/runs/p/ | grep_q "^$trun" &&
	dlk lineage fashion-small@latest --from ./store -o json >lin.json &&
	jq -e ".datasets[0].provenance.pipeline.stage == \"prepare\" and (.datasets[0].provenance.pipeline.key | length) == 64" lin.json &&
	prep=$(jq -r ".datasets[0].provenance.pipeline.run_id" lin.json) &&
	dlk impact fashion-raw@v2 --from ./store --local -o json >imp.json &&
	test "$(jq -r ".runs[] | .project + \" \" + .id" imp.json)" = "fashion $prep" &&
	dlk impact fashion-small@latest --from ./store --local -o json >imp2.json &&
	jq -r ".runs[].project" imp2.json | sort -u | paste -sd" " - >projects &&
	grep_q "^fashion p\$" projects
'

test_expect_success 'a cycle, an unknown stage and a dataset where a model is expected are refused with file:line' '
	cd "$TEST_TMP/p" &&
	sed "s/      data: prepare/      data: gate/" good.yaml >dlk-pipeline.yaml &&
	test_exit_code 3 dlk pipeline run --local 2>e1; cat e1 &&
	grep_q "^error: dlk-pipeline.yaml:[0-9]*:[0-9]*: the stages form a cycle: " e1 &&
	sed "s/      data: prepare/      data: prep/" good.yaml >dlk-pipeline.yaml &&
	test_exit_code 3 dlk pipeline run --local 2>e2; cat e2 &&
	grep_q "names no stage (did you mean .prepare.?)" e2 &&
	sed "s/      model: train/      model: prepare/" good.yaml >dlk-pipeline.yaml &&
	test_exit_code 3 dlk pipeline run --local 2>e3; cat e3 &&
	grep_q "^error: dlk-pipeline.yaml:[0-9]*:[0-9]*: stages.predict.inputs.model: a dataset where a model is expected" e3 &&
	cp good.yaml dlk-pipeline.yaml &&
	test_exit_code 6 dlk pipeline logs nosuch 2>e4 && grep_q "no stage .nosuch." e4
'

test_done
