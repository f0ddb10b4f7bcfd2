#!/bin/sh
# All-reduce on loopback: dlk's TCP ring against Gloo's ring all-reduces (libgloo-dev).
# Builds both drivers into bench/out/allreduce, runs 2 and 4 ranks over 4 KiB..256 MiB
# (powers of 4) and prints time, algbw and busbw = algbw * 2(n-1)/n (nccl-tests) per size.
# Each driver times 3 back-to-back trials per size and keeps the fastest (the machine may be
# shared); time is per operation.
# Usage: bench/allreduce/run.sh [NRANKS...]    (default: 2 4; needs build/libdlk.a: make)
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
out=bench/out/allreduce
mkdir -p "$out"
[ -f build/libdlk.a ] || make -j2 build/libdlk.a >/dev/null
PKGS="yaml-0.1 libcurl libcjson libarchive openblas libmicrohttpd libcrypto"
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I. -o "$out/dlk_allreduce" bench/allreduce/dlk_allreduce.c \
	build/libdlk.a $(pkg-config --libs $PKGS) -ldl -lpthread -lm
if dpkg -s libgloo-dev >/dev/null 2>&1 || [ -f /usr/include/gloo/allreduce_ring.h ]; then
	${CXX:-c++} -std=c++17 -O2 -o "$out/gloo_allreduce" bench/allreduce/gloo_allreduce.cc -lgloo -lpthread
	have_gloo=1
else
	echo "# libgloo-dev not installed (apt-get install -y libgloo-dev): dlk only"
	have_gloo=0
fi
sizes=""
s=4096
while [ $s -le 268435456 ]; do sizes="$sizes $s"; s=$((s * 4)); done
ranks=${*:-2 4}

# Interleave: for every size, each implementation runs REPS times in turn, and the best run
# counts, so that load from other users of the machine hits all of them alike.
REPS=${REPS:-2}
for n in $ranks; do
	: > "$out/dlk-$n.txt"
	: > "$out/gloo-$n.txt"
	for s in $sizes; do
		r=0
		while [ $r -lt "$REPS" ]; do
			"$out/dlk_allreduce" "$n" "$s" >> "$out/dlk-$n.txt"
			if [ $have_gloo = 1 ]; then
				"$out/gloo_allreduce" ring_chunked "$n" "$s" >> "$out/gloo-$n.txt"
				"$out/gloo_allreduce" ring "$n" "$s" >> "$out/gloo-$n.txt"
			fi
			r=$((r + 1))
		done
	done
	echo "# $n ranks, loopback, float32 sum; busbw = algbw * 2($n-1)/$n; time = best of $REPS runs x 3 trials;"
	echo "# gloo = the faster of AllreduceRing and AllreduceRingChunked"
	printf '%10s %12s %10s %10s %12s %10s %10s %7s\n' size dlk_time dlk_algbw dlk_busbw gloo_time gloo_algbw gloo_busbw ratio
	awk -v n="$n" '
		function human(b) { return b >= 1048576 ? (b / 1048576) "MiB" : (b / 1024) "KiB" }
		FILENAME ~ /dlk-/ { if (!($1 in d)) order[++k] = $1; if (!($1 in d) || $2 < d[$1]) d[$1] = $2; next }
		{ if (!($1 in g) || $2 < g[$1]) g[$1] = $2 }
		END {
			f = 2 * (n - 1) / n
			for (i = 1; i <= k; i++) {
				s = order[i]; a = s / d[s] / 1e9
				if (s in g) {
					ga = s / g[s] / 1e9
					printf "%10s %10.1fus %8.3fGB/s %8.3fGB/s %10.1fus %8.3fGB/s %8.3fGB/s %6.2fx\n", human(s), d[s] * 1e6, a, a * f, g[s] * 1e6, ga, ga * f, (a * f) / (ga * f)
				} else {
					printf "%10s %10.1fus %8.3fGB/s %8.3fGB/s %12s %10s %10s %7s\n", human(s), d[s] * 1e6, a, a * f, "-", "-", "-", "-"
				}
			}
		}' "$out/dlk-$n.txt" "$out/gloo-$n.txt"
	echo
done
