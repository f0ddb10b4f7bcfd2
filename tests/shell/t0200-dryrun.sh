#!/bin/sh
# init -> dry-run: what a submit would send, for every example, with overrides, valid against the
# official Kubernetes schemas; --set and template overrides; errors name file, line and column.
. "$(dirname "$0")/../lib.sh"

schema_ready
validate() { node "$SCHEMA/validate.mjs" "$@"; }

test_expect_success 'every example renders objects that pass the Kubernetes schemas' '
	for ex in mlp cnn; do
		dlk init -q --example $ex $ex && (cd $ex && dlk train --dry-run -o json) >$ex.json &&
		validate $ex.json || exit 1
	done
'

test_expect_success 'a multi-GPU, queued, scheduled project with storage passes the schemas' '
	dlk init -q p && cd p &&
	dlk train --dry-run -o json --set resources.workers=4 --set resources.gpus=8 \
		--set resources.gpu_product=NVIDIA-H100-80GB-HBM3 --set resources.queue=team-a \
		--set storage.size=10Gi --set "schedule=0 3 * * *" >o.json &&
	validate o.json &&
	grep -q "\"kind\":.*\"CronJob\"" o.json && grep -q "nvidia.com/gpu" o.json &&
	grep -q "kueue.x-k8s.io/queue-name" o.json && grep -q "PersistentVolumeClaim" o.json
'

