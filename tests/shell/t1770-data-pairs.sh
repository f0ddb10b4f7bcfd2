#!/bin/sh
# Paired image folders (format images, model.task image): Fashion-MNIST with Gaussian noise and
# without, written as PNG files by Pillow (an encoder independent of dlk), train a small
# convolutional denoiser whose PSNR beats the noisy inputs'; the same pairs as WebDataset shards
# train the same weights; targets take the model's output shape; a missing pair and misplaced
# options are named.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
fmnist_ready
[ -x "$PY" ] || test_missing "the frameworks venv with Pillow ($PY, .ci/deps.d/frameworks)"

IMG=$TEST_TMP/pairs
mkdir -p "$IMG"
"$PY" "$TEST_ROOT/tests/data/fmnist-pairs.py" train 3000 "$IMG/train" 1 >/dev/null &&
noisy_psnr=$("$PY" "$TEST_ROOT/tests/data/fmnist-pairs.py" test 500 "$IMG/test" 2) ||
	test_missing "Fashion-MNIST written as paired PNG folders by Pillow"
echo "# the noisy test inputs: PSNR $noisy_psnr dB against the clean images"

# project DIR [LAST-LAYERS]: the denoiser on the paired folders of $IMG
project() {
	mkdir -p "$1" && cat >"$1/dlk.yaml" <<EOT
name: fm-pairs
data:
  format: images
  train: {source: $IMG/train/noisy, targets: $IMG/train/clean}
  test: {source: $IMG/test/noisy, targets: $IMG/test/clean}
model:
  task: image
  loss: mse
  input: [1, 28, 28]
  layers:
    - conv2d: {filters: 16, kernel: 3, padding: 1}
    - relu
    - conv2d: {filters: 16, kernel: 3, padding: 1}
    - relu${2:-}
    - conv2d: {filters: 1, kernel: 3, padding: 1}
training: {epochs: 3, batch_size: 32, threads: 2, seed: 3, checkpoint: {every: 0}, optimizer: {name: adam, lr: 0.003}}
EOT
}

test_expect_success 'a convolutional denoiser trained on paired PNG folders beats the noisy inputs by 3 dB' '
	project p &&
	dlk train --local -q -o json -f p/dlk.yaml >out.json &&
	echo "# $(jq -c .test out.json)" &&
	jq -e "(.test | keys) == [\"mae\", \"psnr\", \"r2\", \"rmse\", \"ssim\"]" out.json &&
	jq -e --argjson noisy "$noisy_psnr" ".test.psnr > \$noisy + 3 and .test.ssim > 0.5" out.json &&
	tar -xOf p/fm-pairs.dlk model.json >model.json &&
	jq -e ".architecture.task == \"image\" and .architecture.n_classes == 784" model.json
'

test_expect_success 'read from their files as batches are drawn (data.images.decode: stream), the same weights' '
	project s && sed -i "/^model:/i\\  images: {decode: stream}" s/dlk.yaml && sed -i "s/epochs: 3/epochs: 1/" s/dlk.yaml &&
	project o && sed -i "s/epochs: 3/epochs: 1/" o/dlk.yaml &&
	dlk train --local -f s/dlk.yaml >log 2>&1 &&
	grep_q "training split: 3000 images read from disk and decoded each time they are used (data.images.decode: stream; decoded they would take 4.5 MiB)" log &&
	grep_q "test split: 500 images read from disk" log &&
	dlk train --local -q -f o/dlk.yaml &&
	tar -xOf s/fm-pairs.dlk weights.safetensors >ws && tar -xOf o/fm-pairs.dlk weights.safetensors | cmp - ws
'

