"""Runs dlk and its PyTorch peers alternately on the same models and prints medians and ratios.
Called by bench/train/run.sh (which builds dlk_bench); standard library only.

Each peer is a Python with PyTorch plus the environment it runs in. For each model:
  1. every peer's configuration is tuned: torch_bench.py tune times its in-process candidates
     (Adam implementation, torch.compile, channels_last) under each OpenMP wait policy, twice;
     then, under the winning policy, the two fastest of them with the process-level settings of
     PyTorch's CPU performance guide (TCMalloc or jemalloc preloaded, Intel's OpenMP runtime with
     and without KMP_BLOCKTIME=1), alternated with the winner as it is, twice; the fastest
     median wins;
  2. one short warm-up run of each program (discarded);
  3. PAIRS rounds, round i trains every program with seed i, in the order dlk, peer 1, peer 2
     (A B C A B C ...), so that load from other users of the machine falls on all alike;
  4. medians with min-max of samples/s and peak RSS, test accuracy as the mean over the seeds,
     and the ratios dlk / peer.
Raw JSON of every run goes to OUT."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_BENCH = os.path.join(HERE, "torch_bench.py")
LOADS = []


def load_now():
    la = os.getloadavg()[0]
    LOADS.append(la)
    return la


def run_json(cmd, env=None, out=None):
    e = dict(os.environ)
    e.update(env or {})
    load_now()
    cmd = [str(c) for c in cmd]
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("bench/train: %s failed (exit %d)" % (" ".join(cmd), p.returncode))
    line = p.stdout.strip().splitlines()[-1]
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
    return json.loads(line)


class Peer:
    def __init__(self, name, python, env, threads):
        self.name, self.python = name, python
        # CPU only: the registry's wheel is built with CUDA; no device may be used even if present
        self.env = dict(env, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        self.best = {}  # model -> (extra env, config)

    def cmd(self, *args):
        return [self.python, TORCH_BENCH] + [str(a) for a in args]


def fmt_env(env):
    return " ".join("%s=%s" % kv for kv in sorted(env.items())) or "(default)"


# Debian's allocators that PyTorch's CPU performance guide recommends preloading
ALLOCATORS = ["/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"]


def process_variants(iomp):
    """The guide's process-level settings this machine has: a faster allocator, Intel's OpenMP
    runtime (libiomp5, which also answers GNU OpenMP's calls) with its default spin time and with
    KMP_BLOCKTIME=1, and both."""
    v = [{"LD_PRELOAD": lib} for lib in ALLOCATORS if os.path.exists(lib)]
    if iomp and os.path.exists(iomp):
        v += [{"LD_PRELOAD": iomp}, {"LD_PRELOAD": iomp, "KMP_BLOCKTIME": "1"}]
        v += [{"LD_PRELOAD": iomp + ":" + lib, "KMP_BLOCKTIME": "1"} for lib in ALLOCATORS[:1] if os.path.exists(lib)]
    return v


def show(title, res):
    ranked = sorted(res.items(), key=lambda kv: statistics.median(kv[1]))
    print(title)
    for (w, c), ts in ranked:
        print("    %7.3f  %-26s %s  (%d samples)" % (statistics.median(ts), fmt_env(json.loads(w)), c, len(ts)))
    return ranked[0][0]


def tune(peer, model, threads, out, waits, variants):
    res = {}
    for rnd in range(2):
        best = min((statistics.median(v) for v in res.values()), default=None)
        for w in waits:
            wk = json.dumps(w, sort_keys=True)
            # a wait policy 3x slower than the best in round 1 is not run again
            if best and min(statistics.median(v) for k, v in res.items() if k[0] == wk) > 3 * best:
                continue
            for r in run_json(peer.cmd("tune", model, threads), dict(peer.env, **w), out):
                key = (wk, json.dumps(r["config"], sort_keys=True))
                res.setdefault(key, []).extend(r["samples"])
    w, c = show("  %s, %s: tuned (ms per step, median; fastest first)" % (peer.name, model), res)
    if variants:
        # then the process-level settings, under the winning wait policy, for the two fastest
        # in-process configurations, alternated with the winner as it is, twice
        ranked = sorted(res.items(), key=lambda kv: statistics.median(kv[1]))
        cands = [json.loads(k[1]) for k, _ in ranked if k[0] == w][:2]
        envs = [json.loads(w)] + [dict(json.loads(w), **v) for v in variants]
        res2 = {}
        for rnd in range(2):
            for e in envs:
                for r in run_json(peer.cmd("tune", model, threads, json.dumps(cands)), dict(peer.env, **e), out):
                    key = (json.dumps(e, sort_keys=True), json.dumps(r["config"], sort_keys=True))
                    res2.setdefault(key, []).extend(r["samples"])
        w, c = show("  %s, %s: the guide's process settings under %s (fastest first)" % (
            peer.name, model, fmt_env(json.loads(w))), res2)
    peer.best[model] = (json.loads(w), json.loads(c))


def med(xs):
    return statistics.median(xs)


def rng(xs, f="%.0f"):
    return ("%s (%s-%s)" % (f, f, f)) % (med(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlk", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", default="mlp=5,cnn=2")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--limit", default="")
    ap.add_argument("--tune", type=int, default=1)
    ap.add_argument("--waits", default="PASSIVE,default",
                    help="OpenMP wait policies the tuning tries (default: OpenMP's own, spinning a while)")
    ap.add_argument("--peer", action="append", default=[], help="NAME=PYTHON[:ENV=VAL,...]")
    ap.add_argument("--iomp", default="", help="Intel's OpenMP runtime (libiomp5.so) the tuning may preload")
    ap.add_argument("--variants", type=int, default=1,
                    help="also try the performance guide's allocators and OpenMP runtime (0: wait policies only)")
    a = ap.parse_args()
    epochs = dict(kv.split("=") for kv in a.epochs.split(","))
    waits = [{} if w == "default" else {"OMP_WAIT_POLICY": w} for w in a.waits.split(",")]
    os.makedirs(a.out, exist_ok=True)
    raw = os.path.join(a.out, "runs.jsonl")
    peers = []
    for spec in a.peer:
        name, rest = spec.split("=", 1)
        python, _, envs = rest.partition(":")
        env = dict(kv.split("=", 1) for kv in envs.split(",") if kv)
        peers.append(Peer(name, python, env, a.threads))
    # PyTorch 2.x's wheel brings numpy, whose own OpenBLAS would start a thread pool of its own
    # that training never uses
    for p in peers:
        if "LD_LIBRARY_PATH" not in p.env:
            p.env["OPENBLAS_NUM_THREADS"] = "1"

    print("load average at start: %.2f" % load_now())
    d = run_json([a.dlk, "info", 0, 0])
    print("dlk: %s, %d threads" % (d["device"], a.threads))
    for p in peers:
        # a peer on OpenBLAS gets the kernels dlk runs, which that OpenBLAS would not pick by itself
        if d["openblas_coretype"] and "openblas" in p.env.get("LD_LIBRARY_PATH", ""):
            p.env["OPENBLAS_CORETYPE"] = d["openblas_coretype"]
    for p in peers:
        i = run_json(p.cmd("info", a.threads), p.env)
        print("%s: PyTorch %s, BLAS %s, parallel backend %s, %d threads, CUDA %s; env %s" % (
            p.name, i["torch"], i["blas"], i["parallel_backend"], i["threads"],
            "visible" if i["cuda_available"] else "not used", fmt_env(p.env)))
        print("  build: " + "; ".join(x[2:] for x in i["build"]))
        print("  loaded: " + ", ".join(os.path.basename(x) for x in i["loaded"]))
        if i["refuse"]:
            raise SystemExit("bench/train: refusing to compare with %s: %s" % (p.name, i["refuse"]))
        p.version = i["torch"].split("+")[0]

    summary = {}
    for model in a.models.split(","):
        ep = int(epochs[model])
        print("\n== %s, %d epochs, batch 128, Adam 1e-3, %d threads" % (model, ep, a.threads))
        for p in peers:
            if a.tune:
                tune(p, model, a.threads, None, waits, process_variants(a.iomp) if a.variants else [])
            else:
                # untuned: the wait policy that won every tuning on a shared machine
                p.best[model] = ({"OMP_WAIT_POLICY": os.environ.get("TORCH_BENCH_WAIT", "PASSIVE")},
                                 json.loads(os.environ.get("TORCH_BENCH_CONFIG", '{"adam": "foreach"}')))
            w, c = p.best[model]
            print("  %s runs with %s, %s" % (p.name, fmt_env(w), json.dumps(c)))

        def run_dlk(seed, e, limit, bundle=""):
            env = {"BENCH_SEED": str(seed)}
            if bundle:
                env["DLK_BENCH_BUNDLE"] = bundle
            return run_json([a.dlk, model, e, a.threads] + ([limit] if limit else []), env, raw)

        def run_peer(p, seed, e, limit):
            w, c = p.best[model]
            env = dict(p.env, BENCH_SEED=str(seed), TORCH_BENCH_CONFIG=json.dumps(c), **w)
            return run_json(p.cmd(model, e, a.threads, limit), env, raw)

        # warm-up: page cache, CPU frequency, compiled-kernel caches
        run_dlk(0, 1, "2560")
        for p in peers:
            run_peer(p, 0, 1, "2560")
        res = {"dlk": []}
        res.update({p.name: [] for p in peers})
        gemm = []
        bundle = os.path.join(a.out, "%s.dlk" % model)
        for seed in range(1, a.pairs + 1):
            t0 = time.time()
            res["dlk"].append(run_dlk(seed, ep, a.limit, bundle if seed == 1 else ""))
            if model == "mlp":
                gemm.append(run_json([a.dlk, "gemm", 1, a.threads], None, raw)["step_ms"])
            for p in peers:
                res[p.name].append(run_peer(p, seed, ep, a.limit))
            print("  round %d (seed %d) done in %.0f s, load average %.2f" % (seed, seed, time.time() - t0, load_now()))

        print("\n  %-16s %26s %24s %12s %8s   %s" % ("impl", "samples/s median (min-max)", "step ms",
                                                       "CPU ms/step", "peak MB", "test accuracy per seed, mean"))
        for name, rs in res.items():
            sps = [r["samples_per_sec"] for r in rs]
            acc = [r["test_accuracy"] for r in rs]
            label = name if name == "dlk" else "%s %s" % (name, next(p.version for p in peers if p.name == name))
            print("  %-16s %26s %24s %12.3f %8.0f   %s, %.4f" % (
                label, rng(sps), rng([r["step_ms"] for r in rs], "%.3f"),
                med([r.get("cpu_ms_per_step", 0) for r in rs]), med([r["peak_rss_mb"] for r in rs]),
                " ".join("%.4f" % x for x in acc), statistics.mean(acc)))
        d = res["dlk"]
        for p in peers:
            q = res[p.name]
            ratios = [x["samples_per_sec"] / y["samples_per_sec"] for x, y in zip(d, q)]
            acc = statistics.mean(x["test_accuracy"] for x in d) - statistics.mean(y["test_accuracy"] for y in q)
            mem = med([x["peak_rss_mb"] for x in d]) / med([y["peak_rss_mb"] for y in q])
            print("  dlk / %-9s speed %.2fx (pairs %.2f-%.2f), accuracy %+.2f points (mean of %d seeds), "
                  "memory %.2f" % (p.name, med(ratios), min(ratios), max(ratios), 100 * acc, len(d), mem))
            summary["%s_%s" % (model, p.name)] = {"speed": med(ratios), "accuracy_points": 100 * acc, "memory": mem}
        if gemm:
            step = med([r["step_ms"] for r in d])
            print("  dlk mlp step %.3f ms, its GEMMs alone %.3f ms (median of %d): step = %.2fx its GEMMs" % (
                step, med(gemm), len(gemm), step / med(gemm)))
            summary["mlp_step_over_gemm"] = step / med(gemm)
        if model == "cnn" and peers:
            c = run_json(peers[0].cmd("check", "cnn", bundle), peers[0].env)
            print("  dlk's CNN bundle (seed 1) loaded into %s: test accuracy %.4f (dlk recorded %.4f)%s" % (
                peers[0].name, c["test_accuracy"], c["dlk_recorded_accuracy"],
                "" if abs(c["test_accuracy"] - c["dlk_recorded_accuracy"]) < 1e-3 else "  MISMATCH"))
    print("\nload average during the runs: %.2f-%.2f (2 cores)" % (min(LOADS), max(LOADS)))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("raw results: %s" % raw)


if __name__ == "__main__":
    main()