test_expect_success 'dry-run yaml is the same objects as dry-run json' '
	dlk init -q p && cd p && dlk train --dry-run >o.yaml && dlk train --dry-run -o json >o.json &&
	node -e "
		const fs = require(\"fs\");
		const { parseAllDocuments } = require(\"$SCHEMA/node_modules/yaml\");
		const docs = parseAllDocuments(fs.readFileSync(\"o.yaml\", \"utf8\")).map(d => d.toJSON());
		const list = JSON.parse(fs.readFileSync(\"o.json\", \"utf8\"));
		if (JSON.stringify(docs) !== JSON.stringify(list.items)) { console.error(\"differ\"); process.exit(1); }
	"
'

test_expect_success 'the Job runs the worker with the spec from the ConfigMap and N workers' '
	dlk init -q p && cd p && dlk train --dry-run --set resources.workers=3 >o.yaml &&
	grep -q "completionMode: Indexed" o.yaml && grep -q "completions: 3" o.yaml &&
	grep -q "parallelism: 3" o.yaml && grep -q -- "- \"--worker\"" o.yaml &&
	grep -q "name: \"p-spec\"\|name: p-spec" o.yaml && grep -q "clusterIP: None" o.yaml
'

test_expect_success '--set overrides reach the rendered spec' '
	dlk init -q p && cd p && dlk train --dry-run --set training.epochs=7 >o.yaml &&
	grep -q "epochs: 7" o.yaml
'

test_expect_success 'a typo in --set is an error naming the key and a suggestion' '
	dlk init -q p && cd p &&
	test_exit_code 3 dlk train --dry-run --set training.epoch=7 2>err &&
	grep -q "epoch" err && grep -q "did you mean .epochs." err
'

test_expect_success 'a typo in dlk.yaml names file, line and column' '
	dlk init -q p && cd p && sed -i "s/^  epochs: 5/  epoch: 5/" dlk.yaml &&
	test_exit_code 3 dlk train --dry-run 2>err &&
	grep -q "dlk.yaml:[0-9]*:[0-9]*: training.epoch" err && grep -q "did you mean .epochs." err
'

test_expect_success '-f names another project file' '
	dlk init -q --name other p && dlk train --dry-run -f p/dlk.yaml >o.yaml && grep -q "other-spec" o.yaml
'

test_expect_success 'a missing project file says what to do' '
	test_exit_code 3 dlk train --dry-run 2>err && grep -q "dlk.yaml" err
'

test_expect_success 'dlk-train (a symlink) behaves as dlk train' '
	dlk init -q p && cd p && ln -s "$DLK" dlk-train &&
	./dlk-train --dry-run -o json >a && dlk train --dry-run -o json >b && cmp a b
'

test_expect_success 'init --templates writes templates that override the built-ins' '
	dlk init -q --templates p && cd p && ls templates/*.yaml >/dev/null &&
	sed -i "s/restartPolicy: Never/restartPolicy: Never\n      # edited/" templates/job.yaml &&
	dlk train --dry-run >o.yaml && grep -q "restartPolicy: Never" o.yaml
'

test_expect_success 'an override template with a typo fails naming the template and line' '
	dlk init -q --templates p && cd p &&
	printf "{{#labels}}\nkind: x\n" >templates/service.yaml &&
	test_must_fail dlk train --dry-run 2>err && grep -q "service.yaml:[0-9]" err
'

test_expect_success 'an override for an unknown template name lists the valid names' '
	dlk init -q p && cd p && mkdir templates && echo "kind: x" >templates/jobs.yaml &&
	test_must_fail dlk train --dry-run 2>err && grep -q "jobs.yaml" err && grep -q "job.yaml" err
'

test_expect_success 'hostile values cannot change the rendered structure' '
	dlk init -q p && cd p &&
	dlk train --dry-run -o json --set "data.classes.0=yes: {{x}} *a &b" --set "labels.team=yes" >o.json &&
	validate o.json &&
	node -e "
		const l = JSON.parse(require(\"fs\").readFileSync(\"o.json\", \"utf8\"));
		if (l.items.length !== 7) throw new Error(\"object count \" + l.items.length);
		const cm = l.items.find(o => o.kind === \"ConfigMap\");
		if (!cm.data[\"dlk.yaml\"].includes(\"yes: {{x}} *a &b\")) throw new Error(\"class name lost\");
		if (cm.metadata.labels.team !== \"yes\") throw new Error(\"label typed wrongly\");
	"
'

test_expect_success 'a mode is required; two modes are refused' '
	dlk init -q p && cd p &&
	test_exit_code 2 dlk train --local --dry-run 2>err && grep -q "exclude each other" err
'

test_expect_success '-o json is indented with two spaces, as jq and kubectl print it' '
	dlk init -q p && cd p && dlk train --dry-run -o json >o.json &&
	! grep -q "$(printf "\t")" o.json &&
	python3 -c "import json, sys; t = open(sys.argv[1]).read(); sys.exit(json.dumps(json.loads(t), indent=2, ensure_ascii=False) + \"\n\" != t)" o.json &&
	dlk version -o json >v.json && ! grep -q "$(printf "\t")" v.json && grep -q "^  \"version\": " v.json
'

test_expect_success 'submitting says first what will not work in a cluster, and how to fix it' '
	dlk init -q p && cd p &&
	test_must_fail dlk train --kubeconfig "$TEST_TMP/no-such-config" 2>err &&
	grep -q "^warning: data.train.images: .file:///usr/share/datasets/fashion-mnist/.* is on this machine.s disk" err &&
	grep -q "^warning: image: .dlk:[^ ]*. names no registry" err &&
	grep -q "^warning: storage: none, so the checkpoints and the model bundle are written inside the pod" err &&
	test "$(sed -n 4p err | cut -c1-6)" = "error:" &&
	test_must_fail dlk train -q --kubeconfig "$TEST_TMP/no-such-config" 2>err && ! grep -q "^warning:" err &&
	test_must_fail dlk train --kubeconfig "$TEST_TMP/no-such-config" --set image=r.example.com/dlk:1 \
		--set storage.size=1Gi --set data.train.images=https://e.org/i.gz --set data.train.labels=pvc://d/l.gz \
		--set data.test.images=https://e.org/t.gz --set data.test.labels=https://e.org/u.gz 2>err &&
	! grep -q "^warning:" err
'

test_expect_success '--dry-run says the same cluster warnings a submit says, on stderr, and still prints the objects' '
	dlk init -q w && cd w &&
	dlk train --dry-run >out 2>err && cat err &&
	grep -q "^warning: storage: none, so the checkpoints and the model bundle are written inside the pod" err &&
	grep -q "^kind: Job" out &&
	dlk train -q --dry-run >out2 2>err2 && test ! -s err2 && cmp out out2
'

test_expect_success 'a model whose shapes cannot work fails --dry-run, before anything loads' '
	dlk init -q p && cd p &&
	sed "/^    - flatten\$/d" dlk.yaml >bad.yaml && ! grep -q flatten bad.yaml &&
	test_exit_code 3 dlk -f bad.yaml train --dry-run >out 2>err &&
	grep -q "bad.yaml:[0-9]*:[0-9]*: model.layers\[0\]: dense runs over each of the 28 rows of its 1x28x28 input (a sequence), so the model ends with a 1x28x10 output, not one value per class (add .flatten. before it)" err &&
	test ! -s out &&
	test_exit_code 3 dlk -f bad.yaml train --local 2>err2 && cmp err err2
'

test_done
