#!/bin/sh
# dlk impact: the runs that used a dataset, from the run history: two projects trained here on
# two datasets of a directory store, each dataset's runs exactly (newest first, with their
# bundles), a tag resolved through the store, -o json, a dataset no run used (exit 6), bad
# references (exit 2); then the cluster's history (the ConfigMap NAME-runs) through the test
# API server.
. "$(dirname "$0")/../lib.sh"

gen() {
	awk -v seed="$1" 'BEGIN { srand(seed); for (i = 0; i < 256; i++) { c = int(rand() * 3); l = "";
		for (j = 0; j < 8; j++) l = l sprintf("%.3f,", rand() + c * 0.7); print l c } }'
}
mkdir -p "$TEST_TMP/d1" "$TEST_TMP/d2"
gen 1 >"$TEST_TMP/d1/train.csv" && head -n 64 "$TEST_TMP/d1/train.csv" >"$TEST_TMP/d1/test.csv"
gen 2 >"$TEST_TMP/d2/train.csv" && head -n 64 "$TEST_TMP/d2/train.csv" >"$TEST_TMP/d2/test.csv"
STORE=$TEST_TMP/store
P=$TEST_TMP/p

# project FILE NAME DATASET: a project file in $P training NAME on DATASET of $STORE
project() {
	mkdir -p "$P" && cat >"$P/$1" <<EOT
name: $2
data:
  format: csv
  dataset: $3
  store: $STORE
  train: {source: train.csv}
  test: {source: test.csv}
model:
  input: [8]
  layers: [{dense: {units: 8}}, relu, {dense: {units: 3}}]
training: {epochs: 1, batch_size: 32, threads: 1}
EOT
}

test_expect_success 'setup: two datasets, three runs of two projects here' '
	dlk data push "$TEST_TMP/d1" --to "$STORE" --tag blobs@v1 -q >"$TEST_TMP/id1" &&
	dlk data push "$TEST_TMP/d2" --to "$STORE" --tag blobs@v2 -q >"$TEST_TMP/id2" &&
	project a.yaml alpha blobs@v1 && project b.yaml beta blobs@v2 &&
	dlk train --local -f "$P/a.yaml" -q >/dev/null 2>&1 &&
	dlk train --local -f "$P/b.yaml" -q >/dev/null 2>&1 &&
	dlk train --local -f "$P/a.yaml" -q --set training.epochs=2 >/dev/null 2>&1 &&
	dlk status alpha --history --local -f "$P/a.yaml" -o json | jq -r ".runs[].run.id" >"$TEST_TMP/alpha.ids" &&
	dlk status beta --history --local -f "$P/b.yaml" -o json | jq -r ".runs[].run.id" >"$TEST_TMP/beta.ids" &&
	test "$(wc -l <"$TEST_TMP/alpha.ids")" = 2 && test "$(wc -l <"$TEST_TMP/beta.ids")" = 1
'

test_expect_success 'impact by tag lists exactly the runs of that dataset, newest first' '
	dlk impact blobs@v1 --local -f "$P/a.yaml" >out &&
	head -n 1 out | grep -q "^RUN .*PROJECT .*OUTCOME .*STARTED (UTC) .*ACCURACY .*TRIGGER .*BUNDLE .*PATH\$" &&
	test "$(wc -l <out)" = 3 &&
	sed -n 2p out | grep -q "^$(head -n 1 "$TEST_TMP/alpha.ids" | cut -c1-8) .*alpha .*succeeded .*manual .*sha256:[0-9a-f]\{12\} " &&
	sed -n 3p out | grep -q "^$(sed -n 2p "$TEST_TMP/alpha.ids" | cut -c1-8) .*alpha " &&
	! grep -q beta out &&
	dlk impact blobs@v2 --local -f "$P/b.yaml" >out &&
	test "$(wc -l <out)" = 2 && grep -q "^$(cut -c1-8 "$TEST_TMP/beta.ids") .*beta .*succeeded" out && ! grep -q alpha out
'

test_expect_success '--local reads every project trained here: the directories below this one too' '
	mkdir -p w && cp -r "$P" w/p && cp -r "$P" w/q && rm -rf w/q/.dlk/runs/beta && mkdir w/empty &&
	(cd w && dlk impact "$(cat "$TEST_TMP/id1")" --local -o json) >j &&
	jq -e "[.runs[].id] | length == 4" j &&
	test "$(jq -r ".runs[].id" j | sort -u | wc -l)" = 2 &&
	(cd w && dlk impact "$(cat "$TEST_TMP/id2")" --local -o json) >j &&
	jq -e "[.runs[].id] == [\"$(cat "$TEST_TMP/beta.ids")\"]" j &&
	(cd w/p && dlk impact "$(cat "$TEST_TMP/id1")" --local -f a.yaml -o json) >j &&
	jq -e "[.runs[].project] == [\"alpha\", \"alpha\"]" j
