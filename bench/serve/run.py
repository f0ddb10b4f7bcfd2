#!/usr/bin/env python3
"""dlk serve against what a user would pick instead, measured in one run with wrk:

  nginx     a static response of the same size (the HTTP ceiling of this machine)
  Triton    its real server (the tritonserver nvidia-pytriton bundles), the bundle exported as ONNX
            (`dlk export --onnx`) run by ONNX Runtime in pytriton's model function or in a Python-
            backend model of its own, dynamic batching
  MLServer  a custom runtime running the same ONNX model in ONNX Runtime (V2 JSON; it has no binary
            tensors)

for the Fashion-MNIST MLP and CNN, V2 JSON and binary requests (one image each, raw UINT8 pixels),
at 1, 16 and 64 connections. Besides requests/s and latency it reports each server's CPU time per
request (user + system of its whole process tree over the run), which a busy machine disturbs much
less than the rates. Each peer first runs in a few configurations at 64 connections and
the best one is kept (printed). Then every cell alternates the servers (A B C D, A B C D, ...) for
ROUNDS rounds after a warm-up and reports the median requests/s with min-max, median p50/p99
latency, the machine's load average, and dlk's and Triton's average batch size (rows / forward
passes, from their metrics). Before timing, every server answers 32 test images (one per
request) and its top class must be the one dlk's own forward pass gives for each. Usage (after `make` and `.ci/deps bench`):

    python3 bench/serve/run.py [--seconds 10] [--rounds 3] [--out bench/out/serve]

Environment: MLP_BUNDLE, CNN_BUNDLE (else trained here, 2 epochs MLP, 1 epoch CNN);
OPENBLAS_CORETYPE is passed to every server (dlk's OpenBLAS reads it; ONNX Runtime has its own
kernels)."""
import argparse
import array
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DLK = os.path.join(TOP, "dlk")
FORWARD = os.path.join(TOP, "build", "tests", "tools", "forward")
HERE = os.path.join(TOP, "bench", "serve")
TRITON_PY = os.path.join(TOP, ".deps", "serve-bench-triton", "bin", "python")
MLSERVER = os.path.join(TOP, ".deps", "serve-bench-mlserver", "bin", "mlserver")
MLSERVER_PY = os.path.join(TOP, ".deps", "serve-bench-mlserver", "bin", "python")
TEST_PY = os.path.join(TOP, ".deps", "serve-test", "bin", "python")
DATA = "/usr/share/datasets/fashion-mnist"
PORTS = {"dlk": 18080, "nginx": 18090, "triton": 18100, "mlserver": 18200}


def log(*a):
    print(*a, flush=True)


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


def wait_ready(url, proc, seconds=180):
    t = time.time()
    while time.time() - t < seconds:
        if proc.poll() is not None:
            stop(proc)  # what it started (Triton's server under pytriton) must not keep the ports
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        try:
            if urllib.request.urlopen(url, timeout=2).status == 200:
                return
        except Exception:
            pass
        time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"{url} never became ready")


def stop(proc):
    """SIGTERM to the server's whole process group (Triton's and MLServer's children included)"""
    if proc and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what outlived its parent
        except ProcessLookupError:
            pass


def metric(url, name, model):
    """the value of metric NAME for the model, from a Prometheus text page"""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'model="{model}"' in line:
            return float(line.split()[-1])
    return 0.0


def group_cpu(pgid):
    """CPU seconds (user + system) of every process in a process group"""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[2]) == pgid:  # fields after the name: state ppid pgrp ...
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def wrk(url, lua, conns, seconds, pgid=None):
    threads = 1 if conns == 1 else 2
    cpu0 = group_cpu(pgid) if pgid else 0
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", lua, url],
                         capture_output=True, text=True, check=True).stdout
    cpu = group_cpu(pgid) - cpu0 if pgid else 0
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    n = int(re.search(r"(\d+) requests in", out).group(1))

    def lat(p):
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)\b", out)
        v, u = float(m.group(1)), m.group(2)
        return v / 1000 if u == "us" else v * 1000 if u == "s" else v
    errors = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errors += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(x) for x in m.groups())
    return {"rps": rps, "p50": lat(50), "p99": lat(99), "errors": errors, "cpu_us": cpu / max(n, 1) * 1e6}


# ---- models and requests ----

def train(example, epochs, out):
    d = os.path.join(out, example)
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([DLK, "init", "--example", example, d], check=True, capture_output=True)
    subprocess.run([DLK, "train", "--local", "-q", "--set", f"training.epochs={epochs}"], cwd=d, check=True,
                   capture_output=True)
    return os.path.join(d, f"{example}.dlk")


