#!/usr/bin/env python3
"""User-space instructions per request of `skiff serve`, for one or more builds side by side.

Wall-clock figures on this shared 2-core machine move by 10-30% between runs, so a small
change to the serving path cannot be judged by them. Instruction counts from
`valgrind --tool=callgrind` are repeatable for the same binary and inputs: each build
serves the same files to `h2load` twice, with N and 2N requests, and the difference
divided by N is its cost per request, start-up and shutdown excluded.

Usage:
  bench/instructions.py --binary before=/tmp/skiff-before --binary after=target/release/skiff \\
      [--file 4k.html:4096] [--file 1k.html:1024] [-n 10000] [-c 10] [--h2] [-- EXTRA SKIFF ARGS]

--h2 sends HTTP/2 with prior knowledge (h2c, 10 streams per connection, as the shared
bench's --h2 mode) instead of HTTP/1.1.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"skiff exited early with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"port {port} never opened")


def instructions(binary, root, path, requests, conns, extra, workdir, h2=False):
    """Total user-space instructions (every thread) of one run serving `requests`."""
    port = free_port()
    out = os.path.join(workdir, f"cg.{os.getpid()}.{port}")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           binary, "serve", root, "--listen", f"127.0.0.1:{port}",
           "--admin-listen", f"127.0.0.1:{free_port()}", "--threads", "1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        if requests:
            proto = ["-m", "10"] if h2 else ["--h1"]
            r = subprocess.run(["h2load", *proto, "-n", str(requests), "-c", str(conns),
                                f"http://127.0.0.1:{port}/{path}"],
                               capture_output=True, text=True, timeout=600)
            done = re.search(r"(\d+) succeeded", r.stdout)
            if r.returncode != 0 or not done or int(done.group(1)) != requests:
                raise SystemExit(f"h2load failed: {r.stdout[-500:]}{r.stderr[-500:]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no totals in {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--file", action="append", help="NAME:SIZE (default 4k.html:4096)")
    ap.add_argument("-n", type=int, default=10000, help="requests in the short run")
    ap.add_argument("-c", type=int, default=10, help="h2load connections")
    ap.add_argument("--h2", action="store_true", help="h2c instead of HTTP/1.1")
    ap.add_argument("extra", nargs="*", help="more arguments for skiff serve")
    args = ap.parse_args()
    files = [f.split(":") for f in (args.file or ["4k.html:4096"])]
    binaries = [b.split("=", 1) for b in args.binary]
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "root")
        os.mkdir(root)
        for name, size in files:
            with open(os.path.join(root, name), "wb") as f:
                f.write(bytes((i * 7 + 13) % 251 for i in range(int(size))))
        print("| file | " + " | ".join(f"{n} instr/req" for n, _ in binaries) + " |")
        print("|---|" + "---|" * len(binaries))
        for name, _ in files:
            cells = []
            for _, path in binaries:
                short = instructions(path, root, name, args.n, args.c, args.extra, work, args.h2)
                long = instructions(path, root, name, 2 * args.n, args.c, args.extra, work,
                                    args.h2)
                cells.append(f"{(long - short) / args.n:,.0f}")
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
