#!/bin/sh
# Builds dlk's container images as an OCI image layout, without a container daemon: the layers
# are tar files, the config and manifests are JSON, all content-addressed by sha256.
#   image/build.sh [options] BUILD_DIR OUT_DIR
#     --base debian    (default) Debian bookworm minbase with the runtime packages of dlk's shared
#                      libraries and ca-certificates, made by mmdebstrap (needs the apt mirror once;
#                      the rootfs is kept in .deps/image-base-*/)
#     --base host      the dynamic loader, dlk's and the backend's shared libraries and the CA
#                      bundle copied from this machine: no network (what the tests use)
#     --compress gzip|none   layer compression (default gzip; the tests use none)
#     --no-cuda        build the CPU image only
# OUT_DIR holds one layout with two tags sharing the base layer:
#   dlk:VERSION        the CPU image: base + /usr/local/bin/dlk (and the dlk-CMD links)
#   dlk:VERSION-cuda   the CPU image's layers + /usr/local/lib/dlk/: libdlk-cuda.so (CUDA runtime
#                      linked in), cuBLAS, cuBLASLt and NCCL from the same CUDA wheels
# Push with standard tools, e.g. skopeo copy oci:OUT_DIR:VERSION docker://REGISTRY/dlk:VERSION
set -eu
base=debian compress=gzip cuda=1
while [ $# -gt 0 ]; do
	case "$1" in
	--base) base=$2; shift 2 ;;
	--compress) compress=$2; shift 2 ;;
	--no-cuda) cuda=0; shift ;;
	-*) echo "image/build.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# = 2 ] || { echo "usage: image/build.sh [--base debian|host] [--compress gzip|none] [--no-cuda] BUILD_DIR OUT_DIR" >&2; exit 2; }
