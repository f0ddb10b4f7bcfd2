#!/bin/sh
# PyTorch parity of a graph: torch, given the bundle's model.json and weights.safetensors (by
# name and shape), computes the logits `dlk serve` answers for the same rows, within 1e-4.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
test -x "$PY" || test_missing "the frameworks venv (.ci/deps.d/frameworks)"
command -v curl >/dev/null || test_missing "curl"
command -v jq >/dev/null || test_missing "jq"

P=$TEST_TMP/p
mkdir -p "$P"
awk 'BEGIN { srand(11); for (i = 0; i < 512; i++) { c = int(rand() * 3); s = ""; for (j = 0; j < 36; j++) s = s sprintf("%.3f,", rand() + (j % 3 == c)); print s c } }' >"$P/train.csv"
head -n 64 "$P/train.csv" >"$P/test.csv"
cat >"$P/dlk.yaml" <<'EOT'
name: gt
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [1, 6, 6]
  layers:
    - conv2d: {filters: 4, padding: 1, name: stem}
    - relu
    - conv2d: {filters: 4, padding: 1, name: c2}
    - add: {inputs: [stem, c2]}
    - tanh: {name: r}
    - conv2d: {filters: 3, kernel: 1, inputs: [input], name: side}
    - concat: {inputs: [r, side]}
    - maxpool: {size: 2}
    - conv2d: {filters: 5, padding: 1, stride: 2}
    - sigmoid
    - globalavgpool
    - dense: {units: 3}
training: {epochs: 2, batch_size: 32, threads: 1, seed: 9}
EOT
ROWS='[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35],[1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0,1,0,0],[-1,0.5,2,0,0,0.25,1,1,1,0,3,0,0,0,-2,0,0,1,0.5,0.5,0,0,0,1,0,0,0,0,0,1,0,9,0,0,0,0]]'

test_expect_success 'torch computes the logits dlk serve answers' '
	dlk train --local -q -f "$P/dlk.yaml" >/dev/null && mkdir b && tar -xf "$P/gt.dlk" -C b &&
	echo "$ROWS" | "$PY" "$TEST_ROOT/tests/nn/torch_forward.py" b/model.json b/weights.safetensors >torch.out &&
	cat torch.out && test "$(wc -l <torch.out)" = 3 &&
	"$DLK" serve --local --port 0 "$P/gt.dlk" 2>srv.log & pid=$! &&
	i=0; while ! grep -q "^ready:" srv.log && test $i -lt 300; do sleep 0.05; i=$((i + 1)); done &&
	port=$(sed -n "s/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p" srv.log) &&
	code=$(curl -s -o body -w "%{http_code}" -H "Content-Type: application/json" \
		--data-binary "{\"instances\":$ROWS}" "http://127.0.0.1:$port/v1/models/gt:predict"); kill -TERM $pid; wait $pid;
	test "$code" = 200 && jq -c ".predictions[].logits" body >dlk.out && cat dlk.out &&
	paste -d" " torch.out dlk.out | tr -d "[]" | tr "," " " | awk "{ n = NF / 2; for (i = 1; i <= n; i++) { d = \$i - \$(i + n); if (d < 0) d = -d; if (d > 1e-4) bad = 1 } } END { exit bad }"
'

test_done
