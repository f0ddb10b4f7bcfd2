#!/bin/sh
# dlk serve --local, end to end with curl and raw sockets: every route and status code, bad
# bundles and options, limits, slow and silent clients, lying binary headers, metrics that
# promtool accepts, the access log, and SIGTERM draining with a request in flight. A small CSV
# model (16 features, 4 classes) trains in a second.
. "$(dirname "$0")/../lib.sh"
EDGE="$TEST_ROOT/tests/serve/http_edge.py"

if ! command -v promtool >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
	echo "Bail out! promtool and curl are needed (make test installs them: .ci/deps test)"
	exit 1
fi

P=$TEST_TMP/proj
mkdir -p "$P"
blobs_csv 1024 1 "$P/train.csv"
blobs_csv 256 2 "$P/test.csv"
cat >"$P/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
  classes: [north, east, south, west]
model:
  input: [16]
  layers:
    - dense: {units: 16}
    - relu
    - dense: {units: 4}
training: {epochs: 2, batch_size: 64, threads: 1}
serving: {port: 1, max_request_bytes: 64Ki}
EOT
(cd "$P" && "$DLK" train --local -q >train.out 2>&1) || { echo "Bail out! training the test model failed"; cat "$P/train.out"; exit 1; }
B=$P/blobs.dlk

# starts dlk serve in the background: SRV_PID, PORT; its stderr in $1.log
serve_bg() {
	log=$1
	shift
	"$DLK" serve --local --port 0 "$@" 2>"$log" &
	SRV_PID=$!
	i=0
	while ! grep -q "^ready:" "$log" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 $SRV_PID 2>/dev/null; then
			echo "Bail out! dlk serve did not become ready"; cat "$log"; kill $SRV_PID 2>/dev/null; exit 1
		fi
		sleep 0.05
	done
	PORT=$(sed -n 's/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
	URL=http://127.0.0.1:$PORT
}
stop() { kill -TERM "$1" 2>/dev/null; wait "$1"; }
J='{"id":"r1","inputs":[{"name":"input","shape":[2,16],"datatype":"FP32","data":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]}]}'
post() { curl -s -o body -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$URL$1"; }
get() { curl -s -o body -w '%{http_code}' "$URL$1"; }

test_expect_failure_code 'a bundle without --local is a usage error: deploying takes a job name' 2 '
	dlk serve "$B" 2>err; rc=$?; grep_q "hint: serve bundles on this machine" err; exit $rc
'
test_expect_failure_code 'no bundle is a usage error' 2 'dlk serve --local'
test_expect_failure_code 'a missing bundle is named, exit 3' 3 '
	timeout 60 "$DLK" serve --local --port 0 nothere.dlk 2>err; rc=$?; grep_q "cannot open bundle .nothere.dlk." err; exit $rc
'
test_expect_failure_code 'a damaged bundle is refused before ready' 3 '
	python3 -c "import sys; d = bytearray(open(sys.argv[1], \"rb\").read()); i = len(d.rstrip(bytes(1))) - 1; d[i] ^= 0xff; open(\"bad.dlk\", \"wb\").write(d)" "$B" &&
	timeout 60 "$DLK" serve --local --port 0 bad.dlk 2>err; rc=$?; cat err; grep_q "bad.dlk" err; exit $rc
'
test_expect_failure_code 'a file that is no bundle fails before "listening on", saying what to serve' 3 '
	printf "name: x\n" >proj.yaml &&
	timeout 60 "$DLK" serve --local --port 0 "$B" proj.yaml 2>err; rc=$?; cat err;
	! grep -q "listening on" err && grep_q "cannot open bundle .proj.yaml." err &&
	grep_q "hint: .proj.yaml. is a project file: serve the bundle its training wrote" err && exit $rc
'
test_expect_failure_code 'with --port, a bundle without --local still gets the hint' 2 '
	dlk serve "$B" --port 0 2>err; rc=$?; grep_q "hint: serve bundles on this machine" err; exit $rc
'
test_expect_failure_code 'a bad serving setting names the key' 2 '
	timeout 60 "$DLK" serve --local --port 0 "$B" --set serving.max_batch=0 2>err; rc=$?; grep_q "serving.max_batch" err; exit $rc
'
test_expect_failure_code 'without a project file only serving.* can be set' 2 '
	timeout 60 "$DLK" serve --local --port 0 "$B" --set training.epochs=3 2>err; rc=$?; grep_q "only serving" err; exit $rc
'
test_expect_failure_code 'a bad --access-log path is a usage error' 2 'timeout 60 "$DLK" serve --local --port 0 --access-log /nonexistent/dir/log "$B"'

serve_bg "$TEST_TMP/s1" --access-log "$TEST_TMP/access.log" --set serving.max_request_bytes=64Ki \
	--set serving.request_timeout_s=1 --set serving.idle_timeout_s=1 --set serving.max_json_depth=8 "$B"

test_expect_success 'health, server and model metadata' '
	test "$(get /v2/health/live)" = 200 && test "$(get /v2/health/ready)" = 200 &&
	test "$(get /v2/models/blobs/ready)" = 200 &&
	test "$(get /v2)" = 200 && grep_q "\"extensions\":\[\"binary_tensor_data\",\"classification\"\]" body &&
	test "$(get /v2/models/blobs)" = 200 && grep_q "\"shape\":\[-1,16\]" body &&
	test "$(get /v2/models/blobs/versions/1)" = 200 &&
	test "$(get /v1/models/blobs)" = 200 && grep_q "\"state\":\"AVAILABLE\"" body &&
	test "$(get /v1/models/blobs/metadata)" = 200 && grep_q "serving_default" body
'
test_expect_success 'V2 inference: the id echoed, both outputs, flat or nested' '
	test "$(post /v2/models/blobs/infer "$J")" = 200 &&
	jq -e ".id == \"r1\" and .model_name == \"blobs\" and (.outputs | length) == 2 and .outputs[0].shape == [2,4]" body &&
	jq -e "[.outputs[0].data[0:4] | add] | .[0] > 0.999 and .[0] < 1.001" body
'
test_expect_success 'outputs selected, classification with the labels' '
	test "$(post /v2/models/blobs/infer "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,16],\"datatype\":\"INT32\",\"data\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}],\"outputs\":[{\"name\":\"probabilities\",\"parameters\":{\"classification\":2}}]}")" = 200 &&
	jq -e "(.outputs | length) == 1 and .outputs[0].datatype == \"BYTES\" and .outputs[0].shape == [1,2]" body &&
	jq -r ".outputs[0].data[0]" body | grep -E "^[01]\.[0-9]{6}:[0-3]:(north|east|south|west)$"