def write_requests(out):
    """one test image, as V2 JSON and as V2 binary (binary outputs asked for), and wrk scripts"""
    import gzip
    raw = gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).read()[16:16 + 784]
    js = json.dumps({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "UINT8", "data": list(raw)}]},
                    separators=(",", ":")).encode()
    hdr = json.dumps({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "UINT8",
                                  "parameters": {"binary_data_size": 784}}],
                      "parameters": {"binary_data_output": True}}, separators=(",", ":")).encode()
    paths = {}
    for enc, body, headers in (("json", js, {"Content-Type": "application/json"}),
                               ("bin", hdr + raw, {"Content-Type": "application/octet-stream",
                                                   "Inference-Header-Content-Length": str(len(hdr))})):
        bp = os.path.join(out, f"req.{enc}")
        open(bp, "wb").write(body)
        lua = os.path.join(out, f"{enc}.lua")
        with open(lua, "w") as f:
            f.write('wrk.method = "POST"\n')
            f.write(f'local f = io.open("{bp}", "rb"); wrk.body = f:read("*a"); f:close()\n')
            for k, v in headers.items():
                f.write(f'wrk.headers["{k}"] = "{v}"\n')
        paths[enc] = (bp, lua, headers)
    return paths


def response_size(url, body_path, headers):
    req = urllib.request.Request(url, data=open(body_path, "rb").read(), headers=headers)
    return len(urllib.request.urlopen(req).read())


# ---- servers ----

def start_dlk(bundles, cfg, out):
    args = [DLK, "serve", "--local", "--port", str(PORTS["dlk"]), "-q"]
    for k, v in cfg.items():
        args += ["--set", f"serving.{k}={v}"]
    args += [f"{n}={p}" for n, p in bundles.items()]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, "dlk.log"), "w"), start_new_session=True)
    wait_ready(f"http://127.0.0.1:{PORTS['dlk']}/v2/health/ready", p)
    return p


