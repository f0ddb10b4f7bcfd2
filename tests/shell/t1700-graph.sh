#!/bin/sh
# The model graph in a project file: layers that name themselves and their inputs (a residual
# add, a concat of two branches, globalavgpool) train, their bundle serves, and a wrong graph is
# refused naming the layer with its file position.
. "$(dirname "$0")/../lib.sh"

command -v curl >/dev/null || test_missing "curl"
command -v jq >/dev/null || test_missing "jq"

P=$TEST_TMP/p
mkdir -p "$P"
# three classes of 4x4 "images": class c is brighter on every third pixel from c
awk 'BEGIN { srand(7); for (i = 0; i < 1536; i++) { c = int(rand() * 3); s = ""; for (j = 0; j < 16; j++) s = s sprintf("%.3f,", rand() + (j % 3 == c)); print s c } }' >"$P/train.csv"
head -n 300 "$P/train.csv" >"$P/test.csv"
cat >"$P/dlk.yaml" <<'EOT'
name: graph
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [1, 4, 4]
  layers:
    - conv2d: {filters: 8, padding: 1, name: stem}
    - relu
    - conv2d: {filters: 8, padding: 1}
    - add: {inputs: [stem, 2], name: res}
    - relu: {name: r}
    - conv2d: {filters: 4, kernel: 1, inputs: [input], name: side}
    - concat: {inputs: [r, side]}
    - conv2d: {filters: 16, padding: 1, stride: 2}
    - globalavgpool
    - dense: {units: 3}
training: {epochs: 4, batch_size: 32, threads: 1, seed: 3}
EOT
# "2" is not a name: the add's second input is the conv2d before it, named here
sed -i 's/    - conv2d: {filters: 8, padding: 1}$/    - conv2d: {filters: 8, padding: 1, name: c2}/; s/inputs: \[stem, 2\]/inputs: [stem, c2]/' "$P/dlk.yaml"

test_expect_success 'a graph trains and learns' '
	dlk train --local -f "$P/dlk.yaml" >"$P/out" 2>"$P/err" && cat "$P/out" &&
	acc=$(sed -n "s/^test accuracy: \([0-9.]*\)%.*/\1/p" "$P/out") &&
	test -n "$acc" && awk -v a="$acc" "BEGIN { exit !(a >= 80) }" &&
	test -f "$P/graph.dlk"
'

test_expect_success 'its bundle serves: 3 logits per row' '
	"$DLK" serve --local --port 0 "$P/graph.dlk" 2>srv.log & pid=$! &&
	i=0; while ! grep -q "^ready:" srv.log && test $i -lt 300; do sleep 0.05; i=$((i + 1)); done &&
	port=$(sed -n "s/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p" srv.log) &&
	code=$(curl -s -o body -w "%{http_code}" -H "Content-Type: application/json" \
		--data-binary "{\"instances\":[[1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1]]}" \
		"http://127.0.0.1:$port/v1/models/graph:predict"); kill -TERM $pid; wait $pid;
	cat body; test "$code" = 200 && jq -e ".predictions[0].logits | length == 3" body
'

bad() { sed "$1" "$P/dlk.yaml" >"$P/bad.yaml" && test_must_fail dlk train --dry-run -f "$P/bad.yaml" >/dev/null 2>err; cat err; }

test_expect_success 'an input that names no earlier layer is refused with its position' '
	bad "s/inputs: \[r, side\]/inputs: [r, nope]/" &&
	grep_q "bad.yaml:15:.*model.layers\[6\].concat.inputs: no layer before this one is named .nope." err
'

test_expect_success 'an add of two shapes is refused naming the layer' '
	bad "s/inputs: \[stem, c2\]/inputs: [stem, input]/" &&
	grep_q "model.layers\[3\]: add.s inputs do not fit together: 8x4x4 and 1x4x4" err
'

test_expect_success 'add needs two inputs' '
	bad "s/    - add: {inputs: \[stem, c2\], name: res}/    - add: {name: res}/" &&
	grep_q "model.layers\[3\]: add needs two inputs" err
'

test_expect_success 'a name used twice is refused' '
	bad "s/name: side/name: stem/" &&
	grep_q "model.layers\[5\].conv2d.name: .stem. already names model.layers\[0\]" err
'

test_done
