#!/bin/sh
# The container images (image/build.sh, what `make image` runs): an OCI layout that independent
# readers accept (skopeo, umoci), blobs that match their digests, layers built the same way twice,
# and in each image `dlk version` runs: the CPU image has no CUDA backend, the CUDA image loads its
# backend and finds cuBLAS and NCCL beside it (and, with no driver in a container without a GPU,
# says so). The tags are the templates' default images. To stay fast and offline the test builds
# on the "host" base (this machine's libraries) with uncompressed layers; `make image` puts the
# same layers on a Debian base and compresses them.
. "$(dirname "$0")/../lib.sh"
BUILD_DIR=$TEST_ROOT/${BUILD:-build}
VERSION=$(dlk version -o json | jq -r .version)
CUDA=0
[ -f "$BUILD_DIR/libdlk-cuda.so" ] && CUDA=1
OUT=$TEST_TMP/oci
opts="--base host --compress none"
[ $CUDA = 1 ] || opts="$opts --no-cuda"
# image/build.sh takes the build directory, whose binary must be $DLK's
[ "$(readlink -f "$BUILD_DIR/dlk")" = "$(readlink -f "$DLK")" ] || [ "$(cmp -s "$BUILD_DIR/dlk" "$DLK"; echo $?)" = 0 ] ||
	{ echo "Bail out! $DLK is not $BUILD_DIR/dlk"; exit 1; }
QUIET=1 sh "$TEST_ROOT/image/build.sh" $opts "$BUILD_DIR" "$OUT" 2>"$TEST_TMP/build.err" ||
	{ echo "Bail out! image/build.sh failed"; cat "$TEST_TMP/build.err"; exit 1; }

# runs a command inside an unpacked root filesystem, with its own /proc
in_root() {
	root=$1; shift
	if [ "$(id -u)" = 0 ]; then
		unshare --mount --pid --fork --root="$root" --mount-proc "$@"
	else
		unshare --user --map-root-user --mount --pid --fork --root="$root" --mount-proc "$@"
	fi
}
# unpacks TAG's layers in order into DIR, checking every blob against its digest
unpack() {
	m=$(jq -r --arg t "$1" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t) | .digest' \
		"$OUT/index.json") && test -n "$m" &&
	mkdir -p "$2" &&
	for l in $(jq -r '.layers[].digest' "$OUT/blobs/sha256/${m#sha256:}"); do
		tar -xf "$OUT/blobs/sha256/${l#sha256:}" -C "$2" || return 1
	done
}

test_expect_success 'the layout names the templates'"'"' default images' '
	jq -e ".imageLayoutVersion == \"1.0.0\"" "$OUT/oci-layout" &&
	jq -r ".manifests[].annotations[\"org.opencontainers.image.ref.name\"]" "$OUT/index.json" >tags &&
	grep -qx "$VERSION" tags && { [ $CUDA = 0 ] || grep -qx "$VERSION-cuda" tags; } &&
	dlk init -q p && (cd p && dlk train --dry-run -o json) >cpu.json &&
	(cd p && dlk train --dry-run -o json --set resources.gpus=1) >gpu.json &&
	jq -e "[.items[] | select(.kind == \"Job\")][0].spec.template.spec.containers[0].image == \"dlk:$VERSION\"" cpu.json &&
	jq -e "[.items[] | select(.kind == \"Job\")][0].spec.template.spec.containers[0].image == \"dlk:$VERSION-cuda\"" gpu.json
'

test_expect_success 'every blob matches its digest and size' '
	for b in "$OUT"/blobs/sha256/*; do
		test "$(sha256sum "$b" | cut -d" " -f1)" = "${b##*/}" || { echo "bad blob $b"; exit 1; }
	done &&
	for m in $(jq -r ".manifests[].digest" "$OUT/index.json"); do
		f=$OUT/blobs/sha256/${m#sha256:}
		jq -r ".config, .layers[] | \"\(.digest) \(.size)\"" "$f" | while read -r d s; do
			test "$(stat -c %s "$OUT/blobs/sha256/${d#sha256:}")" = "$s" || { echo "size of $d"; exit 1; }
		done || exit 1
		# the config lists each layer'"'"'s uncompressed digest
		c=$(jq -r .config.digest "$f")
		test "$(jq -r ".layers | length" "$f")" = "$(jq -r ".rootfs.diff_ids | length" "$OUT/blobs/sha256/${c#sha256:}")" || exit 1
	done
'

test_expect_success 'skopeo reads both images: platform, command, environment' '
	skopeo inspect --config "oci:$OUT:$VERSION" >cfg.json &&
	jq -e ".architecture == \"$(dpkg --print-architecture)\" and .os == \"linux\" and .config.Cmd == [\"dlk\", \"version\"]" cfg.json &&
	if [ $CUDA = 1 ]; then
		skopeo inspect --config "oci:$OUT:$VERSION-cuda" >cuda.json &&
		jq -e "(.config.Env | index(\"NVIDIA_DRIVER_CAPABILITIES=compute,utility\")) != null and (.rootfs.diff_ids | length) == 3" cuda.json
	fi
'

test_expect_success 'the CPU image unpacks with umoci and runs dlk version: no CUDA backend in it' '
	umoci unpack --image "$OUT:$VERSION" bundle >/dev/null &&
	in_root bundle/rootfs /usr/local/bin/dlk version >out && cat out &&
	grep_q "^dlk $VERSION$" out && grep_q "^cpu: *usable: OpenBLAS" out &&
	grep_q "^cuda: *not usable: no CUDA backend: .libdlk-cuda.so. is neither beside dlk nor on the library path" out &&
	in_root bundle/rootfs /usr/local/bin/dlk-version >out2 && cmp out out2
'

if [ $CUDA = 1 ]; then
	test_expect_success 'the CUDA image loads its backend with cuBLAS and NCCL from beside it' '
		unpack "$VERSION-cuda" root &&
		in_root root /usr/local/bin/dlk version >out && cat out &&
		grep_q "^           /usr/local/lib/dlk/libdlk-cuda.so: CUDA 13\.[0-9] for sm_80 sm_90" out &&
		grep_q "^nccl: *NCCL 2\." out &&
		grep_q "^cuda: *not usable: no NVIDIA driver: libcuda.so.1 is not on this machine" out
	'
else
	test_expect_success "the CUDA image: libdlk-cuda.so is built (.ci/deps test installs the CUDA toolchain)" false
fi

test_expect_success 'the same sources build the same layers' '
	QUIET=1 sh "$TEST_ROOT/image/build.sh" --base host --compress none --no-cuda "$BUILD_DIR" again 2>err &&
	layers() { m=$(jq -r ".manifests[0].digest" "$1/index.json") && jq -r ".layers[1].digest" "$1/blobs/sha256/${m#sha256:}"; } &&
	test "$(layers "$OUT")" = "$(layers again)"
'

test_done
