#!/usr/bin/env python3
"""Hostile clients for bench/edge.sh (not run on its own).

  edge.py load PID PORT SECONDS CONNECTIONS
      Opens CONNECTIONS connections to 127.0.0.1:PORT, a third of each kind:
        - half-open: connect, send nothing;
        - slowloris: send a request head one byte a second;
        - big bodies: a webhook head with a well-formed (wrong) signature,
          Content-Length 25 000 000, then the body as fast as the server
          reads it, again and again;
      plus unsigned 25 MB posts in a loop (refused on their head).
      Samples the server's RSS and the latency of GET /healthz every 0.25 s
      for SECONDS. Prints one line of key=value figures.

  edge.py idle PORT N [half]
      Opens N keep-alive connections, sends one GET /healthz on each, reads
      the answer, and then holds them idle until killed (prints "ready");
      with "half", also one request whose head never ends.
"""

import os
import socket
import sys
import threading
import time

BIG = 25_000_000
SIG = "sha256=" + "0" * 62 + "ff"


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def healthz_ms(port):
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            answer = s.recv(64)
            if not answer.startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return (time.monotonic() - started) * 1000


def half_open(port, stop):
    try:
        s = socket.create_connection(("127.0.0.1", port))
    except OSError:
        return
    stop.wait()
    s.close()


def slowloris(port, stop):
    head = b"POST /webhooks HTTP/1.1\r\nHost: b\r\nX-GitHub-Event: issues\r\n"
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port))
            for byte in head:
                s.sendall(bytes([byte]))
                if stop.wait(1):
                    break
        except OSError:
            pass  # closed by the header timeout: start again
        if stop.wait(0.1):
            return


def big_bodies(port, stop, signed):
    head = (
        "POST /webhooks HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BIG}\r\nX-GitHub-Event: issues\r\nX-GitHub-Delivery: d\r\n"
    )
    if signed:
        head += f"X-Hub-Signature-256: {SIG}\r\n"
    head = (head + "\r\n").encode()
    chunk = b" " * 65536
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(head)
            sent = 0
            while sent < BIG and not stop.is_set():
                s.sendall(chunk)
                sent += len(chunk)
            s.close()
        except OSError:
            pass  # refused, or closed when answered
        if stop.wait(0.05):
            return


def load(pid, port, seconds, connections):
    stop = threading.Event()
    threads = []
    third = connections // 3
    kinds = [(half_open, ()), (slowloris, ()), (big_bodies, (True,))]
    for kind, extra in kinds:
        for _ in range(third):
            threads.append(threading.Thread(target=kind, args=(port, stop, *extra), daemon=True))
    for _ in range(4):
        threads.append(threading.Thread(target=big_bodies, args=(port, stop, False), daemon=True))
    base = rss_kb(pid)
    for t in threads:
        t.start()
    rss, latencies, failures = [], [], 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rss.append(rss_kb(pid))
        ms = healthz_ms(port)
        if ms is None:
            failures += 1
        else:
            latencies.append(ms)
        time.sleep(0.25)
    stop.set()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else -1
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else -1
    print(
        f"connections={len(threads)} rss_base_mb={base / 1024:.1f} "
        f"rss_max_mb={max(rss) / 1024:.1f} healthz_p50_ms={p50:.1f} "
        f"healthz_p99_ms={p99:.1f} healthz_max_ms={max(latencies or [-1]):.1f} "
        f"healthz_failures={failures} samples={len(rss)}"
    )


def idle(port, n, half):
    held = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: b\r\n\r\n")
        s.recv(256)
        held.append(s)
    if half:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: b")
        held.append(s)
    print("ready", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    if sys.argv[1] == "load":
        load(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "idle":
        idle(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] == ["half"])
    else:
        sys.exit(__doc__)
    os._exit(0)
