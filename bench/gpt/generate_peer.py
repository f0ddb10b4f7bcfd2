"""The PyTorch peer of bench/gpt/generate.sh: transformers' GPT2LMHeadModel.generate on the
weights `dlk export --hf` wrote, greedy, with its key/value cache, on the CPU.

  python generate_peer.py HF_DIR PROMPT N [--threads 2] [--reps 5] [--static-compile]

Token ids are dlk's byte ids (1 + byte). Loads the model, generates once untimed (warm-up), then
--reps times exactly N new tokens after PROMPT, and prints one JSON line: the median time to the
first token (the prompt's forward pass and the first choice: the moment generate asks its logits
processor about the first token), the median decode rate ((N - 1) tokens over the time after
the first), the text of the last run, the configuration, and the seconds from the start of the
process to the end of the first generation (imports and loading included)."""
import argparse
import json
import os
import statistics
import sys
import time

T0 = time.perf_counter()
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch  # noqa: E402
from transformers import GPT2LMHeadModel, LogitsProcessor, LogitsProcessorList  # noqa: E402


class Clock(LogitsProcessor):
    """Notes the time generate asks about each new token: the first call is after the prompt's pass."""

    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf")
    ap.add_argument("prompt")
    ap.add_argument("n", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--static-compile", action="store_true",
                    help="a static key/value cache and torch.compile of the forward (transformers' guide)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)  # subnormals as zero, as dlk's CPU engine computes them
    m = GPT2LMHeadModel.from_pretrained(a.hf).eval()
    kw = {}
    if a.static_compile:
        m.generation_config.cache_implementation = "static"
        m.forward = torch.compile(m.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.tensor([[1 + b for b in a.prompt.encode()]])
    mask = torch.ones_like(ids)

    def gen():
        c = Clock()
        t = time.perf_counter()
        with torch.inference_mode():
            out = m.generate(ids, attention_mask=mask, max_new_tokens=a.n, min_new_tokens=a.n, do_sample=False,
                             use_cache=True, pad_token_id=0, logits_processor=LogitsProcessorList([c]), **kw)
        end = time.perf_counter()
        return out[0, ids.shape[1]:].tolist(), c.times[0] - t, (a.n - 1) / (end - c.times[0])

    toks, _, _ = gen()
    first_end = time.perf_counter() - T0
    ttft, rate = [], []
    for _ in range(a.reps):
        toks, f, r = gen()
        ttft.append(f)
        rate.append(r)
    text = bytes(max(0, i - 1) for i in toks).decode("utf-8", "replace")
    print(json.dumps({"ttftSeconds": statistics.median(ttft), "tokensPerSecond": statistics.median(rate),
                      "tokens": len(toks), "text": text, "processToFirstGeneration": first_end,
                      "threads": a.threads, "staticCompile": a.static_compile,
                      "wait": os.environ.get("OMP_WAIT_POLICY", "default")}))


if __name__ == "__main__":
    sys.exit(main())
