#!/usr/bin/env python3
"""`dlk predict` against the two other ways to score a dataset with a trained model, over the
Fashion-MNIST test set (10,000 images) with the MLP and CNN examples' bundles:

  predict  dlk predict BUNDLE --data fm@v1 --to STORE --name ...: reads the dataset from a
           directory store, scores it, writes predictions.csv + provenance.json and pushes them
  serve    dlk serve --local answering the same images over HTTP: V2 binary infer requests of
           ROWS raw UINT8 images each from CONC client threads (persistent connections); the
           (CONC, ROWS, serving.max_batch) that scores fastest is picked first and printed
  torch    a Python batch-scoring loop with PyTorch (.deps/frameworks) on the same weights:
           bench/predict/torch_score.py (the bundle's safetensors loaded into an equivalent
           module, torch.inference_mode, threads = cores, the best batch size and OpenMP wait
           policy, picked first)

Every program scores all 10,000 images on every core of the machine. After a warm-up of each,
the three alternate (predict serve torch, predict serve torch, ...) for PAIRS rounds; the table
gives the median samples/s with min-max: end to end (the process from start to exit for predict
and torch; for serve, the first request to the last answer with the server already up) and the
scoring loop alone (predict's and torch's own "score" seconds), the CPU seconds (user + system
of the process; serve: the server's over the timed requests, the client's not counted), which a
busy machine disturbs much less than the rates, and each program's peak RSS (serve: the
server's VmHWM). Before timing, serve's and torch's predicted classes must equal
dlk predict's for every image. Usage (after `make`):

    python3 bench/predict/run.py [--pairs 3] [--models mlp,cnn] [--out bench/out/predict]

Environment: MLP_BUNDLE, CNN_BUNDLE (else trained here, 1 epoch each)."""
import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
import http.client
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLK = os.path.join(TOP, "dlk")
PY = os.path.join(TOP, ".deps", "frameworks", "bin", "python")
TORCH_SCORE = os.path.join(TOP, "bench", "predict", "torch_score.py")
DATA = "/usr/share/datasets/fashion-mnist"
PORT = 18391


def log(*a):
    print(*a, flush=True)


def run_rss(args, **kw):
    """runs args (env: kw["env"]) with os.wait4; (wall seconds, its peak RSS in MiB, stdout, its
    CPU seconds: user + system)"""
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        os.close(r)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        try:
            os.execve(args[0], args, kw.get("env", os.environ))
        finally:
            os._exit(127)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"error: {' '.join(args)} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, ru.ru_maxrss / 1024.0, b"".join(chunks).decode(), ru.ru_utime + ru.ru_stime


def train(example, out):
    d = os.path.join(out, example)
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([DLK, "init", "--example", example, d], check=True, capture_output=True)
    subprocess.run([DLK, "train", "--local", "-q", "--set", "training.epochs=1"], cwd=d, check=True,
                   capture_output=True)
    return os.path.join(d, f"{example}.dlk")


class Predict:
    name = "predict"

    def __init__(self, bundle, store, out):
        self.bundle, self.store, self.out, self.n = bundle, store, out, 0

    def once(self):
        self.n += 1
        wall, rss, out, cpu = run_rss([DLK, "predict", self.bundle, "--data", "fm@v1", "--to", self.store,
                                  "--name", f"bench-preds@r{self.n}", "-o", "json"])
        j = json.loads(out)
        return {"wall": wall, "score": j["seconds"]["score"], "rss": rss, "samples": j["samples"], "cpu": cpu}

    def classes(self):
        d = os.path.join(self.out, "preds")
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([DLK, "data", "get", "-q", f"bench-preds@r{self.n}", "--from", self.store, d], check=True,
                       capture_output=True)
        rows = open(os.path.join(d, "predictions.csv")).read().splitlines()[1:]
        return [r.split(",")[2] for r in rows]


