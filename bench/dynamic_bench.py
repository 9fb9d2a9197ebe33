#!/usr/bin/env python3
"""Dynamic pages behind Skiff and behind nginx, side by side in one run: a PHP page through
php-fpm (fastcgi_pass) and a Django /login page through uWSGI (uwsgi_pass), with the same
backend worker counts for both front ends. Each front end gets one worker; wrk drives it.

Usage: bench/dynamic_bench.py [--seconds 8] [--connections 16] [--workers 2] [--rounds 5]
                              [--skiff "LABEL=BINARY [ARGS]" ...] [--nginx-batch]
                              [--pages index.php login] [--pin-backends] [--json out.json]

Skiff runs with its defaults, which include SCHED_BATCH serving threads
(--cpu-scheduling batch); `--skiff "normal=target/release/skiff --cpu-scheduling normal"`
adds a Skiff on the kernel's default policy, and --nginx-batch an nginx started under
`chrt --batch 0`, to show what the policy is worth to each server.

The machine is shared and noisy, so the front ends alternate: each round measures every
front end on one page, then the next page, with the order reversed every other round (each
front end runs only while it is measured). The table gives the median of the rounds and the
median of each round's Skiff/nginx ratio (every round's figures are printed too).
Requires php-fpm, uwsgi with the python3 plugin, python3-django, nginx and wrk
(scripts/install-deps.sh --bench installs them) and a built target/release/skiff.
"""
import argparse
import json
import os
import re
import shlex
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
from benchlib import cpu_seconds, free_port, wait_port  # noqa: E402
SKIFF = os.path.join(HERE, "..", "target", "release", "skiff")

PHP_PAGE = """<?php
$items = [];
for ($i = 0; $i < 20; $i++) { $items[] = "<li>item $i: " . md5((string)$i) . "</li>"; }
header('Content-Type: text/html; charset=utf-8');
echo "<!DOCTYPE html><html><body><h1>Hello from PHP</h1><ul>", implode('', $items), "</ul></body></html>";
"""

DJANGO_SETTINGS = """SECRET_KEY = 'bench'
DEBUG = False
ALLOWED_HOSTS = ['*']
ROOT_URLCONF = 'benchsite.urls'
INSTALLED_APPS = []
MIDDLEWARE = ['django.middleware.csrf.CsrfViewMiddleware']
TEMPLATES = [{'BACKEND': 'django.template.backends.django.DjangoTemplates', 'DIRS': [],
              'OPTIONS': {'context_processors': ['django.template.context_processors.csrf']}}]
DATABASES = {}
USE_TZ = True
"""

DJANGO_URLS = """from django.urls import path
from django.http import HttpResponse
from django.template import engines
from django.views.decorators.csrf import ensure_csrf_cookie
FORM = engines['django'].from_string(
    '<!DOCTYPE html><html><body><h1>Log in</h1><form method="post">{% csrf_token %}'
    '<input name="username"><input name="password" type="password"><button>Log in</button></form></body></html>')
@ensure_csrf_cookie
def login(request):
    return HttpResponse(FORM.render({}, request))
urlpatterns = [path('login', login)]
"""

DJANGO_WSGI = """import os
os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'benchsite.settings')
from django.core.wsgi import get_wsgi_application
application = get_wsgi_application()
"""








def start(cmd, **kw):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, **kw)


def write_skiff_conf(work, label, port, root, fpm_port, uwsgi_port, keepalive):
    conf = os.path.join(work, f"skiff-{label}", "skiff.yaml")
    # One folder per build: each process watches its own config.
    os.makedirs(os.path.dirname(conf), exist_ok=True)
    with open(conf, "w") as f:
        f.write(f"""listen: 127.0.0.1:{port}
admin_listen: 127.0.0.1:0
threads: 1
access_log: {{ format: off }}
virtual_servers:
  - name: bench
    default: true
    root: {root}
    rules:
      - match: {{ path: /login }}
        action: {{ uwsgi: {{ pool: django }} }}
      - match: {{ extensions: [php] }}
        action: {{ fastcgi: {{ pool: php }} }}
pools:
  - {{ name: php, protocol: fastcgi, endpoints: ["127.0.0.1:{fpm_port}"], keepalive: {keepalive} }}
  - {{ name: django, protocol: uwsgi, endpoints: ["127.0.0.1:{uwsgi_port}"] }}
""")
    return conf