# shards SPLIT N: the split's pairs as N WebDataset shards of KEY.png + KEY.target.png, in name
# order, in $SH
SH=$TEST_TMP/shards
shards() {
	mkdir -p "$SH" && "$PY" - "$IMG/$1" "$2" "$SH/$1" <<'PYEOF'
import os, sys, tarfile
d, n, split = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = sorted(os.listdir(os.path.join(d, "noisy")))
for k in range(n):
    with tarfile.open(f"{split}-{k}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
        for f in names[k * len(names) // n:(k + 1) * len(names) // n]:
            key = f.rsplit(".", 1)[0]
            t.add(os.path.join(d, "noisy", f), arcname=key + ".png")
            t.add(os.path.join(d, "clean", f), arcname=key + ".target.png")
PYEOF
}

test_expect_success 'paired WebDataset shards (KEY.png + KEY.target.png) train the weights the folders give, streamed or not' '
	shards train 3 && shards test 1 &&
	project f && sed -i "s/epochs: 3/epochs: 1/" f/dlk.yaml &&
	project w && sed -i "s/epochs: 3/epochs: 1/" w/dlk.yaml &&
	sed -i "s|train: {source: .*}|train: {shards: [$SH/train-0.tar, $SH/train-1.tar, $SH/train-2.tar]}|; s|test: {source: .*}|test: {source: $SH/test-0.tar}|" w/dlk.yaml &&
	dlk train --local -q -o json -f f/dlk.yaml >f.json &&
	dlk train --local -q -o json -f w/dlk.yaml >w.json &&
	echo "# $(jq -c .test w.json)" &&
	jq -e ".test.psnr > $noisy_psnr" w.json &&
	tar -xOf f/fm-pairs.dlk weights.safetensors >"$SH/wf" && tar -xOf w/fm-pairs.dlk weights.safetensors | cmp - "$SH/wf" &&
	sed -i "/^model:/i\\  images: {decode: stream}" w/dlk.yaml &&
	dlk train --local -f w/dlk.yaml >log 2>&1 &&
	grep_q "training split: 3000 images read from disk and decoded each time they are used" log &&
	tar -xOf w/fm-pairs.dlk weights.safetensors | cmp - "$SH/wf"
'

test_expect_success 'the paired shards pushed as a dataset train the same weights from data.dataset' '
	mkdir ds && cp "$SH"/train-0.tar "$SH"/train-1.tar "$SH"/train-2.tar "$SH"/test-0.tar ds/ &&
	dlk data push -q ds --to "$PWD/store" --tag pairs@v1 >id &&
	project d && sed -i "s/epochs: 3/epochs: 1/" d/dlk.yaml &&
	sed -i "s|train: {source: .*}|train: {shards: [train-0.tar, train-1.tar, train-2.tar]}|; s|test: {source: .*}|test: {source: test-0.tar}|; s|^  format: images|  format: images\n  dataset: pairs@v1\n  store: $PWD/store|" d/dlk.yaml &&
	dlk train --local -q -o json -f d/dlk.yaml >d.json &&
	tar -xOf d/fm-pairs.dlk model.json | jq -e ".provenance.dataset.id == \"$(cat id)\"" >/dev/null &&
	tar -xOf d/fm-pairs.dlk weights.safetensors | cmp - "$SH/wf"
'

test_expect_success 'the paired folders pushed as a dataset train the same weights from data.dataset, streamed too' '
	mkdir ds && cp -r "$IMG/train" "$IMG/test" ds/ &&
	dlk data push -q ds --to "$PWD/store" --tag pair-folders@v1 >id &&
	for decode in once stream; do
		project d$decode && sed -i "s/epochs: 3/epochs: 1/; /^model:/i\\  images: {decode: $decode}" d$decode/dlk.yaml &&
		sed -i "s|train: {source: .*}|train: {source: train/noisy, targets: train/clean}|; s|test: {source: .*}|test: {source: test/noisy, targets: test/clean}|; s|^  format: images|  format: images\n  dataset: pair-folders@v1\n  store: $PWD/store|" d$decode/dlk.yaml &&
		dlk train --local -o json -f d$decode/dlk.yaml >d.json 2>log &&
		grep_q "^dataset sha256:$(cut -c8-19 id): 7000 files, .* read in place" log &&
		tar -xOf d$decode/fm-pairs.dlk model.json | jq -e ".provenance.dataset.id == \"$(cat id)\"" >/dev/null &&
		tar -xOf d$decode/fm-pairs.dlk weights.safetensors | cmp - "$SH/wf" || exit 1
	done &&
	grep_q "training split: 3000 images read from disk" log &&
	sed -i "s|targets: test/clean|targets: test/cleaner|" donce/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f donce/dlk.yaml 2>err &&
	grep_q "test/cleaner.: the dataset has no folder of that name" err
'

test_expect_success 'a shard sample without its target, and targets beside shards, are named' '
	"$PY" -c "
import tarfile
with tarfile.open(\"bad.tar\", \"w\") as t:
    t.add(\"$IMG/test/noisy/000001.png\", arcname=\"000001.png\")
    t.add(\"$IMG/test/clean/000001.png\", arcname=\"000001.target.png\")
    t.add(\"$IMG/test/noisy/000002.png\", arcname=\"000002.png\")
" &&
	project b && sed -i "s|test: {source: .*}|test: {source: $PWD/bad.tar}|" b/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f b/dlk.yaml 2>err &&
	grep_q "bad.tar.: sample .000002. has no target image: member .000002.target.png. or .000002.target.jpg. is missing" err &&
	project b && sed -i "s|test: {source: $IMG/test/noisy, targets: $IMG/test/clean}|test: {shards: [$SH/test-0.tar], targets: $IMG/test/clean}|" b/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f b/dlk.yaml 2>err &&
	grep_q "data.test.targets: tar shards hold their targets (KEY.target.png beside KEY.png): leave .targets. out" err
'

test_expect_success 'the targets are decoded to the model output shape (half size after a maxpool)' '
	project h "
    - maxpool: {size: 2}" &&
	dlk train --local -q -o json -f h/dlk.yaml >out.json &&
	echo "# $(jq -c .test out.json)" &&
	tar -xOf h/fm-pairs.dlk model.json >model.json &&
	jq -e ".architecture.n_classes == 196 and .metrics.test_samples == 500" model.json &&
	jq -e ".test.psnr > 18" out.json
'

test_expect_success 'an input without its target is named, and the run fails as a config error' '
	cp -r "$IMG/train" t2 && rm t2/clean/000007.png &&
	project p && sed -i "s|$IMG/train/|$PWD/t2/|g" p/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "t2/noisy/000007.png.: no target of the same name in .*t2/clean" err
'

test_expect_success 'targets without task image, task image without targets, and flip are refused at their lines' '
	project p && sed -i "s|task: image|task: regression|" p/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "dlk.yaml:4:[0-9]*: data.train.targets: a folder of target images is for format images with model.task image" err &&
	project p && sed -i "s|, targets: $IMG/test/clean||" p/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "dlk.yaml:5:[0-9]*: data.test.targets: task image reads paired images: give .targets.* or give tar shards of KEY.png and KEY.target.png" err &&
	project p && sed -i "s|^model:|  images: {flip: true}\nmodel:|" p/dlk.yaml &&
	test_exit_code 3 dlk train --local -q -f p/dlk.yaml 2>err &&
	grep_q "dlk.yaml:6:[0-9]*: data.images.flip: flipping would move an input but not its target image" err
'

test_done