class Torch:
    name = "torch"

    def __init__(self, bundle, out, threads):
        self.bundle, self.out, self.threads, self.batch, self.wait = bundle, out, threads, 1000, "default"

    def once(self, batch=None, wait=None):
        csv = os.path.join(self.out, "torch.csv")
        env = dict(os.environ)
        env.pop("OMP_WAIT_POLICY", None)
        if (wait or self.wait) != "default":
            env["OMP_WAIT_POLICY"] = wait or self.wait
        wall, rss, out, cpu = run_rss([PY, TORCH_SCORE, self.bundle, f"{DATA}/t10k-images-idx3-ubyte.gz",
                                  f"{DATA}/t10k-labels-idx1-ubyte.gz", str(self.threads), str(batch or self.batch), csv],
                                 env=env)
        j = json.loads(out.strip().splitlines()[-1])
        return {"wall": wall, "score": j["score_s"], "rss": rss, "samples": j["samples"], "cpu": cpu}

    def tune(self):
        best = None
        for wait in ("default", "PASSIVE"):
            for b in (256, 1000, 10000):
                r = self.once(b, wait)
                log(f"  torch batch {b}, OMP_WAIT_POLICY {wait}: scoring {r['samples'] / r['score']:.0f} samples/s")
                if not best or r["score"] < best[2]:
                    best = (b, wait, r["score"])
        self.batch, self.wait = best[0], best[1]
        log(f"  torch: batch {self.batch}, {self.threads} threads, OMP_WAIT_POLICY {self.wait}")

    def classes(self):
        return [r.split(",")[2] for r in open(os.path.join(self.out, "torch.csv")).read().splitlines()[1:]]


