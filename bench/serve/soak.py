#!/usr/bin/env python3
"""A soak of dlk serve: wrk at 64 connections for 10 minutes (--seconds), requests alternating V2
JSON and V2 binary, while the server's resident memory is sampled every 10 s. Passes when no
request failed (wrk's non-2xx and socket errors, the server's failure counters) and the RSS at
the end is within 5% of the RSS after the first minute (and never above it by more than 5%).

    python3 bench/serve/soak.py BUNDLE [--seconds 600] [--out bench/out/serve]"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import DLK, metric, wait_ready, write_requests  # noqa: E402

PORT = 18300


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "out", "serve"))
    ap.add_argument("--set", action="append", default=[], help="serving.KEY=VALUE for dlk serve")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    reqs = write_requests(out)
    lua = os.path.join(out, "mixed.lua")
    with open(lua, "w") as f:
        f.write(f'''local function slurp(p) local f = io.open(p, "rb"); local s = f:read("*a"); f:close(); return s end
local js, bin = slurp("{reqs['json'][0]}"), slurp("{reqs['bin'][0]}")
local hj = {{["Content-Type"] = "application/json"}}
local hb = {{["Content-Type"] = "application/octet-stream", ["Inference-Header-Content-Length"] = "{reqs['bin'][2]['Inference-Header-Content-Length']}"}}
local n = 0
request = function()
  n = n + 1
  if n % 2 == 0 then return wrk.format("POST", nil, hj, js) end
  return wrk.format("POST", nil, hb, bin)
end
''')
    args = [DLK, "serve", "--local", "--port", str(PORT), "-q"] + sum((["--set", s] for s in a.set), []) + [f"m={a.bundle}"]
    srv = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, "soak-dlk.log"), "w"))
    wait_ready(f"http://127.0.0.1:{PORT}/v2/health/ready", srv)
    samples = []
    done = threading.Event()

    def sample():
        t0 = time.time()
        while not done.wait(10):
            samples.append((round(time.time() - t0), rss_kb(srv.pid), open("/proc/loadavg").read().split()[0]))
            print(f"  {samples[-1][0]:4d} s  RSS {samples[-1][1] / 1024:.1f} MiB  load {samples[-1][2]}", flush=True)

    print(f"soak: {a.seconds} s at 64 connections, JSON and binary alternating; RSS at start {rss_kb(srv.pid) / 1024:.1f} MiB",
          flush=True)
    th = threading.Thread(target=sample)
    th.start()
    w = subprocess.run(["wrk", "-t2", "-c64", f"-d{a.seconds}s", "--latency", "-s", lua,
                        f"http://127.0.0.1:{PORT}/v2/models/m/infer"], capture_output=True, text=True)
    done.set()
    th.join()
    print(w.stdout)
    errors = 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", w.stdout)
    if m:
        errors += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", w.stdout)
    if m:
        errors += sum(int(x) for x in m.groups())
    murl = f"http://127.0.0.1:{PORT}/metrics"
    text = urllib.request.urlopen(murl).read().decode()
    failed = sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("dlk_inference_request_failure_total{"))
    ok = sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("dlk_inference_request_success_total{"))
    rows = metric(murl, "dlk_inference_count_total", "m")
    passes = metric(murl, "dlk_inference_exec_count_total", "m")
    srv.send_signal(signal.SIGTERM)
    rc = srv.wait(60)
    base = next((r for t, r, _ in samples if t >= 60), samples[0][1] if samples else 0)
    end = samples[-1][1] if samples else 0
    peak = max((r for t, r, _ in samples if t >= 60), default=end)
    growth = (end - base) / base * 100 if base else 0.0
    peak_growth = (peak - base) / base * 100 if base else 0.0
    result = {"seconds": a.seconds, "requests_ok": ok, "wrk_errors": errors, "server_failures": failed,
              "avg_batch": rows / max(passes, 1), "rss_after_1min_kb": base, "rss_end_kb": end, "rss_peak_kb": peak,
              "rss_growth_pct": growth, "exit_code": rc,
              "load_avg_mean": sum(float(l) for _, _, l in samples) / max(len(samples), 1)}
    json.dump({"result": result, "samples": samples}, open(os.path.join(out, "soak.json"), "w"), indent=1)
    print(json.dumps(result, indent=1))
    passed = errors == 0 and failed == 0 and abs(growth) <= 5 and peak_growth <= 5 and rc == 0
    print("soak: " + ("PASS" if passed else "FAIL") + f": {errors + int(failed)} errors, RSS {base / 1024:.1f} -> "
          f"{end / 1024:.1f} MiB ({growth:+.1f}%, peak {peak_growth:+.1f}%), exit {rc}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
