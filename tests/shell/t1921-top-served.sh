#!/bin/sh
# dlk top lists the model servers here (dlk serve --local registers itself in the user's runtime
# directory): a line per model with requests, errors and rows per second and the mean request
# time over the interval, counted from the server's own /metrics; a server killed without
# removing its file is dropped (and its file removed); a file that is not a server's is passed over;
# one whose server does not answer /metrics says so.
. "$(dirname "$0")/../lib.sh"

blobs_project "$TEST_TMP/p"
dlk train --local -q -f "$TEST_TMP/p/dlk.yaml" >/dev/null 2>&1 || { echo "Bail out! training failed"; exit 1; }

serve_local "$TEST_TMP/serve.log" "$TEST_TMP/p/blobs.dlk"
# requests all the time the tests below sample (2 rows each, one in 3 refused: a wrong shape, so
# that a second of a loaded machine, where a curl may take 300 ms, still has a refused one)
(
	n=0
	while kill -0 $SRV 2>/dev/null && [ $n -lt 4000 ]; do
		n=$((n + 1))
		if [ $((n % 3)) -eq 0 ]; then d='"shape":[1,3],"datatype":"FP32","data":[1,2,3]'; else d='"shape":[2,2],"datatype":"FP32","data":[0.5,0.2,1.5,-0.3]'; fi
		curl -s -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"inputs\":[{\"name\":\"input\",$d}]}" "http://127.0.0.1:$PORT/v2/models/blobs/infer" || break
	done
) &
LOAD=$!

test_expect_success 'the server registered itself, its file private to the user' '
	f=$(ls "$XDG_RUNTIME_DIR"/dlk/serve-$SRV.json) &&
	jq -e ".pid == $SRV and .port == $PORT and .models == [\"blobs\"]" "$f" &&
	test "$(stat -c %a "$XDG_RUNTIME_DIR/dlk")" = 700 && test "$(stat -c %a "$f")" = 600
'

test_expect_success 'JSON: the model'"'"'s requests, errors and rows per second, and its mean request time' '
	sleep 0.3 &&
	dlk top -o json --interval 1s >top.json && jq .served top.json &&
	jq -e ".served | length == 1" top.json &&
	jq -e ".served[0] | .pid == $SRV and .address == \"http://127.0.0.1:$PORT\" and .up and .rss_bytes > 0 and
		(.models | length == 1) and .models[0].model == \"blobs\"" top.json &&
	jq -e ".served[0].models[0] | .requests_per_s > 0 and .errors_per_s > 0 and .latency_ms > 0 and
		(.rows_per_s - 2 * .requests_per_s | fabs) < 0.2 * .requests_per_s + 0.5" top.json
'

test_expect_success 'piped: a line per model below the runs' '
	dlk top --interval 0.5s >top.txt 2>/dev/null && cat top.txt &&
	grep -q "^SERVED  *MODEL  *PID  *REQ/S  *ERR/S  *ROWS/S  *LATENCY  *CPU%  *RSS$" top.txt &&
	grep -q "^http://127.0.0.1:$PORT  *blobs  *$SRV  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]* ms  *[0-9]*  *[0-9.]* [kMG]*B$" top.txt
'

test_expect_success 'a file that is no server'"'"'s is passed over; a server without /metrics says so' '
	printf "{not json" >"$XDG_RUNTIME_DIR/dlk/serve-1.json" &&
	printf "{\"pid\": -4, \"host\": \"127.0.0.1\", \"port\": 1, \"models\": []}" >"$XDG_RUNTIME_DIR/dlk/serve-2.json" &&
	sleep 30 & SLP=$! &&
	printf "{\"pid\": %d, \"host\": \"127.0.0.1\", \"port\": %d, \"models\": [\"m\\\\u001b[2J\"]}" $SLP 1 \
		>"$XDG_RUNTIME_DIR/dlk/serve-$SLP.json" &&
	dlk top -o json --interval 0.2s >top2.json &&
	jq -e ".served | length == 2" top2.json &&
	jq -e ".served[] | select(.pid == $SLP) | (.up | not) and .models[0].model == \"m\\u001b[2J\"" top2.json &&
	dlk top --interval 0.2s >top2.txt 2>/dev/null && cat top2.txt &&
	grep -q "^http://127.0.0.1:[0-9]*  *m\\\\e\[2J  *$SLP  *no /metrics " top2.txt &&
	kill $SLP
'

test_expect_success 'a server killed (no goodbye) is dropped and its file removed; a stopped one removes its own' '
	kill -9 $SRV && wait $SRV; kill $LOAD 2>/dev/null; wait $LOAD
	dlk top -o json --interval 0.1s >top3.json &&
	jq -e ".served | all(.pid != $SRV)" top3.json &&
	! test -e "$XDG_RUNTIME_DIR/dlk/serve-$SRV.json" &&
	"$DLK" serve --local --port 0 "$TEST_TMP/p/blobs.dlk" 2>"$TEST_TMP/serve2.log" &
	S2=$! &&
	i=0 && until grep -q "^ready:" "$TEST_TMP/serve2.log" 2>/dev/null || [ $i -gt 600 ]; do i=$((i + 1)); sleep 0.05; done &&
	test -e "$XDG_RUNTIME_DIR/dlk/serve-$S2.json" &&
	kill -TERM $S2 && wait $S2;
	! test -e "$XDG_RUNTIME_DIR/dlk/serve-$S2.json"
'

test_done
