#!/bin/sh
# The example pipeline with its store in S3 (the Versity S3 Gateway on loopback, as t1510): the
# stages fetch their inputs from and push their outputs to the object store, dlk train and dlk
# predict in the stages reach it with the same credentials; a second run reuses every stage by
# the key tags in the bucket, and lineage reads the chain from there.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"

fmnist_ready
command -v python3 >/dev/null 2>&1 || test_missing "python3 is installed"
start_s3 || { echo "Bail out! cannot start the S3 server"; exit 1; }
S3=s3://data/team/pipe

ran() { sed -n "s/^stage \([a-z]*\): runs (key .*/\1/p" "$1" | sort | paste -sd, -; }
reused() { sed -n "s/^stage \([a-z]*\): reused (key .*/\1/p" "$1" | sort | paste -sd, -; }

test_expect_success 'setup: the example with its store in S3, raw Fashion-MNIST pushed there' '
	cd "$TEST_TMP" &&
	dlk init -q --example pipeline p && cd p &&
	sed "s,^store: ./store .*,store: $S3," dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	grep_q "^store: $S3\$" dlk-pipeline.yaml &&
	dlk data push -q "$FM" --to $S3 --tag fashion-raw@v1 >/dev/null
'

test_expect_success 'every stage runs against the object store, then every stage is reused' '
	cd "$TEST_TMP/p" &&
	dlk pipeline run --local 2>err1 && cat err1 &&
	test "$(ran err1)" = "gate,predict,prepare,train" &&
	test ! -e store &&
	ls "$S3_ROOT/data/team/pipe/tags/" >tags && grep_q "^fashion-preds@key-[0-9a-f]*\$" tags &&
	grep_q "^fashion-small@latest\$" tags &&
	dlk pipeline run --local 2>err2 && cat err2 &&
	test -z "$(ran err2)" && test "$(reused err2)" = "gate,predict,prepare,train"
'

test_expect_success 'lineage of the predictions, read from the bucket, names the stage and the raw data' '
	cd "$TEST_TMP/p" &&
	dlk lineage fashion-preds@latest --from $S3 >lin && cat lin &&
	grep_q "^made by  *dlk predict" lin &&
	grep_q "^made by  *dlk pipeline fashion, stage prepare" lin &&
	grep_q "(fashion-raw@v1)\$" lin
'

test_done
