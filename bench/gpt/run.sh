#!/bin/sh
# Trains examples/gpt/dlk.yaml's GPT (byte-level, 4 pre-norm blocks of 4 heads, width 128, context
# 128, tied head, AdamW) with `dlk train --local` and the same model in PyTorch (bench/gpt/peer.py)
# on the CPU, on the same slice of dict-gcide (same byte tokens, split and sequences, batch 32,
# STEPS optimizer steps), alternating dlk and PyTorch, and prints training tokens/s, the validation
# loss after the run and the peak RSS of each (medians with min-max), and the ratios.
#   sh bench/gpt/run.sh          (from the source tree, after `make` and .ci/deps: dict-gcide, frameworks)
#   STEPS=20 PAIRS=3 THREADS=2 COMPILE=0 PRECISION=fp32 sh bench/gpt/run.sh
# PRECISION=bf16 trains dlk with training.precision: bf16 and adds PyTorch's CPU mixed precision
# (torch.autocast to bfloat16) to the peer's candidates: the faster of fp32 and bf16 is kept.
# The peer's configuration is chosen in the warm-up: eager under the default OpenMP wait policy
# and under OMP_WAIT_POLICY=PASSIVE, the faster kept (COMPILE=1 adds torch.compile under each:
# see bench/README.md). dlk's tokens/s counts every step of its run (its -o json tokensPerSecond);
# the peer's leaves out its first 3 steps.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
steps=${STEPS:-20}
pairs=${PAIRS:-3}
threads=${THREADS:-2}
precision=${PRECISION:-fp32}
. bench/gpt/lib.sh
rm -f "$out/runs.jsonl"

run_dlk() { # $1: seed
	(cd "$w" && rm -rf .dlk gpt.dlk && /usr/bin/time -v -o time.txt "$dlk" train --local -q -o json \
		--set data.train.source=slice.txt --set data.validation=0.1 --set training.threads="$threads" \
		--set training.checkpoint.every=0 --set training.seed="$1" --set training.precision="$precision" \
		>dlk.json 2>dlk.err) ||
		{ cat "$w/dlk.err" >&2; exit 1; }
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$w/time.txt")
	"$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"prog":"dlk","seed":int(sys.argv[3]),"steps":r["steps"],"tokensPerSecond":r["tokensPerSecond"],"valLoss":r["testLoss"],"rssKB":int(sys.argv[2])}))' \
		"$w/dlk.json" "$rss" "$1" >>"$out/runs.jsonl"
}
run_torch() { # $1: seed, $2: wait policy (default or PASSIVE), $3: extra flags
	if [ "$2" = PASSIVE ]; then set -- "$1" "$2" "${3:-}" OMP_WAIT_POLICY=PASSIVE; else set -- "$1" "$2" "${3:-}" DLK_BENCH=1; fi
	env OMP_NUM_THREADS="$threads" "$4" /usr/bin/time -v -o "$w/time.txt" "$py" bench/gpt/peer.py "$w/slice.txt" \
		--threads "$threads" --seed "$1" $3 >"$w/torch.json"
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$w/time.txt")
	"$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); r.update(prog="torch",seed=int(sys.argv[3]),rssKB=int(sys.argv[2]),wait=sys.argv[4]); print(json.dumps(r))' \
		"$w/torch.json" "$rss" "$1" "$2" >>"$out/runs.jsonl"
}

grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $steps steps of 32 x 128 tokens, $threads threads"
cmsg=
if [ "${COMPILE:-0}" = 1 ]; then cmsg=", and torch.compile under each"; fi
echo "warm-up (discarded): dlk, PyTorch eager with the default and the PASSIVE OpenMP wait policy$cmsg"
run_dlk 0
run_torch 0 default
run_torch 0 PASSIVE
if [ "${COMPILE:-0}" = 1 ]; then run_torch 0 default --compile; run_torch 0 PASSIVE --compile; fi
if [ "$precision" = bf16 ]; then
	run_torch 0 default --bf16
	run_torch 0 PASSIVE --bf16
	if [ "${COMPILE:-0}" = 1 ]; then run_torch 0 default "--compile --bf16"; run_torch 0 PASSIVE "--compile --bf16"; fi
fi
best=$("$py" -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1]) if "\"torch\"" in l]
for r in rs: print("  peer candidate: wait %s compile %s autocast bf16 %s: %.0f tokens/s val %.3f" % (r["wait"], r["compile"], r.get("bf16", False), r["tokensPerSecond"], r["valLoss"]), file=sys.stderr)
b=max(rs,key=lambda r:r["tokensPerSecond"]); print(b["wait"], ("--compile " if b["compile"] else "") + ("--bf16" if b.get("bf16") else ""))' "$out/runs.jsonl")
set -- $best
wait_policy=$1
shift
flag="$*"
echo "dlk: training.precision: $precision"
echo "peer: PyTorch eager$(case "$flag" in *--compile*) echo " + torch.compile";; esac)$(case "$flag" in *--bf16*) echo " + autocast bf16";; esac), OMP_WAIT_POLICY=$wait_policy, $threads threads"
mv "$out/runs.jsonl" "$out/warmup.jsonl"
i=1
while [ "$i" -le "$pairs" ]; do
	run_dlk "$i"
	run_torch "$i" "$wait_policy" "$flag"
	echo "  pair $i: $(tail -n 2 "$out/runs.jsonl" | "$py" -c 'import json,sys; print("  ".join("%s %.0f tok/s val %.3f" % (r["prog"], r["tokensPerSecond"], r["valLoss"]) for r in map(json.loads, sys.stdin)))')"
	i=$((i + 1))
done
"$py" - "$out/runs.jsonl" <<'PY'
import json, statistics as st, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
by = {p: [r for r in rs if r["prog"] == p] for p in ("dlk", "torch")}
def f(p, k, fmt):
    v = [r[k] for r in by[p]]
    return (fmt % st.median(v)) + " (" + (fmt % min(v)) + "-" + (fmt % max(v)) + ")"
for p in ("dlk", "torch"):
    print("%-6s tokens/s %s  val loss %s  peak RSS MB %s" % (p, f(p, "tokensPerSecond", "%.0f"), f(p, "valLoss", "%.3f"),
          "%.0f" % (st.median(r["rssKB"] for r in by[p]) / 1024)))
ratios = [a["tokensPerSecond"] / b["tokensPerSecond"] for a, b in zip(by["dlk"], by["torch"])]
print("dlk / PyTorch tokens/s: %.2fx (median of the pairs, %.2f-%.2f)" % (st.median(ratios), min(ratios), max(ratios)))
PY
