#!/bin/sh
# An image-folder RGB model trained with per-channel normalisation (data.images.mean/std) is
# served with the same normalisation: Fashion-MNIST written as RGB PNGs whose channels differ (by
# Pillow, tests/data/fmnist-images.py --rgb), one epoch of 2000 images; the server's classes for the
# 300 test images sent as raw pixels score exactly the test accuracy the bundle recorded, its
# metadata lists each channel's mean and std, normalised images declared preprocessed get the same
# classes and undeclared are refused (tests/serve/channel_client.py). A stream of texts for this
# model, which has no tokenizer, is refused at start.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
fmnist_ready
[ -x "$PY" ] || test_missing "the frameworks venv with Pillow and numpy ($PY, .ci/deps.d/frameworks)"

IMG=$TEST_TMP/rgb
"$PY" "$TEST_ROOT/tests/data/fmnist-images.py" train 2000 png "$IMG/train" --rgb &&
"$PY" "$TEST_ROOT/tests/data/fmnist-images.py" test 300 png "$IMG/test" --rgb ||
	test_missing "Fashion-MNIST written as RGB images by Pillow"
MEAN=0.286,0.714,0.143
STD=0.353,0.353,0.177

test_expect_success 'an RGB model trains with per-channel mean and std, which the bundle records' '
	mkdir -p "$TEST_TMP/p" && cat >"$TEST_TMP/p/dlk.yaml" <<EOT &&
name: rgb
data:
  format: images
  train: {source: $IMG/train}
  test: {source: $IMG/test}
  images: {mean: [$MEAN], std: [$STD]}
model:
  input: [3, 28, 28]
  layers:
    - conv2d: {filters: 8, kernel: 3, padding: 1}
    - relu
    - maxpool: {size: 2}
    - flatten
    - dense: {units: 10}
training: {epochs: 1, batch_size: 32, threads: 2, seed: 3}
EOT
	dlk train --local -q -f "$TEST_TMP/p/dlk.yaml" &&
	tar -xOf "$TEST_TMP/p/rgb.dlk" model.json | jq -ce .input_scaling >scaling &&
	cat scaling && jq -e ".channel_mean | length == 3" scaling && jq -e ".channel_std[2] > 0.17699 and .channel_std[2] < 0.17701" scaling
'

B=$TEST_TMP/p/rgb.dlk
CORRECT=$(tar -xOf "$B" model.json | jq -r '(.metrics.test_accuracy * .metrics.test_samples + 0.5) | floor')
serve_local "$TEST_TMP/serve.log" "$B"

test_expect_success 'raw pixels are normalised per channel as training did: the recorded accuracy exactly' '
	echo "the bundle recorded $CORRECT/300" &&
	"$PY" "$TEST_ROOT/tests/serve/channel_client.py" --url "127.0.0.1:$PORT" --model rgb --folder "$IMG/test" \
		--mean "$MEAN" --std "$STD" --expect-correct "$CORRECT" >out &&
	cat out && grep_q "^$CORRECT/300 correct" out
'
kill -TERM $SRV
wait $SRV

test_expect_success 'a stream of texts for a model without a tokenizer is refused at start' '
	test_must_fail dlk serve --local --port 0 "$B" --stream kafka://127.0.0.1:9/in --to out --format text 2>err &&
	grep_q "format text: the model .rgb. takes no texts" err
'
test_done
