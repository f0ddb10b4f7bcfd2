#!/bin/sh
# Image folders: Fashion-MNIST written out as PNG and JPEG files by Pillow (an encoder independent
# of dlk), one folder per class, trains the CNN here; WebDataset shards of .png + .cls train the
# same way; augmentation is reproducible; damaged or misplaced files are named.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
accuracy() { sed -n 's/.*"testAccuracy":[ \t]*\([0-9.]*\).*/\1/p' "$1"; }
fmnist_ready
[ -x "$PY" ] || test_missing "the frameworks venv with Pillow ($PY, .ci/deps.d/frameworks)"

IMG=$TEST_TMP/fm
mkdir -p "$IMG"
"$PY" "$TEST_ROOT/tests/data/fmnist-images.py" train 6000 png "$IMG/train" &&
"$PY" "$TEST_ROOT/tests/data/fmnist-images.py" test 1000 jpg "$IMG/test" &&
"$PY" "$TEST_ROOT/tests/data/fmnist-images.py" train 6000 png "$IMG/train.tar" --tar ||
	test_missing "Fashion-MNIST written as images by Pillow"

# project DIR TRAIN [IMAGES-OPTIONS]: the small CNN on the image folders of $IMG
project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: fm-images
data:
  format: images
  train: {source: $2}
  test: {source: $IMG/test}
  images: {${3:-}}
model:
  input: [1, 28, 28]
  layers:
    - conv2d: {filters: 8, kernel: 3, padding: 1}
    - relu
    - maxpool: {size: 2}
    - flatten
    - dense: {units: 10}
training: {epochs: 2, batch_size: 64, threads: 2, seed: 7}
EOT
}

test_expect_success 'a PNG folder trains the CNN, tested on JPEGs, the classes named by the folders' '
	project p "$IMG/train" &&
	dlk train --local -q -o json -f p/dlk.yaml >out.json &&
	acc=$(accuracy out.json) && echo "accuracy $acc" &&
	awk -v a="$acc" "BEGIN { exit !(a > 0.70) }" &&
	tar -xOf p/fm-images.dlk model.json >model.json &&
	grep_q "0-tshirt" model.json && grep_q "9-boot" model.json
'

test_expect_success 'per-channel normalisation, flip and random crop train, and the same seed gives the same bits' '
	project p "$IMG/train" "mean: [0.286], std: [0.353], flip: true, crop_padding: 2" &&
	dlk train --local -q -o json -f p/dlk.yaml --fresh >a.json &&
	cp p/fm-images.dlk a.dlk &&
	dlk train --local -q -o json -f p/dlk.yaml --fresh >b.json &&
	acc=$(accuracy a.json) && echo "accuracy $acc" &&
	awk -v a="$acc" "BEGIN { exit !(a > 0.65) }" &&
	tar -xOf a.dlk model.json | tr -d " \t\n" | grep_q "\"channel_mean\":\[0.28" &&
	tar -xOf a.dlk weights.safetensors | cmp - "$(tar -xOf p/fm-images.dlk weights.safetensors >w && echo w)" &&
	project q "$IMG/train" &&
	dlk train --local -q -o json -f q/dlk.yaml --fresh >c.json &&
	! tar -xOf q/fm-images.dlk weights.safetensors | cmp -s - w
'

test_expect_success 'data.images.decode: stream reads the files as batches are drawn, and gives the same bits' '
	project o "$IMG/train" "mean: [0.286], std: [0.353], flip: true, crop_padding: 2" &&
	dlk train --local -q -o json -f o/dlk.yaml >o.json &&
	project s "$IMG/train" "mean: [0.286], std: [0.353], flip: true, crop_padding: 2, decode: stream" &&
	sed -i "s/^  format: images/  format: images\n  loader_threads: 3/" s/dlk.yaml && grep_q "loader_threads: 3" s/dlk.yaml &&
	dlk train --local -o json -f s/dlk.yaml >s.json 2>log &&
	grep_q "training split: 6000 images read from disk and decoded each time they are used (data.images.decode: stream" log &&
	tar -xOf o/fm-images.dlk weights.safetensors >w &&
	tar -xOf s/fm-images.dlk weights.safetensors | cmp - w &&
	jq -e ".testAccuracy == $(accuracy o.json)" s.json
'

