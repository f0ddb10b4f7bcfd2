#!/bin/sh
# Time from submitting to the program's first training step on the real test control plane
# (tests/cluster/up: kube-apiserver, etcd, controller-manager, scheduler, the pod runner that runs
# each pod as local processes), for the PyTorch example (`dlk init --example pytorch`, 2 workers):
#   A) `dlk train` of the project: dlk ships the code as a ConfigMap named by its digest, renders
#      the headless Service and the Indexed Job, and each pod's supervisor waits for the gang's
#      names, then starts `python3 train.py` with torchrun's variables;
#   B) the same program written by hand as a Kubeflow/TorchX user would: `kubectl create
#      configmap` of train.py, then `kubectl apply` of a headless Service and an Indexed Job whose
#      pods run `torchrun --nnodes 2 --node-rank $JOB_COMPLETION_INDEX --master-addr rank 0's name`.
# Both run the same train.py, into which this script adds one line: rank 0 prints FIRST-STEP and
# the time after its first optimizer step; the figure is that time minus the time the command
# started, read from rank 0's log (polled every 0.1 s). A and B alternate after a warm-up of
# each; medians with min-max.
# Usage: sh bench/program/first-step.sh [PAIRS]   (default 3)
# Needs the cluster binaries (.ci/deps test), the frameworks venv (.ci/deps) and ./dlk (make).
. "$(dirname "$0")/../../tests/lib.sh"
. "$TEST_ROOT/tests/cluster/lib.sh"
pairs=${1:-3}
PY=$TEST_ROOT/.deps/frameworks/bin/python
[ -x "$PY" ] || { echo "bench/program: no .deps/frameworks (run .ci/deps)" >&2; exit 2; }
cluster_up --mount "$(readlink -f "$TEST_ROOT/.deps/frameworks"):/opt/frameworks"
PODPY=/opt/frameworks/bin/python
now() { date +%s.%N; }

grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

P=$TEST_TMP/fs
dlk init -q --example pytorch "$P" >/dev/null || exit 1
# rank 0 says when its first step is done (the same line in A and B)
awk '{ print } /^ *opt\.step\(\)$/ { ind = $0; sub(/opt.*/, "", ind);
	print ind "if rank == 0 and not getattr(main, \"_first\", 0):";
	print ind "    main._first = 1";
	print ind "    print(\"FIRST-STEP %.3f\" % time.time(), flush=True)" }' "$P/train.py" >"$P/train.py.new" &&
	mv "$P/train.py.new" "$P/train.py"
grep -q FIRST-STEP "$P/train.py" || { echo "bench/program: cannot mark the first step in train.py" >&2; exit 1; }
ARGS='"--epochs", "1", "--train-samples", "2000", "--test-samples", "500"'
sed -i "s|command: \[python3, train.py\]|command: [\"$PODPY\", train.py]|; s|args: \[--epochs, \"2\"\]|args: [$ARGS]|" "$P/dlk.yaml"
grep -q "train-samples" "$P/dlk.yaml" || { echo "bench/program: the example's command did not change" >&2; exit 1; }

cat >"$TEST_TMP/hand.yaml" <<YAML
apiVersion: v1
kind: Service
metadata: {name: hand}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {job-name: hand}
  ports: [{name: rendezvous, port: 29500}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: hand}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 0
  template:
    metadata: {labels: {job-name: hand}}
    spec:
      subdomain: hand
      restartPolicy: Never
      containers:
      - name: worker
        image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
        workingDir: /workspace
        command: [sh, -c]
        args:
        - exec $PODPY -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --node-rank "\$JOB_COMPLETION_INDEX"
          --master-addr hand-0.hand --master-port 29500 train.py --epochs 1 --train-samples 2000 --test-samples 500
        resources:
          requests: {cpu: "2", memory: 2Gi}
          limits: {cpu: "2", memory: 2Gi}
        volumeMounts: [{name: code, mountPath: /workspace, readOnly: true}]
      volumes: [{name: code, configMap: {name: hand-code}}]
YAML

# first_step JOB T0: seconds from T0 to the FIRST-STEP line in rank 0's log (polled), or fails
first_step() {
	_i=0
	while [ $_i -lt 1500 ]; do
		_pod=$(pod_of "$1" 0)
		if [ -n "$_pod" ]; then
			_t=$(kubectl logs "$_pod" 2>/dev/null | sed -n 's/.*FIRST-STEP \([0-9.]*\).*/\1/p' | head -n 1)
			[ -n "$_t" ] && { awk -v a="$_t" -v b="$2" 'BEGIN { printf "%.2f\n", a - b }'; return 0; }
		fi
		_i=$((_i + 1))
		sleep 0.1
	done
	echo "bench/program: job $1 printed no first step in 150 s" >&2
	kubectl get pods -o wide >&2
	return 1
}
clean() {
	kubectl delete job fs hand --ignore-not-found --wait=true >/dev/null 2>&1
	kubectl delete service hand --ignore-not-found >/dev/null 2>&1
	kubectl delete configmap hand-code --ignore-not-found >/dev/null 2>&1
	dlk delete fs --yes -f "$P/dlk.yaml" >/dev/null 2>&1
	while [ -n "$(kubectl get pods -o name 2>/dev/null)" ]; do sleep 0.2; done
}
run_a() {
	t0=$(now)
	dlk train -q -f "$P/dlk.yaml" --set resources.cpu=1 --set resources.memory=1Gi >/dev/null 2>"$TEST_TMP/a.err" ||
		{ cat "$TEST_TMP/a.err" >&2; return 1; }
	first_step fs "$t0"
}
run_b() {
	t0=$(now)
	kubectl create configmap hand-code --from-file=train.py="$P/train.py" >/dev/null &&
	sed 's/cpu: "2"/cpu: "1"/g; s/memory: 2Gi/memory: 1Gi/g' "$TEST_TMP/hand.yaml" | kubectl apply -f - >/dev/null &&
	first_step hand "$t0"
}

clean
run_a >/dev/null && clean && run_b >/dev/null && clean || exit 1  # the warm-up: page cache, Python's imports
: >"$TEST_TMP/a" && : >"$TEST_TMP/b"
n=0
while [ $n -lt "$pairs" ]; do
	n=$((n + 1))
	a=$(run_a) && clean && b=$(run_b) && clean || exit 1
	echo "$a" >>"$TEST_TMP/a" && echo "$b" >>"$TEST_TMP/b"
	echo "pair $n  dlk train $a s   hand-written torchrun Job $b s"
done
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
	printf "%.2f s (%.2f-%.2f)", m, v[1], v[NR] }'; }
echo "to the first step, median (min-max) of $pairs:"
echo "  dlk train                  $(stats "$TEST_TMP/a")"
echo "  hand-written torchrun Job  $(stats "$TEST_TMP/b")"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
