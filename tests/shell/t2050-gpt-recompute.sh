#!/bin/sh
# training.recompute: the example GPT trained on a slice of dict-gcide with each block's inside
# recomputed in backward ends with the weights of the run that keeps every activation, bit for bit
# (the same seed and threads), and its activations take less memory (-o json activationBytes, the
# log's line). Measured here at batch 8: 29.0 MiB against 54.6 MiB (the output gradients of a
# graph share buffers without recomputation; with it each block's layers share their first
# repetition's).
. "$(dirname "$0")/../lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
if [ ! -f "$GCIDE" ]; then
	test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"
fi

train() { # $1: recompute (true/false)
	dlk train --local -o json --set data.train.source=slice.txt --set data.validation=0.1 \
		--set training.epochs=1 --set training.batch_size=8 --set training.threads=2 \
		--set training.checkpoint.every=0 --set training.recompute="$1" >"out-$1.json" 2>"err-$1" &&
	tar -xOf g.dlk weights.safetensors | sha256sum >"w-$1"
}

test_expect_success 'the example trained with and without recompute: the same weights bit for bit' '
	cd "$TEST_TMP" && dlk init -q --example gpt g && cd g &&
	{ gzip -dc "$GCIDE" | head -c 3000000 | tail -c 6000 >slice.txt; true; } &&
	train false && train true &&
	cat err-true && cmp w-false w-true &&
	jq -e ".steps == 6" out-true.json
'

test_expect_success 'recomputing: the 4 blocks, 60% of the activations or less, said in the log' '
	cd "$TEST_TMP/g" &&
	jq -c "{activationBytes, activationBytesWhole, recomputedBlocks}" out-false.json out-true.json &&
	jq -e ".recomputedBlocks == 0 and .activationBytes == .activationBytesWhole" out-false.json &&
	jq -e ".recomputedBlocks == 4 and .activationBytes < 0.6 * .activationBytesWhole" out-true.json &&
	grep -q "^activations: [0-9.]* MiB per batch, the insides of 4 blocks recomputed in backward ([0-9.]* MiB kept whole)" err-true &&
	! grep -q "^activations" err-false
'

test_expect_success 'a model without blocks: a warning, nothing recomputed' '
	cd "$TEST_TMP/g" &&
	sed -e "/^  blocks:/,/^  layers:/{/^  layers:/!d}" -e "s/^    - {block: gpt2, repeat: 4}/    - layernorm/" dlk.yaml >flat.yaml &&
	dlk train --local -f flat.yaml -o json --set data.train.source=slice.txt --set data.validation=0.1 \
		--set training.epochs=1 --set training.batch_size=8 --set training.recompute=true \
		--set training.checkpoint.every=0 >flat.json 2>flat.err &&
	grep "training.recompute: no block to recompute" flat.err &&
	jq -e ".recomputedBlocks == 0" flat.json
'

test_done
