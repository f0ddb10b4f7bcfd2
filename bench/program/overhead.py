"""Supervision overhead of dlk around a user's program: the PyTorch example (examples/pytorch)
as 2 ranks started bare (two python3 processes with torchrun's variables, from this script) and
under `dlk train --local --workers 2`, alternating A B A B after one warm-up of each. Prints the
wall time and the CPU time (user + system of every process of the run) of each, their medians
with min-max, and dlk's over the bare program's."""
import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bare(project, args):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", PYTHONUNBUFFERED="1",
                   DLK_DATA_DIR="/usr/share/datasets/fashion-mnist")
        procs.append(subprocess.Popen([sys.executable, "train.py"] + args, cwd=project, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("bare run failed:\n" + b"".join(outs).decode(errors="replace"))


def under_dlk(dlk, project, args):
    argv = [dlk, "train", "--local", "--workers", "2", "--fresh", "-q", "-f", os.path.join(project, "dlk.yaml"),
            "--set", "program.args=[" + ", ".join('"%s"' % a for a in args) + "]"]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode:
        raise SystemExit("dlk run failed:\n" + p.stdout.decode(errors="replace"))


def measure(fn):
    c0, t0 = children_cpu(), time.monotonic()
    fn()
    return time.monotonic() - t0, children_cpu() - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlk", required=True)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--train-samples", default="20000")
    ap.add_argument("--epochs", default="2")
    o = ap.parse_args()
    args = ["--epochs", o.epochs, "--train-samples", o.train_samples, "--test-samples", "2000"]
    project = tempfile.mkdtemp(prefix="dlk-bench-program.")
    try:
        subprocess.run([o.dlk, "init", "-q", "--example", "pytorch", project], check=True)
        runs = {"bare": lambda: bare(project, args), "dlk": lambda: under_dlk(o.dlk, project, args)}
        for name in ("bare", "dlk"):
            measure(runs[name])  # warm-up: page cache, Python's bytecode cache
        got = {"bare": [], "dlk": []}
        for i in range(o.pairs):
            for name in ("bare", "dlk"):
                w, c = measure(runs[name])
                got[name].append((w, c))
                print("pair %d %-4s wall %6.2f s  cpu %6.2f s" % (i + 1, name, w, c), flush=True)
        med = {}
        for name in ("bare", "dlk"):
            for k, label in ((0, "wall"), (1, "cpu")):
                v = [x[k] for x in got[name]]
                med[name, label] = statistics.median(v)
                print("%-4s %-4s median %6.2f s (min %.2f, max %.2f)" % (name, label, statistics.median(v), min(v),
                                                                       max(v)))
        for label in ("wall", "cpu"):
            print("dlk / bare %s: %+.1f%%" % (label, 100 * (med["dlk", label] / med["bare", label] - 1)))
    finally:
        shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
