#!/bin/sh
# Peak resident memory per rank of `dlk train --local` on Fashion-MNIST (the example MLP, 1 epoch,
# 1 thread per worker) with 1, 2 and 4 workers, every rank holding the whole training split
# (data.shard: false) and each rank holding only its part (data.shard: true); the training
# files as published (gzip: a rank streams the file and keeps its range) and gunzipped (plain
# IDX: a rank reads the header and its range only).
#   sh bench/train/shard_rss.sh            (from the source tree, after `make`; needs
#                                           /usr/share/datasets/fashion-mnist, `.ci/deps test`)
#   WORKERS="1 2 4" REPEAT=3 sh bench/train/shard_rss.sh
# One worker runs alone (GNU time's maximum resident set size); a gang's ranks are measured by
# the gang itself (wait4's ru_maxrss of each worker, in the run record's peak_memory_bytes).
# Prints, per configuration, the median over REPEAT runs of each rank's peak in MiB.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
dlk=${DLK:-$top/build/dlk}
fm=/usr/share/datasets/fashion-mnist
repeat=${REPEAT:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlk-shard-rss.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

[ -x "$dlk" ] || { echo "bench/train/shard_rss: build $dlk first (make)" >&2; exit 2; }
[ -f "$fm/train-images-idx3-ubyte.gz" ] || { echo "bench/train/shard_rss: no Fashion-MNIST in $fm (.ci/deps test)" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench/train/shard_rss: jq is missing" >&2; exit 2; }
gunzip -c "$fm/train-images-idx3-ubyte.gz" >"$tmp/train-images.idx"
gunzip -c "$fm/train-labels-idx1-ubyte.gz" >"$tmp/train-labels.idx"

echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $("$dlk" version 2>/dev/null | head -1)"
echo "files       shard  workers  peak RSS per rank, MiB (median of $repeat)"
for files in gzip plain; do
	for shard in false true; do
		for w in ${WORKERS:-1 2 4}; do
			i=0
			: >"$tmp/peaks"
			while [ $i -lt "$repeat" ]; do
				p="$tmp/p$i" && rm -rf "$p" && mkdir -p "$p" && cp "$top/examples/mlp/dlk.yaml" "$p/"
				if [ $files = plain ]; then
					sed -i "s,file://$fm/train-images-idx3-ubyte.gz,$tmp/train-images.idx,; s,file://$fm/train-labels-idx1-ubyte.gz,$tmp/train-labels.idx," "$p/dlk.yaml"
				fi
				set -- --set training.epochs=1 --set training.threads=1 --set data.shard=$shard \
					--set training.batch_size=$((128 / w))
				if [ "$w" = 1 ]; then
					/usr/bin/time -f %M -o "$p/time" "$dlk" train --local -q -f "$p/dlk.yaml" "$@" >/dev/null 2>"$p/err" ||
						{ cat "$p/err" >&2; exit 1; }
					echo "$(tail -1 "$p/time")" >>"$tmp/peaks"
				else
					"$dlk" train --local --workers "$w" -q -f "$p/dlk.yaml" "$@" >/dev/null 2>"$p/err" ||
						{ cat "$p/err" >&2; exit 1; }
					jq -r '.run.peak_memory_bytes | map(. / 1024 | floor | tostring) | join(" ")' \
						"$(ls "$p"/.dlk/runs/*/*.json | head -1)" >>"$tmp/peaks"
				fi
				i=$((i + 1))
			done
			# the median of each rank's column, KiB to MiB
			med=$(awk -v n="$w" '{ for (r = 1; r <= n; r++) v[r, NR] = $r } END {
				for (r = 1; r <= n; r++) {
					for (i = 1; i <= NR; i++) a[i] = v[r, i]
					for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
					printf "%s%.1f", (r > 1 ? " " : ""), a[int((NR + 1) / 2)] / 1024
				}
			}' "$tmp/peaks")
			printf "%-11s %-6s %-8s %s\n" "$files" "$shard" "$w" "$med"
		done
	done
done
