#!/usr/bin/env bash
# Checks the Django image without a cluster: runs its root filesystem
# (target/images/django-rootfs, made by build.sh, which this runs when it is missing)
# with chroot as uid 65532, twice, once listening on TCP with the image's CMD and once on
# a unix socket with the args of examples/virtualservers/django-site.yaml, puts a real
# skiff in front (`skiff run`, uwsgi pools, /static/ served from the collected files),
# and walks the login with curl: the CSRF token and cookie, a refused POST, the redirect,
# the signed-cookie session. Then SIGTERM must stop uWSGI gracefully.
#
# Needs root for chroot (otherwise it uses `unshare -r`, uWSGI then runs as the mapped
# root). skiff: $SKIFF_BIN, else ${CARGO_TARGET_DIR:-target}/debug/skiff, built with
# `cargo build -p skiff` when missing. Every process it starts is stopped by its PID;
# each step is bounded. Exit status 0 when all is well.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
rootfs=$root/target/images/django-rootfs
[ -x "$rootfs/usr/bin/uwsgi" ] || "$here/build.sh" >/dev/null
skiff=${SKIFF_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/skiff}
if [ ! -x "$skiff" ]; then
  (cd "$root" && cargo build -q -p skiff)
fi

work=$(mktemp -d /tmp/skiff-django-check.XXXXXX)
# The unix socket must be inside the chroot; the folder goes with the cleanup.
sockdir=$rootfs/tmp/check.$$
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work" "$sockdir"
}
trap cleanup EXIT
rm -rf "$sockdir"
mkdir -m 0777 "$sockdir"

fail() {
  echo "FAIL: $*" >&2
  for log in "$work"/*.log; do
    echo "--- $log" >&2
    tail -n 30 "$log" >&2
  done
  exit 1
}

# uWSGI from the image: ENTRYPOINT then the given args, as a container runtime would.
# `timeout` is a backstop, should this script be killed before its cleanup; with
# --foreground it passes a signal to uWSGI's master only, as a runtime signals PID 1
# (without, it signals the whole process group, the workers too, and SIGTERM kills them).
uwsgi_pid=
run_image() {
  local log=$1
  shift
  local entry=(/usr/bin/uwsgi --ini /etc/uwsgi/blog.ini)
  if [ "$(id -u)" = 0 ]; then
    timeout --foreground 300 chroot --userspec=65532:65532 "$rootfs" "${entry[@]}" "$@" >"$work/$log" 2>&1 &
  else
    timeout --foreground 300 unshare -r chroot "$rootfs" "${entry[@]}" "$@" >"$work/$log" 2>&1 &
  fi
  uwsgi_pid=$!
  pids+=("$uwsgi_pid")
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port=$(free_port)
run_image uwsgi-tcp.log --socket "127.0.0.1:$port" # the image's CMD, on loopback
tcp_pid=$uwsgi_pid
run_image uwsgi-unix.log --socket "/tmp/check.$$/django.sock" --chmod-socket=666 \
  --module blog.wsgi --processes 4
unix_pid=$uwsgi_pid

for _ in $(seq 1 300); do
  if grep -q 'spawned uWSGI worker' "$work/uwsgi-tcp.log" && grep -q 'spawned uWSGI worker 4' "$work/uwsgi-unix.log" &&
    [ -S "$sockdir/django.sock" ]; then
    break
  fi
  kill -0 "$tcp_pid" 2>/dev/null && kill -0 "$unix_pid" 2>/dev/null || fail "uWSGI exited"
  sleep 0.1
done
[ -S "$sockdir/django.sock" ] || fail "uWSGI did not start in 30 s"

cat >"$work/skiff.yaml" <<EOF
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
threads: 1
virtual_servers:
  - name: tcp
    hosts: [tcp.test]
    default: true
    root: $rootfs/srv/blog/static-root
    rules:
      - { match: { prefix: /static/ }, action: { static: {} } }
      - action: { uwsgi: { pool: tcp } }
  - name: unix
    hosts: [unix.test]
    root: $rootfs/srv/blog/static-root
    rules:
      - { match: { prefix: /static/ }, action: { static: {} } }
      - action: { uwsgi: { pool: unix } }
pools:
  - { name: tcp, protocol: uwsgi, endpoints: ["127.0.0.1:$port"] }
  - { name: unix, protocol: uwsgi, endpoints: ["unix:$sockdir/django.sock"] }
EOF
"$skiff" check --config "$work/skiff.yaml" >/dev/null 2>"$work/skiff-check.log" || fail "skiff check"
timeout 300 "$skiff" run --config "$work/skiff.yaml" >"$work/skiff-access.log" 2>"$work/skiff.log" &
pids+=("$!")
addr=
for _ in $(seq 1 100); do
  addr=$(sed -n '/skiff listening on /{s/.*skiff listening on \([0-9.:]*\).*/\1/p;q}' "$work/skiff.log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || fail "skiff did not start"

