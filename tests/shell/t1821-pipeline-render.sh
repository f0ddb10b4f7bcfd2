#!/bin/sh
# What `dlk pipeline run --dry-run` renders for a cluster, without one: schedule: and trigger:
# data-changed make the driver a CronJob (schema-checked with the Role); a store the pods cannot
# reach and bad stage resources are refused naming the file.
. "$(dirname "$0")/../lib.sh"

schema_ready

mkdir -p "$TEST_TMP/p" && cd "$TEST_TMP/p" || exit 1
echo 'cp "$DLK_INPUT_RAW/f" "$DLK_OUTPUT/f"' >copy.sh
pipeline() {
	res=${RES:-}
	[ -n "$res" ] || res='{cpu: "2", memory: 2Gi, gpus: 1}'
	cat >dlk-pipeline.yaml <<EOT
name: nightly
store: ${STORE:-s3://data/n}
store_secret: s3-creds
$1
stages:
  copy:
    inputs: {raw: raw@v1}
    run: [sh, copy.sh]
    resources: $res
EOT
}

test_expect_success 'schedule: makes the driver a CronJob; the stage asks for its resources' '
	pipeline "schedule: \"0 3 * * *\"" &&
	AWS_ACCESS_KEY_ID= dlk pipeline run --dry-run -o json >o.json 2>err && cat err &&
	node "$SCHEMA/validate.mjs" o.json &&
	jq -e ".items[-1].kind == \"CronJob\" and .items[-1].spec.schedule == \"0 3 * * *\" and
		.items[-1].metadata.labels[\"dlk.dev/pipeline\"] == \"nightly\"" o.json &&
	jq -r ".items[] | select(.metadata.name == \"nightly-pipeline-jobs\") | .data[\"jobs.json\"]" o.json >jobs.json &&
	jq -e ".copy.spec.template.spec.containers[0].resources.limits[\"nvidia.com/gpu\"] == \"1\" and
		.copy.spec.template.spec.containers[0].resources.requests.memory == \"2Gi\"" jobs.json &&
	jq -e "[.items[] | select(.kind == \"Role\" and .metadata.name == \"nightly-pipeline-driver\") | .rules[1].resourceNames] == [[\"nightly-copy\"]]" o.json
'

test_expect_success 'trigger: data-changed alone polls every 10 minutes from a CronJob' '
	pipeline "trigger: data-changed" &&
	AWS_ACCESS_KEY_ID= dlk pipeline run --dry-run -o json >o.json 2>/dev/null &&
	node "$SCHEMA/validate.mjs" o.json &&
	jq -e ".items[-1].kind == \"CronJob\" and .items[-1].spec.schedule == \"*/10 * * * *\"" o.json
'

test_expect_success 'predict: {workers: 2}: the stage'"'"'s Job is Indexed over 2 pods, each its rank'"'"'s part; bad counts refused' '
	mkdir -p w && cd w &&
	printf "name: m\ndata: {format: idx, train: {images: file:///dev/null, labels: file:///dev/null}}\n" >dlk.yaml &&
	cp "$TEST_ROOT/tests/fuzz/pipeline/predict-workers.yaml" dlk-pipeline.yaml &&
	AWS_ACCESS_KEY_ID= dlk pipeline run --dry-run -o json >o.json 2>err && cat err &&
	node "$SCHEMA/validate.mjs" o.json &&
	jq -r ".items[] | select(.metadata.name == \"scored-pipeline-jobs\") | .data[\"jobs.json\"]" o.json >jobs.json &&
	jq -e ".predict.spec.completions == 2 and .predict.spec.completionMode == \"Indexed\" and .train.spec.completions == 1" jobs.json &&
	jq -r ".items[] | select(.metadata.name == \"scored-predict-spec\") | .data[\"dlk.yaml\"]" o.json >spec.yaml &&
	grep -q "DLK_PIPELINE_RANK=" spec.yaml &&
	sed "s/workers: 2/workers: 0/" dlk-pipeline.yaml >x.yaml && mv x.yaml dlk-pipeline.yaml &&
	test_exit_code 3 dlk pipeline run --dry-run 2>err && cat err &&
	grep -q "^error: dlk-pipeline.yaml:10:24: stages.predict.predict.workers is the integer 0, not a whole number from 1 to 1000" err &&
	sed "s/workers: 0/threads: 2/" dlk-pipeline.yaml >x.yaml && mv x.yaml dlk-pipeline.yaml &&
	test_exit_code 3 dlk pipeline run --dry-run 2>err && grep -q "unknown key .threads." err
'

test_expect_success 'a directory store, an unknown trigger and a bad resource are refused naming the file' '
	STORE=./store pipeline "" &&
	test_exit_code 3 dlk pipeline run 2>err && cat err &&
	grep -q "store '"'"'./store'"'"' is a directory here: the pods of a cluster cannot reach it" err &&
	grep -q "^hint: .*--local" err &&
	pipeline "trigger: hourly" && test_exit_code 3 dlk pipeline run --dry-run 2>err && cat err &&
	grep -q "^error: dlk-pipeline.yaml:4:10: trigger .hourly. is not one dlk knows" err &&
	RES="{disk: 1Gi}" pipeline "" && test_exit_code 3 dlk pipeline run --dry-run 2>err && cat err &&
	grep -q "^error: dlk-pipeline.yaml:9:17: unknown key .disk." err &&
	RES="{gpus: two}" pipeline "" && test_exit_code 3 dlk pipeline run --dry-run 2>err && cat err &&
	grep -q "gpus is .two., not a whole number" err
'

test_done