case "$base" in debian|host) ;; *) echo "image/build.sh: --base is debian or host" >&2; exit 2 ;; esac
case "$compress" in gzip|none) ;; *) echo "image/build.sh: --compress is gzip or none" >&2; exit 2 ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=$2
dlk=$build/dlk
plugin=$build/libdlk-cuda.so
[ -x "$dlk" ] || { echo "image/build.sh: no $dlk (make first)" >&2; exit 2; }
version=$("$dlk" version -o json | jq -r .version)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
# the layers' timestamps: the commit's time, so the same sources give the same layers
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$top" log -1 --format=%ct 2>/dev/null || echo 0)}
work=$(mktemp -d "${TMPDIR:-/tmp}/dlk-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { [ -n "${QUIET:-}" ] || echo "image: $*" >&2; }

# The shared libraries a binary needs, as resolved here: "SONAME PATH" lines.
needed() { ldd "$1" | sed -n 's/^[[:space:]]*\([^ ]*\) => \(\/[^ ]*\) .*/\1 \2/p'; }
loader() { ldd "$1" | sed -n 's/^[[:space:]]*\(\/[^ ]*ld-linux[^ ]*\) .*/\1/p'; }

if [ "$cuda" = 1 ]; then
	[ -f "$plugin" ] || { echo "image/build.sh: no $plugin (make with the CUDA toolchain: .ci/deps build), or --no-cuda" >&2; exit 2; }
	# the CUDA libraries the plugin was linked with, and NCCL beside them (as the wheels lay them out)
	cudalibs=$(needed "$plugin" | awk '$1 ~ /^libcublas(Lt)?\.so/ { print $2 }')
	[ "$(echo "$cudalibs" | grep -c .)" = 2 ] || { echo "image/build.sh: $plugin does not resolve cuBLAS and cuBLASLt here" >&2; exit 2; }
	nccl=$(dirname "$(echo "$cudalibs" | head -n 1)")/../../nccl/lib/libnccl.so.2
	[ -f "$nccl" ] || nccl=$(ldconfig -p | sed -n 's/.*libnccl\.so\.2 .*=> //p' | head -n 1)
	[ -n "$nccl" ] && [ -f "$nccl" ] || { echo "image/build.sh: no libnccl.so.2 beside cuBLAS or on the library path" >&2; exit 2; }
fi

# ---- the base rootfs, as one tar ----
base_tar=$work/base.tar
if [ "$base" = debian ]; then
	command -v mmdebstrap >/dev/null || { echo "image/build.sh: mmdebstrap is missing (.ci/deps image installs it)" >&2; exit 2; }
	# the Debian packages that ship dlk's libraries here (and the backend's C++ runtime)
	pkgs=ca-certificates
	for f in $(needed "$dlk" | awk '{ print $2 }') $( [ "$cuda" = 1 ] && needed "$plugin" | awk '$1 !~ /^libcublas/ { print $2 }'); do
		# the path as the linker found it, or resolved (merged /usr and alternatives)
		p=$( { dpkg -S "$f" || dpkg -S "$(readlink -f "$f")"; } 2>/dev/null | head -n 1 | cut -d: -f1) || true
		[ -n "$p" ] && pkgs="$pkgs,$p"
	done
	pkgs=$(echo "$pkgs" | tr , '\n' | sort -u | paste -sd, -)
	key=$(printf '%s %s %s' "$pkgs" "$arch" "${DEBIAN_MIRROR:-default}" | sha256sum | cut -c1-12)
	cache=$top/.deps/image-base-bookworm-$key
	if [ ! -f "$cache/rootfs.tar" ]; then
		say "building the Debian base (bookworm minbase + $pkgs) into $cache"
		mkdir -p "$cache.tmp"
		SOURCE_DATE_EPOCH=$epoch mmdebstrap --quiet --variant=minbase --mode=auto --format=tar \
			--include="$pkgs" --skip=output/dev \
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
			--dpkgopt='path-exclude=/usr/share/info/*' \
			bookworm "$cache.tmp/rootfs.tar" \
			"deb ${DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm main" \
			"deb ${DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm-updates main" \
			"deb ${DEBIAN_SECURITY:-http://deb.debian.org/debian-security} bookworm-security main"
		echo "$pkgs" >"$cache.tmp/packages"
		rm -rf "$cache" && mv "$cache.tmp" "$cache"
	fi
	cp "$cache/rootfs.tar" "$base_tar"
	base_desc="Debian bookworm minbase + $(cat "$cache/packages")"
else
	say "assembling a base from this machine's libraries"
	root=$work/base
	mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/usr/lib/$multiarch"
	chmod 1777 "$root/tmp"
	libs=$(needed "$dlk" | awk '{ print $2 }')
	[ "$cuda" = 1 ] && libs="$libs $(needed "$plugin" | awk '$1 !~ /^libcublas/ { print $2 }')"
	for f in $(echo $libs | tr ' ' '\n' | sort -u); do
		cp -L "$f" "$root/usr/lib/$multiarch/$(basename "$f")"
	done
	ld=$(loader "$dlk")
	mkdir -p "$root$(dirname "$ld")" && cp -L "$ld" "$root$ld"
	# enough of a system for the dynamic loader, TLS and user names
	cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --format=posix \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$root" -cf "$base_tar" .
	base_desc="this machine's libraries"
fi

# ---- dlk's layer: the binary, its command links, and any library the base lacks ----
layer_dir() { # DIR TAR: a reproducible tar of DIR
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --format=posix \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" -cf "$2" .
}
tar -tf "$base_tar" | sed 's|^\./||' >"$work/base.list"
st=$work/dlk
mkdir -p "$st/usr/local/bin" "$st/usr/lib/$multiarch"
cp "$dlk" "$st/usr/local/bin/dlk"
for c in $("$dlk" __commands); do ln -s dlk "$st/usr/local/bin/dlk-$c"; done
needed "$dlk" | while read -r soname path; do
	if ! grep -q "/$soname\$" "$work/base.list"; then
		say "the base has no $soname: it goes into dlk's layer"
		cp -L "$path" "$st/usr/lib/$multiarch/$soname"
	fi
done
layer_dir "$st" "$work/dlk.tar"

if [ "$cuda" = 1 ]; then
	st=$work/cuda
	mkdir -p "$st/usr/local/lib/dlk"
	cp "$plugin" "$st/usr/local/lib/dlk/"
	# hard links where the file system allows (the libraries are most of a GB), copies elsewhere
	for f in $cudalibs "$nccl"; do
		ln -L "$f" "$st/usr/local/lib/dlk/$(basename "$f")" 2>/dev/null || cp -L "$f" "$st/usr/local/lib/dlk/$(basename "$f")"
	done
	layer_dir "$st" "$work/cuda.tar"
fi

# ---- the OCI layout (written afresh: no blob of an earlier build stays behind) ----
rm -rf "$out/blobs" "$out/index.json" "$out/oci-layout"
mkdir -p "$out/blobs/sha256"
blob() { # FILE MEDIATYPE -> prints the descriptor; moves the file in as the blob
	d=$(sha256sum "$1" | cut -d' ' -f1) size=$(stat -c %s "$1")
	mv "$1" "$out/blobs/sha256/$d"
	printf '{"mediaType": "%s", "digest": "sha256:%s", "size": %s}' "$2" "$d" "$size"
}
diff_id() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }
layer() { # TAR -> descriptor of the (compressed) layer
	if [ "$compress" = gzip ]; then
		gzip -n -6 <"$1" >"$1.gz"
		blob "$1.gz" application/vnd.oci.image.layer.v1.tar+gzip
	else
		blob "$1" application/vnd.oci.image.layer.v1.tar
	fi
}
say "writing the layers"
base_id=$(diff_id "$work/base.tar"); base_l=$(layer "$work/base.tar")
dlk_id=$(diff_id "$work/dlk.tar"); dlk_l=$(layer "$work/dlk.tar")
if [ "$cuda" = 1 ]; then cuda_id=$(diff_id "$work/cuda.tar"); cuda_l=$(layer "$work/cuda.tar"); fi
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
commit=$(git -C "$top" rev-parse HEAD 2>/dev/null || echo unknown)

