#!/usr/bin/env python3
"""Where a small file's CPU goes: `skiff serve` beside the shared bench's limit responder
(an epoll loop that parses nothing) and `tokio_floor` (a tokio task per connection that
parses nothing either: server/examples/tokio_floor.rs), in interleaved rounds.

Pinned like ../shared/bench/static_bench.py (server on CPU 0, wrk on CPU 1). For each
server and round: CPU ns per request from the threads' run time (/proc/PID/task/*/
schedstat), split into user and system time by the clock ticks in /proc/PID/stat (coarse:
10 ms ticks, so read the medians). The limit minus the floor is what a tokio task per
connection costs; Skiff minus the floor is what Skiff itself does per request.

Usage:
  cargo build --release -p skiff --example tokio_floor
  bench/floor.py [--size 1024] [--conns 10] [--rounds 5] [--seconds 4] [--skiff [LABEL=]PATH]...

--skiff may be repeated (LABEL=PATH) to put builds side by side in the same rounds.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import free_port, wait_port  # noqa: E402

TARGET = os.path.join(HERE, "..", "target", "release")
LIMIT_SRC = os.path.join(HERE, "..", "..", "shared", "bench", "limit_responder.c")


def run_ns(pid):
    """Run time of all the process's threads, in ns."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def ticks(pid):
    """(user, system) clock ticks of the process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def wrk(port, path, conns, seconds):
    out = subprocess.run(
        ["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{seconds}",
         f"http://127.0.0.1:{port}/{path}"],
        capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "requests in" in line:
            return int(line.split()[0])
    raise RuntimeError(f"wrk printed no request count:\n{out}")


def measure(cmd, path, conns, seconds):
    port = free_port()
    proc = subprocess.Popen(["taskset", "-c", "0"] + [c.format(port=port) for c in cmd],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port):
            raise RuntimeError(f"{cmd[0]} did not listen")
        wrk(port, path, conns, 1)  # warm-up
        ns0, (u0, s0) = run_ns(proc.pid), ticks(proc.pid)
        n = wrk(port, path, conns, seconds)
        ns1, (u1, s1) = run_ns(proc.pid), ticks(proc.pid)
    finally:
        proc.terminate()
        proc.wait()
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    return (ns1 - ns0) / n, (u1 - u0) * tick_ns / n, (s1 - s0) * tick_ns / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="body bytes (a file of that size for Skiff)")
    ap.add_argument("--conns", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--skiff", action="append", metavar="[LABEL=]PATH",
                    help="a skiff build (repeat to compare builds; default target/release/skiff)")
    args = ap.parse_args()
    builds = {}
    for spec in args.skiff or [os.path.join(TARGET, "skiff")]:
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = "skiff" if not builds else f"skiff{len(builds) + 1}", spec
        builds[label] = path

    floor = os.path.join(TARGET, "examples", "tokio_floor")
    if not os.path.exists(floor):
        sys.exit("build it first: cargo build --release -p skiff --example tokio_floor")
    with tempfile.TemporaryDirectory() as work:
        limit = os.path.join(work, "limit_responder")
        subprocess.run(["cc", "-O2", "-o", limit, LIMIT_SRC], check=True)
        root = os.path.join(work, "root")
        os.mkdir(root)
        name = f"{args.size}.html"
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"x" * args.size)
        servers = {
            "limit": [limit, "{port}", str(args.size)],
            "tokio_floor": [floor, "{port}", str(args.size)],
        }
        for label, path in builds.items():
            servers[label] = [path, "serve", root, "--listen", "127.0.0.1:{port}", "--threads",
                              "1", "--access-log", "off", "--admin-listen", "127.0.0.1:0"]
        results = {k: [] for k in servers}
        for r in range(args.rounds):
            for label, cmd in servers.items():
                results[label].append(measure(cmd, name, args.conns, args.seconds))
                total, user, system = results[label][-1]
                print(f"# round {r + 1} {label}: {total:.0f} ns/req (user {user:.0f}, system {system:.0f})",
                      file=sys.stderr)
            time.sleep(0.2)
    print(f"{args.size} B body, {args.conns} connections, {args.rounds} rounds of {args.seconds} s "
          "(medians, ns per request)")
    print(f"{'server':<12} {'total':>7} {'user':>6} {'system':>7} {'÷ limit':>8}")
    base = statistics.median(r[0] for r in results["limit"])
    for label, rows in results.items():
        total, user, system = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"{label:<12} {total:>7.0f} {user:>6.0f} {system:>7.0f} {total / base:>8.2f}")


if __name__ == "__main__":
    main()
