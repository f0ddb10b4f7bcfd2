#!/bin/sh
# The drill of hostile bundles, files and clients: bundles crafted from a good one
# (tests/hostile/craft.py) with escape sequences in their provenance, names that are not fit for
# URLs, tensor names past 2^32, weights that overflow on a real input, architectures that need
# gigabytes of activations, labels cut or not UTF-8; FIFOs where files belong; requests framed
# two ways. Each must be refused with a message, or answered without harm, never hang or crash.
. "$(dirname "$0")/../lib.sh"
CRAFT="$TEST_ROOT/tests/hostile/craft.py"

command -v python3 >/dev/null 2>&1 || test_missing "python3"
command -v curl >/dev/null 2>&1 || test_missing "curl"

P=$TEST_TMP/proj
mkdir -p "$P"
awk 'BEGIN { srand(3); for (i = 0; i < 256; i++) { c = int(rand() * 4); l = "";
	for (j = 0; j < 16; j++) l = l sprintf("%.3f,", rand() + c); print l c } }' >"$P/train.csv"
cp "$P/train.csv" "$P/test.csv"
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
training: {epochs: 1, batch_size: 64, threads: 1}
EOT
(cd "$P" && "$DLK" train --local -q >train.out 2>&1) || { echo "Bail out! training the test model failed"; cat "$P/train.out"; exit 1; }
B=$P/blobs.dlk
craft() { python3 "$CRAFT" "$@"; }
ESC='"\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202eevil"'