'

test_expect_success 'the id, a prefix of it and the tag give the same runs; json parses' '
	dlk impact "$(cat "$TEST_TMP/id1")" --local -f "$P/a.yaml" -o json >j1 &&
	dlk impact "$(cut -c1-15 "$TEST_TMP/id1")" --local -f "$P/a.yaml" -o json >j2 &&
	dlk impact blobs@v1 --local -f "$P/a.yaml" -o json >j3 &&
	cmp j1 j2 && cmp j1 j3 &&
	jq -e ".dataset == \"$(cat "$TEST_TMP/id1")\" and .store == \"local\" and (.runs | length) == 2 and
		([.runs[].id] == [$(sed "s/.*/\"&\"/" "$TEST_TMP/alpha.ids" | paste -sd,)]) and
		all(.runs[]; .project == \"alpha\" and .tag == \"blobs@v1\" and (.bundle.sha256 | length) == 64)" j1 >/dev/null &&
	bundle=$(jq -r ".runs[0].bundle.sha256" j1) &&
	test "$bundle" = "$(dlk status alpha --local --history -f "$P/a.yaml" -o json | jq -r ".runs[0].run.bundle.sha256")" &&
	dlk impact blobs@v2 --local -f "$P/a.yaml" -o yaml | grep -q "project: beta" &&
	dlk impact blobs@v2 --local -f "$P/a.yaml" -o wide | grep -q "blobs@v2 .*sha256:[0-9a-f]\{64\} "
'

test_expect_success 'a data file'"'"'s sha256 finds the runs that read it' '
	h=$(sha256sum <"$TEST_TMP/d2/train.csv" | cut -c1-64) &&
	dlk impact "sha256:$h" --local -f "$P/a.yaml" -o json | jq -e "[.runs[].project] == [\"beta\"]" >/dev/null
'

test_expect_success 'a dataset no run used is "not found" (6); bad references are usage errors (2)' '
	dlk data push "$TEST_TMP/d1/test.csv" --to "$STORE" --tag lonely@v1 -q >id3 &&
	test_exit_code 6 dlk impact lonely@v1 --local -f "$P/a.yaml" >out 2>err && test ! -s out &&
	grep -q "no run in the local histories here (.dlk/runs beside .*a.yaml. and in the directories below this one) used dataset $(cat id3)" err &&
	test_exit_code 6 dlk impact blobs@v9 --local -f "$P/a.yaml" 2>err && grep -q "no tag .blobs@v9. in" err &&
	test_exit_code 2 dlk impact "bad name" --local -f "$P/a.yaml" 2>err && grep -q "names no dataset" err &&
	test_exit_code 2 dlk impact --local 2>err &&
	test_exit_code 2 dlk impact a b --local 2>err
'

test_expect_success 'status --history --by dataset sums the usage of the runs per dataset' '
	project g.yaml gamma blobs@v1 &&
	sed "/^  dataset:/d; /^  store:/d; s|source: train.csv|source: $TEST_TMP/d1/train.csv|; s|source: test.csv|source: $TEST_TMP/d1/test.csv|" \
		"$P/g.yaml" >"$P/g2.yaml" &&
	dlk train --local -f "$P/g.yaml" -q >/dev/null 2>&1 &&
	dlk train --local -f "$P/g.yaml" -q --set data.dataset=blobs@v2 >/dev/null 2>&1 &&
	dlk train --local -f "$P/g.yaml" -q --set data.dataset=blobs@v2 >/dev/null 2>&1 &&
	dlk train --local -f "$P/g2.yaml" -q >/dev/null 2>&1 &&
	dlk status gamma --history --local -f "$P/g.yaml" -o json >all.json &&
	DLK_PRICE_CPU_HOUR=3600 dlk status gamma --history --local -f "$P/g.yaml" --by dataset -o json >by.json &&
	jq . by.json &&
	id1=$(cat "$TEST_TMP/id1") id2=$(cat "$TEST_TMP/id2") &&
	id1=${id1#sha256:} id2=${id2#sha256:} &&
	jq -e --arg a "sha256:$id1" --arg b "sha256:$id2" ".by == \"dataset\" and (.groups | length == 3) and
		.groups[0].usage.runs == 4 - .groups[1].usage.runs - .groups[2].usage.runs and
		([.groups[] | select(.dataset == \$a) | .usage.runs] == [1]) and
		([.groups[] | select(.dataset == \$b) | .usage.runs] == [2]) and
		([.groups[] | select(.dataset | startswith(\"files:\")) | .usage.runs] == [1]) and
		([.groups[] | select(.dataset == \$b) | .name] == [\"blobs@v2\"])" by.json &&
	# each group is the sum of its runs (CPU seconds, the cost at 3600 per CPU-hour), the largest first
	for g in $(jq -r ".groups[].dataset" by.json); do
		want=$(jq --arg g "$g" "[.runs[] | select(((.provenance.dataset.id // \"\") | sub(\"^sha256:\"; \"\") | \"sha256:\" + .) == \$g
			or (\$g | startswith(\"files:\")) and (.provenance.dataset == null)) | .run.usage.cpu_seconds] | add" all.json) &&
		jq -e --arg g "$g" --argjson w "$want" ".groups[] | select(.dataset == \$g) |
			((.usage.cpu_seconds - \$w) | fabs < 1e-6) and ((.usage.cost - \$w) | fabs < 1e-6)" by.json >/dev/null || return 1
	done &&
	jq -e "[.groups[].usage.cpu_seconds] as \$c | \$c == (\$c | sort | reverse)" by.json &&
	DLK_PRICE_CPU_HOUR=3600 DLK_PRICE_CURRENCY=EUR dlk status gamma --history --local -f "$P/g.yaml" --by dataset >t &&
	cat t &&
	head -n 1 t | grep -q "^DATASET  *RUNS  *WALL  *GPU TIME  *CPU TIME  *RESERVED  *COST\$" &&
	grep -q "^blobs@v2  *2  *[0-9.]* s  *0.0 s  *[0-9.]* s  *-  *[0-9.]* EUR\$" t &&
	grep -q "^files [0-9a-f]\{12\}  *1 " t && test "$(wc -l <t)" = 4 &&
	# across projects: dlk impact sums the runs of every project on one dataset (beta 1, gamma 2)
	DLK_PRICE_CPU_HOUR=3600 dlk impact blobs@v2 --local -f "$P/g.yaml" -o json >imp.json &&
	want=$(jq "[.runs[] | select(.provenance.dataset.tag == \"blobs@v2\") | .run.usage.cpu_seconds] | add" all.json) &&
	beta=$(dlk status beta --history --local -f "$P/b.yaml" -o json | jq ".usage.cpu_seconds") &&
	jq -e --argjson w "$want" --argjson b "$beta" ".usage.runs == 3 and ((.usage.cpu_seconds - \$w - \$b) | fabs < 1e-6)
		and ((.usage.cost - .usage.cpu_seconds) | fabs < 1e-6)" imp.json &&
	DLK_PRICE_CPU_HOUR=3600 dlk impact blobs@v2 --local -f "$P/g.yaml" >out 2>note &&
	grep -q "^total of 3 runs: GPU time 0.0 s; CPU time [0-9.]* s used; cost [0-9.]*\$" note &&
	test_exit_code 2 dlk status gamma --history --local -f "$P/g.yaml" --by project 2>err &&
	grep -q "not a grouping" err &&
	test_exit_code 2 dlk status gamma --local -f "$P/g.yaml" --by dataset 2>err &&
	grep -q "goes with --history" err
'

# the cluster's history: the records of project alpha as rank 0 would have written them
. "$TEST_ROOT/tests/apiserver/lib.sh"
{
	printf '{"auth": {"tokens": ["test-token"]}, "objects": [{"apiVersion": "v1", "kind": "ConfigMap",\n'
	printf '"metadata": {"name": "alpha-runs", "namespace": "default", "labels": {"dlk.dev/runs": "alpha"}}, "data": '
	for f in "$P"/.dlk/runs/alpha/*.json; do
		jq -c --arg k "$(basename "$f")" '{($k): (.run.where = "cluster" | .run.job = {"name": "alpha",
			"namespace": "default", "uid": .run.id} | tojson)}' "$f"
	done | jq -s add
	printf '}]}\n'
} >"$TEST_TMP/scenario.json"
apiserver_or_fail "$TEST_TMP/scenario.json"
write_kubeconfig "$KUBECONFIG"

test_expect_success 'the cluster'"'"'s history of the project -f names' '
	dlk impact "$(cat "$TEST_TMP/id1")" -f "$P/a.yaml" -o json >c.json &&
	jq -e ".store == \"cluster\" and [.runs[].id] == [$(sed "s/.*/\"&\"/" "$TEST_TMP/alpha.ids" | paste -sd,)] and
		all(.runs[]; .job == \"alpha\" and .where == \"cluster\")" c.json >/dev/null &&
	dlk impact blobs@v1 -f "$P/a.yaml" >out && test "$(wc -l <out)" = 3 &&
	! grep -q "p/a\|\.dlk\$" out &&
	test_exit_code 6 dlk impact blobs@v2 -f "$P/a.yaml" 2>err &&
	grep -q "no run in ConfigMap .alpha-runs. of namespace .default. used dataset $(cat "$TEST_TMP/id2")" err &&
	grep -q "add --local" err
'

test_done