class Serve:
    name = "serve"

    def __init__(self, bundle, model, out, images):
        self.bundle, self.model, self.out, self.images = bundle, model, out, images
        self.proc, self.max_batch, self.conc, self.rows = None, 64, 4, 256
        self.classes_seen = None

    def start(self):
        self.stop()
        self.proc = subprocess.Popen([DLK, "serve", "--local", "--port", str(PORT), "-q",
                                      "--set", f"serving.max_batch={self.max_batch}",
                                      f"{self.model}={self.bundle}"],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.out, "serve.log"), "w"))
        t = time.time()
        while time.time() - t < 60:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v2/health/ready", timeout=2).status == 200:
                    return
            except Exception:
                time.sleep(0.2)
        sys.exit("error: dlk serve did not become ready (see serve.log)")

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None

    def rss(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
        return 0.0

    def cpu(self):
        f = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def once(self, conc=None, rows=None, limit=None):
        conc, rows = conc or self.conc, rows or self.rows
        n = limit or len(self.images) // 784
        starts = list(range(0, n, rows))
        cls = [None] * n
        lock = threading.Lock()
        failed = []

        def worker():
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
            while True:
                with lock:
                    if not starts or failed:
                        break
                    s = starts.pop(0)
                m = min(rows, n - s)
                body = self.images[s * 784:(s + m) * 784]
                hdr = json.dumps({"inputs": [{"name": "input", "shape": [m, 1, 28, 28], "datatype": "UINT8",
                                              "parameters": {"binary_data_size": len(body)}}],
                                  "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
                                  "parameters": {"binary_data_output": True}}, separators=(",", ":")).encode()
                c.request("POST", f"/v2/models/{self.model}/infer", body=hdr + body,
                          headers={"Content-Type": "application/octet-stream",
                                   "Inference-Header-Content-Length": str(len(hdr))})
                r = c.getresponse()
                data = r.read()
                if r.status != 200:
                    failed.append(f"{r.status}: {data[:200]!r}")
                    break
                hl = int(r.getheader("Inference-Header-Content-Length"))
                h = json.loads(data[:hl])
                off = hl
                for o in h["outputs"]:
                    size = o["parameters"]["binary_data_size"]
                    if o["name"] == "probabilities":
                        p = memoryview(data[off:off + size]).cast("f")
                        k = o["shape"][1]
                        for i in range(m):
                            row = p[i * k:(i + 1) * k]
                            cls[s + i] = max(range(k), key=row.__getitem__)
                    off += size
            c.close()

        cpu0, t = self.cpu(), time.perf_counter()
        ths = [threading.Thread(target=worker) for _ in range(conc)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        wall = time.perf_counter() - t
        cpu = self.cpu() - cpu0
        if failed:
            sys.exit(f"error: dlk serve answered {failed[0]}")
        self.classes_seen = cls
        return {"wall": wall, "score": None, "rss": self.rss(), "samples": n, "cpu": cpu}

    def tune(self):
        best = None
        for mb in (64, 256):
            self.max_batch = mb
            self.start()
            for conc in (1, 2, 4, 8):
                for rows in (64, 256, 1000):
                    r = self.once(conc, rows, 4000)
                    log(f"  serve max_batch {mb}, {conc} clients, {rows} rows a request: "
                        f"{r['samples'] / r['wall']:.0f} samples/s")
                    if not best or r["wall"] < best[0]:
                        best = (r["wall"], mb, conc, rows)
        _, self.max_batch, self.conc, self.rows = best
        self.start()  # the peak RSS from here on is the chosen configuration's
        log(f"  serve: serving.max_batch={self.max_batch}, {self.conc} client connections, {self.rows} rows a request")

    def classes(self):
        return self.classes_seen


def fmt(xs, f="{:.0f}"):
    return f"{f.format(statistics.median(xs))} ({f.format(min(xs))}-{f.format(max(xs))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "out", "predict"))
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    for tool, hint in ((DLK, "make"), (PY, ".ci/deps")):
        if not os.path.exists(tool):
            sys.exit(f"error: {tool} is missing (run {hint})")
    threads = os.cpu_count()
    cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].splitlines()[0].strip()
    log(f"machine: {threads} cores, {cpu}; load average {open('/proc/loadavg').read().split()[0:3]}")
    store = os.path.join(out, "store")
    fm = os.path.join(out, "fm")
    os.makedirs(fm, exist_ok=True)
    for f in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(os.path.join(DATA, f), fm)
    subprocess.run([DLK, "data", "push", "-q", fm, "--to", store, "--tag", "fm@v1"], check=True, capture_output=True)
    images = gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).read()[16:]
    results = []
    for m in a.models.split(","):
        bundle = os.path.abspath(os.environ.get(f"{m.upper()}_BUNDLE") or train(m, out))
        log(f"\n== {m} ({bundle})")
        pr, to, sv = Predict(bundle, store, out), Torch(bundle, out, threads), Serve(bundle, m, out, images)
        to.tune()
        sv.tune()
        # warm-up, and the answers: every image's class as dlk predict gives it
        for p in (pr, sv, to):
            p.once()
        want = pr.classes()
        for p in (sv, to):
            got = p.classes()
            names = None
            if got and isinstance(got[0], int):
                names = json.loads(subprocess.run(["tar", "xOf", bundle, "model.json"], capture_output=True,
                                                  check=True).stdout).get("classes")
                got = [names[c] if names else str(c) for c in got]
            diff = sum(1 for x, y in zip(want, got) if x != y)
            log(f"  {p.name}: {diff} of {len(want)} classes differ from dlk predict's")
            if diff > len(want) // 1000:
                sys.exit(f"error: {p.name} does not compute what dlk predict computes")
        runs = {p.name: [] for p in (pr, sv, to)}
        for i in range(a.pairs):
            for p in (pr, sv, to):
                r = p.once()
                runs[p.name].append(r)
                sc = f", scoring {r['samples'] / r['score']:.0f}/s" if r["score"] else ""
                log(f"  round {i + 1} {p.name}: {r['samples'] / r['wall']:.0f} samples/s{sc}, "
                    f"{r['cpu']:.2f} CPU s, peak RSS {r['rss']:.0f} MiB")
        sv.stop()
        for name, rs in runs.items():
            e2e = [r["samples"] / r["wall"] for r in rs]
            sc = [r["samples"] / r["score"] for r in rs if r["score"]]
            results.append((m, name, fmt(e2e), fmt(sc) if sc else "-", fmt([r["cpu"] for r in rs], "{:.2f}"),
                            fmt([r["rss"] for r in rs])))
    log(f"\nload average at the end {open('/proc/loadavg').read().split()[0:3]}")
    log("\n| model | program | samples/s end to end | samples/s scoring loop | CPU seconds | peak RSS MiB |")
    log("|---|---|---|---|---|---|")
    for r in results:
        log("| " + " | ".join(r) + " |")


main()
