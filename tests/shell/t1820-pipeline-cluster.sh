#!/bin/sh
# dlk pipeline run (no --local) on the real test control plane, the store in S3 (the Versity S3
# Gateway as a pod behind a Service, as t1540): the driver Job creates the stage Jobs through the
# API; the first run runs all three stages, a second reuses all three; a parameter changed re-runs
# the stages below it; the driver's ServiceAccount is refused by the API's RBAC on another
# pipeline's Job; a driver killed mid-run is restarted by its Job and follows the stage Job it
# left running, so no stage runs twice; status and logs read the cluster; with schedule:, each
# run its CronJob starts publishes its stages, and status shows them newest first; once a stage's
# pods are gone, logs reads the archive its worker left on the pipeline's log_claim.
# Then the Fashion-MNIST pipeline (the example's prepare.py on a raw subset, dlk training, dlk
# predict) on the same cluster and store: all run, all reused, one raw file changed re-runs all
# three, a training parameter re-runs training and scoring; lineage and impact follow the stages.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/s3/lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"
schema_ready

start_s3 || { echo "Bail out! cannot start the S3 server"; exit 1; }
cluster_up
trap 'stop_s3; cluster_down; test_cleanup' EXIT
S3=s3://data/tp

s3_in_cluster
# the claim the tp pipeline's stage pods archive their logs on (log_claim:), on a hostPath volume
PV=$TEST_TMP/pv
hostpath_pv tp-logs "$PV" tp-logs
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: tp-logs}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
YAML

# three program stages: upper-case the raw text, number its lines (napping $DLK_PARAM_NAP
# seconds first), count them
P=$TEST_TMP/p
mkdir -p "$P" "$TEST_TMP/raw"
printf 'one\ntwo\nthree\n' >"$TEST_TMP/raw/f.txt"
cat >"$P/dlk-pipeline.yaml" <<EOT
name: tp
store: $S3
store_secret: s3-creds
log_claim: tp-logs
stages:
  upper:
    inputs: {raw: tp-raw@v1}
    run: [sh, upper.sh]
  number:
    inputs: {text: upper}
    run: [sh, number.sh]
    params: {nap: 0}
    resources: {cpu: 500m, memory: 256Mi}
  count:
    inputs: {text: number}
    run: [sh, count.sh]
EOT
echo 'tr a-z A-Z <"$DLK_INPUT_RAW/f.txt" >"$DLK_OUTPUT/f.txt"' >"$P/upper.sh"
echo 'echo "numbering, nap $DLK_PARAM_NAP"; sleep "$DLK_PARAM_NAP"; nl -ba "$DLK_INPUT_TEXT/f.txt" >"$DLK_OUTPUT/f.txt"' >"$P/number.sh"
echo 'wc -l <"$DLK_INPUT_TEXT/f.txt" >"$DLK_OUTPUT/count.txt"' >"$P/count.sh"

# the stages the driver's last run ran and reused, from its status on its Job
states() { dlk pipeline status tp -o json | jq -r "[.stages[] | select(.state == \"$1\") | .name] | sort | join(\",\")"; }
diag() { kubectl get jobs,pods; for j in $(kubectl get pods -o name); do echo "== $j"; kubectl logs "$j" | tail -n 8; done; }
uid() { kubectl get job "$1" -o jsonpath={.metadata.uid}; }

