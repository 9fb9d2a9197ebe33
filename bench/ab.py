#!/usr/bin/env python3
"""A/B benchmark of two (or more) skiff configurations, side by side in one run.

Pinned like ../shared/bench/static_bench.py (server on CPU 0, wrk on CPU 1), rounds
interleaved (A, B, A, B, ...) so machine noise hits every variant alike. Reports the
median req/s and server CPU microseconds per request for each variant and file.

Usage:
  bench/ab.py --variant 'log on=' --variant 'log off=--access-log off' \
              --file index.html:1795:20 --rounds 3 --seconds 4

A variant is LABEL=EXTRA_FLAGS for `skiff serve`, or LABEL=config:FILE for `skiff run`
with a config template in which {root} and {port} are replaced; LABEL=bin:PATH [FLAGS]
runs another build (e.g. before and after a change); LABEL=peer:lighttpd runs lighttpd on
the same root, configured as the shared bench configures it. A file is NAME:SIZE:CONNECTIONS;
it is created in a temporary root with the shared bench's payload. Requires wrk and taskset.
"""
import argparse
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_seconds, free_port, wait_port  # noqa: E402
SKIFF = os.path.join(HERE, "..", "target", "release", "skiff")
# The shared bench's lighttpd configuration (../shared/bench/static_bench.py), one worker.
LIGHTTPD_CONF = """server.document-root = "{root}"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{work}/lighttpd.err"
server.max-keep-alive-requests = 1000000
server.max-fds = 8192
mimetype.assign = (".html" => "text/html", ".jpg" => "image/jpeg", ".bin" => "application/octet-stream")
"""
PAYLOAD = b"<p>featherweight static edge benchmark payload</p>\n" * 2048








def run_once(root, extra, name, conns, seconds):
    port = free_port()
    skiff = SKIFF
    if extra.startswith("bin:"):
        skiff, _, extra = extra[len("bin:"):].partition(" ")
    if extra == "peer:lighttpd":
        conf = os.path.join(root, "..", f"lighttpd-{port}.conf")
        with open(conf, "w") as f:
            f.write(LIGHTTPD_CONF.format(root=root, port=port, work=os.path.dirname(conf)))
        cmd = ["taskset", "-c", "0", "lighttpd", "-D", "-f", conf]
    elif extra.startswith("config:"):
        # A config template with {root} and {port}: run it with `skiff run`.
        with open(extra[len("config:"):]) as f:
            text = f.read().replace("{root}", root).replace("{port}", str(port))
        conf = os.path.join(root, "..", f"ab-{port}.yaml")
        with open(conf, "w") as f:
            f.write(text)
        cmd = ["taskset", "-c", "0", skiff, "run", "--config", conf]
    else:
        cmd = ["taskset", "-c", "0", skiff, "serve", root, "--listen", f"127.0.0.1:{port}",
               "--admin-listen", "127.0.0.1:0", "--threads", "1"] + shlex.split(extra)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        if not wait_port(port):
            raise RuntimeError(f"the server did not start: {cmd}")
        cpu0 = cpu_seconds(proc.pid)
        out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{seconds}s",
                              f"http://127.0.0.1:{port}/{name}"], capture_output=True, text=True).stdout
        cpu = cpu_seconds(proc.pid) - cpu0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    requests = rps = 0
    errors = 0
    for line in out.splitlines():
        if " requests in " in line:
            requests = int(line.split()[0])
        elif line.startswith("Requests/sec:"):
            rps = float(line.split()[1])
        elif "Non-2xx" in line or "Socket errors" in line:
            errors += sum(int(x.strip(",")) for x in line.split() if x.strip(",").isdigit())
    return rps, (cpu * 1e6 / requests if requests else float("nan")), errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", required=True, help="LABEL=EXTRA_FLAGS")
    ap.add_argument("--file", action="append", required=True, help="NAME:SIZE:CONNS")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=4)
    args = ap.parse_args()
    if not os.path.exists(SKIFF):
        sys.exit("build first: cargo build --release -p skiff")
    variants = [v.split("=", 1) for v in args.variant]
    files = []
    with tempfile.TemporaryDirectory(prefix="skiff-ab-") as top:
        root = os.path.join(top, "root")
        os.mkdir(root)
        for spec in args.file:
            name, size, conns = spec.split(":")
            size = int(size)
            with open(os.path.join(root, name), "wb") as f:
                left = size
                while left > 0:
                    part = PAYLOAD[: min(left, len(PAYLOAD))]
                    f.write(part)
                    left -= len(part)
            files.append((name, int(conns)))
        results = {(label, name): [] for label, _ in variants for name, _ in files}
        for _ in range(args.rounds):
            for name, conns in files:
                for label, extra in variants:
                    results[(label, name)].append(run_once(root, extra, name, conns, args.seconds))
    print("| file | variant | req/s (median) | CPU us/req (median) | errors |")
    print("|---|---|---|---|---|")
    for name, _ in files:
        for label, _ in variants:
            runs = results[(label, name)]
            print(f"| {name} | {label} | {statistics.median(r[0] for r in runs):.0f} | "
                  f"{statistics.median(r[1] for r in runs):.2f} | {sum(r[2] for r in runs)} |")


if __name__ == "__main__":
    main()
