#!/bin/sh
# dlk init --example denoise: the U-Net-like denoiser on noisy Fashion-MNIST. The example's
# script writes the noisy/clean pairs (a subset here); one epoch of training as written lifts the
# test PSNR above the noisy inputs' PSNR, computed here apart from dlk with numpy; the report page
# shows the grid of inputs, outputs and targets.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
fmnist_ready
[ -x "$PY" ] || test_missing "the frameworks venv with Pillow and numpy ($PY, .ci/deps.d/frameworks)"

D=$TEST_TMP/d
test_expect_success 'init --example denoise writes the project and the script that makes the pairs' '
	dlk init --example denoise "$D" >out &&
	grep_q "python3 noisy-pairs.py" out &&
	test -f "$D/dlk.yaml" && test -f "$D/noisy-pairs.py" &&
	grep_q "concat: {inputs: \[up1, e1\]}" "$D/dlk.yaml" &&
	(cd "$D" && "$PY" noisy-pairs.py "$FM" 2500 300 >pairs.txt) &&
	cat "$D/pairs.txt" | sed "s/^/# /" &&
	test "$(ls "$D/pairs/train/noisy" | wc -l)" = 2500 && test "$(ls "$D/pairs/test/clean" | wc -l)" = 300 &&
	(cd "$D" && dlk train --dry-run -o json) >dry.json && jq -e "length > 0" dry.json >/dev/null
'

test_expect_success 'one epoch of a subset lifts the PSNR above the noisy inputs'"'"' (numpy)' '
	noisy=$("$PY" -c "
import glob, os, sys
import numpy as np
from PIL import Image
ps = []
for f in sorted(glob.glob(sys.argv[1] + \"/pairs/test/noisy/*.png\")):
    x = np.asarray(Image.open(f), dtype=np.float64) / 255
    y = np.asarray(Image.open(f.replace(\"/noisy/\", \"/clean/\")), dtype=np.float64) / 255
    ps.append(min(100.0, 10 * np.log10(1 / np.mean((x - y) ** 2))))
print(\"%.4f\" % np.mean(ps))
" "$D") &&
	echo "# noisy inputs: PSNR $noisy dB" &&
	(cd "$D" && dlk train --local -q -o json --set training.epochs=1 --set training.threads=2) >out.json &&
	echo "# $(jq -c .test out.json)" &&
	jq -e --argjson noisy "$noisy" ".test.psnr > \$noisy + 0.5 and .test.ssim > 0.5" out.json
'

test_expect_success 'the report page shows the test images: input, output and target' '
	tar -xOf "$D/d.dlk" model.json >model.json &&
	jq -e ".architecture.task == \"image\" and .metrics.samples.shape == [1, 28, 28]" model.json &&
	dlk report "$D/d.dlk" -o page.html &&
	grep -q "<figure id=\"samples\"><svg" page.html &&
	test "$(grep -o "<rect x=" page.html | wc -l)" -ge $((3 * 4 * 784))
'

test_done