# curl HOST PATH [ARGS...]: the status and headers in $work/h, the body in $work/b.
req() {
  local host=$1 path=$2
  shift 2
  curl -sS --max-time 20 -o "$work/b" -D "$work/h" -w '%{http_code}' -H "Host: $host" "$@" "http://$addr$path"
}

check_site() {
  local host=$1 jar=$work/$1.jar st token
  rm -f "$jar"
  st=$(req "$host" /) || fail "$host GET /"
  [ "$st" = 200 ] && grep -q 'Django through uWSGI' "$work/b" || fail "$host GET / gave $st"

  st=$(req "$host" /static/blog/site.css) || fail "$host GET css"
  [ "$st" = 200 ] && cmp -s "$work/b" "$rootfs/srv/blog/static-root/static/blog/site.css" ||
    fail "$host GET /static/blog/site.css gave $st"

  st=$(req "$host" /welcome/) || fail "$host GET /welcome/"
  [ "$st" = 302 ] && grep -qi '^location: /login/?next=/welcome/' "$work/h" ||
    fail "$host GET /welcome/ without a session gave $st"

  st=$(req "$host" /login/ -c "$jar") || fail "$host GET /login/"
  [ "$st" = 200 ] || fail "$host GET /login/ gave $st"
  token=$(sed -n '/name="csrfmiddlewaretoken"/{s/.*name="csrfmiddlewaretoken" value="\([^"]*\)".*/\1/p;q}' "$work/b")
  [ -n "$token" ] || fail "$host: no csrfmiddlewaretoken in the login form"
  grep -q 'csrftoken' "$jar" || fail "$host: no csrftoken cookie"

  st=$(req "$host" /login/ -b "$jar" --data-urlencode username=demo --data-urlencode password=skiff-demo) ||
    fail "$host POST /login/ without a token"
  [ "$st" = 403 ] || fail "$host POST /login/ without a token gave $st"

  st=$(req "$host" /login/ -b "$jar" -c "$jar" --data-urlencode "csrfmiddlewaretoken=$token" \
    --data-urlencode username=demo --data-urlencode password=wrong) || fail "$host POST /login/ wrong password"
  [ "$st" = 200 ] && grep -q "didn't match" "$work/b" || fail "$host POST /login/ with a wrong password gave $st"

  st=$(req "$host" /login/ -b "$jar" -c "$jar" --data-urlencode "csrfmiddlewaretoken=$token" \
    --data-urlencode username=demo --data-urlencode password=skiff-demo) || fail "$host POST /login/"
  [ "$st" = 302 ] && grep -qi '^location: /welcome/' "$work/h" || fail "$host POST /login/ gave $st"
  grep -q 'sessionid' "$jar" || fail "$host: no session cookie after the login"

  st=$(req "$host" /welcome/ -b "$jar") || fail "$host GET /welcome/ signed in"
  [ "$st" = 200 ] && grep -q 'Welcome, demo' "$work/b" || fail "$host GET /welcome/ with the session gave $st"
  echo "ok: $host (uwsgi pool over ${2})"
}

check_site tcp.test TCP
check_site unix.test "a unix socket"

# SIGTERM (Kubernetes' stop signal) is a graceful shutdown (blog.ini's hook): a request
# in flight is answered, then uWSGI exits 0 (rather than reloading, uWSGI 2.0's default,
# or dropping the request, what --die-on-term does).
for host in tcp.test unix.test; do
  curl -sS --max-time 20 -o "$work/slow-$host" -w '%{http_code}' -H "Host: $host" \
    "http://$addr/slow/?seconds=2" >"$work/slow-$host.status" 2>&1 &
  pids+=("$!")
done
sleep 1 # both requests are in the workers by now: they take 2 s
kill -TERM "$tcp_pid" "$unix_pid"
for pid in "${pids[@]:3}"; do
  wait "$pid" || fail "curl /slow/ failed: $(cat "$work"/slow-*.status)"
done
for host in tcp.test unix.test; do
  [ "$(cat "$work/slow-$host.status")" = 200 ] && grep -q '^slept 2 s' "$work/slow-$host" ||
    fail "$host: the request in flight at SIGTERM gave $(cat "$work/slow-$host.status") $(cat "$work/slow-$host")"
done
for _ in $(seq 1 100); do
  kill -0 "$tcp_pid" 2>/dev/null || kill -0 "$unix_pid" 2>/dev/null || break
  sleep 0.1
done
for pid in "$tcp_pid" "$unix_pid"; do
  if kill -0 "$pid" 2>/dev/null; then fail "uWSGI (pid $pid) still runs 10 s after SIGTERM"; fi
  wait "$pid" || fail "uWSGI exited with status $? on SIGTERM"
done
pids=("${pids[2]}") # the others are waited for: not to be signalled again
grep -q 'graceful shutdown triggered' "$work/uwsgi-tcp.log" || fail "SIGTERM was not a graceful shutdown"
[ ! -e "$sockdir/django.sock" ] || fail "the unix socket was left behind"
echo "ok: SIGTERM stops uWSGI gracefully, answering the requests in flight"
