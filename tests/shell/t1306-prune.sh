#!/bin/sh
# dlk prune: old runs here go with their record, their own bundle and their checkpoints; the
# checkpoints of finished runs go whatever the options; what resuming needs (the newest run
# when it did not finish) and NAME.dlk stay.
. "$(dirname "$0")/../lib.sh"

P=$TEST_TMP/p
mkdir -p "$P" &&
awk 'BEGIN { srand(5); for (i = 0; i < 1024; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$P/train.csv" &&
head -n 200 "$P/train.csv" >"$P/test.csv" &&
cat >"$P/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 8}
    - relu
    - dense: {units: 2}
training: {epochs: 4, batch_size: 32, threads: 1, checkpoint: {every: 4, keep: 2}}
EOT
runs() { dlk status blobs --history --local -f "$P/dlk.yaml" -o json | jq -r ".runs[].run.id"; }
n_ckpts() { ls -d "$P"/.dlk/checkpoints/blobs/*/step-* 2>/dev/null | wc -l; }

# three finished runs, then one interrupted by Ctrl-C: the newest, which the next train resumes
for seed in 1 2 3; do
	dlk train --local -q -f "$P/dlk.yaml" --set training.seed=$seed >/dev/null 2>&1 ||
		{ echo "Bail out! run $seed failed"; exit 1; }
done
before=$(n_ckpts)
{ DLK_TEST_CHECKPOINT_DELAY_MS=30 "$DLK" train --local -f "$P/dlk.yaml" --set training.seed=4 >/dev/null 2>/dev/null & pid=$!; }
i=0; while [ "$(n_ckpts)" -le "$before" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT $pid; wait $pid
test "$(runs | wc -l)" = 4 || { echo "Bail out! expected 4 runs"; exit 1; }
NEWEST=$(runs | sed -n 1p) OLDEST=$(runs | sed -n 4p) SECOND=$(runs | sed -n 3p)

test_expect_success '--dry-run lists the finished runs'"'"' checkpoints and removes nothing' '
	dlk prune --dry-run -f "$P/dlk.yaml" -o json >dry.json && cat dry.json &&
	jq -e ".dryRun == true and (.removed | length) == 3 and all(.removed[]; .what == \"checkpoints\") and
		(.removed | map(.run) | index(\"$NEWEST\")) == null and .bytes > 0" dry.json &&
	for d in $(jq -r ".removed[].checkpoints" dry.json); do test -d "$d" || exit 1; done &&
	dlk prune --dry-run -f "$P/dlk.yaml" >out 2>err && cat out err &&
	grep_q "^would remove the checkpoints of run $(echo $OLDEST | cut -c1-8), finished" out &&
	grep_q "without --dry-run" err
'

test_expect_success 'prune removes finished runs'"'"' checkpoints; the interrupted newest keeps its own' '
	dlk prune -f "$P/dlk.yaml" >out 2>err && cat out err &&
	test "$(grep -c "^removed the checkpoints of run" out)" = 3 &&
	test ! -e "$P/.dlk/checkpoints/blobs/$OLDEST" && ls "$P/.dlk/checkpoints/blobs/$NEWEST" | grep -q step- &&
	test "$(runs | wc -l)" = 4 && test -s "$P/.dlk/runs/blobs/$OLDEST.dlk" &&
	dlk prune -f "$P/dlk.yaml" 2>err && grep_q "nothing to prune" err
'

test_expect_success '--keep N removes the older runs with their record and bundle; NAME.dlk stays' '
	cp "$P/blobs.dlk" latest.dlk &&
	dlk prune --keep 3 -f "$P/dlk.yaml" -o json >k.json && cat k.json &&
	jq -e "(.removed | length) == 1 and .removed[0].run == \"$OLDEST\" and .removed[0].what == \"run\"" k.json &&
	test ! -e "$P/.dlk/runs/blobs/$OLDEST.json" && test ! -e "$P/.dlk/runs/blobs/$OLDEST.dlk" &&
	test "$(runs | wc -l)" = 3 && cmp "$P/blobs.dlk" latest.dlk && dlk lineage "$P/blobs.dlk" >/dev/null
'

test_expect_success '--older-than removes the runs started before it' '
	jq ".run.started_at = \"2020-01-01T00:00:00.000Z\"" "$P/.dlk/runs/blobs/$SECOND.json" >rec &&
	cp rec "$P/.dlk/runs/blobs/$SECOND.json" &&
	dlk prune --older-than 30d -f "$P/dlk.yaml" >out && cat out &&
	grep_q "^removed run $(echo $SECOND | cut -c1-8): its record, its bundle" out && test "$(wc -l <out)" = 1 &&
	test -e "$P/.dlk/runs/blobs/$NEWEST.json" && test "$(runs | wc -l)" = 2
'

test_expect_success 'after pruning, the interrupted run still resumes' '
	dlk train --local -f "$P/dlk.yaml" --set training.seed=4 >/dev/null 2>err && cat err &&
	grep_q "resuming run $(echo $NEWEST | cut -c1-8) from checkpoint" err
'

test_expect_success 'bad options are usage errors' '
	test_exit_code 2 dlk prune --keep 0 -f "$P/dlk.yaml" 2>err && cat err &&
	test_exit_code 2 dlk prune --older-than soon -f "$P/dlk.yaml" 2>err && cat err &&
	test_exit_code 2 dlk prune extra -f "$P/dlk.yaml" 2>err && cat err
'

test_done
