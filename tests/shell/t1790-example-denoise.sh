#!/bin/sh
# dlk init --example denoise: the U-Net-like denoiser on noisy Fashion-MNIST, trained as it is
# (no script, no Python): dlk draws the inputs' noise itself (data.images.noise: 51), the targets
# are the images. On a subset of the IDX files (cut here by their headers): the log gives the
# noisy test inputs' PSNR, the same in every run and with any seed; one epoch lifts the test PSNR
# above it; the noise the bundle's sample inputs carry is checked apart from dlk (its spread where
# no clipping happens is sigma 51 of 255); the report page shows the grid of inputs, outputs and
# targets.
. "$(dirname "$0")/../lib.sh"

PY=$TEST_ROOT/.deps/frameworks/bin/python
fmnist_ready
[ -x "$PY" ] || test_missing "the frameworks venv ($PY, .ci/deps.d/frameworks)"

D=$TEST_TMP/d
# sub NAME N: the first N samples of Fashion-MNIST's NAME file, its header's count rewritten
sub() {
	gzip -dc "$FM/$1.gz" >"$TEST_TMP/whole" &&
	case $1 in *images*) h=16 item=784 ;; *) h=8 item=1 ;; esac &&
	{ head -c 4 "$TEST_TMP/whole" &&
	  printf "\\$(printf %03o $(($2 >> 24 & 255)))\\$(printf %03o $(($2 >> 16 & 255)))\\$(printf %03o $(($2 >> 8 & 255)))\\$(printf %03o $(($2 & 255)))" &&
	  head -c "$h" "$TEST_TMP/whole" | tail -c +9 &&
	  tail -c +$((h + 1)) "$TEST_TMP/whole" | head -c $(($2 * item)); } >"$D/sub/$1"
}
SUBSET="--set data.train.images=sub/train-images-idx3-ubyte --set data.train.labels=sub/train-labels-idx1-ubyte
	--set data.test.images=sub/t10k-images-idx3-ubyte --set data.test.labels=sub/t10k-labels-idx1-ubyte"

test_expect_success 'init --example denoise writes a project that reads Fashion-MNIST and draws the noise' '
	cd "$TEST_TMP" && dlk init --example denoise "$D" >init.txt && cat init.txt &&
	! grep_q "python" init.txt && grep_q "dlk train --local" init.txt &&
	test -f "$D/dlk.yaml" && test "$(ls "$D")" = dlk.yaml &&
	grep_q "noise: 51" "$D/dlk.yaml" && grep_q "train-images-idx3-ubyte.gz" "$D/dlk.yaml" &&
	grep_q "concat: {inputs: \[up1, e1\]}" "$D/dlk.yaml" &&
	(cd "$D" && dlk train --dry-run -o json) >dry.json && jq -e "length > 0" dry.json >/dev/null &&
	mkdir -p "$D/sub" && sub train-images-idx3-ubyte 2500 && sub train-labels-idx1-ubyte 2500 &&
	sub t10k-images-idx3-ubyte 300 && sub t10k-labels-idx1-ubyte 300 &&
	test "$(wc -c <"$D/sub/train-images-idx3-ubyte")" = $((16 + 2500 * 784))
'

test_expect_success 'one epoch of a subset lifts the PSNR above the noisy inputs'"'"'' '
	cd "$TEST_TMP" && (cd "$D" && dlk train --local -o json $SUBSET --set training.epochs=1 --set training.threads=2) >out.json 2>err &&
	cat err | sed "s/^/# /" &&
	noisy=$(sed -n "s/^test inputs with noise of sigma 51: PSNR \([0-9.]*\) dB against their targets.*/\1/p" err) &&
	echo "# noisy inputs: PSNR $noisy dB; $(jq -c .test out.json)" &&
	jq -e -n --argjson p "$noisy" "\$p > 15 and \$p < 17" >/dev/null &&
	jq -e --argjson noisy "$noisy" ".test.psnr > \$noisy + 0.5 and .test.ssim > 0.5" out.json
'

test_expect_success 'the test inputs are the same in every run, whatever the seed' '
	cd "$TEST_TMP" && (cd "$D" && dlk train --local -o json $SUBSET --set training.epochs=1 --set training.seed=7) >out7.json 2>err7 &&
	grep "^test inputs with noise" err7 >a && grep "^test inputs with noise" err >b && cmp a b &&
	! cmp -s out.json out7.json
'

test_expect_success 'the sample inputs in the bundle carry noise of sigma 51 (checked apart from dlk)' '
	cd "$TEST_TMP" && tar -xOf "$D/d.dlk" model.json >model.json &&
	"$PY" - model.json <<-\EOF
	import json, math, sys
	s = json.load(open(sys.argv[1]))["metrics"]["samples"]
	d = [x - t for xs, ts in zip(s["input"], s["target"]) for x, t in zip(xs, ts) if 0.3 < t < 0.7]
	sd = math.sqrt(sum(v * v for v in d) / len(d))
	print("# %d mid-grey pixels: input - target has mean %.4f, standard deviation %.4f (51/255 = %.4f)"
	      % (len(d), sum(d) / len(d), sd, 51 / 255))
	assert len(d) > 100 and abs(sd - 51 / 255) < 0.03 and abs(sum(d) / len(d)) < 0.03
	EOF
'

test_expect_success 'the report page shows the test images: input, output and target' '
	cd "$TEST_TMP" && jq -e ".architecture.task == \"image\" and .metrics.samples.shape == [1, 28, 28]" model.json &&
	dlk report "$D/d.dlk" -o page.html &&
	grep -q "<figure id=\"samples\"><svg" page.html &&
	test "$(grep -o "<rect x=" page.html | wc -l)" -ge $((3 * 4 * 784))
'

test_done
