#!/usr/bin/env python3
"""Reloads under load: wrk keeps 50 connections busy against `skiff run` on loopback
while the config file is rewritten again and again. Prints the request, error, non-2xx and
reload counts, and exits 1 unless every request succeeded and enough reloads applied.

Usage: bench/reload_under_load.py [--seconds 10] [--reloads 25] [--connections 50]
Requires wrk and a built skiff (target/release/skiff, or --skiff PATH).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def config(root, body):
    return f"""listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
threads: 2
access_log: {{ format: off }}
virtual_servers:
  - name: site
    default: true
    root: {root}
    rules:
      - match: {{ path: /which }}
        action: {{ return: {{ status: 200, body: "{body}" }} }}
      - match: {{ extensions: [css] }}
        action: {{ static: {{}} }}
        cache: {{ max_age: 60 }}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--reloads", type=int, default=25)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--skiff", default=os.path.join(HERE, "..", "target", "release", "skiff"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="skiff-reload-")
    with open(os.path.join(work, "index.html"), "w") as f:
        f.write("<h1>reload under load</h1>\n")
    path = os.path.join(work, "skiff.yaml")
    with open(path, "w") as f:
        f.write(config(work, "v0"))
    proc = subprocess.Popen([args.skiff, "run", "--config", path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    addr = admin = None
    for line in proc.stderr:
        m = re.search(r"skiff listening on (\S+) admin (\S+)", line)
        if m:
            addr, admin = m.group(1), m.group(2)
            break
    if not addr:
        proc.kill()
        sys.exit("skiff did not start")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    try:
        wrk = subprocess.Popen(["wrk", "-t2", f"-c{args.connections}", f"-d{args.seconds}s",
                                f"http://{addr}/"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        spacing = max(0.15, (args.seconds - 1.5) / args.reloads)
        for i in range(1, args.reloads + 1):
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(config(work, f"v{i}"))
            os.replace(tmp, path)  # atomic, as editors and the kubelet do
            time.sleep(spacing)
        out, _ = wrk.communicate(timeout=args.seconds + 30)
        metrics = urllib.request.urlopen(f"http://{admin}/metrics", timeout=5).read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    errors = 0
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        errors = sum(int(x) for x in m.groups())
    reloads = int(m.group(1)) if (m := re.search(r'skiff_config_reloads_total\{result="success"\} (\d+)', metrics)) else 0
    print(f"requests={requests} errors={errors} non2xx={non2xx} reloads={reloads} "
          f"connections={args.connections} seconds={args.seconds}")
    ok = errors == 0 and non2xx == 0 and reloads >= min(20, args.reloads) and requests > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
