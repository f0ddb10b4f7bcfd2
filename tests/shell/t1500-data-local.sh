#!/bin/sh
# Versioned datasets in a directory store: push (content-addressed, only what is missing), ids
# and tags, show and ls, a verified get that names a corrupted object, and training from
# `data.dataset` by id and by tag, the id recorded in the resolved spec and the bundle.
. "$(dirname "$0")/../lib.sh"

# a small CSV dataset: 512 training and 128 test rows, 8 features, 3 classes
gen() {
	awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; i++) { c = int(rand() * 3); l = "";
		for (j = 0; j < 8; j++) l = l sprintf("%.3f,", rand() + c * 0.7 + (j % 3) * 0.1); print l c } }'
}
mkdir -p "$TEST_TMP/blobs/extra"
gen 512 1 >"$TEST_TMP/blobs/train.csv"
gen 128 2 >"$TEST_TMP/blobs/test.csv"
echo "a note that travels with the data" >"$TEST_TMP/blobs/extra/README"
STORE=$TEST_TMP/store

# project DIR DATASET: a project training on the dataset of $STORE
project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  dataset: $2
  store: $STORE
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [8]
  layers: [{dense: {units: 16}}, relu, {dense: {units: 3}}]
training: {epochs: 2, batch_size: 32, threads: 1}
EOT
}
objects() { ls "$STORE/sha256" | wc -l | tr -d ' '; }