image() { # TAG DESCRIPTION ENV-JSON LAYER-DESCRIPTORS DIFF-IDS -> a manifest descriptor line for index.json
	jq -n --arg arch "$arch" --arg created "$created" --arg version "$version" --arg desc "$2" --arg commit "$commit" \
		--argjson env "$3" --argjson ids "$5" '{
		architecture: $arch, os: "linux", created: $created,
		config: {Env: (["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + $env),
			Cmd: ["dlk", "version"], WorkingDir: "/",
			Labels: {"org.opencontainers.image.title": "dlk", "org.opencontainers.image.version": $version,
				"org.opencontainers.image.revision": $commit, "org.opencontainers.image.description": $desc}},
		rootfs: {type: "layers", diff_ids: $ids},
		history: [$ids[] | {created: $created, created_by: "image/build.sh"}]}' >"$work/config.json"
	cfg=$(blob "$work/config.json" application/vnd.oci.image.config.v1+json)
	jq -n --argjson cfg "$cfg" --argjson layers "$4" '{schemaVersion: 2,
		mediaType: "application/vnd.oci.image.manifest.v1+json", config: $cfg, layers: $layers}' >"$work/manifest.json"
	blob "$work/manifest.json" application/vnd.oci.image.manifest.v1+json |
		jq -c --arg tag "$1" '. + {annotations: {"org.opencontainers.image.ref.name": $tag}}'
}
m_cpu=$(image "$version" "dlk $version on $base_desc" '[]' "[$base_l, $dlk_l]" "[\"$base_id\", \"$dlk_id\"]")
manifests=$m_cpu
if [ "$cuda" = 1 ]; then
	# the NVIDIA container runtime mounts the driver (libcuda.so.1) into containers that ask
	m_cuda=$(image "$version-cuda" "dlk $version with the CUDA backend on $base_desc" \
		'["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]' \
		"[$base_l, $dlk_l, $cuda_l]" "[\"$base_id\", \"$dlk_id\", \"$cuda_id\"]")
	manifests="$manifests, $m_cuda"
fi
echo '{"imageLayoutVersion": "1.0.0"}' >"$out/oci-layout"
jq -n --argjson m "[$manifests]" '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: $m}' \
	>"$out/index.json"
say "built $out: dlk:$version$( [ "$cuda" = 1 ] && echo " and dlk:$version-cuda") ($(du -sh "$out" | cut -f1))"