# starts dlk serve in the background: SRV_PID, PORT, URL; its stderr in $1
serve_bg() {
	log=$1
	shift
	"$DLK" serve --local --port 0 "$@" 2>"$log" &
	SRV_PID=$!
	i=0
	while ! grep -q "^ready:" "$log" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 $SRV_PID 2>/dev/null; then
			echo "dlk serve did not become ready"; cat "$log"; kill $SRV_PID 2>/dev/null; return 1
		fi
		sleep 0.05
	done
	PORT=$(sed -n 's/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
	URL=http://127.0.0.1:$PORT
}
stop() { kill -TERM "$1" 2>/dev/null; wait "$1"; }
ROW='[9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9]'
V2='{"inputs":[{"name":"input","shape":[1,16],"datatype":"FP32","data":'$ROW'}],"outputs":[{"name":"probabilities","parameters":{"classification":2}},{"name":"logits"}]}'
post() { curl -s -o body -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$URL$1"; }
no_escape() { ! grep -q "$(printf '\033')" "$1" && ! grep -q "$(printf '\007')" "$1"; }

test_expect_success 'lineage shows the escape sequences of a provenance as text' '
	craft set "$B" esc.dlk provenance.image "$ESC" &&
	craft set esc.dlk esc.dlk provenance.dataset "{\"id\": $ESC, \"tag\": $ESC, \"store\": $ESC}" &&
	craft set esc.dlk esc.dlk provenance.git_commit "$ESC" &&
	dlk lineage esc.dlk >out && no_escape out &&
	grep_q "^image        \\\\e\]0;pwned\\\\x07\\\\e\[2J\\\\u009b31m\\\\u202eevil$" out &&
	grep_q "^dataset      \\\\e\]0;pwned" out && grep_q "^  store      \\\\e" out && grep_q "^git commit   \\\\e" out
'
test_expect_success 'an error naming an outside string shows its escapes as text' '
	craft set "$B" escname.dlk name "$ESC" &&
	test_exit_code 2 timeout 60 "$DLK" serve --local --port 0 escname.dlk 2>err && no_escape err &&
	grep_q "the model name .\\\\e\]0;pwned" err
'
test_expect_failure_code 'a model name not fit for URLs is refused whole, its bundle read after the message' 2 '
	craft set "$B" badname.dlk name "\"$(printf "%080d" 0)\u00e9\u00e9 x\"" &&
	timeout 60 "$DLK" serve --local --port 0 badname.dlk 2>err; rc=$?; cat err
	grep_q "error: .badname.dlk.: the model name .0*. cannot be used in URLs" err &&
	python3 -c "import sys; open(sys.argv[1], \"rb\").read().decode(\"utf-8\")" err && exit $rc
'
test_expect_failure_code 'a tensor named with a layer index past 2^32 is not another layer' 3 '
	craft rename "$B" idx.dlk layers.2.weight layers.4294967298.weight &&
	dlk lineage idx.dlk 2>err; rc=$?; grep_q "tensor .layers.4294967298.weight. is not a parameter" err && exit $rc
'
test_expect_failure_code 'a tensor index with a sign or a leading zero is refused' 3 '
	craft rename "$B" plus.dlk layers.2.weight layers.+2.weight &&
	craft rename "$B" zero.dlk layers.2.weight layers.02.weight &&
	test_exit_code 3 dlk lineage zero.dlk 2>err0 && grep_q "layers.02.weight" err0 &&
	dlk lineage plus.dlk 2>err; rc=$?; grep_q "layers.+2.weight. is not a parameter" err && exit $rc
'
test_expect_failure_code 'a dropout rate out of range in a bundle is refused' 3 '
	craft arch "$B" drop.dlk "{\"layers\": [{\"kind\": \"dense\", \"units\": 16}, {\"kind\": \"dropout\", \"rate\": 1e300},
		{\"kind\": \"dense\", \"units\": 4}]}" &&
	dlk lineage drop.dlk 2>err; rc=$?; grep_q "layers\[1\].rate is not in \[0, 1)" err && exit $rc
'
test_expect_success 'weights that overflow on a real input answer 500, not 200 with null (V2, TF Serving)' '
	craft scale "$B" hot.dlk 1e25 &&
	serve_bg "$TEST_TMP/hot.log" hot.dlk &&
	{ v2=$(post /v2/models/blobs/infer "$V2"); cp body v2.body
	  tfs=$(post /v1/models/blobs:predict "{\"instances\":[$ROW]}"); cp body tfs.body
	  stop $SRV_PID; } &&
	test "$v2" = 500 && grep_q "a value that is not finite for row 0" v2.body && ! grep -q "null\|nan" v2.body &&
	test "$tfs" = 500 && grep_q "a value that is not finite for row 0" tfs.body
'
test_expect_success 'a long label of multi-byte characters is answered whole and as UTF-8' '
	L=$(python3 -c "print(\"\\u00e9\" * 300)") &&
	craft set "$B" long.dlk classes "[\"$L\", \"$L\", \"$L\", \"$L\"]" &&
	serve_bg "$TEST_TMP/long.log" long.dlk &&
	{ code=$(post /v2/models/blobs/infer "$V2"); stop $SRV_PID; } && test "$code" = 200 &&
	python3 -c "import json, sys; d = json.loads(open(\"body\", \"rb\").read().decode(\"utf-8\"));
c = d[\"outputs\"][0][\"data\"][0]; sys.exit(0 if c.endswith(\":\" + \"\\u00e9\" * 300) else 1)"
'
test_expect_success 'an answer naming a URL that is not UTF-8 is UTF-8 JSON; the access log shows it printable' '
	serve_bg "$TEST_TMP/url.log" --access-log "$TEST_TMP/access.log" "$B" &&
	{ code=$(curl -s -o body -w "%{http_code}" "$URL/v2/x%ff%c3%1b"); stop $SRV_PID; } && test "$code" = 404 &&
	python3 -c "import json; json.loads(open(\"body\", \"rb\").read().decode(\"utf-8\"))" &&
	grep_q "no route for GET ./v2/x\\\\ufffd\\\\ufffd\\\\u001b." body &&
	grep_q "\"GET /v2/x???\" 404" "$TEST_TMP/access.log"
'
test_expect_failure_code 'a label that is not UTF-8 is refused when the bundle is read' 3 '
	craft set "$B" bad8.dlk classes "[\"n\udcff\", \"e\", \"s\", \"w\"]" &&
	timeout 60 "$DLK" serve --local --port 0 bad8.dlk 2>err; rc=$?; grep_q "classes\[0\] is not UTF-8 text" err && exit $rc
'
WIDE='{"input": [1, 4, 4], "input_rank": 3, "layers": [{"kind": "conv2d", "filters": 8, "kernel": 1, "padding": 1024},
	{"kind": "maxpool", "size": 1024, "stride": 1024}, {"kind": "flatten"}, {"kind": "dense", "units": 4}]}'
test_expect_success 'a small bundle whose forward pass needs 386 MiB a row (128 MiB of one activation) gets a smaller batch, and says so' '
	craft arch "$B" wide.dlk "$WIDE" && test $(wc -c <wide.dlk) -lt 20000 &&
	serve_bg "$TEST_TMP/wide.log" wide.dlk && stop $SRV_PID &&
	grep_q "model .blobs.: batches of at most 2 rows, not 64: a larger one needs more than serving.max_memory (1024 MiB)" \
		"$TEST_TMP/wide.log"
'
test_expect_failure_code 'one that needs more than serving.max_memory for one row is refused, naming the setting' 3 '
	craft arch "$B" wide.dlk "$WIDE" &&
	timeout 60 "$DLK" serve --local --port 0 wide.dlk --set serving.max_memory=64Mi 2>err; rc=$?; cat err
	grep_q "needs 386 MiB for the activations of one row, over serving.max_memory (64 MiB)" err &&
	! grep -q training.batch_size err && exit $rc
'
test_expect_failure_code 'serving.max_memory is checked by the project loader' 2 '
	timeout 60 "$DLK" serve --local --port 0 "$B" --set serving.max_memory=12 2>err; rc=$?
	grep_q "serving.max_memory" err && exit $rc
'
test_expect_success 'requests framed two ways are answered 400 and their connection closed' '
	serve_bg "$TEST_TMP/frame.log" "$B" &&
	{ craft http $PORT two-lengths >two; craft http $PORT te-and-length >te; craft http $PORT same-lengths >same
	  stop $SRV_PID; } &&
	grep_q "^HTTP/1.1 400" two && grep_q "^connection: close" two && grep_q "Content-Length headers that disagree" two &&
	grep_q "^HTTP/1.1 400" te && grep_q "^connection: close" te && grep_q "both Transfer-Encoding and Content-Length" te &&
	grep_q "no inputs" same
'
test_expect_success 'a FIFO named as a project file, bundle or report source is refused at once' '
	mkfifo ff && cp "$P/dlk.yaml" . &&
	test_exit_code 3 timeout 60 "$DLK" -f ff train --dry-run 2>e1 && grep_q "error: .ff. is a FIFO, not a regular file" e1 &&
	test_exit_code 3 timeout 60 "$DLK" report ff 2>e2 && grep_q ".ff. is a FIFO, not a regular file" e2 &&
	test_exit_code 3 timeout 60 "$DLK" lineage ff 2>e3 && grep_q "bundle: .ff. is a FIFO" e3 &&
	test_exit_code 3 timeout 60 "$DLK" serve --local --port 0 ff 2>e4 && grep_q "bundle: .ff. is a FIFO" e4
'
test_expect_success 'a FIFO as a data file or a template is refused at once' '
	cp "$P/dlk.yaml" "$P/test.csv" . && mkfifo train.csv &&
	test_must_fail timeout 60 "$DLK" train --local -q 2>e1 && grep_q "train.csv. is .*not a regular file" e1 &&
	rm train.csv && cp "$P/train.csv" . && dlk init t --templates >/dev/null && mv t/templates . && t=$(ls templates/*.yaml | head -n 1) &&
	rm "$t" && mkfifo "$t" &&
	test_must_fail timeout 60 "$DLK" train --dry-run 2>e2 && grep_q "is a FIFO, not a regular file" e2
'
test_expect_success 'a report page is UTF-8 whatever bytes its run holds' '
	craft set "$B" bad9.dlk provenance.image "\"img\udcfe\udcff\"" &&
	dlk report bad9.dlk -o page.html >/dev/null &&
	python3 -c "import sys; open(\"page.html\", \"rb\").read().decode(\"utf-8\")" && grep_q "img\\\\ufffd\\\\ufffd" page.html
'
test_done