def start_nginx(sizes, out):
    conf = os.path.join(out, "nginx.conf")
    locs = "".join(f'    location = /{k} {{ return 200 "{"x" * n}"; }}\n' for k, n in sizes.items())
    open(conf, "w").write(f"""worker_processes auto;
daemon off;
pid {out}/nginx.pid;
error_log {out}/nginx.err;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_buffer_size 64k;
  server {{
    listen 127.0.0.1:{PORTS['nginx']};
    default_type application/json;
{locs}  }}
}}
""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    wait_ready(f"http://127.0.0.1:{PORTS['nginx']}/{next(iter(sizes))}", p)
    return p


def start_triton(onnx, name, cfg, out):
    """Triton two ways: pytriton's model function (triton_server.py) or a Python-backend model that
    tritonserver runs with no proxy in between (triton_backend.py); ONNX Runtime in both"""
    if cfg.get("mode") == "backend":
        args = [TRITON_PY, os.path.join(HERE, "triton_backend.py"), onnx, name, str(PORTS["triton"]),
                os.path.join(out, "triton-backend"), "--instances", str(cfg["instances"]), "--threads", str(cfg["threads"]),
                "--max-batch", "64", "--delay-us", str(cfg["delay_us"])]
    else:
        args = [TRITON_PY, os.path.join(HERE, "triton_server.py"), onnx, name, str(PORTS["triton"]),
                "--instances", str(cfg["instances"]), "--threads", str(cfg["threads"])] + \
               ([] if cfg.get("spin", True) else ["--no-spin"]) + ["--max-batch", "64", "--delay-us", str(cfg["delay_us"])]
    p = subprocess.Popen(args, stdout=open(os.path.join(out, "triton.log"), "w"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    # Triton says the server is ready before pytriton has loaded the model: wait for the model
    wait_ready(f"http://127.0.0.1:{PORTS['triton']}/v2/models/{name}/ready", p)
    return p


def start_mlserver(onnx, name, cfg, out):
    d = os.path.join(out, "mlserver")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, name))
    for f in ("mlserver_runtime.py", "peer_onnx.py"):
        shutil.copy(os.path.join(HERE, f), d)
    json.dump({"http_port": PORTS["mlserver"], "grpc_port": PORTS["mlserver"] + 1, "metrics_port": PORTS["mlserver"] + 2,
               "host": "127.0.0.1", "parallel_workers": cfg["workers"], "logging_level": "WARNING"},
              open(os.path.join(d, "settings.json"), "w"))
    settings = {"name": name, "implementation": "mlserver_runtime.DlkOnnx",
                "parameters": {"uri": onnx, "extra": {"threads": cfg["threads"], "spin": cfg.get("spin", True)}}}
    if cfg["batch"]:
        settings.update({"max_batch_size": 64, "max_batch_time": 0.0005})
    json.dump(settings, open(os.path.join(d, name, "model-settings.json"), "w"))
    p = subprocess.Popen([MLSERVER, "start", d], cwd=d, stdout=open(os.path.join(out, "mlserver.log"), "w"),
                         stderr=subprocess.STDOUT, start_new_session=True)
    wait_ready(f"http://127.0.0.1:{PORTS['mlserver']}/v2/models/{name}/ready", p)
    return p


DLK_CONFIGS = [  # workers, http_threads, max_delay_us: on the request's thread, or queued and batched
    {"workers": 0, "http_threads": 0, "max_delay_us": 0},
    {"workers": 1, "http_threads": 0, "max_delay_us": 0},
    {"workers": 0, "http_threads": 0, "max_delay_us": 200},
    {"workers": 1, "http_threads": 0, "max_delay_us": 1000},
]
# the peers: Triton through pytriton or with a Python-backend model of its own (start_triton), 1 ONNX
# Runtime intra-op thread per instance (worker), 1 or 2 instances, or one instance
# of 2 threads that do not spin (spinning threads lose their cores to wrk: peer_onnx.py); Triton's
# dynamic batcher is always on (max batch 64), with and without a queue delay; MLServer with and
# without its adaptive batching (max batch 64, 500 us)
TRITON_CONFIGS = [{"mode": "pytriton", "instances": 1, "threads": 1, "delay_us": 0},
                  {"mode": "pytriton", "instances": 1, "threads": 2, "spin": False, "delay_us": 0},
                  {"mode": "pytriton", "instances": 2, "threads": 1, "delay_us": 0},
                  {"mode": "pytriton", "instances": 2, "threads": 1, "delay_us": 1000},
                  {"mode": "backend", "instances": 1, "threads": 1, "delay_us": 0},
                  {"mode": "backend", "instances": 2, "threads": 1, "delay_us": 0}]
MLSERVER_CONFIGS = [{"workers": 1, "threads": 1, "batch": False}, {"workers": 1, "threads": 2, "spin": False, "batch": False},
                    {"workers": 2, "threads": 1, "batch": False}, {"workers": 1, "threads": 1, "batch": True}]


def server_version(port):
    """the server's name and version from its V2 metadata (GET /v2)"""
    try:
        d = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v2", timeout=5))
        return f"{d.get('name', '?')} {d.get('version', '?')}"
    except Exception as e:
        return f"(no /v2 metadata: {e})"


def check_answers(server, url, images, want):
    """the top class of each image, one V2 JSON request per image, against dlk's forward pass"""
    bad = 0
    for i, img in enumerate(images):
        body = json.dumps({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "UINT8", "data": list(img)}]})
        req = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": "application/json"})
        outs = {o["name"]: o["data"] for o in json.load(urllib.request.urlopen(req, timeout=30))["outputs"]}
        got = outs["logits"]
        if got.index(max(got)) != want[i]:
            bad += 1
    if bad:
        sys.exit(f"error: {server} answers another class than dlk's forward pass for {bad} of {len(images)} images")
    log(f"  {server}: the same top class as dlk's forward pass for all {len(images)} images")


def retry(start):
    """START, again once if it fails: on a loaded machine pytriton's handshake with Triton's Python
    backend can time out (its log: "Timeout occurred while waiting for config file")"""
    def f(*args):
        try:
            return start(*args)
        except RuntimeError as e:
            log(f"  (a server did not start: {e}; again)")
            return start(*args)
    return f


