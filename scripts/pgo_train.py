#!/usr/bin/env python3
"""The training run of a profile-guided build (scripts/pgo-profile.sh): an instrumented
`skiff serve` answers what an edge tier mostly answers (static files of the shared bench's
sizes over HTTP/1.1 keep-alive, plain and TLS, misses, and HTTP/2 when h2load is
installed), for about 15 seconds, and exits cleanly so that it writes its profile.

Usage: scripts/pgo_train.py SKIFF_BINARY
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from benchlib import free_port, wait_port  # noqa: E402

FILES = {"index.html": 1795, "1k.html": 1024, "4k.html": 4096, "30k.html": 30 * 1024,
         "100k.jpg": 100 * 1024, "1m.jpg": 1024 * 1024}


def load(argv, misses=False):
    """Runs one load generator for a second or so. A failure, or (unless `misses`)
    responses other than 2xx/3xx, fail the training: a broken server must not leave a
    profile of its error paths behind."""
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    out = run.stdout + run.stderr
    problems = []
    if run.returncode != 0:
        problems.append(f"exit status {run.returncode}")
    if "Socket errors" in out:
        problems.append("socket errors")
    if not misses and "Non-2xx or 3xx responses" in out:
        problems.append("non-2xx/3xx responses")
    if "requests:" in out and " 0 failed" not in out:
        problems.append("failed HTTP/2 requests")
    if problems:
        sys.exit(f"pgo_train: {' '.join(argv)}: {', '.join(problems)}\n{out}")


def stop(server):
    """SIGTERM, and the exit the profile is written at; returns the exit status."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        sys.exit("pgo_train: the server did not stop within 30 s")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    if not shutil.which("wrk"):
        sys.exit("pgo_train: wrk is missing")
    h2load = shutil.which("h2load")
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "root")
        os.mkdir(root)
        for name, size in FILES.items():
            with open(os.path.join(root, name), "wb") as f:
                f.write((b"<p>skiff profile training</p>\n" * (size // 30 + 1))[:size])
        cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-keyout", key, "-out", cert],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        plain = free_port()
        tls = free_port()
        while tls == plain:
            tls = free_port()
        # The profile goes where the build said (-Cprofile-generate), whatever the caller's
        # environment says.
        env = {k: v for k, v in os.environ.items() if k != "LLVM_PROFILE_FILE"}
        log = open(os.path.join(work, "server.log"), "w+")
        server = subprocess.Popen(
            [binary, "serve", root, "--listen", f"127.0.0.1:{plain}", "--tls-listen",
             f"127.0.0.1:{tls}", "--tls-cert", cert, "--tls-key", key, "--threads", "1",
             "--access-log", "off", "--admin-listen", "127.0.0.1:0"],
            stdout=log, stderr=log, env=env)
        # Stopped (and its profile written) however this script ends, SIGTERM included.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("pgo_train: terminated"))
        try:
            if not (wait_port(plain) and wait_port(tls)) or server.poll() is not None:
                log.seek(0)
                sys.exit(f"pgo_train: the instrumented server did not listen\n{log.read()}")
            for name in FILES:
                load(["wrk", "-t1", "-c10", "-d1", f"http://127.0.0.1:{plain}/{name}"])
            load(["wrk", "-t1", "-c4", "-d1", f"http://127.0.0.1:{plain}/missing.html"],
                 misses=True)
            for name in ("index.html", "100k.jpg"):
                load(["wrk", "-t1", "-c10", "-d1", f"https://127.0.0.1:{tls}/{name}"])
            if h2load:
                for scheme, port in (("http", plain), ("https", tls)):
                    for name in ("index.html", "30k.html"):
                        load([h2load, "-c10", "-m10", "-D", "1",
                              f"{scheme}://127.0.0.1:{port}/{name}"])
        finally:
            code = stop(server)
        if code != 0:
            log.seek(0)
            sys.exit(f"pgo_train: the server exited with {code}\n{log.read()}")


if __name__ == "__main__":
    main()
