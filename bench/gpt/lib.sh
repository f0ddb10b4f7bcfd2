# Sourced by bench/gpt/run.sh and bench/gpt/generate.sh, from the top of the tree, with steps set:
# the programs and the text they need, a work folder $w removed on exit, and in it the example's
# dlk.yaml and the slice of dict-gcide whose training split (90%) packs into exactly $steps batches
# of 32 sequences of 128 bytes.
dlk=$top/${BUILD:-build}/dlk
py=$top/.deps/frameworks/bin/python
gcide=/usr/share/dictd/gcide.dict.dz
[ -x "$dlk" ] || { echo "bench/gpt: build $dlk first (make)" >&2; exit 2; }
[ -x "$py" ] || { echo "bench/gpt: no $py (run .ci/deps)" >&2; exit 2; }
[ -f "$gcide" ] || { echo "bench/gpt: no $gcide (apt install dict-gcide)" >&2; exit 2; }
out=${OUT:-bench/out/gpt}
mkdir -p "$out"
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
bytes=$(( (steps * 4096 + 64) * 10 / 9 + 1 ))
{ gzip -dc "$gcide" | head -c 3000000 | tail -c "$bytes" >"$w/slice.txt"; } || true
cp examples/gpt/dlk.yaml "$w/"
