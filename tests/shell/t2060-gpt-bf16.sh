#!/bin/sh
# training.precision: bf16: the example GPT trained on a slice of dict-gcide with its dense layers'
# products in bfloat16 (fp32 sums, fp32 master weights and AdamW state) ends within 1% of the
# fp32 run's validation loss (measured here: 4.64823 against 4.64843 after 25 steps of 8
# sequences; a uniform guess is ln 257 = 5.55), with other weights (the products did change)
# that are the same bits run to run; the emulated products (a CPU without AVX512_BF16) give the
# same curve to the same tolerance and say they are no faster than fp32.
. "$(dirname "$0")/../lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
if [ ! -f "$GCIDE" ]; then
	test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"
fi

train() { # $1: precision, $2: the run's name
	dlk train --local -o json --set data.train.source=slice.txt --set data.validation=0.1 \
		--set training.epochs=1 --set training.batch_size=8 --set training.threads=2 \
		--set training.checkpoint.every=0 --set training.precision="$1" >"out-$2.json" 2>"err-$2" &&
	tar -xOf g.dlk weights.safetensors | sha256sum >"w-$2"
}

# $1, $2: two runs' names: their validation losses within 1% of each other
near() {
	a=$(jq .testLoss "out-$1.json") b=$(jq .testLoss "out-$2.json") &&
	echo "validation loss: $1 $a, $2 $b" &&
	awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * b) }'
}

test_expect_success 'bf16 against fp32: the validation loss within 1%, other weights' '
	cd "$TEST_TMP" && dlk init -q --example gpt g && cd g &&
	{ gzip -dc "$GCIDE" | head -c 3000000 | tail -c 28000 >slice.txt; true; } &&
	train fp32 fp32 && train bf16 bf16 &&
	jq -e ".steps == 25 and .precision == \"bf16\"" out-bf16.json &&
	jq -e ".precision == \"fp32\"" out-fp32.json &&
	near bf16 fp32 &&
	! cmp -s w-fp32 w-bf16 &&
	jq -e ".trainLoss < 5.2" out-bf16.json
'

test_expect_success 'bf16 twice: the same weights bit for bit' '
	cd "$TEST_TMP/g" && train bf16 again && cmp w-bf16 w-again
'

test_expect_success 'the emulated products: the same curve to 1%, and a warning that they are no faster' '
	cd "$TEST_TMP/g" &&
	DLK_TEST_BF16_EMULATE=1 train bf16 emulated &&
	near emulated bf16 &&
	grep "training.precision: bf16: this CPU has no AVX512_BF16 instructions, so the products are emulated" err-emulated
'

test_expect_success 'a model of convolutions in bf16: in bf16 on AVX512_BF16, else a warning that the CPU computes them in fp32; none for the GPT' '
	cd "$TEST_TMP/g" && ! grep -q "conv2d layers in fp32" err-bf16 && ! grep -q "conv2d layers in fp32" err-emulated &&
	mkdir c && cd c && cat >dlk.yaml <<EOT &&
name: c
data:
  format: csv
  train: {source: t.csv}
  test: {source: t.csv}
model:
  input: [1, 4, 4]
  layers: [{conv2d: {filters: 2, padding: 1}}, relu, {conv2d: {filters: 4, groups: 2}}, flatten, {dense: {units: 2}}]
training: {epochs: 1, batch_size: 4, precision: bf16, threads: 1, checkpoint: {every: 0}}
EOT
	awk "BEGIN { for (i = 0; i < 8; i++) { l = \"\"; for (j = 0; j < 16; j++) l = l (i * j % 7) \",\"; print l (i % 2) } }" >t.csv &&
	dlk train --local -q 2>err &&
	if grep -q avx512_bf16 /proc/cpuinfo; then
		! grep "conv2d layers in fp32" err
	else
		grep "training.precision: bf16: without AVX512_BF16 the CPU computes conv2d layers in fp32 (1 of this model.s), not faster" err
	fi &&
	DLK_TEST_BF16_EMULATE=1 dlk train --local -q 2>err2 &&
	grep "training.precision: bf16: without AVX512_BF16 the CPU computes conv2d layers in fp32 (1 of this model.s), not faster" err2
'

test_expect_success 'a value that is not a precision: refused naming the line, nothing trained' '
	cd "$TEST_TMP/g" &&
	sed "s/^training:$/training:\n  precision: fp16/" dlk.yaml >bad.yaml &&
	line=$(grep -n "^  precision: fp16" bad.yaml | cut -d: -f1) &&
	rm -f g.dlk &&
	test_exit_code 3 dlk train --local -f bad.yaml 2>bad.err &&
	cat bad.err &&
	grep "bad.yaml:$line:[0-9]*: training.precision: unknown value .fp16. (expected fp32 or bf16)" bad.err &&
	! test -e g.dlk
'

test_done
