#!/usr/bin/env python3
"""Samples/s per rank of `dlk train --local --workers N` on examples/mlp, one thread per rank.

  python3 bench/train/ranks.py [--dlk NAME=PATH ...] [--workers 1,2,4] [--rounds 3] [--epochs 2]

Every round runs every (binary, N) once, alternated, so load from other users falls on all
alike. Each run trains in a fresh temporary directory (a copy of examples/mlp/dlk.yaml, --fresh,
training.threads=1, batch 128 per rank: the same rank-steps for every N). Per rank: the epochs'
samples/s (the global rate dlk records) divided by N, the median of the epochs; the CPU time of
the whole process tree (user + system of dlk and its workers, which it waits for) per rank-step.
Prints the median with min-max over the rounds."""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(dlk, n, epochs):
    d = tempfile.mkdtemp(prefix="dlk-ranks-")
    try:
        shutil.copy(os.path.join(top, "examples/mlp/dlk.yaml"), d)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([dlk, "train", "--local", "--workers", str(n), "--fresh", "--metrics", "m.jsonl",
                            "--set", "training.threads=1", "--set", "training.epochs=%d" % epochs],
                           cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            sys.exit("ranks: %s --workers %d failed (%d): %s" % (dlk, n, p.returncode, p.stderr[-2000:]))
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        epochs_ev = [json.loads(l) for l in open(os.path.join(d, "m.jsonl")) if '"event":"epoch"' in l]
        per_rank = statistics.median(e["samples_per_sec"] for e in epochs_ev) / n
        rank_steps = epochs_ev[-1]["step"]  # steps of one rank over the run
        return per_rank, cpu, cpu * 1e3 / (rank_steps * n)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlk", action="append", default=[], help="NAME=PATH (default: dlk=build/dlk)")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    bins = [(n, os.path.abspath(p)) for n, p in (x.split("=", 1) for x in (a.dlk or ["dlk=" + os.path.join(top, "build/dlk")]))]
    ns = [int(x) for x in a.workers.split(",")]
    res = {}
    for r in range(a.rounds):
        for n in ns:
            for name, path in bins:
                res.setdefault((name, n), []).append(run(path, n, a.epochs))
        print("round %d done, load average %.1f" % (r + 1, os.getloadavg()[0]), flush=True)
    print("%-8s %7s  %-34s %-28s %s" % ("dlk", "workers", "samples/s per rank, median (min-max)",
                                        "CPU s, process tree (rounds)", "CPU ms per rank-step (median)"))
    for name, _ in bins:
        for n in ns:
            v = res[(name, n)]
            sps = [x[0] for x in v]
            print("%-8s %7d  %-34s %-28s %.2f" % (name, n, "%.0f (%.0f-%.0f)" % (statistics.median(sps), min(sps), max(sps)),
                                                  " ".join("%.2f" % x[1] for x in v),
                                                  statistics.median(x[2] for x in v)))


if __name__ == "__main__":
    main()
