# Shell helpers for tests against the real control plane (tests/cluster/up). Source after
# tests/lib.sh:
#   . "$TEST_ROOT/tests/cluster/lib.sh"
#   cluster_up                 at the top level of the script (the EXIT trap stops the cluster)
# Then $KUBECONFIG is the cluster's admin kubeconfig, `kubectl` runs the kubectl built with the
# cluster, and $CLUSTER is the cluster's directory (pods' logs and files under runner/pods/).
# A cluster that cannot start is a failure, never a skip: `.ci/deps test` builds what it needs.
CLUSTER=$TEST_TMP/cluster
cluster_src=$TEST_ROOT/tests/cluster cluster_top=$TEST_ROOT
. "$TEST_ROOT/tests/cluster/env.sh"

kubectl() { "$K8S_BIN/kubectl" "$@"; }

cluster_down() { "$TEST_ROOT/tests/cluster/down" "$CLUSTER"; }

# cluster_up [UP-OPTIONS]: starts the cluster, or fails the script with the reason.
cluster_up() {
	trap 'cluster_down; test_cleanup' EXIT
	trap 'exit 130' INT TERM
	if ! "$TEST_ROOT/tests/cluster/up" "$CLUSTER" --dlk "$DLK" "$@" >"$TEST_TMP/cluster-up.log" 2>&1; then
		test_count=$((test_count + 1))
		echo "not ok $test_count - the cluster starts"
		sed 's/^/#   /' "$TEST_TMP/cluster-up.log" | tail -n 60
		test_done
		exit 1
	fi
	mkdir -p "$(dirname "$KUBECONFIG")"
	cp "$CLUSTER/kubeconfig" "$KUBECONFIG"
}

# pod_of JOB RANK: the name of the newest pod of JOB's rank
pod_of() {
	kubectl get pods -l "batch.kubernetes.io/job-name=$1,batch.kubernetes.io/job-completion-index=$2" \
		--sort-by=.metadata.creationTimestamp -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | tail -n 1
}

# pod_dir POD: the pod runner's directory of a pod (logs, volumes, pid files), in "default"
pod_dir() { echo "$CLUSTER/runner/pods/${2:-default}/$1"; }

# wait_until SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds
wait_until() {
	_secs=$1
	shift
	_i=0
	while ! "$@"; do
		_i=$((_i + 1))
		if [ $_i -gt $((_secs * 5)) ]; then
			echo "timed out after ${_secs}s waiting for: $*" >&2
			return 1
		fi
		sleep 0.2
	done
}

# token_kubeconfig FILE TOKEN: a kubeconfig for the cluster that authenticates with TOKEN only
token_kubeconfig() {
	kubectl --kubeconfig "$1" config set-cluster test --server "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')" \
		--certificate-authority "$CLUSTER/pki/ca.crt" --embed-certs >/dev/null &&
	kubectl --kubeconfig "$1" config set-credentials worker --token "$2" >/dev/null &&
	kubectl --kubeconfig "$1" config set-context test --cluster test --user worker --namespace default >/dev/null &&
	kubectl --kubeconfig "$1" config use-context test >/dev/null
}

# hostpath_pv NAME DIR CLAIM: a 1Gi PersistentVolume on DIR, reserved for the claim CLAIM of
# namespace default (the claim binds to it once it exists, as with a pre-provisioned volume)
hostpath_pv() {
	mkdir -p "$2" &&
	kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce, ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: default, name: $3}
  hostPath: {path: $2}
YAML
}

# program_project NAME: $TEST_TMP/NAME/dlk.yaml begun with the name and Fashion-MNIST's training
# files (a program's project needs data); the caller appends program: and the rest (cat >>)
program_project() {
	mkdir -p "$TEST_TMP/$1" && cat >"$TEST_TMP/$1/dlk.yaml" <<YAML
name: $1
data:
  format: idx
  train:
    images: file:///usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
    labels: file:///usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz
YAML
}
