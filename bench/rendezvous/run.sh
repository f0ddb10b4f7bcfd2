#!/bin/sh
# A rendezvous of N local ranks (processes), time to the first all-reduce: dlk's rendezvous and
# TCP ring against Gloo's FileStore rendezvous and full TCP mesh (libgloo-dev, what PyTorch's
# Gloo process group connects), alternated A B A B after a warm-up of each, for each N; medians
# with min-max, and the ratio of the medians. A Gloo run that does not finish within LIMIT
# seconds (or fails) is reported as such, and Gloo is not run again at that N.
# Usage: bench/rendezvous/run.sh [NRANKS...]   (default 64 128 256; PAIRS=3, LIMIT=120;
#        needs build/libdlk.a: make)
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
pairs=${PAIRS:-3} limit=${LIMIT:-120}
out=bench/out/rendezvous
mkdir -p "$out"
[ -f build/libdlk.a ] || make -j2 build/libdlk.a >/dev/null
PKGS="yaml-0.1 libcurl libcjson libarchive openblas libmicrohttpd libcrypto"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. -o "$out/dlk_rdzv" bench/rendezvous/dlk_rdzv.c \
	build/libdlk.a $(pkg-config --libs $PKGS) -ldl -lpthread -lm
${CXX:-c++} -std=c++17 -O2 -o "$out/gloo_rdzv" bench/rendezvous/gloo_rdzv.cc -lgloo -lpthread
# a full mesh of 256 ranks holds 255 sockets per rank
ulimit -n 65536 2>/dev/null || true

stats() { sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
	printf "%.3f s (%.3f-%.3f)", m, v[1], v[NR] }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# gloo N: one run into $out/gloo-N.txt; fails when it fails or takes longer than $limit s
gloo() {
	timeout "$limit" "$out/gloo_rdzv" "$1" >"$out/gloo.tmp" 2>"$out/gloo-$1.err" && cat "$out/gloo.tmp" >>"$out/gloo-$1.txt"
}

echo "# ranks on 127.0.0.1, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $pairs pairs alternated after a warm-up"
echo "# gloo: FileStore rendezvous (key waits up to 300 s), connectFullMesh over TCP, AllreduceRing; a run is given ${limit}s"
printf '%6s  %-34s %-34s %s\n' ranks "dlk: first all-reduce" "gloo: first all-reduce" "dlk/gloo"
for n in ${*:-64 128 256}; do
	: >"$out/dlk-$n.txt"
	: >"$out/gloo-$n.txt"
	"$out/dlk_rdzv" "$n" >/dev/null
	gloo_ok=1
	gloo "$n" || gloo_ok=0
	: >"$out/gloo-$n.txt"
	i=0
	while [ $i -lt "$pairs" ]; do
		"$out/dlk_rdzv" "$n" >>"$out/dlk-$n.txt"
		if [ $gloo_ok = 1 ]; then gloo "$n" || gloo_ok=0; fi
		i=$((i + 1))
	done
	d=$(cut -d' ' -f1 "$out/dlk-$n.txt" | stats)
	if [ $gloo_ok = 1 ]; then
		g=$(cut -d' ' -f1 "$out/gloo-$n.txt" | stats)
		r=$(awk -v a="$(cut -d' ' -f1 "$out/dlk-$n.txt" | median)" -v b="$(cut -d' ' -f1 "$out/gloo-$n.txt" | median)" \
			'BEGIN { printf "%.3f", a / b }')
	else
		why=$(grep -m1 -o "Wait timeout for key" "$out/gloo-$n.err" | sed "s/.*/its store's wait timed out/")
		g="did not finish in ${limit}s${why:+ ($why)}"
		r=-
	fi
	printf '%6s  %-34s %-34s %s\n' "$n" "$d" "$g" "$r"
done
