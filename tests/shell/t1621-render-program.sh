#!/bin/sh
# `dlk train` of a project with program: renders the program's pods (docs/program-cluster.md):
# the objects pass the official Kubernetes schemas, the code ships as a ConfigMap named by the
# digest of its files (the same content address a dataset gets, recomputed here by hand), a
# local run's outputs beside dlk.yaml do not ship, and a tree too big for a ConfigMap is refused.
. "$(dirname "$0")/../lib.sh"

RENDER_TEST="$TEST_ROOT/${BUILD:-build}/tests/unit/test_render_program"
JSON="$TEST_TMP/json"

schema_ready
test_expect_success 'schema validator dependencies are installed' '
	test -d "$SCHEMA/node_modules/kubernetes-models" && test -d "$SCHEMA/node_modules/yaml"
'

test_expect_success 'a program with its code, one in its image, a server of the user'"'"'s: every object is valid' '
	test -x "$RENDER_TEST" || { echo "build the unit tests first (make test-unit)"; exit 1; } &&
	mkdir -p "$JSON" &&
	{ DLK_RENDER_JSON_DIR="$JSON" "$RENDER_TEST" >unit.log 2>&1 || { grep -a "^not ok" unit.log; exit 1; }; } &&
	node "$SCHEMA/validate.mjs" "$JSON/program-torch.json" >out && grep_q "ok: 8 objects" out &&
	node "$SCHEMA/validate.mjs" "$JSON/program-image.json" >out && grep_q "ok: 7 objects" out &&
	node "$SCHEMA/validate.mjs" "$JSON/serving-program.json" >out && cat out && grep_q "ok: [0-9]* objects" out
'

# the manifest's id by hand: sha256 of "dlk-dataset 1\n" and "SHA256 SIZE PATH\n" sorted by path
code_digest() {
	( cd "$1" && find . -type f ! -path "./.dlk/*" ! -path "*/__pycache__/*" ! -path "./.git/*" | sed "s|^\./||" |
		LC_ALL=C sort | while read -r f; do
			printf "%s %s %s\n" "$(sha256sum "$f" | cut -c1-64)" "$(wc -c <"$f" | tr -d " ")" "$f"
		done ) | { printf "dlk-dataset 1\n"; cat; } | sha256sum | cut -c1-64
}

test_expect_success 'dlk train --dry-run of the PyTorch example: its code in a ConfigMap named by the digest' '
	dlk init --example pytorch fm >/dev/null &&
	cd fm && want=$(code_digest .) &&
	dlk train --dry-run -o json >../objs.json 2>../err &&
	jq ".items[] | select(.kind == \"ConfigMap\" and (.metadata.name | startswith(\"fm-code-\")))" ../objs.json >../cm.json &&
	test "$(jq -r ".metadata.annotations[\"dlk.dev/code-sha256\"]" ../cm.json)" = "$want" &&
	test "$(jq -r .metadata.name ../cm.json)" = "fm-code-$(echo "$want" | cut -c1-12)" &&
	jq -j ".data[\"1-train.py\"]" ../cm.json >../shipped.py && cmp ../shipped.py train.py &&
	jq ".items[] | select(.kind == \"Job\")" ../objs.json >../job.json &&
	test "$(jq -r ".spec.template.spec.containers[0].workingDir" ../job.json)" = /workspace &&
	test "$(jq -c ".spec.template.spec.containers[0].command" ../job.json)" = "[\"dlk\",\"train\",\"--worker\",\"-f\",\"/etc/dlk/dlk.yaml\"]" &&
	test "$(jq -r ".spec.template.spec.containers[0].env[] | select(.name == \"DLK_CODE_SHA256\") | .value" ../job.json)" = "$want" &&
	test "$(jq -c ".spec.template.spec.volumes[1].configMap.items" ../job.json)" = "[{\"key\":\"0-dlk.yaml\",\"path\":\"dlk.yaml\",\"mode\":420},{\"key\":\"1-train.py\",\"path\":\"train.py\",\"mode\":420}]" &&
	test "$(jq -c "[.spec.podFailurePolicy.rules[] | .action]" ../job.json)" = "[\"Ignore\",\"FailJob\"]" &&
	test "$(jq -c ".spec.podFailurePolicy.rules[1].onExitCodes.values" ../job.json)" = "[2,126,127]"
'

test_expect_success 'a local run'"'"'s outputs beside dlk.yaml do not ship; a changed file is a new ConfigMap' '
	dlk init --example pytorch fm >/dev/null && cd fm &&
	dlk train --dry-run -o json 2>/dev/null | jq -r ".items[].metadata.name" | grep "^fm-code-" >../before &&
	mkdir -p .dlk/checkpoints/fm __pycache__ && head -c 2000000 /dev/zero >.dlk/checkpoints/fm/ckpt.pt &&
	echo x >__pycache__/train.cpython-312.pyc &&
	dlk train --dry-run -o json 2>/dev/null | jq -r ".items[].metadata.name" | grep "^fm-code-" >../after &&
	cmp ../before ../after &&
	echo "# changed" >>train.py &&
	dlk train --dry-run -o json 2>/dev/null | jq -r ".items[].metadata.name" | grep "^fm-code-" >../changed &&
	! cmp -s ../before ../changed
'

test_expect_success 'a code tree over the ConfigMap limit is refused, naming the limit and what to do' '
	dlk init --example pytorch fm >/dev/null && cd fm &&
	head -c 900000 /dev/zero | tr "\0" a >weights.txt &&
	test_exit_code 3 dlk train --dry-run 2>err >out &&
	grep_q "program.code '"'"'.'"'"' holds 9" err &&
	grep_q "more than the 768 KiB dlk ships in a ConfigMap" err &&
	grep_q "bake the code into program.image" err &&
	test ! -s out
'

test_done
