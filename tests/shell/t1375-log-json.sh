#!/bin/sh
# --log-format json: one JSON object per line on stderr (time RFC 3339, level, rank, msg, and
# the numbers of progress lines as fields) for dlk train --local/--worker and dlk serve
# --local/--worker; $DLK_LOG_FORMAT (logging.format, passed by the templates) when the option is
# not given; `dlk logs` shows a job whose workers log JSON as text.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"

STEP='{\"time\":\"2026-01-02T03:04:05.678Z\",\"level\":\"info\",\"rank\":0,\"msg\":\"epoch 1/2  step 20/40  loss 0.6931  800 samples/s  ETA 0:03\",\"epoch\":1,\"step\":20,\"loss\":0.6931}'
ERR='{\"time\":\"2026-01-02T03:04:06.000Z\",\"level\":\"error\",\"rank\":1,\"msg\":\"train.csv:7:5: expected a number\",\"hint\":\"fix the file\"}'
cat >"$TEST_TMP/scenario.json" <<EOT
{
  "description": "A Job whose workers log JSON lines.",
  "auth": { "tokens": ["test-token"] },
  "jobs": {
    "js": {
      "pods": [
        { "timeline": [ { "at": 0, "phase": "Running" }, { "at": 20, "log": ["$STEP", "plain line"] },
            { "at": 200, "phase": "Succeeded", "exitCode": 0 } ] },
        { "timeline": [ { "at": 0, "phase": "Running" }, { "at": 40, "log": "$ERR" },
            { "at": 200, "phase": "Succeeded", "exitCode": 0 } ] }
      ]
    }
  }
}
EOT
apiserver_project "$TEST_TMP/scenario.json"

P=$TEST_TMP/p
mkdir -p "$P" &&
awk 'BEGIN { srand(7); for (i = 0; i < 512; i++) { c = int(rand() * 2); printf "%.3f,%.3f,%d\n", rand() + c, rand() - c, c } }' >"$P/train.csv" &&
head -n 100 "$P/train.csv" >"$P/test.csv" &&
cat >"$P/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [2]
  layers:
    - dense: {units: 8}
    - relu
    - dense: {units: 2}
training: {epochs: 2, batch_size: 16, threads: 1}
EOT

