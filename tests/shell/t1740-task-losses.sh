#!/bin/sh
# Models of other tasks than classification, trained on real data: Fashion-MNIST (Debian's
# dataset-fashion-mnist) turned into a regression table (the top half of each image, 2x2-pooled,
# predicts how much ink the bottom half has) and a multi-label table (attributes of each garment
# from its class: worn on top, footwear, long sleeves). Each trains from a CSV with
# data.csv.targets, and its metrics reach the result, the run history and the report page.
. "$(dirname "$0")/../lib.sh"

fmnist_ready

# tables.py KIND N OFFSET: N images from OFFSET of the training set as CSV rows on stdout
cat >"$TEST_TMP/tables.py" <<'PY'
import gzip, struct, sys
kind, n, off = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fm = "/usr/share/datasets/fashion-mnist/"
img = gzip.open(fm + "train-images-idx3-ubyte.gz").read()[16:]
lab = gzip.open(fm + "train-labels-idx1-ubyte.gz").read()[8:]
top, feet, sleeves = {0, 2, 3, 4, 6}, {5, 7, 9}, {2, 4, 6}
for i in range(off, off + n):
    p = img[i * 784:(i + 1) * 784]
    # 2x2 average pooling to 14x14, scaled to [0, 1]
    q = [sum(p[(2 * r + a) * 28 + 2 * c + b] for a in (0, 1) for b in (0, 1)) / 1020.0 for r in range(14) for c in range(14)]
    if kind == "image":
        # denoising: the image with a fixed pattern of noise in, the clean image out
        noisy = [min(1.0, max(0.0, v + 0.3 * (((i * 131 + j * 71) % 17) / 8.0 - 1.0))) for j, v in enumerate(q)]
        row = noisy + q
    elif kind == "regression":
        bottom = q[98:]
        ink = sum(bottom) / len(bottom)
        covered = sum(1 for v in bottom if v > 0.5) / len(bottom)
        row = q[:98] + [ink * 4, covered * 4]
    else:
        y = lab[i]
        row = q + [int(y in top), int(y in feet), int(y in sleeves)]
    print(",".join("%.4g" % v for v in row))
PY

project() { # project DIR KIND TARGETS OUTPUTS
	mkdir -p "$1" &&
	python3 "$TEST_TMP/tables.py" "$2" 4000 0 >"$1/train.csv" &&
	python3 "$TEST_TMP/tables.py" "$2" 1000 50000 >"$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: fm-$2
data:
  format: csv
  csv: {targets: $3}
  train: {source: train.csv}
  test: {source: test.csv}
model:
  task: $2
  input: [$(($(head -n 1 "$1/train.csv" | tr , '\n' | wc -l) - $3))]
  layers:
    - dense: {units: 64}
    - relu
    - dense: {units: $4}
training: {epochs: 6, batch_size: 64, threads: 1, checkpoint: {every: 0}, optimizer: adamw}
EOT
}

test_expect_success 'a regression model trains on CSV target columns and reports R2, RMSE and MAE' '
	project p regression 2 2 &&
	dlk train --local -f p/dlk.yaml -o json >out.json 2>err &&
	jq -e ".task == \"regression\" and (.test | keys) == [\"mae\", \"r2\", \"rmse\"]" out.json &&
	jq -e ".test.r2 > 0.5 and .test.rmse > 0 and .test.mae <= .test.rmse" out.json &&
	jq -e "has(\"testAccuracy\") | not" out.json &&
	grep -q "test loss [0-9.]*  test r2 0\.[0-9]*  rmse [0-9.]*  mae [0-9.]*" err &&
	echo "# $(jq -c .test out.json)"
'

test_expect_success 'its run history, run and report page show the metrics of the task, no confusion matrix' '
	project p regression 2 2 &&
	dlk train --local -q -f p/dlk.yaml --set training.epochs=2 >/dev/null 2>&1 &&
	dlk status --history --local -f p/dlk.yaml >hist &&
	cat hist && grep -q "succeeded  *1  *0  *r2 0\.[0-9]*" hist &&
	id=$(awk "NR == 2 { print \$1 }" hist) &&
	dlk status --run "$id" --local -f p/dlk.yaml >run &&
	grep -q "^metrics  *test r2 0\.[0-9]*, rmse [0-9.]*, mae [0-9.]*, test loss" run &&
	(cd p && dlk report "$id" -o ../page.html) &&
	grep -q "<section id=\"task-metrics\">" page.html &&
	grep -q "<th scope=\"row\">r2</th><td>0\.[0-9]*</td>" page.html &&
	! grep -q "id=\"confusion" page.html &&
	grep -q "Test r2" page.html
'

