#!/bin/sh
# Text rows with float targets: several labels a row (model.task multilabel, JSON Lines arrays or
# a CSV cell split by data.text.separator) and numbers a row (model.task regression) train and
# evaluate; the label names land in the bundle; bad rows are named by line.
. "$(dirname "$0")/../lib.sh"

command -v python3 >/dev/null || test_missing "python3"
D=$TEST_TMP/data
mkdir -p "$D" &&
python3 "$TEST_ROOT/tests/data/text-targets.py" 3000 1 "$D/ml-train.jsonl" "$D/rg-train.csv" &&
python3 "$TEST_ROOT/tests/data/text-targets.py" 500 2 "$D/ml-test.jsonl" "$D/rg-test.csv" ||
	test_missing "synthetic text rows"

# project DIR TASK TRAIN TEST [MORE-YAML]: files of $D unless a path
project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: $2
data:
  format: text
  train: {source: $3}
  test: {source: $4}${5:-}
model:
  task: $2
  input: [48]
  layers: [{dense: {units: 32}}, relu, {dense: {units: 2}}]
training: {epochs: 5, batch_size: 32, threads: 2, seed: 1, checkpoint: {every: 0}}
EOT
}

test_expect_success 'several labels a row (JSON Lines lists, some empty) train a multi-label model' '
	project m multilabel "$D/ml-train.jsonl" "$D/ml-test.jsonl" &&
	dlk train --local -q -o json -f m/dlk.yaml >"$D/ml.json" &&
	echo "# $(jq -c .test "$D/ml.json")" &&
	jq -e ".test.f1_micro > 0.9 and .test.subset_accuracy > 0.8" "$D/ml.json" &&
	tar -xOf m/multilabel.dlk model.json | jq -e ".classes == [\"long\", \"starts_x\"] and .architecture.task == \"multilabel\""
'

test_expect_success 'the same labels in a CSV cell, split by data.text.separator' '
	python3 -c "
import json, sys
for name in (\"ml-train\", \"ml-test\"):
    with open(\"$D/\" + name + \".jsonl\") as f, open(\"$D/\" + name + \".csv\", \"w\") as out:
        out.write(\"text,label\n\")
        for line in f:
            r = json.loads(line)
            out.write(\"%s,%s\n\" % (r[\"text\"], \";\".join(r[\"label\"])))
" &&
	project c multilabel "$D/ml-train.csv" "$D/ml-test.csv" "
  text: {separator: \";\"}" &&
	dlk train --local -q -o json -f c/dlk.yaml >csv.json &&
	jq -e ".test.f1_micro > 0.9" csv.json &&
	test "$(jq -c .test csv.json)" = "$(jq -c .test "$D/ml.json")"
'

test_expect_success 'two numbers a row train a regression model' '
	project r regression "$D/rg-train.csv" "$D/rg-test.csv" &&
	dlk train --local -q -o json -f r/dlk.yaml --set training.epochs=30 --set training.optimizer.lr=0.01 \
		--set "model.layers=[{dense: {units: 2}}]" >out.json &&
	echo "# $(jq -c .test out.json)" &&
	jq -e ".test.r2 > 0.5" out.json
'

test_expect_success 'a row with another count of numbers, a number that is not, and an unknown label are named by line' '
	{ head -3 "$D/rg-train.csv" && echo "abc,97" && tail -n +5 "$D/rg-train.csv"; } >short.csv &&
	project r regression "$PWD/short.csv" "$D/rg-test.csv" &&
	test_exit_code 3 dlk train --local -q -f r/dlk.yaml 2>err &&
	grep_q "short.csv:4: 1 target, but the first row has 2" err &&
	{ head -3 "$D/rg-train.csv" && echo "abc,97|x1" && tail -n +5 "$D/rg-train.csv"; } >nan.csv &&
	project r regression "$PWD/nan.csv" "$D/rg-test.csv" &&
	test_exit_code 3 dlk train --local -q -f r/dlk.yaml 2>err &&
	grep_q "nan.csv:4: target 2, .x1., is not a number" err &&
	{ head -2 "$D/ml-test.jsonl" && echo "{\"text\": \"zz\", \"label\": [\"tall\"]}"; } >odd.jsonl &&
	project m multilabel "$D/ml-train.jsonl" "$PWD/odd.jsonl" &&
	test_exit_code 3 dlk train --local -q -f m/dlk.yaml 2>err &&
	grep_q "odd.jsonl:3: label .tall. is not one of the 2 labels" err &&
	{ head -2 "$D/ml-test.jsonl" && echo "{\"text\": \"zz\", \"label\": {\"a\": 1}}"; } >obj.jsonl &&
	project m multilabel "$D/ml-train.jsonl" "$PWD/obj.jsonl" &&
	test_exit_code 3 dlk train --local -q -f m/dlk.yaml 2>err &&
	grep_q "obj.jsonl:3: .label. must be a number, a label, or a list of them" err
'

test_done