test_expect_success 'auto streams a split that decoded would pass a quarter of the memory, and keeps it otherwise' '
	project o "$IMG/train" "flip: true" &&
	dlk train --local -q -f o/dlk.yaml && tar -xOf o/fm-images.dlk weights.safetensors >w &&
	project s "$IMG/train" "flip: true" &&
	DLK_TEST_MEMORY=$((4 * 784 * 6000 - 1)) dlk train --local -f s/dlk.yaml --fresh >/dev/null 2>log &&
	grep_q "training split: 6000 images read from disk and decoded each time they are used: decoded they would take 4.5 MiB, more than a quarter of the 17.9 MiB this process may use (data.images.decode: auto" log &&
	! grep_q "test split: .* read from disk" log &&
	tar -xOf s/fm-images.dlk weights.safetensors | cmp - w &&
	DLK_TEST_MEMORY=$((4 * 784 * 6000)) dlk train --local -f s/dlk.yaml --fresh >/dev/null 2>log &&
	! grep_q "read from disk" log
'

test_expect_success 'a folder on a claim (pvc://CLAIM/PATH, where DLK_PVC_ROOT mounts it) streams in place' '
	project o "$IMG/train" "decode: once" &&
	dlk train --local -q -f o/dlk.yaml && tar -xOf o/fm-images.dlk weights.safetensors >w &&
	mkdir -p mnt/fmnist && ln -s "$IMG/train" mnt/fmnist/train &&
	project s "pvc://fmnist/train" "decode: stream" &&
	DLK_PVC_ROOT=$PWD/mnt dlk train --local -f s/dlk.yaml >log 2>&1 &&
	grep_q "training split: 6000 images read from disk" log &&
	tar -xOf s/fm-images.dlk weights.safetensors | cmp - w &&
	dlk train --dry-run -o json -f s/dlk.yaml >objs.json 2>/dev/null &&
	grep_q "/mnt/pvc/fmnist" objs.json
'

# from_dataset DIR: project DIR reads its folders (train, test) from the dataset fm-folders@v1
from_dataset() {
	sed -i "s|test: {source: .*}|test: {source: test}|; s|^  format: images|  format: images\n  dataset: fm-folders@v1\n  store: $TEST_TMP/store|" "$1/dlk.yaml"
}

test_expect_success 'the folders pushed as a dataset train the same weights from data.dataset, streamed too' '
	mkdir ds && cp -r "$IMG/train" ds/train && cp -r "$IMG/test" ds/test && echo notes >ds/train/README &&
	dlk data push -q ds --to "$TEST_TMP/store" --tag fm-folders@v1 >id &&
	project o "$IMG/train" "flip: true" && dlk train --local -q -o json -f o/dlk.yaml >o.json &&
	tar -xOf o/fm-images.dlk weights.safetensors >w &&
	for decode in once stream; do
		project d$decode train "flip: true, decode: $decode" && from_dataset d$decode &&
		dlk train --local -o json -f d$decode/dlk.yaml >d.json 2>log &&
		grep_q "^dataset sha256:$(cut -c8-19 id): 7000 files, .* read in place" log &&
		tar -xOf d$decode/fm-images.dlk weights.safetensors | cmp - w &&
		jq -e ".testAccuracy == $(accuracy o.json)" d.json >/dev/null &&
		tar -xOf d$decode/fm-images.dlk model.json |
			jq -e ".provenance.dataset.id == \"$(cat id)\" and (.classes | length) == 10" >/dev/null || exit 1
	done &&
	grep_q "training split: 6000 images read from disk" log &&
	project x trainx && from_dataset x &&
	test_exit_code 3 dlk train --local -q -f x/dlk.yaml 2>err &&
	grep_q "has no file .trainx." err
'

test_expect_success 'a file of a dataset folder that changed in the store is named, and nothing trains' '
	f=$(ls "$TEST_TMP/store/sha256" | head -n 1) && chmod u+w "$TEST_TMP/store/sha256/$f" &&
	printf X >>"$TEST_TMP/store/sha256/$f" &&
	project p train && from_dataset p &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "its bytes hash to .*, not to the $f its dataset.s manifest lists" err &&
	test ! -e p/fm-images.dlk
'