test_expect_success 'dry run: the objects pass the schema; the driver may create Jobs, get and delete only its stages'"'"' Jobs' '
	cd "$P" &&
	dlk data push -q "$TEST_TMP/raw" --to $S3 --tag tp-raw@v1 >/dev/null &&
	dlk pipeline run --dry-run -o json >objs.json 2>dry.err && cat dry.err &&
	node "$TEST_ROOT/tests/schema/validate.mjs" objs.json &&
	jq -e "[.items[] | select(.kind == \"Role\" and .metadata.name == \"tp-pipeline-driver\") | .rules[] |
		select(.resources == [\"jobs\"])] == [{apiGroups: [\"batch\"], resources: [\"jobs\"], verbs: [\"create\"]},
		{apiGroups: [\"batch\"], resources: [\"jobs\"], verbs: [\"get\", \"delete\"], resourceNames: [\"tp-upper\", \"tp-number\", \"tp-count\"]}]" objs.json &&
	jq -e ".items[-1].kind == \"Job\" and .items[-1].metadata.name == \"tp-pipeline\"" objs.json &&
	jq -r ".items[] | select(.metadata.name == \"tp-pipeline-jobs\") | .data[\"jobs.json\"]" objs.json >jobs.json &&
	jq -e ".number.spec.template.spec.containers[0].resources.requests.cpu == \"500m\" and
		.number.metadata.labels[\"dlk.dev/pipeline\"] == \"tp\"" jobs.json
'

test_expect_success 'the first run runs the three stages as Jobs, a second reuses all three' '
	cd "$P" &&
	kubectl wait --for=condition=Ready pod/s3 --timeout=60s >/dev/null &&
	dlk pipeline run --wait 2>run1.err; rc=$?; cat run1.err
	test $rc = 0 || { for j in $(kubectl get jobs -o name); do echo "== $j"; kubectl logs "$j" --all-containers | tail -n 20; done; false; } &&
	test "$(states succeeded)" = "count,number,upper" &&
	dlk data get tp-count@latest --from $S3 "$TEST_TMP/out1" -q && test "$(tr -d " " <"$TEST_TMP/out1/count.txt")" = 3 &&
	u1=$(uid tp-upper) && test -n "$u1" &&
	dlk pipeline run --wait 2>run2.err; rc=$?; cat run2.err; test $rc = 0 &&
	test "$(states reused)" = "count,number,upper" && test -z "$(states succeeded)" &&
	test "$(uid tp-upper)" = "$u1"
'

test_expect_success 'status and logs read the cluster' '
	cd "$P" &&
	dlk pipeline status tp >st.out && cat st.out &&
	grep -q "^tp-number  *succeeded  *[0-9a-f]\{12\}$" st.out &&
	dlk pipeline logs tp number >logs.out && cat logs.out &&
	grep -q "numbering, nap 0" logs.out
'

test_expect_success 'the driver'"'"'s ServiceAccount: its own stage Job yes, another pipeline'"'"'s Job refused by RBAC' '
	kubectl create job other --image=busybox -- sh -c true >/dev/null &&
	sa=$(kubectl get job tp-pipeline -o jsonpath={.spec.template.spec.serviceAccountName}) && test -n "$sa" &&
	token_kubeconfig "$TEST_TMP/driver.kubeconfig" "$(kubectl create token "$sa")" &&
	kubectl --kubeconfig "$TEST_TMP/driver.kubeconfig" get job tp-upper -o name &&
	! kubectl --kubeconfig "$TEST_TMP/driver.kubeconfig" delete job other 2>del.err && cat del.err &&
	grep -q "Forbidden\|forbidden" del.err &&
	! kubectl --kubeconfig "$TEST_TMP/driver.kubeconfig" get job other 2>get.err && grep -q "forbidden" get.err &&
	kubectl get job other -o name
'

test_expect_success 'a driver killed mid-stage is restarted by its Job, follows the stage Job it left and runs nothing twice' '
	cd "$P" &&
	sed "s/nap: 0/nap: 15/" dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	u1=$(uid tp-upper) && n0=$(uid tp-number) &&
	dlk pipeline run 2>run3.err && cat run3.err &&
	wait_until 60 sh -c "test \"\$(kubectl get job tp-number -o jsonpath={.metadata.uid} 2>/dev/null)\" != \"$n0\" &&
		test -n \"\$(kubectl get job tp-number -o jsonpath={.metadata.uid} 2>/dev/null)\"" &&
	n1=$(uid tp-number) &&
	driver=$(pod_of tp-pipeline 0) && kubectl delete pod "$driver" --wait=false >/dev/null &&
	wait_until 90 sh -c "kubectl get job tp-pipeline -o jsonpath={.status.conditions[*].type} | grep -q \"Complete\|Failed\"" &&
	kubectl get job tp-pipeline -o jsonpath={.status.conditions[*].type} | grep -q Complete &&
	test "$(pod_of tp-pipeline 0)" != "$driver" &&
	test "$(uid tp-number)" = "$n1" && test "$(uid tp-upper)" = "$u1" &&
	test "$(kubectl get pods -l batch.kubernetes.io/job-name=tp-number -o name | wc -l)" = 1 &&
	test "$(states reused)" = "upper" && test "$(states succeeded)" = "count,number" &&
	kubectl logs "$(pod_of tp-pipeline 0)" | grep "following it" ||
	{ kubectl get jobs,pods; for j in $(kubectl get pods -o name); do echo "== $j"; kubectl logs "$j" | tail -n 8; done; false; }
'

test_expect_success 'schedule: each run its CronJob starts publishes its stages; status shows the runs newest first' '
	cd "$P" &&
	sed "s/nap: 15/nap: 1/" dlk-pipeline.yaml >x && printf "schedule: \"0 0 1 1 *\"\n" >>x && mv x dlk-pipeline.yaml &&
	dlk pipeline run 2>cron.err && cat cron.err && grep_q "the CronJob .tp-pipeline." cron.err &&
	test "$(kubectl get cronjob tp-pipeline -o jsonpath="{.spec.jobTemplate.metadata.labels.dlk\.dev/pipeline}")" = tp &&
	kubectl create job --from=cronjob/tp-pipeline tp-cron-1 >/dev/null &&
	kubectl wait --for=condition=complete job/tp-cron-1 --timeout=90s >/dev/null &&
	sleep 1 && kubectl create job --from=cronjob/tp-pipeline tp-cron-2 >/dev/null &&
	kubectl wait --for=condition=complete job/tp-cron-2 --timeout=90s >/dev/null &&
	dlk pipeline status tp -o json >cst.json &&
	test "$(jq -r "[.runs[].job] | join(\",\")" cst.json)" = "tp-cron-2,tp-cron-1,tp-pipeline" &&
	test "$(jq -r "[.runs[0].status.stages[].state] | unique | join(\",\")" cst.json)" = reused &&
	test "$(jq -r ".runs[1].status.stages[] | .name + \"=\" + .state" cst.json | sort | paste -sd" " -)" = \
		"count=succeeded number=succeeded upper=reused" &&
	test "$(jq -r "[.stages[].state] | unique | join(\",\")" cst.json)" = reused &&
	dlk pipeline status tp >cst.out && cat cst.out &&
	test "$(sed -n "s/^run of job \([a-z0-9-]*\): .*/\1/p" cst.out | paste -sd" " -)" = "tp-cron-2 tp-cron-1 tp-pipeline" &&
	grep_q "^number  *program  *succeeded " cst.out ||
	{ diag; false; }
'

test_expect_success 'logs: once a stage'"'"'s pods are gone, its newest run'"'"'s log from the archive on log_claim' '
	cd "$P" &&
	kubectl delete job tp-number --wait=true >/dev/null &&
	wait_until 30 sh -c "test -z \"\$(kubectl get pods -l batch.kubernetes.io/job-name=tp-number -o name)\"" &&
	dlk pipeline logs tp number --from "$PV/dlk-logs" >alogs.out 2>alogs.err && cat alogs.out alogs.err &&
	grep_q "^numbering, nap 1\$" alogs.out && ! grep -q "nap 15" alogs.out &&
	grep_q "its pods are gone" alogs.err &&
	kubectl delete job tp-count --wait=true >/dev/null &&
	wait_until 30 sh -c "test -z \"\$(kubectl get pods -l batch.kubernetes.io/job-name=tp-count -o name)\"" &&
	! dlk pipeline logs tp count --from "$TEST_TMP/nowhere" 2>nolog.err && cat nolog.err &&
	grep_q "^error: stage .count. has no pod, and its archived log" nolog.err
'

# Fashion-MNIST, small: 1000 training and 300 test samples of the raw files ("raw"), and the
# same with the first training image inverted ("raw2": one file changed)
FM=/usr/share/datasets/fashion-mnist
fm_ran() { dlk pipeline status fm -o json | jq -r "[.stages[] | select(.state == \"$1\") | .name] | sort | join(\",\")"; }

test_expect_success 'Fashion-MNIST: prepare.py, dlk train, dlk predict as stage Jobs; all run, then all reused' '
	test -f "$FM/t10k-images-idx3-ubyte.gz" &&
	cd "$TEST_TMP" && dlk init -q --example pipeline fm && cd fm && rm gate.py &&
	python3 - "$FM" "$TEST_TMP/fmraw" "$TEST_TMP/fmraw2" <<\EOF_PY &&
import gzip, os, struct, sys
src, dst, dst2 = sys.argv[1:4]
for d in (dst, dst2):
    os.makedirs(d)
for name, n in (("train-images-idx3-ubyte.gz", 1000), ("train-labels-idx1-ubyte.gz", 1000),
                ("t10k-images-idx3-ubyte.gz", 300), ("t10k-labels-idx1-ubyte.gz", 300)):
    with gzip.open(os.path.join(src, name)) as f:
        magic = struct.unpack(">I", f.read(4))[0]
        dims = struct.unpack(">" + "I" * (magic & 0xFF), f.read(4 * (magic & 0xFF)))
        item = 1
        for x in dims[1:]:
            item *= x
        body = f.read(n * item)
    head = struct.pack(">I", magic) + struct.pack(">" + "I" * len(dims), n, *dims[1:])
    changed = bytes(255 - b for b in body[:item]) + body[item:] if name.startswith("train-images") else body
    for d, b in ((dst, body), (dst2, changed)):
        with gzip.GzipFile(os.path.join(d, name), "wb", mtime=0) as out:
            out.write(head + b)
EOF_PY
	cat >dlk-pipeline.yaml <<EOT &&
name: fm
store: $S3/fm
store_secret: s3-creds
stages:
  prepare:
    inputs: {raw: fm-raw@v1}
    run: [python3, prepare.py]
    params: {train_samples: 600, test_samples: 200}
    output: fm-small
  train:
    inputs: {data: prepare}
    train: dlk.yaml
    params: {training.epochs: 1, training.batch_size: 64}
  predict:
    inputs: {model: train, data: prepare}
    predict: {}
    output: fm-preds
EOT
	dlk data push -q "$TEST_TMP/fmraw" --to $S3/fm --tag fm-raw@v1 >/dev/null &&
	dlk data push -q "$TEST_TMP/fmraw2" --to $S3/fm --tag fm-raw@v2 >/dev/null &&
	dlk pipeline run --wait 2>fm1.err; rc=$?; cat fm1.err
	test $rc = 0 || { diag; false; } &&
	test "$(fm_ran succeeded)" = "predict,prepare,train" &&
	dlk data get -q fm-preds@latest --from $S3/fm "$TEST_TMP/preds1" &&
	test "$(($(wc -l <"$TEST_TMP/preds1/predictions.csv") - 1))" = 200 &&
	t1=$(uid fm-train) &&
	dlk pipeline run --wait 2>fm2.err; rc=$?; cat fm2.err; test $rc = 0 &&
	test "$(fm_ran reused)" = "predict,prepare,train" && test -z "$(fm_ran succeeded)" &&
	test "$(uid fm-train)" = "$t1"
'

test_expect_success 'Fashion-MNIST: one raw file changed re-runs all three; a training parameter re-runs training and scoring' '
	cd "$TEST_TMP/fm" &&
	sed "s/fm-raw@v1/fm-raw@v2/" dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	dlk pipeline run --wait 2>fm3.err; rc=$?; cat fm3.err; test $rc = 0 &&
	test "$(fm_ran succeeded)" = "predict,prepare,train" &&
	sed "s/training.batch_size: 64/training.batch_size: 32/" dlk-pipeline.yaml >x && mv x dlk-pipeline.yaml &&
	dlk pipeline run --wait 2>fm4.err; rc=$?; cat fm4.err; test $rc = 0 &&
	test "$(fm_ran succeeded)" = "predict,train" && test "$(fm_ran reused)" = prepare
'

test_expect_success 'Fashion-MNIST: lineage of the predictions names every stage and the raw dataset; impact lists the outputs' '
	cd "$TEST_TMP/fm" &&
	dlk lineage fm-preds@latest --from $S3/fm >lin && cat lin &&
	grep_q "^made by  *dlk predict" lin &&
	grep_q "^model data  *sha256:[0-9a-f]*, made by dlk pipeline fm, stage train, run " lin &&
	grep_q "^made by  *dlk pipeline fm, stage prepare" lin &&
	grep_q "(fm-raw@v2)\$" lin &&
	preds=$(dlk data show fm-preds@latest --from $S3/fm -o json | jq -r .id) && test -n "$preds" &&
	dlk impact fm-raw@v2 --downstream --from $S3/fm -o json >imp2.json &&
	test "$(jq -r "[.downstream[].made_by] | unique | join(\",\")" imp2.json)" = \
		"dlk pipeline fm, stage prepare,dlk pipeline fm, stage train,dlk predict" &&
	jq -e --arg p "$preds" "[.downstream[] | select(.id == \$p and .tags == [\"fm-preds@latest\"])] | length == 1" imp2.json &&
	dlk impact fm-raw@v1 --downstream --from $S3/fm -o json >imp1.json &&
	test "$(jq "[.downstream[] | select(.made_by == \"dlk predict\")] | length" imp1.json)" = 1 &&
	jq -e --arg p "$preds" "[.downstream[] | select(.id == \$p)] | length == 0" imp1.json &&
	dlk impact fm-raw@v2 --downstream --from $S3/fm >imp2.txt && cat imp2.txt &&
	grep_q "^sha256:[0-9a-f]* *fm-preds@latest  *dlk predict  *sha256:" imp2.txt
'

test_expect_success 'impact --downstream names the models served from the pipeline'"'"'s model, by its weights' '
	cd "$TEST_TMP/fm" &&
	w=$(jq -r "[.downstream[] | select(.weights_sha256)][0].weights_sha256" imp2.json) &&
	test -n "$w" && test "$w" != null &&
	for m in fm-served:$w fm-other:0000000000000000000000000000000000000000000000000000000000000000; do
		kubectl apply -f - >/dev/null <<-EOT || return 1
		apiVersion: apps/v1
		kind: Deployment
		metadata:
		  name: ${m%%:*}-stable
		  labels: {dlk.dev/serve: ${m%%:*}, dlk.dev/track: stable}
		  annotations: {dlk.dev/model-sha256: "${m#*:}"}
		spec:
		  replicas: 0
		  selector: {matchLabels: {dlk.dev/serve: ${m%%:*}, dlk.dev/track: stable}}
		  template:
		    metadata: {labels: {dlk.dev/serve: ${m%%:*}, dlk.dev/track: stable}}
		    spec: {containers: [{name: s, image: none}]}
		EOT
	done &&
	dlk impact fm-raw@v2 --downstream --from $S3/fm -o json >imp3.json &&
	jq -e ".served | length == 1 and .[0].name == \"fm-served\" and .[0].track == \"stable\" and .[0].desired == 0 and
		.[0].weights_sha256 == \"$w\"" imp3.json &&
	dlk impact fm-raw@v2 --downstream --from $S3/fm >imp3.txt && cat imp3.txt &&
	grep_q "^fm-served  *stable  *0/0  *" imp3.txt && ! grep -q fm-other imp3.txt
'

test_done
