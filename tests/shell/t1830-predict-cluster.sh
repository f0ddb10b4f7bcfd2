#!/bin/sh
# dlk predict --workers 2 on the real test control plane, the store in S3 (the Versity S3 Gateway
# as a pod behind a Service, as t1540): the objects pass the schema; an Indexed Job of two pods
# scores the 10,000 Fashion-MNIST test images, rank 0 joins the parts, and the predictions are the
# bytes one process here makes of the same bundle and data (the same dataset id); a re-run makes
# no part twice; a rank that fails names itself and its cause.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"
schema_ready

fmnist_ready
start_s3 || { echo "Bail out! cannot start the S3 server"; exit 1; }
cluster_up
trap 'stop_s3; cluster_down; test_cleanup' EXIT
S3=s3://data/pr
s3_in_cluster

# the same threads and batch here and in the pods: the forward pass's floats depend on both
ARGS="--data fm@v1 --to $S3 --threads 1 --batch 500"
diag() { kubectl get jobs,pods; for p in $(kubectl get pods -o name); do echo "== $p"; kubectl logs "$p" | tail -n 12; done; }

test_expect_success 'setup: a model (1 epoch of the example MLP), the test split in S3, its predictions by one process' '
	cd "$TEST_TMP" &&
	mkdir -p fm proj && cp "$FM"/t10k-* fm/ &&
	cp "$TEST_ROOT/examples/mlp/dlk.yaml" proj/ &&
	dlk train --local -q -f proj/dlk.yaml --set training.epochs=1 --set training.threads=2 \
		--set training.checkpoint.every=0 >/dev/null &&
	dlk data push -q fm --to $S3 --tag fm@v1 >/dev/null &&
	dlk predict proj/fashion-mlp.dlk $ARGS --name one@v1 -q >one.id && test -s one.id
'

test_expect_success 'dry run: an Indexed Job of 2 pods, each a rank of dlk predict; the objects pass the schema' '
	cd "$TEST_TMP" &&
	dlk predict proj/fashion-mlp.dlk $ARGS --name two@v1 --workers 2 --store-secret s3-creds --dry-run -o json >objs.json &&
	node "$TEST_ROOT/tests/schema/validate.mjs" objs.json &&
	jq -e "[.items[] | select(.kind == \"Job\")] | length == 1 and .[0].metadata.name == \"two-predict\" and
		.[0].spec.completionMode == \"Indexed\" and .[0].spec.completions == 2" objs.json &&
	jq -r ".items[] | select(.kind == \"ConfigMap\") | .data[\"dlk.yaml\"] // empty" objs.json >spec.yaml &&
	grep -q "workers 2 --rank" spec.yaml && grep -q "store_secret: \"s3-creds\"" spec.yaml
'

test_expect_success '2 workers on the cluster: the joined predictions are the one-process dataset' '
	cd "$TEST_TMP" &&
	kubectl wait --for=condition=Ready pod/s3 --timeout=60s >/dev/null &&
	dlk predict proj/fashion-mlp.dlk $ARGS --name two@v1 --workers 2 --store-secret s3-creds --wait >two.id 2>two.err;
	rc=$?; cat two.err; test $rc = 0 || { diag; false; } &&
	echo "one process $(cat one.id), 2 workers $(cat two.id)" &&
	test "$(cat two.id)" = "$(cat one.id)" &&
	kubectl logs "$(pod_of two-predict 1)" | grep "rank 1 of 2: scored samples 5000 to 10000" &&
	kubectl logs "$(pod_of two-predict 0)" | grep "rank 0: joined the 2 parts" &&
	test "$(dlk data ls --from $S3 | grep -c "two-part-")" = 2
'

test_expect_success 'a re-run finds both parts in the store and makes none twice; -o json' '
	cd "$TEST_TMP" &&
	dlk predict proj/fashion-mlp.dlk $ARGS --name two@v2 --workers 2 --store-secret s3-creds --wait -o json >again.json 2>again.err ||
		{ cat again.err; diag; false; } &&
	jq -e ".id == \"$(cat one.id)\" and .tag == \"two@v2\" and .workers == 2 and .job == \"two-predict\"" again.json &&
	kubectl logs "$(pod_of two-predict 1)" | grep "rank 1 of 2: its part (samples 5000 to 10000) is in the store already" &&
	test "$(dlk data ls --from $S3 | grep -c "two-part-")" = 2
'

test_expect_success 'a rank that fails names itself and its cause' '
	cd "$TEST_TMP" &&
	test_exit_code 1 dlk predict proj/fashion-mlp.dlk $ARGS --name bad@v1 --images nosuch-images-idx3-ubyte \
		--labels nosuch-labels-idx1-ubyte --workers 2 --store-secret s3-creds --wait 2>bad.err;
	cat bad.err &&
	grep -q "job .bad-predict. failed" bad.err && grep -q "rank [01]" bad.err && grep -q "nosuch-images-idx3-ubyte" bad.err
'

test_expect_success 'a pipeline'"'"'s predict stage with workers: 2 runs as an Indexed Job of 2 pods; rank 0 pushes the output' '
	mkdir -p "$TEST_TMP/sp" && cd "$TEST_TMP/sp" &&
	cat >train.yaml <<-EOT &&
	name: small
	data: {format: idx, train: {images: t10k-images-idx3-ubyte.gz, labels: t10k-labels-idx1-ubyte.gz}}
	model: {input: [1, 28, 28], layers: [flatten, {dense: {units: 10}}]}
	training: {epochs: 1, threads: 1, checkpoint: {every: 0}}
	EOT
	cat >dlk-pipeline.yaml <<-EOT &&
	name: sc
	store: $S3
	store_secret: s3-creds
	stages:
	  train:
	    inputs: {data: fm@v1}
	    train: train.yaml
	  predict:
	    inputs: {model: train, data: fm@v1}
	    predict: {workers: 2}
	EOT
	dlk pipeline run --wait 2>run.err; rc=$?; cat run.err; test $rc = 0 || { diag; false; } &&
	dlk pipeline status sc -o json | jq -e "[.stages[] | select(.state == \"succeeded\") | .name] | sort == [\"predict\", \"train\"]" &&
	test "$(kubectl get pods -l batch.kubernetes.io/job-name=sc-predict -o name | wc -l)" = 2 &&
	test "$(dlk data ls --from $S3 | grep -c "sc-predict-part-[01]-of-2@")" = 2 &&
	dlk data get -q sc-predict@latest --from $S3 got &&
	test "$(wc -l <got/predictions.csv)" = 10001 &&
	awk -F, "NR > 1 && \$1 != NR - 2 { exit 1 }" got/predictions.csv
'

test_done
