#!/bin/sh
# The serving input contract with the real tritonclient[http] (.deps/serve-test): the model's
# metadata says its input takes raw pixels 0..255; x/255 sent as FP32 — what a PyTorch or Triton
# user sends, which the server used to scale a second time and answer at 10% accuracy — is refused
# with a 400 naming the contract, binary and JSON; declared with parameters={"input_form":
# "preprocessed"} it is accepted and scores the bundle's recorded accuracy over all 10,000
# Fashion-MNIST test images. TF Serving's REST API holds requests to the same contract.
. "$(dirname "$0")/../lib.sh"
PY=$TEST_ROOT/.deps/serve-test/bin/python
CLIENTS=$TEST_ROOT/tests/serve/clients.py
FORWARD=$TEST_ROOT/${BUILD:-build}/tests/tools/forward
D=/usr/share/datasets/fashion-mnist
[ -x "$PY" ] || test_missing "the test clients (.deps/serve-test)"
[ -x "$FORWARD" ] || test_missing "tests/tools/forward (make test builds it)"
[ -f "$D/t10k-images-idx3-ubyte.gz" ] || test_missing "the Fashion-MNIST dataset"

P=$TEST_TMP/fashion
"$DLK" init --example mlp "$P" >/dev/null &&
(cd "$P" && "$DLK" train --local -q --set training.epochs=1 >train.out 2>&1) ||
	{ echo "Bail out! training failed"; cat "$P/train.out"; exit 1; }
B=$(ls "$P"/*.dlk)
NAME=$(tar -xOf "$B" model.json | jq -r .name)
CORRECT=$(tar -xOf "$B" model.json | jq -r '(.metrics.test_accuracy * .metrics.test_samples + 0.5) | floor')
"$FORWARD" "$B" "$P/dlk.yaml" 0 10000 256 "$TEST_TMP/l10k.f32" >/dev/null || { echo "Bail out! forward failed"; exit 1; }

serve_local "$TEST_TMP/serve.log" "$B"
URL=http://127.0.0.1:$PORT

test_expect_success 'tritonclient: the metadata states the contract; x/255 refused, then declared and scored at the bundle accuracy' '
	"$PY" "$CLIENTS" triton-contract --url "127.0.0.1:$PORT" --model "$NAME" --images "$D/t10k-images-idx3-ubyte.gz" \
		--labels "$D/t10k-labels-idx1-ubyte.gz" --logits "$TEST_TMP/l10k.f32" --n 10000 --expect-correct "$CORRECT" >out &&
	cat out && grep_q "declared preprocessed: $CORRECT/10000 correct" out
'
test_expect_success 'TF Serving REST: the contract in the metadata, x/255 refused with 400, declared accepted' '
	curl -sf "$URL/v1/models/$NAME/metadata" | jq -e ".metadata.dlk_input_contract.input_form == \"raw\"" &&
	code=$(curl -s -o resp.json -w "%{http_code}" -d "{\"instances\":[[$(seq -s, 1 784 | sed "s/[0-9]*/0.5/g")]]}" \
		"$URL/v1/models/$NAME:predict") &&
	test "$code" = 400 && grep_q "input_form" resp.json &&
	curl -sf -d "{\"input_form\":\"preprocessed\",\"instances\":[[$(seq -s, 1 784 | sed "s/[0-9]*/0.5/g")]]}" \
		"$URL/v1/models/$NAME:predict" | jq -e ".predictions[0].logits | length == 10"
'
test_expect_success 'raw pixels, the default form, are answered as before' '
	curl -sf -d "{\"instances\":[[$(seq -s, 1 784 | sed "s/[0-9]*/128/g")]]}" "$URL/v1/models/$NAME:predict" |
		jq -e ".predictions[0].probabilities | length == 10"
'
kill -TERM $SRV
wait $SRV
test_done