def write_nginx_conf(work, port, root, fpm_port, uwsgi_port, keepalive):
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; daemon off; master_process off; pid {work}/nginx.pid;
error_log {work}/nginx.err warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {work}/nb; proxy_temp_path {work}/np; fastcgi_temp_path {work}/nf;
  uwsgi_temp_path {work}/nu; scgi_temp_path {work}/ns;
  upstream php {{ server 127.0.0.1:{fpm_port}; {f"keepalive {keepalive};" if keepalive else ""} }}
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location = /login {{ include /etc/nginx/uwsgi_params; uwsgi_pass 127.0.0.1:{uwsgi_port}; }}
    location ~ \\.php$ {{ include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; {"fastcgi_keep_conn on;" if keepalive else ""} fastcgi_pass php; }}
  }}
}}
""")
    return conf


def pin_workers(masters, count):
    """Pins each backend worker process to one core, alternating (php-fpm's and uWSGI's
    first worker on CPU 0, the second on CPU 1, ...). Left to the scheduler, where the
    workers land changes from run to run, and that placement moved a front end's figures
    by up to 20% between rounds; pinned, every front end meets the same layout."""
    for master in masters:
        deadline = time.time() + 20
        while True:
            workers = subprocess.run(["pgrep", "-P", str(master.pid)], capture_output=True, text=True).stdout.split()
            if len(workers) >= count:
                break
            if time.time() > deadline:
                sys.exit(f"{master.args[0]}: {len(workers)} worker processes, expected {count}")
            time.sleep(0.1)
        for i, pid in enumerate(sorted(workers, key=int)):
            subprocess.run(["taskset", "-pc", str(i % 2), pid], check=True, capture_output=True)


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wrk(url, seconds, conns):
    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", url],
                         capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    errors = 0
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(m.group(1))
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        errors += sum(int(x) for x in m.groups())
    return rps, requests, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2, help="php-fpm children and uWSGI processes")
    ap.add_argument("--keepalive", type=int, default=0,
                    help="FastCGI connections kept for reuse by both front ends (0: none, the default of both)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating Skiff/nginx rounds; medians are reported")
    ap.add_argument("--skiff", action="append", metavar="LABEL=BINARY [ARGS]",
                    help="Skiff builds to compare, with extra arguments for `skiff run` (repeatable); "
                         "default skiff=target/release/skiff")
    ap.add_argument("--nginx-batch", action="store_true",
                    help="also measure nginx under `chrt --batch 0` (the policy Skiff's threads use)")
    ap.add_argument("--pin-backends", action="store_true",
                    help="pin backend workers to alternating cores (same layout for every front end, less variance)")
    ap.add_argument("--pages", nargs="+", choices=["index.php", "login"], default=["index.php", "login"],
                    help="pages to measure (default both)")
    ap.add_argument("--json")
    args = ap.parse_args()
    skiffs = {label: shlex.split(cmd) for label, cmd in
              (v.split("=", 1) for v in (args.skiff or [f"skiff={SKIFF}"]))}
    nginxes = {"nginx": [], **({"nginx-batch": ["chrt", "--batch", "0"]} if args.nginx_batch else {})}
    for tool in ("wrk", "nginx", "uwsgi"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: scripts/install-deps.sh --bench")
    fpm = next((os.path.join("/usr/sbin", f) for f in os.listdir("/usr/sbin") if f.startswith("php-fpm")), None)
    if not fpm:
        sys.exit("php-fpm is not installed")
    work = tempfile.mkdtemp(prefix="skiff-dyn-")
    os.chmod(work, 0o755)
    root = os.path.join(work, "www")
    os.makedirs(root)
    with open(os.path.join(root, "index.php"), "w") as f:
        f.write(PHP_PAGE)
    site = os.path.join(work, "benchsite")
    os.makedirs(site)
    for name, text in (("__init__.py", ""), ("settings.py", DJANGO_SETTINGS), ("urls.py", DJANGO_URLS), ("wsgi.py", DJANGO_WSGI)):
        with open(os.path.join(site, name), "w") as f:
            f.write(text)
    fpm_port, uwsgi_port = free_port(), free_port()
    with open(os.path.join(work, "fpm.conf"), "w") as f:
        f.write(f"[global]\npid = {work}/fpm.pid\nerror_log = {work}/fpm.log\ndaemonize = no\n"
                f"[www]\nlisten = 127.0.0.1:{fpm_port}\npm = static\npm.max_children = {args.workers}\n")
    backends = [
        start([fpm, "-F", "-R", "-y", os.path.join(work, "fpm.conf")]),
        start(["uwsgi", "--plugin", "python3", "--master", "--processes", str(args.workers), "--die-on-term",
               "--disable-logging", "--socket", f"127.0.0.1:{uwsgi_port}", "--chdir", work,
               "--module", "benchsite.wsgi:application"]),
    ]
    results = {}
    try:
        if not (wait_port(fpm_port) and wait_port(uwsgi_port)):
            sys.exit("backends did not start")
        if args.pin_backends:
            pin_workers(backends, args.workers)
        order = [*skiffs, *nginxes]
        for r in range(args.rounds):
            # Alternate who goes first (ABBA...), so a drift in the machine's speed during a
            # round does not favour one side.
            this_round = order if r % 2 == 0 else order[::-1]
            for page in args.pages:
                for front in this_round:
                    # A front end runs only while it is measured: one that holds FastCGI
                    # keep-conn connections would otherwise keep php-fpm workers from the
                    # other.
                    port = free_port()
                    if front in skiffs:
                        conf = write_skiff_conf(work, front, port, root, fpm_port, uwsgi_port, args.keepalive)
                        binary, *extra = skiffs[front]
                        proc = start(["taskset", "-c", "0", binary, "run", "--config", conf, *extra])
                    else:
                        conf = write_nginx_conf(work, port, root, fpm_port, uwsgi_port, args.keepalive)
                        proc = start(["taskset", "-c", "0", *nginxes[front], "nginx", "-c", conf, "-p", work])
                    try:
                        if not wait_port(port):
                            sys.exit(f"{front} did not start")
                        url = f"http://127.0.0.1:{port}/{page}"
                        wrk(url, 2, args.connections)  # warm up
                        cpu0 = cpu_seconds(proc.pid)
                        rps, requests, errors = wrk(url, args.seconds, args.connections)
                        cpu = cpu_seconds(proc.pid) - cpu0
                        results.setdefault((front, page), []).append(
                            {"rps": rps, "errors": errors, "front_us_per_req": cpu * 1e6 / max(requests, 1)})
                    finally:
                        stop(proc)
    finally:
        for b in backends:
            stop(b)
        shutil.rmtree(work, ignore_errors=True)
    for (front, page), runs in sorted(results.items()):
        print(f"{front:6} /{page:9} " + "  ".join(f"{r['rps']:.0f} req/s {r['front_us_per_req']:.1f} us" for r in runs))
    median = {k: {"rps": statistics.median(r["rps"] for r in runs),
                  "front_us_per_req": statistics.median(r["front_us_per_req"] for r in runs),
                  "errors": sum(r["errors"] for r in runs)} for k, runs in results.items()}
    print(f"backend workers: {args.workers}, FastCGI keepalive: {args.keepalive}, "
          f"connections: {args.connections}, {args.seconds}s per run, median of {args.rounds} rounds "
          f"(fronts alternating within each round)")
    for label in (f for f in [*skiffs, *nginxes] if f != "nginx"):
        print(f"| page | {label} req/s | nginx req/s | {label}/nginx | median of round ratios | "
              f"{label} front-end µs/req | nginx front-end µs/req | errors ({label}, nginx) |")
        print("|---|---|---|---|---|---|---|---|")
        for page in args.pages:
            s, n = median[(label, page)], median[("nginx", page)]
            paired = statistics.median(a["rps"] / b["rps"] for a, b in
                                       zip(results[(label, page)], results[("nginx", page)]))
            median[(label, page)]["paired_ratio"] = paired
            print(f"| /{page} | {s['rps']:.0f} | {n['rps']:.0f} | {s['rps'] / n['rps']:.2f} | {paired:.2f} | "
                  f"{s['front_us_per_req']:.1f} | {n['front_us_per_req']:.1f} | {s['errors']}, {n['errors']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{k[0]} {k[1]}": {"median": median[k], "runs": v} for k, v in results.items()}, f, indent=2)


if __name__ == "__main__":
    main()
