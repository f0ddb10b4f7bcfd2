#!/bin/sh
# The report page in a real browser (Debian's chromium, headless, driven over the DevTools
# protocol by tests/report/browser.js): it makes no request but for itself and breaks no rule of
# its Content-Security-Policy; its charts hold one point per recorded value, placed in the order of
# the values; its heat maps print the embedded counts; its text follows the reader's font size; it
# has a print style; its embedded data is the bundle's; and its look matches a golden screenshot.
# DLK_UPDATE_GOLDEN=1 writes the golden image anew (look at it before committing it).
. "$(dirname "$0")/../lib.sh"
FIX=$TEST_ROOT/tests/report
BROWSER="node $FIX/browser.js"
GOLDEN=$FIX/golden-compare.png
# the screenshot is taken at half scale (a quarter of the pixels: a small golden file that still
# shows every line of the layout); a pixel differs when a channel differs by more than 48 of 255,
# and at most 0.5% of them may
MAX_SHARE=0.005

if ! command -v chromium >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	# a component the tests need is installed by `.ci/deps test` (make test): missing, it is a failure
	echo "not ok 1 - chromium and node are needed (install them with: .ci/deps test)"
	echo "1..1"
	exit 1
fi

# open PAGE: the browser's findings about it, in result.json
open_page() { _p=$1; shift; $BROWSER open "$_p" --eval "$FIX/checks.js" "$@" >result.json 2>browser.err || { cat browser.err; return 1; }; }
only_itself() {
	jq -e ".requests | length == 1 and .[0].type == \"Document\" and (.[0].url | startswith(\"file://\"))" result.json >/dev/null &&
	jq -e ".console == []" result.json >/dev/null || { jq "{requests, console}" result.json; return 1; }
}
no_problems() { jq -e ".eval.problems == []" result.json >/dev/null || { jq .eval.problems result.json; return 1; }; }

test_expect_success 'the comparison page: no request leaves it, everything drawn agrees with its data' '
	dlk report "$FIX/run-a.json" --compare "$FIX/run-b.json" -o page.html 2>/dev/null &&
	open_page page.html --screenshot shot.png --scale 0.5 && only_itself && no_problems &&
	jq -e ".eval.heatCells == 32 and .eval.marks.loss == 1 and (.eval.moved | length) == 4" result.json &&
	jq -e ".eval.series[\"chart-loss/step-loss\"].points == 192 and .eval.series[\"chart-loss/b-step-loss\"].points == 256" result.json &&
	jq -e ".eval.series[\"chart-accuracy/b-test-accuracy\"].points == 8" result.json &&
	cp shot.png "$TEST_TMP/shot.png"
'

test_expect_success 'its screenshot matches the golden image' '
	if [ "${DLK_UPDATE_GOLDEN:-}" = 1 ]; then cp "$TEST_TMP/shot.png" "$GOLDEN"; fi &&
	$BROWSER compare "$GOLDEN" "$TEST_TMP/shot.png" --diff diff.png >cmp.json 2>browser.err || { cat browser.err; exit 1; }
	cat cmp.json &&
	jq -e ".a == .b and .share <= $MAX_SHARE" cmp.json >/dev/null ||
		{ cp diff.png "$TEST_ROOT/${BUILD:-build}/t1110-diff.png" 2>/dev/null; echo "differing pixels in red: ${BUILD:-build}/t1110-diff.png"; exit 1; }
'

test_expect_success 'one run alone: the same checks' '
	dlk report "$FIX/run-a.json" -o one.html 2>/dev/null && open_page one.html && only_itself && no_problems &&
	jq -e ".eval.heatCells == 16 and .eval.marks.loss == 0" result.json
'

test_expect_success 'a freshly trained bundle: the data the page carries is the bundle'\''s' '
	mkdir p &&
	awk "BEGIN { srand(4); for (i = 0; i < 600; i++) { c = int(rand() * 3); printf \"%.3f,%.3f,%.3f,%d\\n\", rand() + c, rand() - c, rand(), c } }" >p/train.csv &&
	cp p/train.csv p/test.csv &&
	printf "name: tri\ndata:\n  format: csv\n  train: {source: train.csv}\n  test: {source: test.csv}\nmodel:\n  input: [3]\n  layers:\n    - dense: {units: 8}\n    - relu\n    - dense: {units: 3}\ntraining: {epochs: 4, batch_size: 50, threads: 1}\n" >p/dlk.yaml &&
	dlk train --local -q -f p/dlk.yaml -o json --report p/tri.html >train.json 2>/dev/null &&
	open_page p/tri.html && only_itself && no_problems &&
	tar -xOf p/tri.dlk model.json >model.json &&
	for k in metrics history provenance classes; do
		jq -S ".eval.data.runs[0].$k" result.json >got && jq -S ".$k" model.json >want &&
		cmp got want || { echo "$k differs"; diff got want | head; exit 1; }
	done &&
	test "$(jq .eval.data.runs[0].metrics.test_accuracy result.json)" = "$(jq .testAccuracy train.json)" &&
	jq -e ".eval.series[\"chart-loss/train-loss\"].points == 4 and .eval.series[\"chart-loss/step-loss\"].points == 48" result.json
'

test_expect_success 'the checks can fail: a wrong count in a cell, a missing point' '
	dlk report "$FIX/run-a.json" -o one.html 2>/dev/null &&
	c=$(jq ".metrics.confusion_matrix[0][0]" "$FIX/run-a.json") &&
	sed "0,/>$c<\\/td>/s//>$((c + 1))<\\/td>/" one.html >bad.html && ! cmp -s one.html bad.html &&
	open_page bad.html && ! no_problems >/dev/null && jq -e ".eval.problems[0] | test(\"cell 0,0\")" result.json &&
	awk "/data-series=\"train-loss\"/ { s = 1 } s && /<polyline/ { sub(/ [0-9.]+,[0-9.]+\"\\/>/, \"\\\"/>\"); s = 0 } { print }" one.html >bad2.html &&
	open_page bad2.html && jq -e ".eval.problems | map(select(test(\"train-loss: 5 points drawn for 6 values\"))) | length == 1" result.json
'

test_expect_success 'the request check sees a page that loads something' '
	printf "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\"></body></html>" >loads.html &&
	$BROWSER open loads.html >result.json 2>/dev/null && ! only_itself >/dev/null &&
	jq -e ".requests | map(.url) | index(\"http://127.0.0.1:9/x.png\") != null" result.json
'

test_done
