#!/bin/sh
# Generation speed of examples/gpt/dlk.yaml's GPT: `dlk generate` against transformers'
# GPT2LMHeadModel.generate (bench/gpt/generate_peer.py) on the same weights (`dlk export --hf`),
# both greedy with a key/value cache, the same prompt and exactly N new tokens, on the CPU,
# alternating dlk and PyTorch. Prints the time to the first token (the prompt's forward pass and
# the first choice) and the decode rate ((N - 1) tokens over the time after the first), medians
# with min-max, and the ratios; and whether both generated the same text (they should: the
# logits agree to about 1e-5, t2030).
#   sh bench/gpt/generate.sh        (from the source tree, after `make` and .ci/deps: dict-gcide, frameworks)
#   N=100 PAIRS=3 REPS=5 THREADS=2 COMPILE=0 sh bench/gpt/generate.sh
# The model: the example GPT trained STEPS (default 30) steps of 32 x 128 tokens on a slice of
# dict-gcide, so that its text is words, not noise (speed does not depend on the weights). Each
# pair: dlk generate REPS times (a process each: dlk loads a bundle in milliseconds), then one
# peer process that generates once untimed and REPS times timed; a figure of a pair is the median
# of its REPS. The peer's configuration is chosen in the warm-up: eager under the default OpenMP
# wait policy and under OMP_WAIT_POLICY=PASSIVE (COMPILE=1 adds transformers' static cache with
# torch.compile under each), the fastest decode kept and printed. Also printed: each program's
# seconds from its start to the end of its first generation (loading, and the peer's imports).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
n=${N:-100}
pairs=${PAIRS:-3}
reps=${REPS:-5}
threads=${THREADS:-2}
steps=${STEPS:-30}
prompt="The meaning of a"
[ $(( ${#prompt} + n )) -le 128 ] || { echo "bench/gpt: prompt + N must fit the context of 128" >&2; exit 2; }
. bench/gpt/lib.sh
(cd "$w" && "$dlk" train --local -q --set data.train.source=slice.txt --set data.validation=0.1 \
	--set training.threads="$threads" --set training.checkpoint.every=0 >train.out 2>&1 &&
	"$dlk" export gpt.dlk --hf hf >/dev/null) || { cat "$w/train.out" >&2; exit 1; }
rm -f "$out/generate.jsonl"

run_dlk() { # one JSON line: the medians of REPS runs
	r=0
	: >"$w/dlk.runs"
	while [ "$r" -lt "$reps" ]; do
		s=$(date +%s.%N)
		"$dlk" generate "$w/gpt.dlk" "$prompt" --max-tokens "$n" --temperature 0 --threads "$threads" -o json >"$w/g.json"
		e=$(date +%s.%N)
		"$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"ttft":r["time_to_first_token_seconds"],"rate":(r["usage"]["completion_tokens"]-1)/(r["seconds"]-r["time_to_first_token_seconds"]),"tokens":r["usage"]["completion_tokens"],"text":r["text"],"process":float(sys.argv[3])-float(sys.argv[2])}))' \
			"$w/g.json" "$s" "$e" >>"$w/dlk.runs"
		r=$((r + 1))
	done
	"$py" -c 'import json,statistics as st,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
print(json.dumps({"prog":"dlk","ttftSeconds":st.median(r["ttft"] for r in rs),"tokensPerSecond":st.median(r["rate"] for r in rs),"tokens":rs[-1]["tokens"],"text":rs[-1]["text"],"processToFirstGeneration":rs[0]["process"]}))' "$w/dlk.runs" >>"$out/generate.jsonl"
}
run_torch() { # $1: wait policy (default or PASSIVE), $2: extra flags
	if [ "$1" = PASSIVE ]; then set -- "$1" "${2:-}" OMP_WAIT_POLICY=PASSIVE; else set -- "$1" "${2:-}" DLK_BENCH=1; fi
	env OMP_NUM_THREADS="$threads" "$3" "$py" bench/gpt/generate_peer.py "$w/hf" "$prompt" "$n" --threads "$threads" \
		--reps "$reps" $2 >"$w/torch.json" 2>"$w/torch.err" || { cat "$w/torch.err" >&2; exit 1; }
	"$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); r["prog"]="torch"; print(json.dumps(r))' "$w/torch.json" >>"$out/generate.jsonl"
}

grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), prompt of ${#prompt} bytes, $n new tokens, greedy, $threads threads, $reps generations a figure"
echo "warm-up (discarded): dlk, PyTorch eager with the default and the PASSIVE OpenMP wait policy${COMPILE:+ (COMPILE=$COMPILE)}"
run_dlk
run_torch default
run_torch PASSIVE
if [ "${COMPILE:-0}" = 1 ]; then run_torch default --static-compile; run_torch PASSIVE --static-compile; fi
best=$("$py" -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1]) if "\"torch\"" in l]
for r in rs: print("  peer candidate: wait %s static cache + compile %s: %.0f tokens/s, first token %.1f ms" % (r["wait"], r["staticCompile"], r["tokensPerSecond"], 1000 * r["ttftSeconds"]), file=sys.stderr)
b=max(rs,key=lambda r:r["tokensPerSecond"]); print(b["wait"], "--static-compile" if b["staticCompile"] else "")' "$out/generate.jsonl")
set -- $best
wait_policy=$1 flag=${2:-}
echo "peer: transformers $("$py" -c 'import transformers; print(transformers.__version__)') on PyTorch $("$py" -c 'import torch; print(torch.__version__)'), GPT2LMHeadModel.generate, ${flag:+static cache + torch.compile, }OMP_WAIT_POLICY=$wait_policy, $threads threads"
mv "$out/generate.jsonl" "$out/generate-warmup.jsonl"
i=1
while [ "$i" -le "$pairs" ]; do
	run_dlk
	run_torch "$wait_policy" "$flag"
	echo "  pair $i: $(tail -n 2 "$out/generate.jsonl" | "$py" -c 'import json,sys; print("  ".join("%s %.0f tok/s first %.1f ms" % (r["prog"], r["tokensPerSecond"], 1000 * r["ttftSeconds"]) for r in map(json.loads, sys.stdin)))')"
	i=$((i + 1))
done
"$py" - "$out/generate.jsonl" <<'PY'
import json, statistics as st, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
by = {p: [r for r in rs if r["prog"] == p] for p in ("dlk", "torch")}
def f(p, k, fmt, scale=1):
    v = [scale * r[k] for r in by[p]]
    return (fmt % st.median(v)) + " (" + (fmt % min(v)) + "-" + (fmt % max(v)) + ")"
for p in ("dlk", "torch"):
    print("%-6s decode tokens/s %s  first token ms %s  start to first text s %s" % (p, f(p, "tokensPerSecond", "%.0f"),
          f(p, "ttftSeconds", "%.2f", 1000), f(p, "processToFirstGeneration", "%.2f")))
rate = [a["tokensPerSecond"] / b["tokensPerSecond"] for a, b in zip(by["dlk"], by["torch"])]
first = [b["ttftSeconds"] / a["ttftSeconds"] for a, b in zip(by["dlk"], by["torch"])]
print("dlk / PyTorch: decode %.2fx (pairs %.2f-%.2f), first token %.2fx sooner (%.2f-%.2f)" % (
    st.median(rate), min(rate), max(rate), st.median(first), min(first), max(first)))
same = all(a["text"] == b["text"] for a, b in zip(by["dlk"], by["torch"]))
print("the same greedy text from both: %s%s" % ("yes" if same else "no", "" if same else " (a near-tie decided otherwise)"))
if not same:
    print("  dlk:   %r\n  torch: %r" % (by["dlk"][-1]["text"], by["torch"][-1]["text"]))
PY