test_expect_success 'push prints the id, and the id is the sha256 of the manifest' '
	dlk data push "$TEST_TMP/blobs" --to "$STORE" --tag blobs@v1 >out 2>err &&
	id=$(sed -n "s/^sha256://p" out) && [ ${#id} = 64 ] &&
	grep -q "uploaded 3" err && grep -q "tagged blobs@v1" err &&
	test "$(sha256sum <"$STORE/datasets/$id" | cut -c1-64)" = "$id" &&
	head -n 1 "$STORE/datasets/$id" | grep -qx "dlk-dataset 1" &&
	sed -n 2p "$STORE/datasets/$id" | grep -q " extra/README$" &&
	for f in train.csv test.csv extra/README; do
		h=$(sha256sum <"$TEST_TMP/blobs/$f" | cut -c1-64)
		cmp "$STORE/sha256/$h" "$TEST_TMP/blobs/$f" || exit 1
		grep -q "^$h $(wc -c <"$TEST_TMP/blobs/$f" | tr -d " ") $f\$" "$STORE/datasets/$id" || exit 1
	done &&
	echo "$id" >"$TEST_TMP/id1"
'

test_expect_success 'pushing the same files again gives the same id and uploads nothing' '
	before=$(ls -l --time-style=+%s.%N "$STORE/sha256" | md5sum) &&
	dlk data push "$TEST_TMP/blobs" --to "$STORE" >out 2>err &&
	test "$(cat out)" = "sha256:$(cat "$TEST_TMP/id1")" &&
	grep -q "nothing uploaded" err &&
	test "$(ls -l --time-style=+%s.%N "$STORE/sha256" | md5sum)" = "$before" &&
	dlk data push -q "$TEST_TMP/blobs" --to "$STORE" >out 2>err && test ! -s err && test "$(wc -l <out)" = 1
'

test_expect_success 'one changed byte gives a new id and uploads only that file' '
	cp -r "$TEST_TMP/blobs" b2 && sed -i "1s/^./9/" b2/train.csv &&
	n=$(objects) &&
	dlk data push b2 --to "$STORE" --tag blobs@v2 -o json >out.json &&
	jq -e ".uploaded == 1 and .files == 3" out.json >/dev/null &&
	id2=$(jq -r .id out.json | sed "s/^sha256://") &&
	test "$id2" != "$(cat "$TEST_TMP/id1")" &&
	test "$(objects)" = $((n + 1)) &&
	echo "$id2" >"$TEST_TMP/id2"
'

test_expect_success 'ls lists both datasets with their tags; show lists the files' '
	dlk data ls --from "$STORE" >out &&
	grep -q "^sha256:$(cut -c1-12 "$TEST_TMP/id1") .* 3 .*blobs@v1" out &&
	grep -q "^sha256:$(cut -c1-12 "$TEST_TMP/id2") .*blobs@v2" out &&
	dlk data ls --from "$STORE" -o wide | grep -q "sha256:$(cat "$TEST_TMP/id1")" &&
	dlk data show blobs@v1 --from "$STORE" >out &&
	grep -q "^dataset  sha256:$(cat "$TEST_TMP/id1")\$" out && grep -q "^tags     blobs@v1\$" out &&
	grep -q " extra/README\$" out && grep -q " train.csv\$" out &&
	dlk data show "$(cut -c1-10 "$TEST_TMP/id2")" --from "$STORE" -o json >s.json &&
	jq -e ".tags == [\"blobs@v2\"] and (.files | length) == 3 and (.files[0].sha256 | length) == 64" s.json >/dev/null
'

test_expect_success 'a tag or id the store does not have is "not found", naming the store' '
	test_exit_code 6 dlk data show blobs@v9 --from "$STORE" 2>err && grep -q "no tag .blobs@v9. in" err &&
	test_exit_code 6 dlk data show sha256:0000000000000000000000000000000000000000000000000000000000000000 \
		--from "$STORE" 2>err && grep -q "is not in" err &&
	test_exit_code 2 dlk data show "bad name" --from "$STORE" 2>err && grep -q "names no dataset" err &&
	test_exit_code 2 dlk data ls 2>err && grep -q "no data store" err &&
	test_exit_code 3 dlk data ls --from ftp://x/y 2>err && grep -q "not a data store" err
'

test_expect_success 'get writes every file, verified; a second get keeps them' '
	dlk data get blobs@v1 --from "$STORE" copy 2>err &&
	cmp copy/train.csv "$TEST_TMP/blobs/train.csv" && cmp copy/extra/README "$TEST_TMP/blobs/extra/README" &&
	grep -q "fetched 3" err &&
	dlk data get "sha256:$(cat "$TEST_TMP/id1")" --from "$STORE" copy 2>err && grep -q "3 already there" err &&
	! ls copy/*.part copy/extra/*.part 2>/dev/null
'

test_expect_success 'a corrupted object is named, and no file takes its place' '
	cp -r "$STORE" store2 &&
	h=$(sha256sum <"$TEST_TMP/blobs/test.csv" | cut -c1-64) &&
	chmod u+w "store2/sha256/$h" && printf X | dd of="store2/sha256/$h" bs=1 seek=10 conv=notrunc 2>/dev/null &&
	test_exit_code 3 dlk data get blobs@v1 --from store2 copy 2>err &&
	grep -q "store2/sha256/$h. is corrupted" err && grep -q "test.csv" err &&
	test ! -e copy/test.csv && test ! -e copy/test.csv.part
'

test_expect_success 'a corrupted manifest is named too' '
	cp -r "$STORE" store3 && id=$(cat "$TEST_TMP/id1") &&
	sed -i "s/ train.csv\$/ train2.csv/" "store3/datasets/$id" &&
	test_exit_code 3 dlk data show "sha256:$id" --from store3 2>err && grep -q "datasets/$id. is corrupted" err
'

test_expect_success 'train from sha256:ID: the run reads the dataset and the bundle records the id' '
	project p "sha256:$(cat "$TEST_TMP/id1")" &&
	dlk train --local -f p/dlk.yaml -q -o json >out.json 2>err &&
	tar -xOf p/blobs.dlk model.json >model.json &&
	jq -e ".provenance.dataset.id == \"sha256:$(cat "$TEST_TMP/id1")\" and (.provenance.dataset | has(\"tag\") | not)" \
		model.json >/dev/null &&
	jq -e "[.provenance.data[].url] == [\"train.csv\", \"test.csv\"]" model.json >/dev/null &&
	jq -e ".provenance.data[0].sha256 == \"$(sha256sum <"$TEST_TMP/blobs/train.csv" | cut -c1-64)\"" model.json >/dev/null
'

test_expect_success 'train from a tag: resolved once at submit, the id in the job and the bundle' '
	project p blobs@v2 &&
	dlk train --dry-run -f p/dlk.yaml >objs.yaml &&
	grep -q "dataset: {id: \"sha256:$(cat "$TEST_TMP/id2")\", tag: \"blobs@v2\"}" objs.yaml &&
	dlk train --local -f p/dlk.yaml >out 2>err &&
	grep -q "^dataset sha256:$(cut -c1-12 "$TEST_TMP/id2"): 2 files, .*read in place" err &&
	tar -xOf p/blobs.dlk model.json | jq -e ".provenance.dataset.id == \"sha256:$(cat "$TEST_TMP/id2")\" and
		.provenance.dataset.tag == \"blobs@v2\" and .provenance.dataset.store == \"$STORE\"" >/dev/null
'

test_expect_success 'lineage prints the dataset with its tag, the project digest and the run' '
	project p blobs@v2 && dlk train --local -f p/dlk.yaml -q >/dev/null 2>&1 &&
	id=$(dlk status blobs --history --local -f p/dlk.yaml -o json | jq -r ".runs[0].run.id") &&
	dlk lineage p/blobs.dlk >out &&
	grep -q "^dataset      sha256:$(cat "$TEST_TMP/id2") (blobs@v2)\$" out &&
	grep -q "^  store      $STORE\$" out &&
	grep -q "^  train      train.csv sha256:$(sed -n "s/ .* train.csv\$//p" "$STORE/datasets/$(cat "$TEST_TMP/id2")" | cut -c1-12)\$" out &&
	grep -q "^project      sha256:[0-9a-f]\{64\}\$" out &&
	grep -q "^run          $id\$" out && grep -q "^image        (not recorded)\$" out &&
	dlk lineage p/blobs.dlk -o json | jq -e ".provenance.run_id == \"$id\" and
		.provenance.dataset.tag == \"blobs@v2\" and (.weightsSha256 | length) == 64" >/dev/null &&
	cp p/blobs.dlk bad.dlk && blk=$(tar -tRf bad.dlk | sed -n "s/^block \([0-9]*\): weights.safetensors\$/\1/p") &&
	printf X | dd of=bad.dlk bs=1 seek=$(((blk + 1) * 512 + 300)) conv=notrunc 2>/dev/null &&
	test_exit_code 3 dlk lineage bad.dlk 2>err && grep -q "bad.dlk" err &&
	test_exit_code 2 dlk lineage 2>err
'

test_expect_success 'a file the dataset does not have, or a changed copy, stops the run' '
	project p "sha256:$(cat "$TEST_TMP/id1")" &&
	test_exit_code 3 dlk train --local -f p/dlk.yaml --set data.test.source=nope.csv 2>err &&
	grep -q "has no file .nope.csv." err && grep -q "extra/README" err &&
	cp -r "$STORE" p/store && sed -i "s|store: .*|store: store|" p/dlk.yaml &&
	h=$(sha256sum <"$TEST_TMP/blobs/train.csv" | cut -c1-64) &&
	printf "0" | dd of="p/store/sha256/$h" bs=1 seek=3 conv=notrunc 2>/dev/null &&
	test_exit_code 3 dlk train --local -f p/dlk.yaml 2>err && grep -q "not to the $h its dataset.s manifest lists" err
'

test_expect_success 'the project file checks a dataset and its sources' '
	project p blobs@v1 &&
	test_exit_code 3 dlk train --dry-run -f p/dlk.yaml --set data.train.source=/etc/passwd 2>err &&
	grep -q "data.train.source=/etc/passwd: with data.dataset a source is a path inside the dataset" err &&
	test_exit_code 3 dlk train --dry-run -f p/dlk.yaml --set data.train.source=. 2>err &&
	grep -q "data.train.source=.: with data.dataset a source is a path inside the dataset, and .\.. has a .\.. or .\.\.. segment" err &&
	test_exit_code 3 dlk train --dry-run -f p/dlk.yaml --set data.dataset=a@b@c 2>err && grep -q "names no dataset" err &&
	sed -i "/store:/d" p/dlk.yaml &&
	test_exit_code 3 dlk train --dry-run -f p/dlk.yaml 2>err && grep -q "a dataset needs data.store" err &&
	project p blobs@v1 && sed -i "s|store: .*|store: s3://Bad_Bucket/x|" p/dlk.yaml &&
	test_exit_code 3 dlk train --dry-run -f p/dlk.yaml 2>err &&
	grep -q "data.store: .s3://Bad_Bucket/x. has a bucket name with other characters" err &&
	! grep -q "needs data.store" err
'

test_expect_success 'a submit refuses a directory store: no worker could read it' '
	project p blobs@v1 &&
	test_exit_code 3 dlk train -f p/dlk.yaml 2>err && grep -q "is a directory of this machine" err &&
	dlk train --dry-run -f p/dlk.yaml -o json >objs.json &&
	jq -e ".items[] | select(.kind == \"Job\") | .spec.template.spec.containers[0].env[] |
		select(.name == \"DLK_DATA_CACHE\") | .value == \"/var/cache/dlk\"" objs.json >/dev/null
'

test_expect_success 'data push to the project file'"'"'s data.store, and its pins' '
	project p blobs@v1 &&
	(cd p && dlk data push "$TEST_TMP/blobs/test.csv" -q) >out &&
	test -f "$STORE/datasets/$(sed s/sha256:// out)"
'

test_done
