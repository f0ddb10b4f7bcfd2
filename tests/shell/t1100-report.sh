#!/bin/sh
# dlk report: the page of a bundle, a run document or a job, its data as -o json (the very numbers
# of the bundle and of `dlk train -o json`), --compare, where the page goes, bad input; and the
# page `dlk train --report` writes at the end of a local run, a resumed run and a waited-for job.
# (The page in a real browser: t1110.)
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/apiserver/lib.sh"
FIX=$TEST_ROOT/tests/report

# 1024 training and 256 test rows of 8 features in 3 named classes
make_project() {
	mkdir -p "$1" &&
	awk -v n=1024 -v seed=1 -f "$TEST_TMP/gen.awk" >"$1/train.csv" &&
	awk -v n=256 -v seed=2 -f "$TEST_TMP/gen.awk" >"$1/test.csv" &&
	cat >"$1/dlk.yaml" <<EOT
name: blobs
data:
  format: csv
  train: {source: train.csv}
  test: {source: test.csv}
  classes: [circle, "square <&>", triangle]
model:
  input: [8]
  layers:
    - dense: {units: 16}
    - relu
    - dense: {units: 3}
training:
  epochs: ${2:-3}
  batch_size: 32
  optimizer: {name: adam, lr: 0.01}
  threads: 1
  checkpoint: {every: 4, keep: 2}
EOT
}
cat >"$TEST_TMP/gen.awk" <<'EOT'
BEGIN {
	srand(seed)
	for (i = 0; i < n; i++) {
		c = int(rand() * 3); line = ""
		for (j = 0; j < 8; j++) {
			u = rand(); v = rand(); if (u < 1e-9) u = 1e-9
			line = line sprintf("%.4f,", sqrt(-2 * log(u)) * cos(6.283185307 * v) + ((c * 5 + j) % 4) * 0.6)
		}
		print line c
	}
}
EOT
wait_for() { i=0; while [ ! -e "$1" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done; [ -e "$1" ]; }
# the report document embedded in a page
page_data() { sed -n 's/.*<script type="application\/json" id="dlk-report-data">\(.*\)<\/script>.*/\1/p' "$1"; }

# a trained project shared by the cases
REF=$TEST_TMP/ref
make_project "$REF" && dlk train --local -q -f "$REF/dlk.yaml" -o json --report "$REF/run.html" >"$REF/train.json" 2>"$REF/err" ||
	{ echo "Bail out! the reference run failed"; cat "$REF/err"; exit 1; }
tar -xOf "$REF/blobs.dlk" model.json >"$REF/model.json"

test_expect_success 'train --report writes the page of the bundle it wrote' '
	test -s "$REF/run.html" && head -n 1 "$REF/run.html" | grep -qx "<!DOCTYPE html>" &&
	page_data "$REF/run.html" >data.json && jq -e ".runs[0].source.path == \"$REF/blobs.dlk\"" data.json &&
	jq -S ".runs[0].metrics" data.json >got && jq -S .metrics "$REF/model.json" >want && cmp got want
'

test_expect_success 'the data is the bundle'\''s: metrics, history, provenance, classes, settings' '
	dlk report "$REF/blobs.dlk" -o json >doc.json &&
	jq -e ".format == \"dlk-report\" and .version == 1 and (.runs | length) == 1" doc.json &&
	for k in metrics history provenance classes training architecture name; do
		jq -S ".runs[0].$k" doc.json >got && jq -S ".$k" "$REF/model.json" >want &&
		cmp got want || { echo "$k differs"; diff got want; exit 1; }
	done &&
	jq -e ".runs[0].weights.sha256 == \"$(jq -r .weights.sha256 "$REF/model.json")\"" doc.json &&
	jq -e ".runs[0].history.epochs | length == 3" doc.json &&
	jq -e "[.runs[0].history.events[].event] == [\"start\"]" doc.json
'

test_expect_success 'the numbers are those dlk train -o json printed' '
	dlk report "$REF/blobs.dlk" -o json >doc.json &&
	test "$(jq .runs[0].metrics.test_accuracy doc.json)" = "$(jq .testAccuracy "$REF/train.json")" &&
	test "$(jq .runs[0].metrics.test_loss doc.json)" = "$(jq .testLoss "$REF/train.json")" &&
	test "$(jq -c .runs[0].metrics.confusion_matrix doc.json)" = "$(jq -c .confusionMatrix "$REF/train.json")" &&
	test "$(jq .runs[0].metrics.train_loss doc.json)" = "$(jq .trainLoss "$REF/train.json")" &&
	test "$(jq .runs[0].history.step_loss.steps doc.json)" = "$(jq .steps "$REF/train.json")"
'

test_expect_success 'the page embeds exactly what -o json prints' '
	dlk report "$REF/blobs.dlk" -o page.html 2>err && test ! -s err -o "$(cat err)" = "report: page.html" &&
	page_data page.html | jq -S . >got && dlk report "$REF/blobs.dlk" -o json | jq -S . >want && cmp got want &&
	dlk report "$REF/blobs.dlk" -o yaml >doc.yaml && grep -q "^format: dlk-report$" doc.yaml
'

test_expect_success 'without -o the page is NAME.html here; -o - writes it to stdout; -q says nothing' '
	dlk report "$REF/blobs.dlk" 2>err && test -s blobs.html && grep -qx "report: blobs.html" err &&
	dlk report -q "$REF/blobs.dlk" -o - >out.html 2>err && test ! -s err &&
	head -n 1 out.html | grep -qx "<!DOCTYPE html>" && tail -n 1 out.html | grep -qx "</html>"
'

test_expect_success 'class names are escaped, and the page loads nothing' '
	grep -q "square &lt;&amp;&gt;" "$REF/run.html" && ! grep -q "square <&>" "$REF/run.html" &&
	test "$(grep -c "<script" "$REF/run.html")" = 1 &&
	! grep -Eq "<(link|img|iframe|object|embed)|src=|href=|url\\(|@import" "$REF/run.html" &&
	grep -q "Content-Security-Policy\" content=\"default-src .none.; style-src .unsafe-inline.\"" "$REF/run.html"
'

test_expect_success 'a run document, a report document and a model.json are sources too' '
	dlk report "$REF/blobs.dlk" -o json >doc.json && jq .runs[0] doc.json >run.json &&
	dlk report run.json -o json | jq -S .runs[0] >a && jq -S .runs[0] doc.json >b && cmp a b &&
	dlk report doc.json -o json | jq -S .runs[0] >a && cmp a b &&
	dlk report "$REF/model.json" -o json >m.json &&
	jq -e ".runs[0].source.kind == \"file\"" m.json &&
	jq -S .runs[0].metrics m.json >a && jq -S .runs[0].metrics doc.json >b && cmp a b
'

test_expect_success '--compare: both runs, the difference of their matrices, the classes that moved' '
	make_project q 4 && dlk train --local -q -f q/dlk.yaml --set training.optimizer.lr=0.002 >/dev/null 2>&1 &&
	dlk report "$REF/blobs.dlk" --compare q/blobs.dlk -o json >doc.json &&
	jq -e "(.runs | length) == 2 and .comparison.same_classes and .comparison.same_test_set" doc.json &&
	jq -e ".comparison.confusion_diff.unit == \"count\" and (.comparison.confusion_diff.values | length) == 3" doc.json &&
	a=$(jq -c ".runs[0].metrics.confusion_matrix" doc.json) && b=$(jq -c ".runs[1].metrics.confusion_matrix" doc.json) &&
	d=$(jq -c "[.comparison.confusion_diff.values[][]]" doc.json) &&
	test "$d" = "$(jq -nc --argjson a "$a" --argjson b "$b" "[range(3) as \$i | range(3) as \$j | \$a[\$i][\$j] - \$b[\$i][\$j]]")" &&
	jq -e ".comparison.test_accuracy_delta == (.runs[0].metrics.test_accuracy - .runs[1].metrics.test_accuracy)" doc.json &&
	jq -e "[.comparison.moved_most[].delta | fabs] | . == (sort | reverse)" doc.json &&
	dlk report "$REF/blobs.dlk" --compare q/blobs.dlk -o cmp.html 2>/dev/null &&
	grep -q "id=\"confusion-diff\"" cmp.html && grep -q "data-series=\"b-train-loss\" data-run=\"1\" data-points=\"4\"" cmp.html
'

test_expect_success 'a project kept in git: the bundle and the page name its commit, and uncommitted changes' '
	make_project g && git -C g init -q && git -C g add dlk.yaml &&
	git -C g -c user.name=t -c user.email=t@example.com commit -qm "first" && head=$(git -C g rev-parse HEAD) &&
	dlk train --local -q -f g/dlk.yaml >/dev/null 2>&1 &&
	tar -xOf g/blobs.dlk model.json | jq -e ".provenance.git_commit == \"$head\" and .provenance.git_dirty == false" &&
	echo "# changed" >>g/dlk.yaml && rm -rf g/.dlk && dlk train --local -q -f g/dlk.yaml >/dev/null 2>&1 &&
	tar -xOf g/blobs.dlk model.json | jq -e ".provenance.git_dirty == true" &&
	dlk report g/blobs.dlk -o - | grep -q "$head (with uncommitted changes)" &&
	dlk report "$REF/blobs.dlk" -o - | grep -q "<th scope=\"row\">git commit</th><td class=\"text\"><span class=\"same\">not recorded"
'

test_expect_failure_code 'a missing file is not found' 6 '
	dlk report nope.dlk 2>err; rc=$?; grep -q "cannot open .nope.dlk.: No such file" err; exit $rc
'

test_expect_failure_code 'a damaged bundle is named, with where it breaks' 3 '
	head -c 3000 "$REF/blobs.dlk" >cut.dlk && dlk report cut.dlk 2>err; rc=$?; cat err; grep -q "cut.dlk" err; exit $rc
'

test_expect_failure_code 'a run document with a bad field names it' 3 '
	jq ".metrics.confusion_matrix[1] = [1]" "$REF/model.json" >bad.json &&
	dlk report bad.json 2>err; rc=$?; cat err;
	grep -q "error: .bad.json.: metrics.confusion_matrix: every row must have 3 entries" err; exit $rc
'

test_expect_failure_code 'JSON that is no run is refused' 3 '
	echo "{\"kind\": \"Job\"}" >job.json && dlk report job.json 2>err; rc=$?; grep -q "not a dlk run document" err; exit $rc
'

test_expect_failure_code '-o wide is a usage error' 2 '
	dlk report "$REF/blobs.dlk" -o wide 2>err; rc=$?; grep -q "not a format of .dlk report." err; exit $rc
'

test_expect_failure_code 'train --report goes with a run that ends here or is waited for' 2 '
	dlk train -f "$REF/dlk.yaml" --report x.html 2>err; rc=$?; grep -q "report writes the page when the run ends" err &&
	test_exit_code 2 dlk train -f "$REF/dlk.yaml" --dry-run --report x.html 2>/dev/null; exit $rc
'

test_expect_success 'a resumed run: its page marks the resume, the history spans both parts' '
	make_project p 12 &&
	{ DLK_TEST_CHECKPOINT_DELAY_MS=20 "$DLK" train --local -q -f p/dlk.yaml >/dev/null 2>err & pid=$!; } &&
	wait_for_glob "p/.dlk/checkpoints/blobs/*/step-00000040" && kill -TERM $pid; wait $pid; test $? = 75 &&
	dlk train --local -q -f p/dlk.yaml --report p/run.html >/dev/null 2>err && cat err &&
	page_data p/run.html >data.json &&
	jq -e "[.runs[0].history.events[].event] == [\"start\", \"resume\"]" data.json &&
	jq -e ".runs[0].history.epochs | length == 12 and .[11].step == 384" data.json &&
	jq -e ".runs[0].history.step_loss.steps == 384" data.json &&
	test "$(grep -c "<g class=\"mark\"" p/run.html)" = 2 && grep -q "resumed at step" p/run.html
