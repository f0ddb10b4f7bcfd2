#!/bin/sh
# dlk serve answering clients nobody here wrote: the real tritonclient[http] (binary tensors, its
# default, and JSON), KServe's Python SDK REST client (V2 and V1) and curl. Every answer is
# compared with dlk's in-process forward pass (tests/tools/forward) on the same Fashion-MNIST test
# images, and the bundle's recorded test accuracy is reproduced through the server over all
# 10,000 test images. The clients come from .ci/deps test (.deps/serve-test).
. "$(dirname "$0")/../lib.sh"
PY=$TEST_ROOT/.deps/serve-test/bin/python
CLIENTS=$TEST_ROOT/tests/serve/clients.py
FORWARD=$TEST_ROOT/${BUILD:-build}/tests/tools/forward
D=/usr/share/datasets/fashion-mnist

if [ ! -x "$PY" ] || [ ! -x "$FORWARD" ] || [ ! -f "$D/t10k-images-idx3-ubyte.gz" ]; then
	echo "Bail out! the test clients, tests/tools/forward or the dataset are missing (make test installs and builds them)"
	exit 1
fi

# a Fashion-MNIST MLP, one epoch
P=$TEST_TMP/fashion
"$DLK" init --example mlp "$P" >/dev/null &&
(cd "$P" && "$DLK" train --local -q --set training.epochs=1 >train.out 2>&1) ||
	{ echo "Bail out! training failed"; cat "$P/train.out"; exit 1; }
B=$P/fashion.dlk
[ -f "$B" ] || B=$(ls "$P"/*.dlk)
NAME=$(tar -xOf "$B" model.json | jq -r .name)
CLASSES=$(tar -xOf "$B" model.json | jq -r '.classes | join(",")')
CORRECT=$(tar -xOf "$B" model.json | jq -r '(.metrics.test_accuracy * .metrics.test_samples + 0.5) | floor')
"$FORWARD" "$B" "$P/dlk.yaml" 0 64 1 "$TEST_TMP/l64.f32" >/dev/null &&
"$FORWARD" "$B" "$P/dlk.yaml" 0 10000 256 "$TEST_TMP/l10k.f32" >"$TEST_TMP/fwd10k" ||
	{ echo "Bail out! the in-process forward pass failed"; exit 1; }

# max_delay_us > 0: requests queue and are gathered into batches (t1000 covers running them on
# the request's own thread, the max_delay_us 0 default)
serve_local "$TEST_TMP/serve.log" --set serving.max_delay_us=2000 "$B"
run() { "$PY" "$CLIENTS" "$1" --url "127.0.0.1:$PORT" --model "$NAME" --images "$D/t10k-images-idx3-ubyte.gz" \
	--labels "$D/t10k-labels-idx1-ubyte.gz" --classes "$CLASSES" --logits "$TEST_TMP/$2" --n "$3" ${4:+--expect-correct "$4"}; }

test_expect_success 'the in-process forward pass reproduces the recorded accuracy (the reference is sound)' '
	test "$(cut -d" " -f1 "$TEST_TMP/fwd10k")" = "$CORRECT"
'
test_expect_success 'tritonclient, binary tensors (its default): both outputs equal the in-process pass' 'run triton-binary l64.f32 64'
test_expect_success 'tritonclient, JSON tensors' 'run triton-json l64.f32 64'
test_expect_success 'tritonclient, the classification extension, binary and JSON, with labels' 'run triton-classification l64.f32 64'
test_expect_success 'tritonclient: health, metadata, and errors as its exceptions' 'run triton-meta l64.f32 64'
test_expect_success 'KServe SDK REST client, V2 protocol (JSON and binary inputs)' 'run kserve-v2 l64.f32 64'
test_expect_success 'KServe SDK REST client, V1 protocol (instances and inputs)' 'run kserve-v1 l64.f32 64'
test_expect_success 'curl: raw pixels as JSON give the logits of the in-process pass' '
	"$PY" -c "
import gzip, json, numpy as np
d = gzip.open(\"$D/t10k-images-idx3-ubyte.gz\").read()
x = np.frombuffer(d, dtype=np.uint8, offset=16)[:784 * 3].reshape(3, 1, 28, 28)
json.dump({\"inputs\": [{\"name\": \"input\", \"shape\": [3, 1, 28, 28], \"datatype\": \"UINT8\", \"data\": x.tolist()}],
           \"outputs\": [{\"name\": \"logits\"}]}, open(\"req.json\", \"w\"))" &&
	curl -sf -H "Content-Type: application/json" --data-binary @req.json "http://127.0.0.1:$PORT/v2/models/$NAME/infer" >resp.json &&
	"$PY" -c "
import json, numpy as np
got = np.array(json.load(open(\"resp.json\"))[\"outputs\"][0][\"data\"], dtype=np.float32)
want = np.fromfile(\"$TEST_TMP/l64.f32\", dtype=np.float32)[:30]
assert np.allclose(got, want, rtol=1e-4, atol=1e-5), (got, want)"
'
test_expect_success 'all 10,000 test images through the server reproduce the bundle'"'"'s test accuracy' '
	run accuracy l10k.f32 10000 "$CORRECT"
'
test_expect_success 'concurrent one-row requests share forward passes, each answered with its own row' '
	run batching l64.f32 64
'
kill -TERM $SRV
wait $SRV
echo $? >"$TEST_TMP/srv.rc"
test_expect_success 'the server drains and exits 0' 'test "$(cat "$TEST_TMP/srv.rc")" = 0'
test_done
