#!/usr/bin/env python3
"""Attacks under load: slow and stalled clients against `skiff run` on loopback, while a
well-behaved client keeps asking for a small file and a small PHP page.

Starts php-fpm (pm static, --php-workers children) and `skiff run` with one virtual
server (a small page, a small PHP page, a PHP script that reads its body, a 64 MiB file)
and a FastCGI pool with max_active_requests = --max-active. Then, all at once and for
--duration seconds:

  slowloris    --slowloris connections sending a request head one header line every
               --slowloris-interval seconds, never finishing it;
  slow_body    --slow-bodies POSTs to the PHP script: Content-Length: 100, 10 bytes, then
               one byte every 5 s; every --chunked-every'th one chunked instead (one
               10-byte chunk, then nothing);
  non_reading  --non-reading GETs of the 64 MiB file with SO_RCVBUF 4096, never read;
  h2c_idle     --h2c-idle connections sending the HTTP/2 preface and an empty SETTINGS
               frame, then nothing;

while one well-behaved client sends GETs one after another (a new connection each,
--client-interval apart), alternating the small page and the PHP page.

When did the server close an attacking connection? For the classes that read, when they
see EOF or a reset; for every class, when the server's own socket for it leaves the
server's file table (/proc/PID/fd and /proc/net/tcp, polled every --poll seconds). Times
are from that connection's first byte sent. A connection is expected closed within its
class's timeout (the --expect-* flags, defaulting to skiff's defaults) plus --slack.

Prints the client's requests, failures and p50/p99/max latency per page, and for each
attack class the connections opened, closed by the server (p50/max time to close), still
open at the end, and outliving their timeout, with what the server answered. Exits 1 if
a client request failed, a page's p99 is above --max-p99-ms, or any attacking connection
outlived its expected timeout.

Usage: bench/attack.py [--skiff PATH] [--duration 40] [--slowloris 500] [--slow-bodies 100]
                       [--non-reading 100] [--h2c-idle 4] [--max-connections 2000]
                       [--limit body_timeout=20s ...] [--json out.json]
Requires php-fpm (scripts/install-deps.sh) and a built skiff (target/release/skiff).
Linux only (/proc). Ends only the processes it started, by PID.
"""
import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import free_port, wait_port  # noqa: E402

SKIFF = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(HERE, "..", "target"), "release", "skiff")
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
H2_FRAME_NAMES = {0: "DATA", 1: "HEADERS", 3: "RST_STREAM", 4: "SETTINGS", 6: "PING", 7: "GOAWAY",
                  8: "WINDOW_UPDATE"}
BIG_FILE_BYTES = 64 << 20

PHP_HELLO = """<?php
header('Content-Type: text/plain');
echo "hello from php\\n";
"""
PHP_SLOW = """<?php
header('Content-Type: text/plain');
echo strlen(file_get_contents('php://input')), " bytes\\n";
"""
CLASSES = ("slowloris", "slow_body", "non_reading", "h2c_idle")


# --- the well-behaved client (a subprocess, so the attackers' event loop never delays it) ---

def one_get(port, path, timeout):
    """One GET on a new connection (Connection: close); returns (seconds, error or None)."""
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(max(0.001, timeout - (time.perf_counter() - start)))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: attack.test\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if time.perf_counter() - start > timeout:
                    raise TimeoutError("timed out")
    except OSError as e:
        return time.perf_counter() - start, f"{type(e).__name__}: {e}"
    elapsed = time.perf_counter() - start
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if not status.startswith("HTTP/1.1 200"):
        return elapsed, f"status {status!r}" if status else "no response"
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and int(value) != len(body):
            return elapsed, f"body {len(body)} bytes of {int(value)}"
    return elapsed, None


def client_main(port, seconds, interval, timeout, paths):
    """Sequential GETs for `seconds`; prints {path: {"latencies": [...], "at": [...],
    "failures": [...]}} (`at`: when each request started, in seconds from the first)."""
    results = {p: {"latencies": [], "at": [], "failures": []} for p in paths}
    t0 = time.monotonic()
    i = 0
    while time.monotonic() < t0 + seconds:
        path = paths[i % len(paths)]
        i += 1
        at = time.monotonic() - t0
        elapsed, error = one_get(port, path, timeout)
        results[path]["latencies"].append(elapsed)
        results[path]["at"].append(at)
        if error:
            results[path]["failures"].append(f"{at:.1f}s: {error}")
        time.sleep(interval)
    json.dump(results, sys.stdout)