'
test_expect_success 'TF Serving predict: rows and columns' '
	test "$(post /v1/models/blobs:predict "{\"instances\":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}")" = 200 &&
	jq -e ".predictions[0].logits | length == 4" body &&
	test "$(post /v1/models/blobs:predict "{\"inputs\":{\"input\":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}}")" = 200 &&
	jq -e ".outputs.probabilities[0] | length == 4" body
'
test_expect_success 'malformed JSON, wrong shapes and datatypes: 400 with the reason' '
	test "$(post /v2/models/blobs/infer "{\"inputs\":[")" = 400 && grep_q "invalid JSON at byte" body &&
	test "$(post /v2/models/blobs/infer "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,15],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}")" = 400 &&
	grep_q "shape \[1,15\] does not fit the model.s \[-1,16\]" body &&
	test "$(post /v2/models/blobs/infer "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,16],\"datatype\":\"BYTES\",\"data\":[\"a\"]}]}")" = 400 &&
	grep_q "datatype BYTES is not a number type" body &&
	test "$(post /v2/models/blobs/infer "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,16],\"datatype\":\"UINT8\",\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,-1]}]}")" = 400 &&
	grep_q "element 15 (-1) is not a valid UINT8" body &&
	test "$(post /v1/models/blobs:predict "{\"instances\":[[1,2]]}")" = 400 && grep_q "does not fit" body &&
	test "$(post /v1/models/blobs:predict "[]")" = 400 && jq -e ".error" body
'
test_expect_success 'JSON nested past serving.max_json_depth: 400' '
	test "$(post /v2/models/blobs/infer "{\"inputs\":[{\"name\":\"input\",\"data\":[[[[[[[[[[1]]]]]]]]]]}]}")" = 400 &&
	grep_q "JSON nesting deeper than 8" body
'
test_expect_success 'unknown models and routes 404, wrong methods 405' '
	test "$(get /v2/models/nope)" = 404 && grep_q "unknown model .nope." body &&
	test "$(post /v2/models/nope/infer "$J")" = 404 &&
	test "$(get /v2/models/blobs/versions/7)" = 404 &&
	test "$(get /nothing/here)" = 404 &&
	test "$(get /v2/models/blobs/infer)" = 405 &&
	test "$(curl -s -o body -w "%{http_code}" -X PUT "$URL/v2/health/live")" = 405
'
test_expect_success 'a body over the limit is 413 and names it, by Content-Length or as it arrives' '
	head -c 70000 /dev/zero | tr "\0" " " >big &&
	test "$(curl -s -o body -w "%{http_code}" --data-binary @big "$URL/v2/models/blobs/infer")" = 413 &&
	grep_q "over the limit of 65536 bytes (serving.max_request_bytes)" body &&
	test "$(curl -s -o body -w "%{http_code}" -H "Transfer-Encoding: chunked" --data-binary @big "$URL/v2/models/blobs/infer")" = 413 &&
	python3 "$EDGE" huge $PORT blobs