'

# ---- jobs in the cluster ----
jq -n --arg m "$(jq -c . "$FIX/run-a.json")" '{
  description: "A Job for a worker to publish on, one that ends after publishing its run, one that never did.",
  auth: { tokens: ["test-token"] },
  objects: [ { apiVersion: "batch/v1", kind: "Job", metadata: { name: "blobs", namespace: "default" },
    spec: { suspend: true, template: { spec: { restartPolicy: "Never", containers: [ { name: "worker", image: "dlk" } ] } } } } ],
  jobs: {
    pets: { timeline: [ { at: 0, phase: "Running" }, { at: 100, annotations: { "dlk.dev/metrics": $m } },
      { at: 300, phase: "Succeeded", exitCode: 0 } ] },
    silent: { timeline: [ { at: 0, phase: "Running" }, { at: 200, phase: "Succeeded", exitCode: 0 } ] } } }' \
	>"$TEST_TMP/scenario.json"
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"
PORT=${APISERVER_URL##*:}
SA=$TEST_TMP/sa
mkdir -p "$SA" && printf test-token >"$SA/token" && cp "$APISERVER_CERTS/ca.crt" "$SA/ca.crt" && printf default >"$SA/namespace"
in_pod() { env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" DLK_SERVICEACCOUNT_DIR="$SA" "$@"; }

# a worker writes its bundle to the checkpoint volume, else its working directory (in a pod the
# project file is a read-only volume)
test_expect_success 'a job'\''s report: what its rank 0 published is what its bundle holds' '
	make_project p && in_pod DLK_JOB_NAME=blobs "$DLK" train --worker -q -f p/dlk.yaml >/dev/null 2>err &&
	! grep -q warning err && tar -xOf blobs.dlk model.json >model.json &&
	dlk report blobs -o json >doc.json &&
	jq -e ".runs[0].source == {kind: \"job\", name: \"blobs\", namespace: \"default\", state: \"Suspended\", workers: 1, pod_restarts: 0}" doc.json &&
	for k in metrics history provenance classes training architecture; do
		jq -S ".runs[0].$k" doc.json >got && jq -S ".$k" model.json >want &&
		cmp got want || { echo "$k differs"; diff got want; exit 1; }
	done &&
	api /apis/batch/v1/namespaces/default/jobs/blobs | jq -r ".metadata.annotations[\"dlk.dev/metrics\"]" >ann.json &&
	jq -S .metrics ann.json >got && jq -S .runs[0].metrics doc.json >want && cmp got want &&
	dlk report blobs 2>/dev/null && grep -q "<h1>blobs</h1>" blobs.html && grep -q "job blobs" blobs.html
'

test_expect_success 'train --wait --report writes the page of the job once it ends' '
	dlk init -q proj >/dev/null &&
	dlk -f proj/dlk.yaml train --set name=pets --wait --report pets.html >out 2>err && cat err &&
	grep -qx "report: pets.html" err && page_data pets.html >data.json &&
	jq -e ".runs[0].source.state == \"Succeeded\" and .runs[0].source.name == \"pets\"" data.json &&
	jq -S ".runs[0].metrics" data.json >got && jq -S .metrics "$FIX/run-a.json" >want && cmp got want
'

test_expect_failure_code 'a job that published nothing has no report' 6 '
	dlk init -q proj >/dev/null &&
	dlk -f proj/dlk.yaml train --set name=silent --wait --report s.html >out 2>err; rc=$?; cat err;
	grep -q "job .silent. has published no metrics yet" err && test ! -e s.html && exit $rc
'

test_expect_failure_code 'no file and no job of that name' 6 '
	dlk report nosuchjob 2>err; rc=$?; cat err; grep -q "no file and no job named .nosuchjob." err; exit $rc
'

test_done