# --- the attacking connections ---

class Attack:
    """One attacking connection and what became of it."""

    def __init__(self, cls, variant):
        self.cls, self.variant = cls, variant
        self.sock = None
        self.port = None  # our local port: the server's socket has it as its remote port
        self.started = None  # first byte sent (monotonic)
        self.closed = None  # when the server was first seen to have closed it
        self.how = None
        self.answer = None  # the status line, or the HTTP/2 frames, the server sent
        self.seen_by_server = False
        self.goaway = None  # when an HTTP/2 GOAWAY arrived (the close may come later)
        self.error = None

    def close_seen(self, how, at=None):
        if self.closed is None:
            self.closed = at if at is not None else time.monotonic()
            self.how = how

    def lifetime(self, now):
        if self.started is None:
            return None
        return (self.closed if self.closed is not None else now) - self.started


async def connect(attack, port, rcvbuf=None):
    loop = asyncio.get_running_loop()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    if rcvbuf:
        # Before connect, so the window the client announces is small from the start.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    attack.sock = s
    await loop.sock_connect(s, ("127.0.0.1", port))
    attack.port = s.getsockname()[1]


async def send(attack, data):
    await asyncio.get_running_loop().sock_sendall(attack.sock, data)
    if attack.started is None:
        attack.started = time.monotonic()


async def read_until_closed(attack, h2=False):
    """Reads what the server sends, remembering its answer, until EOF or a reset."""
    loop = asyncio.get_running_loop()
    buf = b""
    frames = []
    while True:
        try:
            chunk = await loop.sock_recv(attack.sock, 65536)
        except (ConnectionResetError, BrokenPipeError):
            attack.close_seen("reset")
            return
        except OSError as e:
            attack.close_seen(f"error {e.errno}")
            return
        if not chunk:
            attack.close_seen("eof")
            return
        if h2:
            buf += chunk
            if buf.startswith(b"HTTP/"):  # an HTTP/1.1 answer to the preface
                attack.answer = buf.split(b"\r\n", 1)[0].decode(errors="replace")
                continue
            while len(buf) >= 9:
                length = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + length:
                    break
                kind = buf[3]
                name = H2_FRAME_NAMES.get(kind, f"type{kind}")
                if kind == 7 and length >= 8:
                    name += f"({int.from_bytes(buf[9 + 4:9 + 8], 'big')})"
                    if attack.goaway is None:
                        attack.goaway = time.monotonic()
                frames.append(name)
                buf = buf[9 + length:]
            attack.answer = " ".join(dict.fromkeys(frames))
        elif attack.answer is None:
            attack.answer = chunk.split(b"\r\n", 1)[0].decode(errors="replace")[:60]


async def trickle(attack, interval, pieces):
    """Sends each of `pieces` after `interval` seconds (the first after a random part of
    it, so the connections do not all write in the same instant)."""
    await asyncio.sleep(random.uniform(0, interval))
    for piece in pieces:
        if attack.closed is not None:
            return
        try:
            await send(attack, piece)
        except OSError:
            attack.close_seen("reset on write")
            return
        await asyncio.sleep(interval)


async def run_attack(attack, port, args):
    try:
        if attack.cls == "slowloris":
            await connect(attack, port)
            await send(attack, b"GET /small.html HTTP/1.1\r\nHost: attack.test\r\n")
            lines = (f"X-Slow-{i}: {i}\r\n".encode() for i in range(1_000_000))
            await asyncio.gather(read_until_closed(attack), trickle(attack, args.slowloris_interval, lines))
        elif attack.cls == "slow_body":
            await connect(attack, port)
            chunked = attack.variant == "chunked"
            head = ("POST /slow.php HTTP/1.1\r\nHost: attack.test\r\nContent-Type: application/octet-stream\r\n"
                    + ("Transfer-Encoding: chunked\r\n" if chunked else "Content-Length: 100\r\n") + "\r\n")
            await send(attack, head.encode() + (b"a\r\n0123456789\r\n" if chunked else b"0123456789"))
            rest = [] if chunked else [b"x"] * 90
            await asyncio.gather(read_until_closed(attack), trickle(attack, 5.0, rest))
        elif attack.cls == "non_reading":
            await connect(attack, port, rcvbuf=4096)
            await send(attack, b"GET /big.bin HTTP/1.1\r\nHost: attack.test\r\n\r\n")
            # Never reads: the monitor sees when the server lets go of the connection.
            await asyncio.Event().wait()
        elif attack.cls == "h2c_idle":
            await connect(attack, port)
            await send(attack, H2_PREFACE + H2_EMPTY_SETTINGS)
            await read_until_closed(attack, h2=True)
    except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError) as e:
        attack.error = type(e).__name__
        attack.close_seen("connect failed" if attack.started is None else "reset")


