#!/bin/sh
# dlk predict: a model trained on Fashion-MNIST scores the test split pushed to a directory store;
# the predictions are a dataset of that store (predictions.csv, provenance.json naming the input
# dataset and the bundle), agree with the bundle's own test accuracy, and are the same dataset
# when scored again. Every case works in $TEST_TMP, where the first leaves the model and store.
. "$(dirname "$0")/../lib.sh"

fmnist_ready
STORE=$TEST_TMP/store

test_expect_success 'setup: a model (1 epoch of the example MLP) and the test split in a store' '
	cd "$TEST_TMP" &&
	mkdir -p fm proj && cp "$FM"/t10k-* fm/ &&
	cp "$TEST_ROOT/examples/mlp/dlk.yaml" proj/ &&
	dlk train --local -q -o json -f proj/dlk.yaml --set training.epochs=1 --set training.threads=2 \
		--set training.checkpoint.every=0 >train.json &&
	test -f proj/fashion-mlp.dlk &&
	dlk data push -q fm --to "$STORE" --tag fmnist-test@v1 >in.id
'

test_expect_success 'predict pushes a dataset of predictions and prints its id' '
	cd "$TEST_TMP" &&
	dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name preds@v1 >out 2>err &&
	id=$(sed -n "s/^sha256://p" out) && [ ${#id} = 64 ] &&
	grep -q "scored 10000 samples" err &&
	dlk data show preds@v1 --from "$STORE" >show &&
	grep -q "sha256:$id" show && grep -q "predictions.csv" show && grep -q "provenance.json" show &&
	echo "$id" >preds.id
'

test_expect_success 'predictions.csv: one row per sample, its label, its class, a probability per class' '
	cd "$TEST_TMP" &&
	dlk data get -q preds@v1 --from "$STORE" got &&
	test "$(wc -l <got/predictions.csv)" = 10001 &&
	head -n 1 got/predictions.csv | grep -qx "index,label,class,p_T-shirt/top,p_Trouser,p_Pullover,p_Dress,p_Coat,p_Sandal,p_Shirt,p_Sneaker,p_Bag,p_Ankle boot" &&
	awk -F, "NR > 1 { if (\$1 != NR - 2 || NF != 13) bad = 1; s = 0; for (i = 4; i <= 13; i++) s += \$i;
		if (s < 0.999 || s > 1.001) bad = 1 } END { exit bad }" got/predictions.csv &&
	sed -n 2p got/predictions.csv | grep -q "^0,Ankle boot,"
'

test_expect_success 'the accuracy of the predictions is the bundle'"'"'s test accuracy' '
	cd "$TEST_TMP" &&
	acc=$(sed -n "s/.*\"testAccuracy\":[ \t]*\([0-9.]*\).*/\1/p" train.json) &&
	mine=$(awk -F, "NR > 1 { n++; if (\$2 == \$3) c++ } END { printf \"%.4f\", c / n }" got/predictions.csv) &&
	echo "bundle $acc, predictions $mine" &&
	awk -v a="$acc" -v b="$mine" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.00005) }"
'

test_expect_success 'provenance.json names the input dataset and the bundle' '
	cd "$TEST_TMP" &&
	in=$(cat in.id) && bsha=$(sha256sum <proj/fashion-mlp.dlk | cut -c1-64) &&
	grep -q "\"id\": *\"$in\"" got/provenance.json &&
	grep -q "\"tag\": *\"fmnist-test@v1\"" got/provenance.json &&
	grep -q "\"bundle_sha256\": *\"sha256:$bsha\"" got/provenance.json &&
	grep -q "\"images\": *\"t10k-images-idx3-ubyte.gz\"" got/provenance.json
'

test_expect_success 'scoring again gives the same dataset; -o json says what was scored; 1 thread agrees' '
	cd "$TEST_TMP" &&
	dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name preds@v2 -o json >out.json &&
	grep -q "\"id\": *\"sha256:$(cat preds.id)\"" out.json &&
	grep -q "\"tag\": *\"preds@v2\"" out.json &&
	grep -q "\"input\": *\"$(cat in.id)\"" out.json &&
	grep -q "\"samples\": *10000" out.json &&
	grep -q "\"seconds\": *{" out.json && grep -q "\"read\": *[0-9]" out.json &&
	grep -q "\"score\": *[0-9]" out.json && grep -q "\"write\": *[0-9]" out.json &&
	dlk predict proj/fashion-mlp.dlk --data "$(cat in.id)" --to "$STORE" --name preds@v3 -o json >id.json &&
	grep -q "\"input\": *\"$(cat in.id)\"" id.json &&
	dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name preds@t1 --threads 1 --batch 1000 \
		-o json >t1.json &&
	a=$(sed -n "s/.*\"accuracy\": *\([0-9.]*\).*/\1/p" out.json) && b=$(sed -n "s/.*\"accuracy\": *\([0-9.]*\).*/\1/p" t1.json) &&
	echo "accuracy $a, with 1 thread and batches of 1000 $b" && test -n "$a" && test "$a" = "$b"
