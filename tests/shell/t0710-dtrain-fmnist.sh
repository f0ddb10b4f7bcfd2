#!/bin/sh
# Two local workers on Fashion-MNIST (1 epoch of the example MLP, global batch 128) reach the
# accuracy of one worker. One epoch is noisy (the workers see the samples in another order), so
# the bound here is 1 point; t0720-dtrain-fmnist-long compares 1, 2 and 4 workers within 0.5.
. "$(dirname "$0")/../lib.sh"

accuracy() { sed -n 's/.*"testAccuracy":[ \t]*\([0-9.]*\).*/\1/p' "$1"; }

fmnist_ready

test_expect_success '2 workers x batch 64 reach the accuracy of 1 worker x batch 128 within 1 point' '
	mkdir a b && cp "$TEST_ROOT/examples/mlp/dlk.yaml" a/ && cp a/dlk.yaml b/ &&
	dlk train --local -q -o json -f a/dlk.yaml --set training.epochs=1 --set training.threads=1 >a.json &&
	dlk train --local --workers 2 -q -o json -f b/dlk.yaml --set training.epochs=1 --set training.batch_size=64 \
		--set training.threads=1 >b.json &&
	x=$(accuracy a.json) && y=$(accuracy b.json) && echo "1 worker $x, 2 workers $y" &&
	awk -v a="$x" -v b="$y" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.8 && d <= 0.01) }"
'

test_done