def server_peers(pid, port):
    """The remote ports of the server's own TCP sockets on `port` (its accepted
    connections): sockets in its file table (/proc/PID/fd) matched by inode against
    /proc/net/tcp and tcp6."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return None
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[9] in inodes and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        peers.add(int(fields[2].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return peers, len(inodes)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


async def monitor(attacks, pid, port, interval, stats):
    """Marks connections closed when the server's socket for them is gone (after it was
    seen once: one not yet accepted is not in the table either), and follows the server's
    memory and sockets."""
    while True:
        now = time.monotonic()
        found = server_peers(pid, port)
        if found is not None:
            peers, sockets = found
            stats["peak_sockets"] = max(stats["peak_sockets"], sockets)
            for a in attacks:
                if a.port is None or a.closed is not None:
                    continue
                if a.port in peers:
                    a.seen_by_server = True
                elif a.seen_by_server:
                    a.close_seen("server socket closed", now)
        rss = rss_kib(pid)
        if rss:
            stats["peak_rss_kib"] = max(stats["peak_rss_kib"], rss)
        await asyncio.sleep(interval)


async def attack_main(attacks, port, pid, args, stats):
    t0 = time.monotonic()
    mon = asyncio.create_task(monitor(attacks, pid, port, args.poll, stats))
    tasks = [asyncio.create_task(run_attack(a, port, args)) for a in attacks]
    await asyncio.sleep(max(0.0, args.duration - (time.monotonic() - t0)))
    # One last look at the server's table, then let go of everything.
    mon.cancel()
    await asyncio.gather(mon, return_exceptions=True)
    end = time.monotonic()
    found = server_peers(pid, port)
    if found is not None:
        peers, _ = found
        for a in attacks:
            if a.port is not None and a.closed is None:
                if a.port in peers:
                    a.seen_by_server = True
                elif a.seen_by_server:
                    a.close_seen("server socket closed", end)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for a in attacks:
        if a.sock is not None:
            a.sock.close()
    return t0, end


# --- processes ---

def start(cmd, log):
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)


def stop(proc, grace=10.0):
    """SIGTERM to the process we started (php-fpm's master takes its workers down with
    it; skiff drains), SIGKILL if it has not exited within `grace`."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(hard, need)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        sys.exit(f"RLIMIT_NOFILE is {soft}, and this run needs {need}: raise the hard limit")


def php_fpm_binary():
    for name in sorted(os.listdir("/usr/sbin")):
        if name.startswith("php-fpm"):
            return os.path.join("/usr/sbin", name)
    sys.exit("php-fpm is not installed: scripts/install-deps.sh")


def make_site(root):
    os.makedirs(root)
    with open(os.path.join(root, "small.html"), "w") as f:
        f.write("<!doctype html><title>small</title><p>" + "x" * 900 + "</p>\n")
    with open(os.path.join(root, "hello.php"), "w") as f:
        f.write(PHP_HELLO)
    with open(os.path.join(root, "slow.php"), "w") as f:
        f.write(PHP_SLOW)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.truncate(BIG_FILE_BYTES)


def skiff_config(args, port, admin_port, root, fpm_port):
    limits = [f"max_connections: {args.max_connections}"] + [
        f"{k}: {v}" for k, v in (item.split("=", 1) for item in args.limit)]
    return "\n".join([
        f"listen: 127.0.0.1:{port}",
        f"admin_listen: 127.0.0.1:{admin_port}",
        f"threads: {args.threads}",
        "access_log: { format: off }",
        "limits:",
        *(f"  {line}" for line in limits),
        "virtual_servers:",
        "  - name: attack",
        "    default: true",
        f"    root: {root}",
        "    rules:",
        "      - match: { extensions: [php] }",
        "        action: { fastcgi: { pool: php } }",
        "pools:",
        f"  - {{ name: php, protocol: fastcgi, endpoints: [\"127.0.0.1:{fpm_port}\"], "
        f"max_active_requests: {args.max_active} }}",
        "",
    ])