'
test_expect_success 'a truncated body is not answered and does not hurt the next request' 'python3 "$EDGE" truncated $PORT blobs'
test_expect_success 'binary headers that lie are refused; binary outputs come back split' 'python3 "$EDGE" lying-binary $PORT blobs'
test_expect_success 'a body slower than request_timeout_s loses its connection' 'python3 "$EDGE" slow-body $PORT blobs'
test_expect_success 'a silent client is disconnected after idle_timeout_s' 'python3 "$EDGE" idle $PORT blobs'
test_expect_success 'metrics pass promtool and count what happened' '
	test "$(get /metrics)" = 200 && promtool check metrics <body &&
	grep_q "^dlk_inference_request_success_total{model=\"blobs\"} [1-9]" body &&
	grep_q "^dlk_inference_request_failure_total{model=\"blobs\",reason=\"bad_request\"} [1-9]" body &&
	grep_q "^dlk_inference_request_failure_total{model=\"blobs\",reason=\"too_large\"} [1-9]" body &&
	grep_q "^dlk_inference_request_duration_seconds_bucket{model=\"blobs\",le=\"+Inf\"} [1-9]" body &&
	grep_q "^dlk_inference_batch_size_count{model=\"blobs\"}" body && grep_q "^dlk_server_ready 1" body
'
test_expect_success 'the access log has a line per request' '
	grep_q "\"POST /v2/models/blobs/infer\" 200 [0-9]* [0-9.]* model=blobs" "$TEST_TMP/access.log" &&
	grep_q "\"GET /nothing/here\" 404" "$TEST_TMP/access.log"
'
# the server is this shell's child: the drain runs here, the case checks what happened. A server
# of its own, whose request_timeout_s (60 s) a request in flight over a loaded second outlives
stop $SRV_PID
serve_bg "$TEST_TMP/s1d" "$B"
python3 "$EDGE" drain $PORT blobs $SRV_PID >"$TEST_TMP/drain.out" 2>&1
echo $? >"$TEST_TMP/drain.rc"
wait $SRV_PID
echo $? >"$TEST_TMP/srv.rc"
test_expect_success 'SIGTERM drains: not ready, 503 for new inferences, the request in flight answered, exit 0' '
	cat "$TEST_TMP/drain.out" && test "$(cat "$TEST_TMP/drain.rc")" = 0 && test "$(cat "$TEST_TMP/srv.rc")" = 0 &&
	# the inference held open, and a readiness poll if one was being answered when the signal came
	grep -E -q "draining: (1 request|2 requests) in flight" "$TEST_TMP/s1d" &&
	grep_q "drained: every request answered" "$TEST_TMP/s1d"
'

test_expect_failure_code 'a port in use is an error, exit 1' 1 '
	serve_bg s2 "$B" && timeout 60 "$DLK" serve --local --port $PORT "$B" 2>err; rc=$?; stop $SRV_PID; grep_q "cannot listen" err; exit $rc
'
test_expect_success 'the project file serving section applies, and two models are served by name' '
	cp "$B" "$P/copy.dlk" &&
	(cd "$P" && serve_bg "$TEST_TMP/s3" blobs.dlk second=copy.dlk &&
	 test "$(get /v2/models/second/ready)" = 200 && test "$(get /v2/models/blobs/ready)" = 200 &&
	 test "$(post /v2/models/second/infer "$J")" = 200; rc=$?
	 stop $SRV_PID; exit $rc) &&
	grep_q "ready: 2 models" "$TEST_TMP/s3"
'
test_expect_success 'serving.max_request_bytes from dlk.yaml is the limit' '
	(cd "$P" && serve_bg "$TEST_TMP/s4" blobs.dlk &&
	 head -c 66000 /dev/zero | tr "\0" " " >big2 &&
	 test "$(curl -s -o body -w "%{http_code}" --data-binary @big2 "$URL/v2/models/blobs/infer")" = 413; rc=$?
	 stop $SRV_PID; exit $rc)
'
test_expect_success 'OpenBLAS: dlk runs the kernels of this CPU, and warns when made to run older ones' '
	(OPENBLAS_CORETYPE=Prescott && export OPENBLAS_CORETYPE && serve_bg "$TEST_TMP/s5" "$B" && stop $SRV_PID) &&
	if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
		"$DLK" version >version.out && ! grep -q "(Prescott)" version.out &&
		grep_q "Prescott kernels): OpenBLAS runs older kernels than this CPU allows; start dlk with OPENBLAS_CORETYPE=" "$TEST_TMP/s5"
	else
		! grep -q "older kernels" "$TEST_TMP/s5"
	fi
'
test_done
