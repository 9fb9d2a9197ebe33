#!/usr/bin/env bash
# Installs what building and testing Skiff needs, idempotently, on a fresh Debian machine.
#   scripts/install-deps.sh --build  only what building needs (serving the example site)
#   scripts/install-deps.sh          also the test tools and real backends (php-fpm, uWSGI, Django)
#   scripts/install-deps.sh --bench  also the benchmark peers (nginx, lighttpd, Apache, h2o, wrk)
set -euo pipefail

need_apt=()
if [[ "${1:-}" != "--build" ]]; then
for tool in curl strace wrk ss strip; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    case "$tool" in ss) need_apt+=(iproute2) ;; strip) need_apt+=(binutils) ;; *) need_apt+=("$tool") ;; esac
  fi
done
# Real backends for the pool tests: php-fpm, uWSGI with Python 3, and Django (Debian's,
# which matches Debian's uWSGI Python plugin).
ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need_apt+=(php-fpm)
command -v uwsgi >/dev/null 2>&1 || need_apt+=(uwsgi)
[ -e /usr/lib/uwsgi/plugins/python3_plugin.so ] || need_apt+=(uwsgi-plugin-python3)
/usr/bin/python3 -c 'import django' >/dev/null 2>&1 || need_apt+=(python3-django)
fi
if [[ "${1:-}" == "--bench" ]]; then
  for pair in nginx:nginx-light lighttpd:lighttpd apache2:apache2 h2o:h2o wrk:wrk h2load:nghttp2-client; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
  done
fi
if ((${#need_apt[@]})); then
  echo "install-deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo not found; install Rust with rustup first" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
  done
fi
