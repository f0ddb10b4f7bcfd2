# Sourced with $cluster_src (this directory) and $cluster_top (the project) set: where the binaries are and the cluster's fixed addresses.
# The versions are pinned once, in go.mod (k8s.io/kubernetes, go.etcd.io/etcd/server/v3,
# sigs.k8s.io/kwok); the binaries of one pin live in .deps/k8s-VERSION/bin.
K8S_VERSION=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9.]*\)$/\1/p' "$cluster_src/go.mod" | head -n 1)
K8S_DEPS=${K8S_DEPS:-$cluster_top/.deps/k8s-$K8S_VERSION}
K8S_BIN=$K8S_DEPS/bin
SERVICE_CIDR=10.0.0.0/24   # the `kubernetes` service is its first address
SERVICE_IP=10.0.0.1
DNS_IP=10.0.0.10
POD_CIDR=10.244.0.0/16
