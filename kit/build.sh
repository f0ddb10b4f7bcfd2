#!/bin/sh
# Builds the GPU kit (what `make gpu-kit` runs): one folder that a machine with a GPU, NVIDIA's
# driver and PyTorch but none of Debian's libraries runs as `KIT/run` (kit/run, read its header
# for why it carries the dynamic loader). It holds
#   run                    the entry script
#   bin/                   dlk, the GPU test programs, bench/gpu's programs, jq, xz (stripped)
#   lib/                   libdlk-cuda.so, every library those link and the dynamic loader itself,
#                          all from this machine; xz-compressed but the loader, libc, liblzma
#   bench/                 bench/gpu's PyTorch peer
#   data/fashion-mnist/    the four IDX files the checks read (already gzipped)
#   KIT                    what was built from what
# and not cuBLAS, cuBLASLt, NCCL or the driver (the target's own; run finds them). It fails when
# a program would need a library from outside the kit, or when the kit is over --max-mib.
#   sh kit/build.sh [--max-mib N] [--fast] BUILD_DIR OUT_DIR
# --fast compresses least (xz -0) and lifts the size limit: the same kit, for tests of its paths.
set -eu
max_mib=60
level=-6
while [ $# -gt 2 ]; do
	case "$1" in
	--max-mib) max_mib=$2; shift 2 ;;
	--fast) level=-0 max_mib=1024; shift ;;
	*) break ;;
	esac
done
[ $# = 2 ] || { echo "usage: kit/build.sh [--max-mib N] [--fast] BUILD_DIR OUT_DIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1 out=$2
case "$out" in /*) ;; *) out=$PWD/$out ;; esac
fmnist=${DLK_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
# libraries the target machine has and the kit must not carry: the driver's, CUDA's, NCCL
machine_lib='^(libcuda|libcublas|libcublasLt|libnccl|libnvidia-[a-z-]*)\.so'

die() { echo "error: gpu kit: $*" >&2; exit 1; }
for f in dlk tests/unit/test_nn_gpu tests/unit/test_train_fmnist_gpu tests/unit/test_gpt_gpu bench/gpu/dlk_gpu_bench \
	bench/gpu/dlk_allreduce_bench; do
	[ -x "$build/$f" ] || die "'$build/$f' is not built (make all test-unit)"
done
[ -f "$build/kit-cuda/libdlk-cuda.so" ] ||
	die "'$build/kit-cuda/libdlk-cuda.so' is not built (make gpu-kit): the CUDA toolchain is missing ('.ci/deps build' installs it)"
jq=$(command -v jq) || die "no jq on this machine (Debian's jq; '.ci/deps test' installs it)"
xz=$(command -v xz) || die "no xz on this machine (Debian's xz-utils)"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
	[ -r "$fmnist/$f" ] || die "Fashion-MNIST is not installed: no '$fmnist/$f' ('.ci/deps test' installs it)"
done
loader=$(readlink -f /lib64/ld-linux-x86-64.so.2) || die "no dynamic loader /lib64/ld-linux-x86-64.so.2 here"

rm -rf "$out.tmp"
mkdir -p "$out.tmp/bin" "$out.tmp/lib" "$out.tmp/bench" "$out.tmp/data/fashion-mnist"
cp "$build/dlk" "$build/tests/unit/test_nn_gpu" "$build/tests/unit/test_train_fmnist_gpu" "$build/tests/unit/test_gpt_gpu" \
	"$build/bench/gpu/dlk_gpu_bench" "$build/bench/gpu/dlk_allreduce_bench" "$jq" "$xz" "$out.tmp/bin/"
cp "$build/kit-cuda/libdlk-cuda.so" "$out.tmp/lib/"
# debug information is most of each program's size; the kit reports results, not stacks
strip --strip-unneeded "$out.tmp"/bin/* "$out.tmp/lib/libdlk-cuda.so"
cp "$loader" "$out.tmp/lib/ld-linux-x86-64.so.2"

# The dependency closure, as this machine's loader resolves it (ldd lists it whole), less the
# machine's CUDA libraries. Copied under the names the programs ask for (the sonames).
for f in "$out.tmp"/bin/* "$out.tmp/lib/libdlk-cuda.so"; do
	ldd "$f" || die "ldd '$f' failed"
done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u | while read -r name path; do
	if echo "$name" | grep -Eq "$machine_lib"; then
		continue
	fi
	cp -L "$path" "$out.tmp/lib/$name"
done

# The parts of glibc and of GCC's runtime that the machine's cuBLAS, cuBLASLt and NCCL link: they
# load beside the carried libc, so they must be its own, not the machine's.
for name in librt.so.1 libpthread.so.0 libdl.so.2 libm.so.6 libgcc_s.so.1 libstdc++.so.6; do
	[ -e "$out.tmp/lib/$name" ] && continue
	path=$(/sbin/ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ { print $NF; exit }')
	[ -n "$path" ] || die "no $name on this machine"
	cp -L "$path" "$out.tmp/lib/$name"
done

# The libraries xz-compressed: uncompressed they are 100 MB (OpenBLAS with the kernels of every
# x86 CPU 36, ICU's data 30), gzipped 50, with xz 23, which with the data fits the upload. run
# unpacks them once into a temporary folder with the carried xz, which is why the loader, libc and
# liblzma stay as they are. Two files at a time, each in one thread: a library is smaller than the
# block that xz -T splits at, so one xz gains nothing from a second thread, and two xz use both
# cores (the same compressed bytes either way).
find "$out.tmp/lib" -type f ! -name 'ld-linux*' ! -name 'libc.so*' ! -name 'liblzma.so*' -print0 |
	xargs -0 -r -n 1 -P "$(nproc 2>/dev/null || echo 2)" "$xz" $level -T1 || die "xz failed"

cp "$fmnist"/train-images-idx3-ubyte.gz "$fmnist"/train-labels-idx1-ubyte.gz "$fmnist"/t10k-images-idx3-ubyte.gz \
	"$fmnist"/t10k-labels-idx1-ubyte.gz "$out.tmp/data/fashion-mnist/"
cp "$top/bench/gpu/torch_gpu_bench.py" "$out.tmp/bench/"
cp "$top/kit/run" "$out.tmp/run"
chmod 755 "$out.tmp/run"
commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null | head -n 1)
{
	echo "dlk $("$build/dlk" version -o json | jq -r .version), commit $commit${dirty:+ (with uncommitted changes)}"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | sed -n '1s/.* //p')"
	"$build/dlk" version | sed -n 's/^ *\(.*libdlk-cuda.so\): \([^;]*\).*/libdlk-cuda.so: \2/p'
	echo "cuBLAS, cuBLASLt, NCCL and the driver: the machine's own (run finds them)"
} >"$out.tmp/KIT"