# --- figures ---

def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def ms_of(v):
    return "-" if v is None else f"{v:.1f} ms"


def secs(v):
    return "-" if v is None else f"{v:.1f} s"


def summarise(attacks, client, args, end, stats):
    expected = {"slowloris": args.expect_header_timeout, "slow_body": args.expect_body_timeout,
                "non_reading": args.expect_send_timeout, "h2c_idle": args.expect_idle_timeout}
    report = {"client": {}, "attacks": {}, "server": stats, "settings": {
        "duration_s": args.duration, "expected_timeouts_s": expected, "slack_s": args.slack,
        "max_p99_ms": args.max_p99_ms, "limits": args.limit, "max_connections": args.max_connections,
        "max_active_requests": args.max_active, "php_workers": args.php_workers, "threads": args.threads}}
    problems = []
    for path, r in client.items():
        lat = r["latencies"]
        row = {"requests": len(lat), "failures": len(r["failures"]), "p50_ms": None, "p99_ms": None,
               "max_ms": None, "first_failures": r["failures"][:5]}
        if lat:
            worst = max(range(len(lat)), key=lat.__getitem__)
            row.update(p50_ms=pct(lat, 0.5) * 1000, p99_ms=pct(lat, 0.99) * 1000, max_ms=lat[worst] * 1000,
                       max_at_s=r["at"][worst],
                       over_max_p99=sum(1 for v in lat if v * 1000 > args.max_p99_ms))
        report["client"][path] = row
        if not lat:
            problems.append(f"client: no request to {path}")
        if row["failures"]:
            problems.append(f"client: {row['failures']} of {len(lat)} requests to {path} failed")
        if row["p99_ms"] is not None and row["p99_ms"] > args.max_p99_ms:
            problems.append(f"client: p99 of {path} is {row['p99_ms']:.1f} ms (> {args.max_p99_ms} ms)")
    for cls in CLASSES:
        mine = [a for a in attacks if a.cls == cls]
        if not mine:
            continue
        limit = expected[cls] + args.slack
        opened = [a for a in mine if a.started is not None]
        closed = [a for a in opened if a.closed is not None]
        times = [a.closed - a.started for a in closed]
        still_open = [a for a in opened if a.closed is None]
        outlived = [a for a in opened if a.lifetime(end) > limit]
        answers = {}
        for a in opened:
            key = a.answer or "(nothing)"
            answers[key] = answers.get(key, 0) + 1
        hows = {}
        for a in closed:
            hows[a.how] = hows.get(a.how, 0) + 1
        row = {"connections": len(mine), "opened": len(opened), "failed_to_open": len(mine) - len(opened),
               "never_seen_by_server": sum(1 for a in opened if not a.seen_by_server and a.closed is None),
               "closed_by_server": len(closed), "close_p50_s": pct(times, 0.5),
               "close_max_s": max(times) if times else None, "open_at_end": len(still_open),
               "expected_timeout_s": expected[cls], "outlived": len(outlived), "answers": answers,
               "closed_how": hows,
               "goaway_p50_s": pct([a.goaway - a.started for a in opened if a.goaway], 0.5),
               "variants": sorted({a.variant for a in mine})}
        report["attacks"][cls] = row
        if outlived:
            problems.append(f"{cls}: {len(outlived)} of {len(opened)} connections outlived "
                            f"{expected[cls]:g} s + {args.slack:g} s")
    report["problems"] = problems
    report["pass"] = not problems
    return report


