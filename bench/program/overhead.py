"""Supervision overhead of dlk around a user's program: the PyTorch example (examples/pytorch)
as 2 ranks started bare (two python3 processes with torchrun's variables, from this script) and
under `dlk train --local --workers 2`, in pairs after one warm-up of each; the order inside a pair
alternates (bare first, then dlk first), so that neither side always follows the other.

Both sides do the same work: the bare ranks get a checkpoint and an output directory too (the
example saves a checkpoint each epoch when DLK_CHECKPOINT_DIR is set, as it is under dlk), and
both start each rank through the same small shell wrapper, which notes when the rank's process
starts and when it has exited. That splits each run's wall time into the launcher's part (from
the command to the first rank's start, and from the last rank's exit to the command's end:
dlk's own work, or this script's) and the ranks' part (first start to last exit: the program).

Prints, per pair and as medians with min-max: the wall time, the CPU time (user + system of
every process of the run), the launcher's part and the ranks' part, and dlk's over the bare
program's, also as the median of the per-pair ratios (each pair ran under the same load)."""
import argparse
import glob
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# the same wrapper on both sides: the rank's start and end times, then its exit code
WRAP = ('date +%s.%N >"$DLK_BENCH_TIMES/start.$RANK"; "$0" "$@"; rc=$?; '
        'date +%s.%N >"$DLK_BENCH_TIMES/end.$RANK"; exit $rc')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bare(project, args, work):
    port = free_port()
    procs = []
    shutil.rmtree(os.path.join(work, "ckpt"))  # a fresh run, as `dlk train --fresh`
    os.makedirs(os.path.join(work, "ckpt"))
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", PYTHONUNBUFFERED="1",
                   DLK_DATA_DIR="/usr/share/datasets/fashion-mnist", DLK_CHECKPOINT_DIR=os.path.join(work, "ckpt"),
                   DLK_OUTPUT_DIR=os.path.join(work, "out"))
        procs.append(subprocess.Popen(["sh", "-c", WRAP, sys.executable, "train.py"] + args, cwd=project, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("bare run failed:\n" + b"".join(outs).decode(errors="replace"))


def under_dlk(dlk, project, args, work):
    argv = [dlk, "train", "--local", "--workers", "2", "--fresh", "-q", "-f", os.path.join(project, "dlk.yaml"),
            "--set", "program.command=[sh, -c, '%s', python3, train.py]" % WRAP.replace("'", "''"),
            "--set", "program.args=[" + ", ".join('"%s"' % a for a in args) + "]"]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode:
        raise SystemExit("dlk run failed:\n" + p.stdout.decode(errors="replace"))


def measure(fn, times):
    for f in glob.glob(os.path.join(times, "*")):
        os.remove(f)
    c0, t0 = children_cpu(), time.time()
    fn()
    t1, c1 = time.time(), children_cpu()
    starts = [float(open(f).read()) for f in glob.glob(os.path.join(times, "start.*"))]
    ends = [float(open(f).read()) for f in glob.glob(os.path.join(times, "end.*"))]
    if len(starts) != 2 or len(ends) != 2:
        raise SystemExit("a rank did not note its start and end in %s" % times)
    ranks = max(ends) - min(starts)
    return {"wall": t1 - t0, "cpu": c1 - c0, "launcher": (t1 - t0) - ranks, "ranks": ranks}


def spread(v):
    return "%7.2f s (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlk", required=True)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--train-samples", default="20000")
    ap.add_argument("--epochs", default="2")
    o = ap.parse_args()
    args = ["--epochs", o.epochs, "--train-samples", o.train_samples, "--test-samples", "2000"]
    work = tempfile.mkdtemp(prefix="dlk-bench-program.")
    project, times = os.path.join(work, "project"), os.path.join(work, "times")
    for d in (times, os.path.join(work, "ckpt"), os.path.join(work, "out")):
        os.makedirs(d)
    os.environ["DLK_BENCH_TIMES"] = times
    try:
        subprocess.run([o.dlk, "init", "-q", "--example", "pytorch", project], check=True)
        runs = {"bare": lambda: bare(project, args, work), "dlk": lambda: under_dlk(o.dlk, project, args, work)}
        for name in ("bare", "dlk"):
            measure(runs[name], times)  # warm-up: page cache, Python's bytecode cache
        keys = ("wall", "cpu", "launcher", "ranks")
        got = {"bare": [], "dlk": []}
        for i in range(o.pairs):
            for name in (("bare", "dlk") if i % 2 == 0 else ("dlk", "bare")):
                m = measure(runs[name], times)
                got[name].append(m)
                print("pair %d %-4s wall %6.2f s  cpu %6.2f s  launcher %5.2f s  ranks %6.2f s" %
                      (i + 1, name, m["wall"], m["cpu"], m["launcher"], m["ranks"]), flush=True)
        print("\n%-10s %-26s %-26s %s" % ("median", "bare (min-max)", "under dlk (min-max)", "dlk - bare"))
        for k in keys:
            b, d = [m[k] for m in got["bare"]], [m[k] for m in got["dlk"]]
            print("%-10s %-26s %-26s %+.2f s" % (k, spread(b), spread(d), statistics.median(d) - statistics.median(b)))
        print()
        for k in ("wall", "cpu", "ranks"):
            ratios = [d[k] / b[k] - 1 for b, d in zip(got["bare"], got["dlk"])]
            b, d = [m[k] for m in got["bare"]], [m[k] for m in got["dlk"]]
            print("dlk / bare %-5s: %+.1f%% of the medians; per pair median %+.1f%% (%+.1f%% to %+.1f%%)" %
                  (k, 100 * (statistics.median(d) / statistics.median(b) - 1), 100 * statistics.median(ratios),
                   100 * min(ratios), 100 * max(ratios)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
