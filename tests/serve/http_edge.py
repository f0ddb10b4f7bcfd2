#!/usr/bin/env python3
"""dlk serve at the socket level, where curl cannot go: slow and silent clients, truncated bodies,
binary headers that lie, and a drain with a request in flight. Standard library only.

    http_edge.py CASE PORT MODEL [SERVER_PID]

Prints what it saw; exits 0 when the server behaved, 1 with a message when it did not."""
import json
import os
import signal
import socket
import struct
import sys
import time


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(s):
    """status, headers (lowercase names), body of one HTTP/1.1 response; None when the server
    closed the connection without answering"""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return None
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def request(port, method, path, body=b"", headers=None):
    s = connect(port)
    h = {"Host": "127.0.0.1", "Content-Length": str(len(body))}
    h.update(headers or {})
    s.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode() + body)
    r = read_response(s)
    s.close()
    return r


def infer_body(rows=1):
    return json.dumps({"inputs": [{"name": "input", "shape": [rows, 16], "datatype": "FP32",
                                   "data": [float(i % 7) for i in range(16 * rows)]}]}).encode()


def closed_without_answer(s, within):
    """the server closes s (without a response) within `within` seconds"""
    s.settimeout(within)
    try:
        data = s.recv(65536)
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    return data == b""


def case_slow_body(port, model):
    # serving.request_timeout_s is 1: a body trickling in for longer loses its connection
    body = infer_body()
    s = connect(port)
    s.sendall(f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:10])
    for i in range(5):
        time.sleep(0.4)
        try:
            s.sendall(body[10 + i:11 + i])
        except (BrokenPipeError, ConnectionResetError):
            break
    if not closed_without_answer(s, 3):
        fail("a body slower than request_timeout_s kept its connection")
    print("a body slower than request_timeout_s: connection closed")


def case_idle(port, model):
    # serving.idle_timeout_s is 1: a client that stops in the middle of its headers is dropped
    s = connect(port)
    s.sendall(f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\n".encode())
    t = time.time()
    if not closed_without_answer(s, 5):
        fail("a silent client was not disconnected")
    print(f"a silent client was disconnected after {time.time() - t:.1f} s")


def case_truncated(port, model):
    # the body ends before Content-Length says: no answer, no crash, the next request is served
    body = infer_body()
    s = connect(port)
    s.sendall(f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body) + 500}\r\n\r\n".encode() + body)
    s.shutdown(socket.SHUT_WR)
    r = read_response(s)
    if r and r[0] == 200:
        fail("a truncated body was answered 200")
    s.close()
    r = request(port, "POST", f"/v2/models/{model}/infer", infer_body())
    if not r or r[0] != 200:
        fail(f"the server did not serve the next request: {r}")
    print("a truncated body: no answer; the next request: 200")


def case_huge(port, model):
    # a Content-Length over the limit is refused before the body is sent
    s = connect(port)
    s.sendall(f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n".encode())
    r = read_response(s)
    if not r or r[0] != 413 or b"over the limit of" not in r[2]:
        fail(f"a 1 TB body: {r}")
    print("a 1 TB body:", r[0], r[2].decode())


def case_lying_binary(port, model):
    hdr = json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 64}}]}).encode()
    data = struct.pack("<16f", *range(16))
    ok = request(port, "POST", f"/v2/models/{model}/infer", hdr + data,
                 {"Inference-Header-Content-Length": str(len(hdr)), "Content-Type": "application/octet-stream"})
    if not ok or ok[0] != 200 or ok[1].get("content-type") != "application/json":
        fail(f"a true binary request: {ok}")
    for claimed, want in ((len(hdr) + 10, "invalid JSON"), (len(hdr) + 1000, "Inference-Header-Content-Length is"),
                          (len(hdr) - 5, "invalid JSON")):
        r = request(port, "POST", f"/v2/models/{model}/infer", hdr + data, {"Inference-Header-Content-Length": str(claimed)})
        if not r or r[0] != 400 or want.encode() not in r[2]:
            fail(f"Inference-Header-Content-Length {claimed} for {len(hdr)}: {r}")
    r = request(port, "POST", f"/v2/models/{model}/infer", hdr + data[:40], {"Inference-Header-Content-Length": str(len(hdr))})
    if not r or r[0] != 400 or b"runs past the end of the body" not in r[2]:
        fail(f"binary_data_size past the end: {r}")
    # binary outputs asked for: the response splits where its header says
    hdr2 = json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 64}}],
                       "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    r = request(port, "POST", f"/v2/models/{model}/infer", hdr2 + data, {"Inference-Header-Content-Length": str(len(hdr2))})
    n = int(r[1]["inference-header-content-length"])
    meta = json.loads(r[2][:n])
    size = meta["outputs"][0]["parameters"]["binary_data_size"]
    if r[1].get("content-type") != "application/octet-stream" or len(r[2]) != n + size:
        fail(f"binary response: {r[1]} {meta}")
    print("lying binary headers: 400 each; binary outputs split at Inference-Header-Content-Length")


def case_drain(port, model, pid):
    """SIGTERM with a request in flight: it is answered; meanwhile readiness fails and new
    inferences get 503; then the server exits (the shell checks the exit status)"""
    body = infer_body(3)
    a = connect(port)
    # in flight: the server has begun it (its headers read) before the signal, which its
    # "100 Continue" says, not a time a loaded machine may overrun
    a.sendall(f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
              "Expect: 100-continue\r\n\r\n".encode())
    cont = b""
    while b"\r\n\r\n" not in cont:
        chunk = a.recv(1)
        if not chunk:
            fail("the server closed the request before its 100 Continue")
        cont += chunk
    if not cont.startswith(b"HTTP/1.1 100"):
        fail(f"no 100 Continue: {cont!r}")
    a.sendall(body[:20])
    os.kill(pid, signal.SIGTERM)
    # until the server has seen the signal: ready (200) before, 400 once it drains
    deadline = time.time() + 30
    while True:
        r = request(port, "GET", "/v2/health/ready")
        if r and r[0] == 400:
            break
        if not r or r[0] != 200 or time.time() > deadline:
            fail(f"ready while draining: {r}")
        time.sleep(0.05)
    r = request(port, "POST", f"/v2/models/{model}/infer", infer_body())
    if not r or r[0] != 503 or b"shutting down" not in r[2] or r[1].get("connection") != "close":
        fail(f"a new inference while draining: {r}")
    a.sendall(body[20:])
    r = read_response(a)
    if not r or r[0] != 200 or len(json.loads(r[2])["outputs"][0]["data"]) != 3 * 4:
        fail(f"the request in flight at SIGTERM: {r}")
    print("draining: ready 400, new inference 503, the request in flight 200")


def main():
    case, port, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if case == "drain":
        case_drain(port, model, int(sys.argv[4]))
    else:
        globals()["case_" + case.replace("-", "_")](port, model)


if __name__ == "__main__":
    main()