test_expect_success 'a multi-label model trains with binary cross-entropy and reports F1' '
	project m multilabel 3 3 &&
	dlk train --local -f m/dlk.yaml -o json >out.json 2>err &&
	jq -e ".task == \"multilabel\" and .test.f1_micro > 0.85 and .test.f1_macro > 0.8" out.json &&
	jq -e ".test.subset_accuracy > 0.7" out.json &&
	tar -xOf m/fm-multilabel.dlk model.json >model.json &&
	jq -e ".architecture.loss == \"binary_cross_entropy\" and (.metrics.f1 | length) == 3" model.json &&
	echo "# $(jq -c .test out.json)"
'

test_expect_success 'huber and l1 train too, and label smoothing trains a classifier' '
	project h regression 2 2 &&
	dlk train --local -q -f h/dlk.yaml --set model.loss=huber --set model.huber_delta=0.5 -o json >hu.json &&
	dlk train --local -q -f h/dlk.yaml --set model.loss=l1 -o json >l1.json &&
	jq -e ".test.r2 > 0.4" hu.json && jq -e ".test.r2 > 0.4" l1.json &&
	blobs_project b &&
	dlk train --local -q -f b/dlk.yaml --set training.label_smoothing=0.1 -o json >ls.json &&
	jq -e ".testAccuracy > 0.65" ls.json
'

# the noisy inputs themselves are 16.3 dB from the clean images
test_expect_success 'an image-to-image model (a small convolutional denoiser) reports PSNR and SSIM' '
	mkdir d &&
	python3 "$TEST_TMP/tables.py" image 2000 0 >d/train.csv &&
	python3 "$TEST_TMP/tables.py" image 300 50000 >d/test.csv &&
	cat >d/dlk.yaml <<EOT &&
name: fm-denoise
data:
  format: csv
  csv: {targets: 196}
  train: {source: train.csv}
  test: {source: test.csv}
model:
  task: image
  loss: l1
  input: [1, 14, 14]
  layers:
    - conv2d: {filters: 8, kernel: 3, padding: 1}
    - relu
    - conv2d: {filters: 1, kernel: 3, padding: 1}
training: {epochs: 4, batch_size: 32, threads: 1, checkpoint: {every: 0}, optimizer: {name: adam, lr: 0.01}}
EOT
	dlk train --local -q -f d/dlk.yaml -o json >out.json &&
	echo "# $(jq -c .test out.json)" &&
	jq -e "(.test | keys) == [\"mae\", \"psnr\", \"r2\", \"rmse\", \"ssim\"]" out.json &&
	jq -e ".test.psnr > 22 and .test.ssim > 0.8 and .test.ssim <= 1 and .test.r2 > 0.8" out.json &&
	tar -xOf d/fm-denoise.dlk model.json >model.json &&
	jq -e ".metrics.samples.shape == [1, 14, 14] and (.metrics.samples.input | length) == 4 and
		(.metrics.samples.output[0] | length) == 196 and (.metrics.samples.target | length) == 4" model.json &&
	dlk report d/fm-denoise.dlk -o page.html &&
	grep -q "<figure id=\"samples\"><svg" page.html &&
	test "$(grep -o "<rect x=" page.html | wc -l)" -ge $((3 * 4 * 196))
'

# a port the kernel has just handed out
free_port() {
	node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

test_expect_success 'a training worker'"'"'s Prometheus metrics carry the task'"'"'s test metrics' '
	project p regression 2 2 &&
	port=$(free_port) &&
	{ dlk train --local -q -f p/dlk.yaml --set training.epochs=1000 --metrics-port $port >out 2>err & pid=$!; } &&
	i=0 && ok=1 &&
	while [ $i -lt 600 ]; do
		if curl -sf "http://127.0.0.1:$port/metrics" >m.txt 2>/dev/null &&
			grep -q "^dlk_train_test_metric{metric=\"r2\"} " m.txt; then ok=0; break; fi
		sleep 0.1; i=$((i + 1))
	done;
	kill -INT $pid; wait $pid; cat m.txt; test $ok = 0 &&
	promtool check metrics <m.txt &&
	grep -q "^dlk_train_test_metric{metric=\"rmse\"} [0-9]" m.txt &&
	grep -q "^dlk_train_test_metric{metric=\"mae\"} [0-9]" m.txt &&
	awk "\$1 == \"dlk_train_test_loss\" && \$2 > 0 { ok = 1 } END { exit !ok }" m.txt
'

test_expect_failure_code 'a regression task without target columns is refused, naming the key' 3 '
	project p regression 2 2 &&
	sed -i "s/  csv: {targets: 2}//" p/dlk.yaml &&
	dlk train --local -f p/dlk.yaml 2>err; rc=$?; cat err;
	grep -q "data.csv.targets: task regression needs float targets" err && exit $rc
'

test_expect_failure_code 'a model whose outputs do not match the targets is refused' 3 '
	project p regression 2 3 &&
	dlk train --local -f p/dlk.yaml 2>err; rc=$?; cat err;
	grep -q "the training data has 2 target values per sample but the model ends with 3 outputs" err && exit $rc
'

test_done