# every_line_json FILE: each line of FILE is a JSON object with time, level, rank and msg
every_line_json() {
	test -s "$1" && while IFS= read -r l; do
		printf "%s\n" "$l" | jq -e "(.time | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$\")) and
			(.level | IN(\"info\", \"warning\", \"error\")) and (.rank | type == \"number\") and (.msg | type == \"string\")" >/dev/null ||
			{ echo "not a log object: $l" >&2; return 1; }
	done <"$1"
}

test_expect_success 'dlk train --local --log-format json: every line an object, progress with its numbers' '
	"$DLK" -f "$P/dlk.yaml" train --local --fresh --log-format json >out 2>err && cat err &&
	every_line_json err && test ! -s out &&
	jq -se "[.[] | select(.event == \"step\")] | length > 0 and all(.epoch >= 1 and .step >= 1 and .loss > 0 and .samples_per_sec > 0)" err &&
	jq -se "[.[] | select(.event == \"epoch\")] | length == 2 and all(.test_accuracy > 0.5 and (.test_loss | type == \"number\"))" err &&
	jq -se "[.[] | select(.bundle)] | length == 1 and (.[0].confusionMatrix | length) == 2" err
'

test_expect_success 'text stays the default, and DLK_LOG_FORMAT chooses when the option is not given' '
	"$DLK" -f "$P/dlk.yaml" train --local --fresh >out 2>err && ! grep -q "^{" err && grep -q "^epoch 2/2" err &&
	DLK_LOG_FORMAT=json "$DLK" -f "$P/dlk.yaml" train --local --fresh >out 2>err && every_line_json err &&
	DLK_LOG_FORMAT=json "$DLK" -f "$P/dlk.yaml" train --local --fresh --log-format text >out 2>err && ! grep -q "^{" err
'

test_expect_failure_code 'a DLK_LOG_FORMAT that is neither is a usage error' 2 '
	DLK_LOG_FORMAT=xml "$DLK" -f "$P/dlk.yaml" train --local 2>err; rc=$?; grep_q "DLK_LOG_FORMAT: expected text or json" err; exit $rc
'

test_expect_failure_code 'an error is an object of level error, with its hint and class' 3 '
	"$DLK" -f "$P/dlk.yaml" train --local --fresh --log-format json --set data.train.source=nothere.csv 2>err; rc=$?; cat err
	every_line_json err &&
	jq -se "[.[] | select(.level == \"error\")] | length == 1 and (.[0].msg | test(\"nothere.csv\")) and .[0].class == \"config\"" err &&
	exit $rc
'

test_expect_success 'the workers of --workers 2 log objects too, each with its rank' '
	"$DLK" -f "$P/dlk.yaml" train --local --fresh --workers 2 --log-format json -v >out 2>err && cat err &&
	every_line_json err && jq -se "[.[] | .rank] | unique == [0, 1]" err
'

test_expect_success 'dlk serve --local --log-format json logs objects' '
	"$DLK" serve --local --port 0 --log-format json "$P/blobs.dlk" 2>serr & pid=$! &&
	i=0 && while ! grep -q ready serr && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done;
	kill -TERM $pid; wait $pid; cat serr &&
	every_line_json serr && jq -se "[.[] | select(.msg | test(\"listening on http\"))] | length == 1" serr
'

test_expect_success 'logging.format reaches the pods of the Job and of a served model' '
	"$DLK" -f "$P/dlk.yaml" train --dry-run -o json >d.json &&
	jq -e "[.items[] | select(.kind == \"Job\") | .spec.template.spec.containers[0].env[] | select(.name == \"DLK_LOG_FORMAT\") | .value] == [\"text\"]" d.json &&
	"$DLK" -f "$P/dlk.yaml" train --dry-run -o json --set logging.format=json >d.json &&
	jq -e "[.items[] | select(.kind == \"Job\") | .spec.template.spec.containers[0].env[] | select(.name == \"DLK_LOG_FORMAT\") | .value] == [\"json\"]" d.json &&
	printf "%s\n" "serving: {port: 8080}" >>"$P/dlk.yaml" && cp "$P/blobs.dlk" "$TEST_TMP/m.dlk" &&
	{ cd "$TEST_TMP" && python3 -m http.server --bind 127.0.0.1 0 >http.log 2>&1 & hp=$!; } &&
	i=0 && while ! grep -q "port [0-9]" "$TEST_TMP/http.log" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done &&
	port=$(sed -n "s/.*port \([0-9]*\).*/\1/p" "$TEST_TMP/http.log" | head -n 1) &&
	"$DLK" -f "$P/dlk.yaml" serve --dry-run -o json --set logging.format=json --model "http://127.0.0.1:$port/m.dlk" \
		--sha256 $(sha256sum "$TEST_TMP/m.dlk" | cut -d" " -f1) >s.json; rc=$?; kill $hp; wait $hp; test $rc = 0 &&
	jq -e "[.items[] | select(.kind == \"Deployment\") | .spec.template.spec.containers[0].env[] | select(.name == \"DLK_LOG_FORMAT\") | .value] == [\"json\"]" s.json
'

test_expect_success 'dlk logs shows JSON lines as text; -o json keeps them' '
	dlk -f "$PROJ" -q train --set name=js --set resources.workers=2 --wait >/dev/null 2>&1 &&
	dlk logs js >out && cat out &&
	grep_q "^\[rank 0\] epoch 1/2  step 20/40  loss 0.6931  800 samples/s  ETA 0:03$" out &&
	grep_q "^\[rank 0\] plain line$" out &&
	grep_q "^\[rank 1\] error: train.csv:7:5: expected a number (hint: fix the file)$" out &&
	dlk logs js -o json >raw && grep -q "\"level\":\"error\"" raw
'

test_done