'

test_expect_success 'N ranks here (--workers N --rank R): the parts joined by rank 0 are the one-process bytes; a re-run makes no part twice' '
	cd "$TEST_TMP" &&
	dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name one@v1 --threads 2 --batch 300 >one.id &&
	{ dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name three@v1 --threads 2 --batch 300 \
		--workers 3 --rank 0 >r0.out 2>r0.err & } &&
	for r in 2 1; do
		dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name three@v1 --threads 2 --batch 300 \
			--workers 3 --rank $r >r$r.out 2>r$r.err || exit 1
	done &&
	wait $! && cat r0.err r1.err r2.err &&
	test "$(cat r0.out)" = "$(cat one.id)" &&
	grep -q "rank 1 of 3: scored samples 3300 to 6600" r1.err &&
	grep -q "rank 2 of 3: scored samples 6600 to 10000" r2.err &&
	n=$(dlk data ls --from "$STORE" 2>/dev/null | grep -c "three-part-") &&
	dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name three@v1 --threads 2 --batch 300 \
		--workers 3 --rank 1 >again.out 2>again.err &&
	grep -q "rank 1 of 3: its part (samples 3300 to 6600) is in the store already" again.err &&
	test "$(cat again.out)" = "$(cat r1.out)" &&
	test "$(dlk data ls --from "$STORE" 2>/dev/null | grep -c "three-part-")" = "$n" &&
	dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name three@v1 --threads 2 --batch 300 \
		--workers 3 --rank 2 -o json 2>/dev/null | jq -e ".rank == 2 and .first == 6600 and .count == 3400 and
		.part == \"$(cat r2.out)\"" &&
	test_exit_code 2 dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name x --rank 3 --workers 3 2>err &&
	grep -q "\-\-rank 3 is not a rank of \-\-workers 3" err &&
	test_exit_code 2 dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name x --wait 2>err &&
	grep -q "\-\-wait goes with \-\-workers" err &&
	test_exit_code 2 dlk predict proj/fashion-mlp.dlk --data fmnist-test@v1 --to "$STORE" --name x --workers 2 --dry-run 2>err &&
	grep -q "cannot reach it" err
'

test_expect_success 'lineage follows the predictions back to the model and the raw dataset' '
	cd "$TEST_TMP" &&
	dlk lineage preds@v1 --from "$STORE" >lin &&
	grep -q "^dataset  *sha256:$(cat preds.id)\$" lin &&
	grep -q "^made by  *dlk predict" lin &&
	grep -q "^input  *$(cat in.id) (fmnist-test@v1)" lin &&
	grep -q "^model  *fashion-mlp sha256:$(sha256sum <proj/fashion-mlp.dlk | cut -c1-64)" lin &&
	grep -q "^dataset  *$(cat in.id) (pushed from files)" lin &&
	dlk lineage "sha256:$(cat preds.id)" --from "$STORE" -o json >lin.json &&
	grep -c "\"id\": *\"sha256:" lin.json | grep -qx 3 &&
	test_exit_code 6 dlk lineage nosuch@v1 --from "$STORE"
'

test_expect_success 'bad input: a missing dataset, data that does not fit, no --name' '
	cd "$TEST_TMP" &&
	test_exit_code 6 dlk predict proj/fashion-mlp.dlk --data nosuch@v1 --to "$STORE" --name x 2>err &&
	grep -q "nosuch@v1" err &&
	mkdir csv && echo "1,2,0" >csv/t.csv && dlk data push -q csv --to "$STORE" --tag tab >/dev/null &&
	test_exit_code 3 dlk predict proj/fashion-mlp.dlk --data tab --to "$STORE" --name x 2>err &&
	grep -q "no IDX images file" err && grep -q "hint:.*--images" err &&
	test_exit_code 2 dlk predict proj/fashion-mlp.dlk --data tab --to "$STORE" 2>err &&
	grep -q "\-\-name" err &&
	test_exit_code 2 dlk predict proj/fashion-mlp.dlk --data tab --to "$STORE" --name "bad name" 2>err &&
	printf "not a bundle" >bad.dlk &&
	test_exit_code 3 dlk predict bad.dlk --data fmnist-test@v1 --to "$STORE" --name x 2>err && grep -q "bad.dlk" err
'

test_done
