#!/bin/sh
# The GPT issue's cluster proof, against the real control plane: a small GPT (2 pre-norm blocks,
# width 32, context 32, byte-level, on a 60 KB slice of dict-gcide) as a 2-worker Job with ZeRO-1
# on the TCP ring (each rank holds half the optimizer state, and says so); a worker killed
# mid-run (its pod deleted: SIGTERM), the gang stops with a checkpoint (75) that holds the whole
# state, the real Job controller restarts it at 2; `dlk scale` to 1 worker, the gang stops again
# (76) and one worker finishes from the checkpoint with the same global batch. The loss goes on
# from where it was at each resume (below the first step's by more than 1 nat), never from the
# start, and the run's record lists both sizes.
. "$(dirname "$0")/../lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"

GCIDE=/usr/share/dictd/gcide.dict.dz
[ -f "$GCIDE" ] || test_missing "dict-gcide is installed ($GCIDE, Debian's dict-gcide, .ci/deps.d/corpus)"

cluster_up

# rank 0 reads the Job's size every second (DLK_RESIZE_POLL), through the user's own template
dlk init -q --templates "$TEST_TMP/g" >/dev/null
sed -i "s/^      env:\$/      env:\n      - name: DLK_RESIZE_POLL\n        value: \"1\"/" "$TEST_TMP/g/templates/_jobspec.yaml"
grep -q "name: DLK_RESIZE_POLL" "$TEST_TMP/g/templates/_jobspec.yaml" || { echo "cannot set DLK_RESIZE_POLL in the template" >&2; exit 1; }
# the text on a claim of its own, which the pods mount (pods do not see this machine's files)
mkdir -p "$TEST_TMP/data" && gzip -dc "$GCIDE" | head -c 3000000 | tail -c 60000 >"$TEST_TMP/data/slice.txt"
hostpath_pv zgpt-data "$TEST_TMP/data" zgpt-data
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: zgpt-data}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
YAML
cat >"$TEST_TMP/g/dlk.yaml" <<EOT
name: zgpt
data:
  format: text
  train: {source: pvc://zgpt-data/slice.txt}
  validation: 0.05
  text: {tokenizer: byte}
model:
  task: lm
  input: [32]
  blocks:
    gpt2:
      - layernorm
      - attention: {heads: 2, name: att}
      - add: {inputs: [input, att], name: h}
      - layernorm
      - dense: {units: 128}
      - gelu: {approximate: tanh}
      - dense: {units: 32, name: mlp}
      - add: {inputs: [h, mlp]}
  layers:
    - embedding: {vocab: 257, dim: 32, positions: 32, name: wte}
    - {block: gpt2, repeat: 2}
    - layernorm
    - dense: {units: 257, tie: wte}
training:
  epochs: 24
  batch_size: 8
  zero: 1
  optimizer: {name: adamw, lr: 0.003, weight_decay: 0.1}
  grad_clip: 1.0
  threads: 1
  checkpoint: {every: 50}
resources: {workers: 2, memory: 1Gi}
storage: {size: 1Gi}
EOT
PROJ=$TEST_TMP/g/dlk.yaml
hostpath_pv zgpt "$TEST_TMP/pv" zgpt-checkpoints

test_expect_success 'a 2-worker GPT with ZeRO-1: a worker killed, resumed at 2, scaled to 1; the loss goes on' '
	kubectl get pods -l batch.kubernetes.io/job-name=zgpt --watch -o jsonpath="{.metadata.name} {.status.phase} {.status.containerStatuses[0].state.terminated.exitCode}{\"\n\"}" >watch.log &
	w=$!
	dlk train -f "$PROJ" >out 2>err || { cat out err; kill $w; exit 1; }
	p0="" p1=""
	training() { p0=$(pod_of zgpt 0) && p1=$(pod_of zgpt 1) && test -n "$p0" && test -n "$p1" &&
		kubectl logs "$p0" 2>/dev/null | grep -q "^epoch 2/24"; }
	wait_until 240 training || { kill $w; kubectl get pods; kubectl logs "$p0" | tail; exit 1; }
	kubectl logs "$p0" >first.log && grep -q "optimizer state: .* per rank, sharded over 2 ranks (ZeRO-1; .* whole)" first.log &&
	kubectl delete pod "$p1" --wait=false &&
	regang() { q=$(pod_of zgpt 0) && test -n "$q" && test "$q" != "$p0" && kubectl logs "$q" 2>/dev/null | grep -q "^epoch .*  step "; }
	wait_until 240 regang || { kill $w; cat watch.log; kubectl get pods; exit 1; }
	second=$(pod_of zgpt 0)
	# the Job controller may be writing the Job as its pods come back: a conflict says to try again
	for i in 1 2 3 4 5; do
		dlk scale zgpt --workers 1 --wait --timeout 300s -o json >scale.json 2>scale.err; rc=$?; cat scale.err scale.json
		test $rc != 0 && grep -q "run the command again" scale.err || break
		sleep 1
	done
	test $rc = 0 || { kill $w; cat watch.log; kubectl get pods; exit 1; }
	kubectl wait --for=condition=Complete job/zgpt --timeout=600s; rc=$?; kill $w; test $rc = 0 &&
	cat watch.log && grep -q "^$p1 Failed 75$" watch.log && grep -q "^$p0 Failed 75$" watch.log &&
	kubectl logs "$second" >second.log && { grep -v " step " second.log; true; } &&
	grep -q "^$second Failed 76$" watch.log &&
	grep -q "resuming run [0-9a-f]* from checkpoint ./checkpoints/" second.log &&
	grep -q "sharded over 2 ranks" second.log &&
	last=$(pod_of zgpt 0) && kubectl logs "$last" >last.log && { grep -v " step " last.log; true; } &&
	grep -q "resuming run [0-9a-f]* from checkpoint [0-9]* at 1 worker (was 2), batch 16 per worker, global 16$" last.log &&
	uid=$(kubectl get job zgpt -o jsonpath={.metadata.uid}) &&
	dlk status zgpt --run "$uid" -o json >rec.json &&
	jq -c "[.run.outcome, .run.worlds, [.history.events[] | [.event, .world, .step]]]" rec.json &&
	jq -e ".run.outcome == \"succeeded\" and .run.worlds == [2, 1]" rec.json &&
	jq -e "[.history.events[] | [.event, .world]] == [[\"start\", 2], [\"resume\", 2], [\"resume\", 1]]" rec.json &&
	jq -e ".history as \$h | \$h.step_loss.values as \$v | [\$h.events[] | select(.event == \"resume\") | .step] as \$r |
		(\$r | length) == 2 and all(\$r[]; . > 0 and \$v[(. / \$h.step_loss.every | floor)] < \$v[0] - 1)" rec.json
'

test_done
