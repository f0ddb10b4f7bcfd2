#!/bin/sh
# training.accumulate K: an optimizer step over K micro-batches of batch_size is a step over one
# batch K times larger (the global batch is batch_size x K x workers). One epoch of 2048 rows
# (32 steps, the last ones alike) trained as 1 x 64, as 1 x 16 x 4 and as 2 workers x 8 x 4 ends
# with the same weights within 1e-5 (float sums in another order; measured at most 2e-7 with SGD
# and 3e-7 with Adam), in the same 32 steps; 1 x 16 without accumulating does not (128 steps).
. "$(dirname "$0")/../lib.sh"
PY=$TEST_ROOT/.deps/frameworks/bin/python
[ -x "$PY" ] || test_missing "the frameworks venv (.deps/frameworks)"

cd "$TEST_TMP" &&
awk 'BEGIN { srand(1); for (i = 0; i < 2048; i++) { c = int(rand() * 4); l = "";
	for (j = 0; j < 8; j++) l = l sprintf("%.4f,", rand() + ((c * 7 + j) % 5) * 0.5); print l c } }' >train.csv &&
cat >dlk.yaml <<EOT
name: acc
data:
  format: csv
  train: {source: train.csv}
  validation: 0
model:
  input: [8]
  layers:
    - dense: {units: 32}
    - relu
    - dense: {units: 4}
training:
  epochs: 1
  batch_size: 64
  optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
  threads: 1
  checkpoint: {every: 0}
EOT

# trains into DIR/acc.dlk with the extra arguments; prints the steps
run() {
	d=$1; shift
	mkdir -p "$d" && cp dlk.yaml train.csv "$d"/ &&
	(cd "$d" && dlk train --local -q -o json "$@" >out.json) &&
	tar -xOf "$d/acc.dlk" weights.safetensors >"$d/w.safetensors" &&
	sed -n 's/^[[:space:]]*"steps":[[:space:]]*\([0-9]*\),*$/\1/p' "$d/out.json" | head -1
}
# the largest difference between two runs' weights
diff_w() {
	"$PY" - "$1/w.safetensors" "$2/w.safetensors" <<-EOF
	import sys
	from safetensors.numpy import load_file
	a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
	print("%.3g" % max(abs(a[k] - b[k]).max() for k in a))
	EOF
}
within() { "$PY" -c "import sys; sys.exit(not float(sys.argv[1]) <= float(sys.argv[2]))" "$1" "$2"; }

for opt in sgd adam; do
	test_expect_success "$opt: 1 x 64 = 1 x 16 x 4 = 2 workers x 8 x 4, and not 1 x 16" '
		cd "$TEST_TMP" && set_opt="--set training.optimizer.name='$opt'" &&
		test "$(run '$opt'-64 $set_opt)" = 32 &&
		test "$(run '$opt'-16x4 $set_opt --set training.batch_size=16 --set training.accumulate=4)" = 32 &&
		test "$(run '$opt'-2x8x4 $set_opt --workers 2 --set training.batch_size=8 --set training.accumulate=4)" = 32 &&
		test "$(run '$opt'-16 $set_opt --set training.batch_size=16)" = 128 &&
		a=$(diff_w '$opt'-64 '$opt'-16x4) && b=$(diff_w '$opt'-64 '$opt'-2x8x4) && c=$(diff_w '$opt'-64 '$opt'-16) &&
		echo "1x16x4: $a, 2x8x4: $b, 1x16: $c" &&
		within "$a" 1e-5 && within "$b" 1e-5 && ! within "$c" 1e-3
	'
done

test_done
