#!/bin/sh
# Datasets in S3-compatible object storage: a real S3 server (the Versity S3 Gateway, built by
# .ci/deps test) on loopback checks every request's SigV4 signature and payload hash, and its
# access log shows what dlk sent. Push and re-push, wrong credentials, an upload cut off and
# continued, a verified get (a corrupted object named, a partial download continued), and
# training through the node cache: the second run, or a worker restarted after a kill,
# downloads nothing.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"

start_s3 || { echo "Bail out! cannot start the S3 server"; exit 1; }
S3=s3://data/team/datasets

gen() {
	awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; i++) { c = int(rand() * 3); l = "";
		for (j = 0; j < 8; j++) l = l sprintf("%.3f,", rand() + c * 0.7 + (j % 3) * 0.1); print l c } }'
}
mkdir -p "$TEST_TMP/blobs"
gen 512 1 >"$TEST_TMP/blobs/train.csv"
gen 128 2 >"$TEST_TMP/blobs/test.csv"

test_expect_success 'push: every object signed and checked by the server, then the manifest and the tag' '
	dlk data push "$TEST_TMP/blobs" --to $S3 --tag blobs@v1 >out 2>err &&
	id=$(sed -n "s/^sha256://p" out) && [ ${#id} = 64 ] &&
	test "$(s3_ops PutObject)" = 4 &&
	test -f "$S3_ROOT/data/team/datasets/datasets/$id" &&
	test -f "$S3_ROOT/data/team/datasets/tags/blobs@v1" &&
	h=$(sha256sum <"$TEST_TMP/blobs/train.csv" | cut -c1-64) &&
	cmp "$S3_ROOT/data/team/datasets/sha256/$h" "$TEST_TMP/blobs/train.csv" &&
	! grep " dlk/" "$S3_LOG" | grep -q " 403 " &&
	echo "$id" >"$TEST_TMP/id"
'

test_expect_success 'a second push of the same files sends no object' '
	puts=$(s3_ops PutObject) &&
	dlk data push "$TEST_TMP/blobs" --to $S3 >out 2>err &&
	test "$(cat out)" = "sha256:$(cat "$TEST_TMP/id")" && grep -q "nothing uploaded" err &&
	test "$(s3_ops PutObject)" = "$puts"
'

test_expect_success 'ls, show and get read the bucket' '
	dlk data ls --from $S3 | grep -q "^sha256:$(cut -c1-12 "$TEST_TMP/id") .*blobs@v1" &&
	dlk data show blobs --from $S3 2>err; test $? = 6 && grep -q "no tag .blobs@latest." err &&
	dlk data show blobs@v1 --from $S3 -o json | jq -e ".tags == [\"blobs@v1\"]" >/dev/null &&
	dlk data get blobs@v1 --from $S3 copy &&
	cmp copy/train.csv "$TEST_TMP/blobs/train.csv" && cmp copy/test.csv "$TEST_TMP/blobs/test.csv"
'

test_expect_success 'a wrong secret key is refused with a clear error (exit 5), nothing written' '
	puts=$(s3_ops PutObject) &&
	AWS_SECRET_ACCESS_KEY=not-the-secret test_exit_code 5 dlk data push "$TEST_TMP/blobs" --to $S3 2>err &&
	grep -q "refused the request.s signature (SignatureDoesNotMatch)" err &&
	grep -q "access key .AKIDLKTEST." err && grep -q "hint: check AWS_SECRET_ACCESS_KEY" err &&
	! grep -q "not-the-secret" err &&
	test "$(s3_ops PutObject)" = "$puts"
'

test_expect_success 'an unknown access key, no credentials and a missing bucket say so' '
	AWS_ACCESS_KEY_ID=AKIDNOBODY test_exit_code 5 dlk data ls --from $S3 2>err &&
	grep -q "does not know access key .AKIDNOBODY." err &&
	(unset AWS_ACCESS_KEY_ID; test_exit_code 5 dlk data ls --from $S3) 2>err &&
	grep -q "no credentials" err && grep -q "AWS_ACCESS_KEY_ID" err &&
	test_exit_code 6 dlk data ls --from s3://nosuchbucket/x 2>err && grep -q "no bucket .nosuchbucket." err
'

test_expect_success 'an upload cut off (kill -9) is continued: the parts already sent are not sent again' '
	big=$TEST_TMP/big && mkdir "$big" && head -c 41000000 /dev/urandom >"$big/blob.bin" &&
	parts=$(s3_ops UploadPart) &&
	{ DLK_TEST_S3_PART_DELAY_MS=400 "$DLK" data push "$big" --to $S3 >out1 2>err1 & } &&
	pid=$! &&
	i=0; while [ "$(s3_ops UploadPart)" -lt $((parts + 2)) ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done &&
	kill -9 $pid; wait $pid 2>/dev/null; sent=$(( $(s3_ops UploadPart) - parts )) &&
	echo "$sent of 5 parts sent before the kill" &&
	[ "$sent" -ge 2 ] && [ "$sent" -lt 5 ] &&
	test "$(s3_ops CompleteMultipartUpload)" = 0 &&
	dlk data push "$big" --to $S3 >"$TEST_TMP/big.id" 2>err2 &&
	grep -q "continued an interrupted upload" err2 &&
	test "$(s3_ops ListParts)" = 1 &&
	test $(( $(s3_ops UploadPart) - parts )) = 5 &&
	test "$(s3_ops CompleteMultipartUpload)" = 1 &&
	h=$(sha256sum <"$big/blob.bin" | cut -c1-64) &&
	cmp "$S3_ROOT/data/team/datasets/sha256/$h" "$big/blob.bin"
'

test_expect_success 'a get continues a partial download with a range request' '
	big=$TEST_TMP/big && h=$(sha256sum <"$big/blob.bin" | cut -c1-64) &&
	mkdir out && head -c 20000000 "$big/blob.bin" >out/blob.bin.part &&
	dlk data get -vv "$(cat "$TEST_TMP/big.id")" --from $S3 out 2>err &&
	cmp out/blob.bin "$big/blob.bin" &&
	grep -q "^GET s3://data/team/datasets/sha256/$h (a range) 206 in" err
'

test_expect_success 'a corrupted object in the bucket is named; nothing takes its place' '
	h=$(sha256sum <"$TEST_TMP/blobs/test.csv" | cut -c1-64) && obj=$S3_ROOT/data/team/datasets/sha256/$h &&
	cp "$obj" saved && printf X | dd of="$obj" bs=1 seek=5 conv=notrunc 2>/dev/null &&
	test_exit_code 3 dlk data get blobs@v1 --from $S3 bad 2>err; rc=$?
	cp saved "$obj" && test $rc = 0 &&
	grep -q "$S3/sha256/$h. is corrupted" err && test ! -e bad/test.csv && test ! -e bad/test.csv.part
'

test_expect_success 'every object carries the sha256 dlk verified; one changed on the server is replaced by push --verify' '
	h=$(sha256sum <"$TEST_TMP/blobs/test.csv" | cut -c1-64) && obj=$S3_ROOT/data/team/datasets/sha256/$h &&
	dlk data push "$TEST_TMP/blobs" --to $S3 2>err >/dev/null && grep -q "nothing uploaded" err &&
	printf X | dd of="$obj" bs=1 seek=5 conv=notrunc 2>/dev/null &&
	puts=$(s3_ops PutObject) &&
	dlk data push "$TEST_TMP/blobs" --to $S3 --verify 2>err >/dev/null && grep -q "uploaded 1 " err &&
	test "$(s3_ops PutObject)" = $((puts + 1)) &&
	cmp "$obj" "$TEST_TMP/blobs/test.csv" &&
	dlk data get blobs@v1 --from $S3 fixed && cmp fixed/test.csv "$TEST_TMP/blobs/test.csv"
'

test_expect_success 'a file changed while its parts go up: nothing completed, no tag, exit 1' '
	chg=$TEST_TMP/chg && mkdir "$chg" && head -c 41000000 /dev/urandom >"$chg/blob.bin" &&
	h=$(sha256sum <"$chg/blob.bin" | cut -c1-64) &&
	parts=$(s3_ops UploadPart) && done0=$(s3_ops CompleteMultipartUpload) &&
	{ DLK_TEST_S3_PART_DELAY_MS=400 "$DLK" data push "$chg" --to $S3 --tag chg@v1 >out 2>err & } &&
	pid=$! &&
	i=0; while [ "$(s3_ops UploadPart)" -lt $((parts + 1)) ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done &&
	printf CHANGED | dd of="$chg/blob.bin" bs=1 seek=40000000 conv=notrunc 2>/dev/null &&
	wait $pid; rc=$? && test $rc = 1 &&
	grep -q "blob.bin. changed while it was uploaded" err && grep -q "nothing was stored" err &&
	test "$(s3_ops CompleteMultipartUpload)" = "$done0" &&
	test ! -e "$S3_ROOT/data/team/datasets/sha256/$h" && test ! -e "$S3_ROOT/data/team/datasets/tags/chg@v1"
'

project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  dataset: blobs@v1
  store: $S3
  cache_dir: $TEST_TMP/cache
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [8]
  layers: [{dense: {units: 16}}, relu, {dense: {units: 3}}]
training: {epochs: 1, batch_size: 32, threads: 1}
EOT
}

test_expect_success 'training fetches the dataset once: a second run reads it from the node cache' '
	project p && gets=$(s3_ops GetObject) &&
	dlk train --local -f p/dlk.yaml >out 2>err &&
	grep -q "^dataset sha256:$(cut -c1-12 "$TEST_TMP/id"): 2 files, .*: 0 B from the node cache, .* fetched from $S3" err &&
	test $(( $(s3_ops GetObject) - gets )) = 4 &&
	rm -rf p/.dlk && gets=$(s3_ops GetObject) &&
	dlk train --local -f p/dlk.yaml >out 2>err &&
	grep -q "2 files, \(.*\): \1 from the node cache, 0 B fetched" err &&
	test $(( $(s3_ops GetObject) - gets )) = 2 &&
	tar -xOf p/blobs.dlk model.json | jq -e ".provenance.dataset.store == \"$S3\"" >/dev/null
'

test_expect_success 'two workers on one machine share the cache: each object is fetched once' '
	rm -rf "$TEST_TMP/cache" p/.dlk && project p && objs=$(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") &&
	dlk train --local --workers 2 -f p/dlk.yaml >out 2>err &&
	test $(( $(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") - objs )) = 2
'

test_expect_success 'a worker killed and restarted in its pod reads the dataset from the node cache' '
	project p && rm -rf "$TEST_TMP/podcache" &&
	objs=$(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") &&
	pod() { DLK_DATA_CACHE=$TEST_TMP/podcache JOB_COMPLETION_INDEX=0 RANK=0 WORLD_SIZE=1 \
		exec "$DLK" train --worker -f p/dlk.yaml --set data.dataset=sha256:$(cat "$TEST_TMP/id") "$@"; } &&
	{ (pod --set training.epochs=1000000 >/dev/null 2>err1) & } &&
	n=0 && while [ $n -lt 100 ] && ! grep -q "epoch 2/" err1; do sleep 0.1; n=$((n + 1)); done &&
	kill -9 $! && { wait $! 2>/dev/null; true; } &&
	grep -q ": 0 B from the node cache, .* fetched from $S3" err1 &&
	test $(( $(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") - objs )) = 2 &&
	(pod >/dev/null 2>err2) &&
	grep -q "2 files, \(.*\): \1 from the node cache, 0 B fetched" err2 &&
	test $(( $(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") - objs )) = 2
'

test_expect_success 'an image folder inside a dataset (the whole of it): each file fetched once into the node cache' '
	mkdir -p imgs/a imgs/b && i=0 &&
	for f in "$TEST_ROOT"/tests/data/images/*.png "$TEST_ROOT"/tests/data/images/*.jpg; do
		i=$((i + 1)) && cp "$f" imgs/$([ $((i % 2)) = 0 ] && echo a || echo b)/ || exit 1
	done &&
	n=$(find imgs -type f | wc -l) && test "$n" -ge 8 &&
	dlk data push -q imgs --to $S3 --tag imgs@v1 >/dev/null &&
	mkdir -p q && cat >q/dlk.yaml <<EOT &&
name: imgs
data:
  format: images
  dataset: imgs@v1
  store: $S3
  cache_dir: $TEST_TMP/imgcache
  train: {source: .}
  test: {source: .}
model:
  input: [1, 8, 8]
  layers: [flatten, {dense: {units: 2}}]
training: {epochs: 1, batch_size: 4, threads: 1}
EOT
	objs=$(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") &&
	dlk train --local -f q/dlk.yaml >out 2>err &&
	grep -q "^dataset sha256:[0-9a-f]*: $((2 * n)) files, .* fetched from $S3" err &&
	test $(( $(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") - objs )) = "$n" &&
	tar -xOf q/imgs.dlk model.json | jq -e ".classes == [\"a\", \"b\"]" >/dev/null &&
	rm -rf q/.dlk && dlk train --local -f q/dlk.yaml >out 2>err &&
	grep -q "$((2 * n)) files, \(.*\): \1 from the node cache, 0 B fetched" err &&
	test $(( $(grep -c " s3_GetObject [^ ]*/sha256/" "$S3_LOG") - objs )) = "$n"
'

test_expect_success 'a cached copy that went bad is fetched again' '
	h=$(sha256sum <"$TEST_TMP/blobs/train.csv" | cut -c1-64) &&
	printf Z | dd of="$TEST_TMP/cache/sha256/$h" bs=1 seek=1 conv=notrunc 2>/dev/null &&
	project p && dlk train --local -f p/dlk.yaml >out 2>err &&
	cmp "$TEST_TMP/cache/sha256/$h" "$TEST_TMP/blobs/train.csv"
'

test_done