test_expect_success 'streamed, a file that is no image by its first bytes is refused before the first step' '
	cp -r "$IMG/train" odd && printf "hello" >odd/3-dress/zz.png &&
	project p "$PWD/odd" "decode: stream" &&
	test_exit_code 3 dlk train --local -f p/dlk.yaml >log 2>&1 &&
	grep_q "odd/3-dress/zz.png.: neither a PNG nor a JPEG (by its first bytes)" log &&
	! grep_q "^training " log && test ! -e p/fm-images.dlk
'

test_expect_success 'streamed, a damaged file stops the run where it is read, named, exit 3' '
	cp -r "$IMG/train" late && printf "\211PNG\r\n\032\nbroken" >late/3-dress/zz.png &&
	project p "$PWD/late" "decode: stream" &&
	test_exit_code 3 dlk train --local -f p/dlk.yaml >log 2>&1 &&
	grep_q "late/3-dress/zz.png.: not a readable PNG" log &&
	grep_q "training .fm-images. on 6001 samples" log
'

test_expect_success 'WebDataset shards of KEY.png + KEY.cls train like the folder' '
	project p "$IMG/train.tar" &&
	dlk train --local -q -o json -f p/dlk.yaml >out.json &&
	acc=$(accuracy out.json) && echo "accuracy $acc" &&
	awk -v a="$acc" "BEGIN { exit !(a > 0.70) }"
'

test_expect_success 'a WebDataset shard is read member by member with decode: stream, the same bits as once (gzipped: its tar unpacked once into the cache)' '
	project o "$IMG/train.tar" "flip: true, decode: once" &&
	dlk train --local -q -f o/dlk.yaml && tar -xOf o/fm-images.dlk weights.safetensors >w &&
	project s "$IMG/train.tar" "flip: true, decode: stream" &&
	dlk train --local -f s/dlk.yaml >log 2>&1 &&
	grep_q "training split: 6000 images read from disk and decoded each time they are used" log &&
	tar -xOf s/fm-images.dlk weights.safetensors | cmp - w &&
	gzip -c "$IMG/train.tar" >train.tar.gz &&
	project z "$PWD/train.tar.gz" "flip: true, decode: stream" &&
	dlk train --local -f z/dlk.yaml >log 2>&1 &&
	grep_q "training split: 6000 images read from disk and decoded each time they are used" log &&
	tar -xOf z/fm-images.dlk weights.safetensors | cmp - w &&
	u=$(ls .dlk/cache/unpacked-*.tar) && cmp "$u" "$IMG/train.tar" &&
	test "$(cut -c1-64 "$u.sha256")" = "$(sha256sum <"$IMG/train.tar" | cut -c1-64)" &&
	printf X | dd of="$u" bs=1 seek=600 conv=notrunc 2>/dev/null &&
	dlk train --local -q -f z/dlk.yaml --fresh &&
	cmp "$u" "$IMG/train.tar" && tar -xOf z/fm-images.dlk weights.safetensors | cmp - w
'

test_expect_success 'streamed, a shard that holds no tar of images is refused, named' '
	gzip -c "$IMG/test/0-tshirt/$(ls "$IMG/test/0-tshirt" | head -n 1)" >notar.gz &&
	project z "$PWD/notar.gz" "decode: stream" &&
	test_exit_code 3 dlk train --local -q -f z/dlk.yaml 2>err &&
	grep_q "notar.gz" err
'

test_expect_success 'a damaged image is named with its folder, and the run fails as a config error' '
	cp -r "$IMG/train" bad && printf "\211PNG\r\n\032\nbroken" >bad/3-dress/zz.png &&
	project p "$PWD/bad" &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "bad/3-dress/zz.png.: not a readable PNG" err
'

test_expect_success 'a test folder with a class the training folders lack is refused' '
	cp -r "$IMG/test" t2 && mkdir t2/extra && cp t2/0-tshirt/*.jpg t2/extra/ 2>/dev/null;
	project p "$IMG/train" && sed -i "s|source: $IMG/test|source: $PWD/t2|" p/dlk.yaml &&
	test_must_fail dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "t2/extra.: a class folder" err
'

test_expect_success 'crop_padding must be smaller than the input, per-channel values one per channel' '
	project p "$IMG/train" "crop_padding: 28" &&
	test_must_fail dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "data.images.crop_padding 28 is not smaller than the 28x28 input" err &&
	project p "$IMG/train" "mean: [0.1, 0.2, 0.3]" &&
	test_must_fail dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "data.images.mean has 3 values, but the images have 1 channel" err
'

test_done