def print_report(report, args):
    print(f"well-behaved client (sequential GETs, a new connection each, {args.client_interval * 1000:g} ms apart):")
    print(f"  {'page':<12} {'requests':>8} {'failed':>6} {'p50':>9} {'p99':>9} {'max':>9} {'max at':>7} "
          f"{'> ' + format(args.max_p99_ms, 'g') + ' ms':>8}")
    for path, r in report["client"].items():
        print(f"  {path:<12} {r['requests']:>8} {r['failures']:>6} "
              f"{ms_of(r['p50_ms']):>9} {ms_of(r['p99_ms']):>9} {ms_of(r['max_ms']):>9} "
              f"{secs(r.get('max_at_s')):>7} {r.get('over_max_p99', 0):>8}")
        for f in r["first_failures"]:
            print(f"      {f}")
    print(f"attacks (for {args.duration:g} s; times from each connection's first byte; "
          f"expected closed within its timeout + {args.slack:g} s):")
    print(f"  {'class':<12} {'conns':>5} {'closed':>6} {'p50 close':>9} {'max close':>9} {'open at end':>11} "
          f"{'timeout':>7} {'outlived':>8}  answers")
    for cls, r in report["attacks"].items():
        answers = ", ".join(f"{k} x{v}" for k, v in sorted(r["answers"].items(), key=lambda kv: -kv[1]))
        print(f"  {cls:<12} {r['opened']:>5} {r['closed_by_server']:>6} {secs(r['close_p50_s']):>9} "
              f"{secs(r['close_max_s']):>9} {r['open_at_end']:>11} {r['expected_timeout_s']:>6g}s "
              f"{r['outlived']:>8}  {answers}")
        extra = []
        if r["goaway_p50_s"] is not None:
            extra.append(f"GOAWAY after {secs(r['goaway_p50_s'])} (p50)")
        if r["failed_to_open"]:
            extra.append(f"{r['failed_to_open']} failed to connect")
        if r["never_seen_by_server"]:
            extra.append(f"{r['never_seen_by_server']} never accepted")
        if extra:
            print(f"  {'':<12} ({', '.join(extra)})")
    s = report["server"]
    print(f"skiff: peak RSS {s['peak_rss_kib'] / 1024:.1f} MiB, peak open sockets {s['peak_sockets']}")
    if report["pass"]:
        print("PASS")
    else:
        print("FAIL: " + "; ".join(report["problems"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skiff", default=SKIFF, help="the skiff binary (default: release/skiff under $CARGO_TARGET_DIR, else target/)")
    ap.add_argument("--duration", type=float, default=40.0, help="seconds the attacks and the client run")
    ap.add_argument("--slowloris", type=int, default=500)
    ap.add_argument("--slowloris-interval", type=float, default=3.0, help="seconds between header lines")
    ap.add_argument("--slow-bodies", type=int, default=100)
    ap.add_argument("--chunked-every", type=int, default=4,
                    help="every Nth slow body is chunked (one chunk, then nothing); 0: none")
    ap.add_argument("--non-reading", type=int, default=100)
    ap.add_argument("--h2c-idle", type=int, default=4)
    ap.add_argument("--expect-header-timeout", type=float, default=10.0,
                    help="slowloris connections must be closed within this (skiff's header_timeout, 10 s)")
    ap.add_argument("--expect-body-timeout", type=float, default=20.0,
                    help="slow bodies must be closed within this (skiff's body_timeout, 20 s, which is "
                         "also the grace before body_min_rate)")
    ap.add_argument("--expect-send-timeout", type=float, default=30.0,
                    help="non-reading clients must be dropped within this (skiff's send_timeout, 30 s)")
    ap.add_argument("--expect-idle-timeout", type=float, default=10.0,
                    help="idle h2c connections that never sent a request must be closed within this "
                         "(skiff closes them at header_timeout, 10 s)")
    ap.add_argument("--slack", type=float, default=3.0, help="seconds allowed beyond an expected timeout")
    ap.add_argument("--max-p99-ms", type=float, default=50.0, help="the client's p99 bound, per page")
    ap.add_argument("--limit", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra `limits:` entry for skiff's config, e.g. body_timeout=20s (repeatable)")
    ap.add_argument("--max-connections", type=int, default=2000, help="skiff's limits.max_connections")
    ap.add_argument("--max-active", type=int, default=8, help="the PHP pool's max_active_requests")
    ap.add_argument("--php-workers", type=int, default=8, help="php-fpm children (pm static)")
    ap.add_argument("--threads", type=int, default=2, help="skiff's serving threads")
    ap.add_argument("--client-interval", type=float, default=0.01, help="seconds between the client's requests")
    ap.add_argument("--client-timeout", type=float, default=5.0, help="a client request slower than this fails")
    ap.add_argument("--poll", type=float, default=0.25, help="seconds between looks at the server's sockets")
    ap.add_argument("--skiff-arg", action="append", default=[], help="an extra argument for `skiff run`")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON (- for stdout)")
    ap.add_argument("--client", type=int, help=argparse.SUPPRESS)  # the client subprocess: the port
    args = ap.parse_args()
    if args.client:
        client_main(args.client, args.duration, args.client_interval, args.client_timeout,
                    ["/small.html", "/hello.php"])
        return
    for item in args.limit:
        if "=" not in item:
            sys.exit(f"--limit {item}: expected KEY=VALUE")
    if not os.access(args.skiff, os.X_OK):
        sys.exit(f"{args.skiff} is not an executable: cargo build --release -p skiff (or pass --skiff)")

    attacks = [Attack("slowloris", "head") for _ in range(args.slowloris)]
    attacks += [Attack("slow_body", "chunked" if args.chunked_every and i % args.chunked_every == args.chunked_every - 1
                       else "content-length") for i in range(args.slow_bodies)]
    attacks += [Attack("non_reading", "rcvbuf-4096") for _ in range(args.non_reading)]
    attacks += [Attack("h2c_idle", "preface+settings") for _ in range(args.h2c_idle)]
    # Ours and skiff's (inherited): one socket per attack each side, plus room.
    raise_nofile(2 * len(attacks) + args.max_connections + 1024)

    work = tempfile.mkdtemp(prefix="skiff-attack-")
    os.chmod(work, 0o755)
    root = os.path.join(work, "www")
    make_site(root)
    fpm_port, port, admin_port = free_port(), free_port(), free_port()
    fpm_conf = os.path.join(work, "fpm.conf")
    with open(fpm_conf, "w") as f:
        f.write(f"[global]\npid = {work}/fpm.pid\nerror_log = {work}/fpm.log\ndaemonize = no\n"
                f"[www]\nlisten = 127.0.0.1:{fpm_port}\npm = static\npm.max_children = {args.php_workers}\n")
    conf = os.path.join(work, "skiff.yaml")
    with open(conf, "w") as f:
        f.write(skiff_config(args, port, admin_port, root, fpm_port))
    fpm = skiff = client = None
    try:
        fpm = start([php_fpm_binary(), "-F", "-R", "-n", "-y", fpm_conf], os.path.join(work, "fpm.out"))
        if not wait_port(fpm_port):
            sys.exit("php-fpm did not start")
        skiff_log = os.path.join(work, "skiff.log")
        skiff = start([args.skiff, "run", "--config", conf, "--shutdown-grace", "2s", *args.skiff_arg], skiff_log)
        if not wait_port(port):
            with open(skiff_log) as f:
                sys.exit(f"skiff did not start:\n{f.read()[-3000:]}")
        for path in ("/small.html", "/hello.php"):
            elapsed, error = one_get(port, path, 5.0)
            if error:
                sys.exit(f"GET {path} before the attacks: {error}")
        stats = {"peak_rss_kib": rss_kib(skiff.pid) or 0, "idle_rss_kib": rss_kib(skiff.pid), "peak_sockets": 0}
        client = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--client", str(port),
                                   "--duration", str(args.duration), "--client-interval", str(args.client_interval),
                                   "--client-timeout", str(args.client_timeout)],
                                  stdout=subprocess.PIPE, text=True)
        _, end = asyncio.run(attack_main(attacks, port, skiff.pid, args, stats))
        out, _ = client.communicate(timeout=args.client_timeout + 30)
        client_results = json.loads(out)
        stats["rss_at_end_kib"] = rss_kib(skiff.pid)
        alive = skiff.poll() is None
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        stop(skiff)
        stop(fpm)
        shutil.rmtree(work, ignore_errors=True)
    report = summarise(attacks, client_results, args, end, stats)
    if not alive:
        report["problems"].append("skiff exited during the run")
        report["pass"] = False
    print_report(report, args)
    if args.json:
        if args.json == "-":
            json.dump(report, sys.stdout, indent=2)
            print()
        else:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
    sys.exit(0 if report["pass"] else 1)


if __name__ == "__main__":
    main()