# Every program must resolve every library inside the kit, through the carried loader: a library
# found elsewhere here would be missing on the target. (The same check starts every run.)
lib=$out.tmp/lib
unz=$(mktemp -d)
trap 'rm -rf "$unz"' EXIT
for f in "$lib"/*.xz; do
	b=$(basename "$f" .xz)
	xz -dc "$f" >"$unz/$b" || die "cannot unpack '$f'"
done
for f in "$lib"/*; do case "$f" in *.xz) ;; *) ln -s "$f" "$unz/" ;; esac; done
# The loader lists no shared object one of whose libraries is missing: this machine's cuBLAS stands
# in for the target's, after the kit.
cublas_dir=$(ldd "$build/kit-cuda/libdlk-cuda.so" | awk '$1 == "libcublas.so.13" && $3 ~ /^\// { sub(/\/[^\/]*$/, "", $3); print $3 }')
[ -n "$cublas_dir" ] || cublas_dir=$(ldd "$build/libdlk-cuda.so" | awk '$1 == "libcublas.so.13" && $3 ~ /^\// { sub(/\/[^\/]*$/, "", $3); print $3 }')
bad=$(for f in "$out.tmp"/bin/* "$unz/libdlk-cuda.so"; do
	env -i "$unz/ld-linux-x86-64.so.2" --library-path "$unz${cublas_dir:+:$cublas_dir}" --list "$f" >"$unz/list" 2>&1
	grep -q "libc.so.6 => $unz/" "$unz/list" || echo "$(basename "$f"): the carried loader cannot list it"
	<"$unz/list" \
		awk -v f="$(basename "$f")" -v kit="$unz/" -v skip="$machine_lib" '
			$1 ~ /^linux-vdso/ { next }
			$1 ~ skip { next }
			$2 == "=>" && index($3, kit) != 1 { print f ": " $1 " => " $3 }
			$2 != "=>" && index($1, kit) != 1 && $1 !~ /ld-linux/ { print f ": " $0 }'
done)
[ -z "$bad" ] || die "a program would load a library from outside the kit:
$bad"

rm -rf "$out"
mv "$out.tmp" "$out"
bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gpu kit: $out, $mib MiB ($bytes bytes; at most $max_mib MiB)"
[ "$bytes" -le $((max_mib * 1048576)) ] || die "'$out' is $mib MiB, over the $max_mib MiB an upload carries"
