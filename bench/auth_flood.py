#!/usr/bin/env python3
"""Basic auth under a flood of wrong passwords: `skiff run` with one worker thread and a
bcrypt entry of cost 12 (`htpasswd -B -C 12`). Prints the median time to answer a known
user with a wrong password, an unknown user and remembered right credentials, then the
latency of a static GET from another client alone and while four clients loop on wrong
passwords, and the `skiff_auth_*` metrics.

Usage: bench/auth_flood.py [--skiff PATH] [--loops 4] [--cost 12]
Requires htpasswd (apache2-utils) and a built skiff (target/release/skiff by default).
"""
import argparse
import base64
import os
import re
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def request(addr, path, auth=None):
    """One GET on a new connection: (status, milliseconds)."""
    head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    if auth:
        head += "Authorization: Basic " + base64.b64encode(auth.encode()).decode() + "\r\n"
    s = socket.create_connection(addr)
    start = time.perf_counter()
    s.sendall((head + "\r\n").encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return int(data[9:12]), (time.perf_counter() - start) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", default=os.path.join(HERE, "..", "target", "release", "skiff"))
    ap.add_argument("--loops", type=int, default=4)
    ap.add_argument("--cost", type=int, default=12)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(f"{d}/www/admin")
        open(f"{d}/www/index.html", "w").write("home\n")
        open(f"{d}/www/admin/index.html", "w").write("admin\n")
        entry = subprocess.run(
            ["htpasswd", "-nbB", "-C", str(args.cost), "alice", "s3cret"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
        open(f"{d}/htpasswd", "w").write(entry + "\n")
        open(f"{d}/skiff.yaml", "w").write(
            """listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
threads: 1
access_log: { format: off }
virtual_servers:
  - name: www
    default: true
    root: www
    rules:
      - match: { prefix: /admin/ }
        action: { static: {} }
        basic_auth: { realm: Admin, htpasswd: htpasswd }
"""
        )
        proc = subprocess.Popen(
            [args.skiff, "run", "--config", f"{d}/skiff.yaml"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            for line in proc.stderr:
                m = re.search(r"skiff listening on (\S+) admin (\S+)", line)
                if m:
                    break
            host, port = m.group(1).rsplit(":", 1)
            addr = (host, int(port))
            admin = m.group(2)
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()

            def median(auth, n=10):
                return statistics.median(request(addr, "/admin/", auth)[1] for _ in range(n))

            print(f"known user, wrong password: median {median('alice:wrong'):.1f} ms")
            print(f"unknown user:               median {median('mallory:wrong'):.1f} ms")
            print(f"right password, remembered: median {median('alice:s3cret'):.2f} ms")
            alone = sorted(request(addr, "/index.html")[1] for _ in range(50))
            print(f"static GET alone:           median {statistics.median(alone):.2f} ms, "
                  f"max {alone[-1]:.2f} ms")
            stop = threading.Event()

            def flood():
                while not stop.is_set():
                    request(addr, "/admin/", "alice:wrong")

            threads = [threading.Thread(target=flood) for _ in range(args.loops)]
            for t in threads:
                t.start()
            time.sleep(1)
            during = []
            for _ in range(50):
                during.append(request(addr, "/index.html")[1])
                time.sleep(0.02)
            stop.set()
            for t in threads:
                t.join()
            during.sort()
            print(f"static GET, {args.loops} wrong-password loops: median "
                  f"{statistics.median(during):.2f} ms, p90 {during[44]:.2f} ms, "
                  f"max {during[-1]:.2f} ms")
            metrics = urllib.request.urlopen(f"http://{admin}/metrics").read().decode()
            for line in metrics.splitlines():
                if line.startswith("skiff_auth"):
                    print(line)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