def pick(name, configs, start, url, lua, seconds, stop_after=True):
    """each configuration at 64 connections; the best by requests/s"""
    best = None
    for cfg in configs:
        try:
            p = start(cfg)
        except RuntimeError as e:
            log(f"  {name} {cfg}: did not start twice ({e}), left out")
            continue
        try:
            wrk(url, lua, 64, 2)
            r = wrk(url, lua, 64, seconds)
        finally:
            stop(p)
        log(f"  {name} {cfg}: {r['rps']:.0f} req/s, p99 {r['p99']:.2f} ms, {r['errors']} errors")
        if r["errors"] == 0 and (best is None or r["rps"] > best[1]):
            best = (cfg, r["rps"])
    return best[0] if best else configs[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "out", "serve"))
    ap.add_argument("--models", default="mlp,cnn")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    for tool, hint in ((DLK, "make"), (FORWARD, "make test-unit"), (TRITON_PY, ".ci/deps bench"),
                       (MLSERVER, ".ci/deps bench")):
        if not os.path.exists(tool):
            sys.exit(f"error: {tool} is missing (run {hint})")
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            sys.exit(f"error: {tool} is not installed (run .ci/deps bench)")

    log(f"machine: {os.cpu_count()} cores, {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}, "
        f"load average {open('/proc/loadavg').read().split()[0:3]}")
    log(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    models = a.models.split(",")
    bundles, onnx, want = {}, {}, {}
    for m, epochs in (("mlp", 2), ("cnn", 1)):
        if m not in models:
            continue
        path = os.environ.get(f"{m.upper()}_BUNDLE") or train(m, epochs, out)
        bundles[m] = os.path.abspath(path)
        # the peers run the bundle exported as ONNX; ONNX Runtime against dlk's own forward pass
        onnx[m] = os.path.join(out, f"{m}.onnx")
        subprocess.run([DLK, "export", path, "--onnx", onnx[m]], check=True, capture_output=True)
        fwd = os.path.join(out, f"{m}.f32")
        subprocess.run([FORWARD, path, os.path.join(os.path.dirname(path), "dlk.yaml") if not os.environ.get(f"{m.upper()}_PROJECT")
                        else os.environ[f"{m.upper()}_PROJECT"], "0", "64", "8", fwd], check=True, capture_output=True)
        logits = array.array("f", open(fwd, "rb").read())
        nc = len(logits) // 64
        want[m] = [max(range(nc), key=lambda c: logits[i * nc + c]) for i in range(64)]
        for py in (TRITON_PY, MLSERVER_PY):
            r = subprocess.run([py, os.path.join(HERE, "peer_onnx.py"), onnx[m], fwd, "64"], capture_output=True, text=True)
            log("  " + (r.stdout.strip() or r.stderr.strip()))
            if r.returncode:
                sys.exit("error: the peers' model does not compute what dlk computes")
    reqs = write_requests(out)
    import gzip
    raw = gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).read()[16:]
    images = [raw[i * 784:(i + 1) * 784] for i in range(32)]
    for py, what in ((TRITON_PY, "triton"), (MLSERVER_PY, "mlserver")):
        v = subprocess.run([py, "-c", "import sys, onnxruntime, numpy; print(sys.version.split()[0], onnxruntime.__version__, "
                            "numpy.__version__)"], capture_output=True, text=True, check=True).stdout.split()
        log(f"{what} venv: Python {v[0]}, onnxruntime {v[1]}, numpy {v[2]}")
    results = []
    for m, bundle in bundles.items():
        name = m
        log(f"\n== {m} ({bundle})")
        url = {"dlk": f"http://127.0.0.1:{PORTS['dlk']}/v2/models/{name}/infer",
               "triton": f"http://127.0.0.1:{PORTS['triton']}/v2/models/{name}/infer",
               "mlserver": f"http://127.0.0.1:{PORTS['mlserver']}/v2/models/{name}/infer"}
        log("best configurations (64 connections, binary; MLServer JSON):")
        dlk_cfg = pick("dlk", DLK_CONFIGS, lambda c: start_dlk({name: bundle}, c, out), url["dlk"], reqs["bin"][1], a.seconds)
        tri_cfg = pick("triton", TRITON_CONFIGS, retry(lambda c: start_triton(onnx[m], name, c, out)), url["triton"], reqs["bin"][1],
                       a.seconds)
        mls_cfg = pick("mlserver", MLSERVER_CONFIGS, retry(lambda c: start_mlserver(onnx[m], name, c, out)), url["mlserver"],
                       reqs["json"][1], a.seconds)
        log(f"kept: dlk {dlk_cfg}, triton {tri_cfg}, mlserver {mls_cfg}, nginx: worker_processes auto, access_log off, keepalive")
        procs = {}
        try:
            procs["dlk"] = start_dlk({name: bundle}, dlk_cfg, out)
            sizes = {enc: response_size(url["dlk"], reqs[enc][0], reqs[enc][2]) for enc in ("json", "bin")}
            procs["nginx"] = start_nginx(sizes, out)
            url["nginx"] = None
            procs["triton"] = retry(start_triton)(onnx[m], name, tri_cfg, out)
            procs["mlserver"] = retry(start_mlserver)(onnx[m], name, mls_cfg, out)
            for s in ("dlk", "triton", "mlserver"):
                check_answers(s, url[s], images, want[m])
            tri_how = ("nvidia-pytriton 0.7.0's model function" if tri_cfg.get("mode") != "backend"
                       else "its Python backend, model.py, no proxy")
            log(f"servers: dlk {server_version(PORTS['dlk'])}; triton {server_version(PORTS['triton'])} ({tri_how}: ONNX "
                f"Runtime, {tri_cfg['instances']} instances x {tri_cfg['threads']} intra-op threads"
                f"{'' if tri_cfg.get('spin', True) else ' (no spinning)'}, dynamic batcher max batch 64, queue delay "
                f"{tri_cfg['delay_us']} us); mlserver {server_version(PORTS['mlserver'])} (custom runtime: ONNX Runtime, "
                f"{mls_cfg['workers']} workers x {mls_cfg['threads']} intra-op threads"
                f"{'' if mls_cfg.get('spin', True) else ' (no spinning)'}, adaptive batching "
                f"{'max 64, 500 us' if mls_cfg['batch'] else 'off'}); nginx: static body")
            for enc in ("json", "bin"):
                lua = reqs[enc][1]
                servers = ["dlk", "nginx", "triton"] + (["mlserver"] if enc == "json" else [])
                for conns in (1, 16, 64):
                    runs = {s: [] for s in servers}
                    batch = {}
                    loads = []
                    for s in servers:  # warm-up
                        u = url[s] or f"http://127.0.0.1:{PORTS['nginx']}/{enc}"
                        wrk(u, lua, conns, 2)
                    rows0 = {"dlk": (metric(f"http://127.0.0.1:{PORTS['dlk']}/metrics", "dlk_inference_count_total", name),
                                     metric(f"http://127.0.0.1:{PORTS['dlk']}/metrics", "dlk_inference_exec_count_total", name)),
                             "triton": (metric(f"http://127.0.0.1:{PORTS['triton'] + 2}/metrics", "nv_inference_count", name),
                                        metric(f"http://127.0.0.1:{PORTS['triton'] + 2}/metrics", "nv_inference_exec_count", name))}
                    for rnd in range(a.rounds):
                        order = servers if rnd % 2 == 0 else servers[::-1]
                        for s in order:
                            u = url[s] or f"http://127.0.0.1:{PORTS['nginx']}/{enc}"
                            loads.append(loadavg())
                            runs[s].append(wrk(u, lua, conns, a.seconds, procs[s].pid))
                    for s, port, cnt, exe in (("dlk", PORTS["dlk"], "dlk_inference_count_total", "dlk_inference_exec_count_total"),
                                              ("triton", PORTS["triton"] + 2, "nv_inference_count", "nv_inference_exec_count")):
                        mn = name
                        r1 = metric(f"http://127.0.0.1:{port}/metrics", cnt, mn)
                        e1 = metric(f"http://127.0.0.1:{port}/metrics", exe, mn)
                        batch[s] = (r1 - rows0[s][0]) / max(1.0, e1 - rows0[s][1])
                    for s in servers:
                        rs = [r["rps"] for r in runs[s]]
                        row = {"model": m, "enc": enc, "conns": conns, "server": s, "rps": statistics.median(rs),
                               "rps_min": min(rs), "rps_max": max(rs),
                               "p50": statistics.median(r["p50"] for r in runs[s]),
                               "p99": statistics.median(r["p99"] for r in runs[s]),
                               "errors": sum(r["errors"] for r in runs[s]), "batch": batch.get(s),
                               "cpu_us": statistics.median(r["cpu_us"] for r in runs[s]),
                               "load": statistics.mean(loads)}
                        results.append(row)
                        log(f"{m:4} {enc:4} c={conns:<3} {s:9} {row['rps']:9.0f} req/s [{row['rps_min']:.0f}-{row['rps_max']:.0f}]"
                            f"  p50 {row['p50']:7.2f} ms  p99 {row['p99']:7.2f} ms  CPU {row['cpu_us']:6.1f} us/req  errors {row['errors']}"
                            + (f"  batch {row['batch']:.2f}" if row["batch"] else "") + f"  load {row['load']:.1f}")
                    base = {r["server"]: r for r in results[-len(servers):]}
                    log(f"{m:4} {enc:4} c={conns:<3} ratios: dlk/nginx {base['dlk']['rps'] / base['nginx']['rps']:.2f}, "
                        f"dlk/triton {base['dlk']['rps'] / base['triton']['rps']:.1f}x"
                        + (f", dlk/mlserver {base['dlk']['rps'] / base['mlserver']['rps']:.1f}x" if "mlserver" in base else ""))
        finally:
            for p in procs.values():
                stop(p)
    json.dump(results, open(os.path.join(out, "results.json"), "w"), indent=1)
    log(f"\nresults: {os.path.join(out, 'results.json')}")


if __name__ == "__main__":
    main()
