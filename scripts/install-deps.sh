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
# PyYAML: dashboards/rules/generator/ and scripts/chart-check.sh read and write YAML with it.
/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || need_apt+=(python3-yaml)
# TLS: openssl makes the conformance suites' certificates, testssl.sh scans the listener.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v testssl >/dev/null 2>&1 || need_apt+=(testssl.sh)
# The dashboard generator's venv (below) needs ensurepip, which Debian ships apart.
/usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# Go builds h2spec below; the machine's /usr/local/go if there is one, else Debian's.
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || need_apt+=(golang-go)
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
  # llvm-tools: llvm-profdata, for the profile-guided release build (scripts/pgo-profile.sh).
  for component in rustfmt clippy llvm-tools; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
  done
fi

# h2spec, the HTTP/2 conformance suite (`cargo xtask h2spec`), built from the Go module
# proxy. Its go.mod says `module github.com/summerwind/h2spec` (no /v2), so its v2.x tags
# are not valid module versions and the proxy refuses them: v2.6.0 is fetched as the
# pseudo-version of the tag's commit, which `go install` checks against sum.golang.org.
# Cached by version under ~/.cache/skiff-tools and linked onto the PATH.
if [[ "${1:-}" != "--build" ]]; then
  H2SPEC_VERSION=2.6.0
  H2SPEC_COMMIT=70ac2294010887f48b18e2d64f5cccd48421fad1
  H2SPEC_MODULE=github.com/summerwind/h2spec/cmd/h2spec@v0.0.0-20200804131034-70ac22940108
  h2spec_dir=${SKIFF_TOOLS_CACHE:-$HOME/.cache/skiff-tools}/h2spec-$H2SPEC_VERSION
  if ! "$h2spec_dir/h2spec" --version 2>/dev/null | grep -q "^Version: $H2SPEC_VERSION "; then
    echo "install-deps: go install $H2SPEC_MODULE (h2spec $H2SPEC_VERSION)"
    rm -rf "$h2spec_dir.tmp"
    mkdir -p "$h2spec_dir.tmp"
    # The version is set as its Makefile does, so `h2spec --version` names what this is.
    (cd /tmp && PATH=/usr/local/go/bin:$PATH CGO_ENABLED=0 GOBIN="$h2spec_dir.tmp" GOFLAGS=-buildvcs=false \
      go install -trimpath -ldflags "-s -w -X main.VERSION=$H2SPEC_VERSION -X main.COMMIT=$H2SPEC_COMMIT" "$H2SPEC_MODULE")
    rm -rf "$h2spec_dir" && mv "$h2spec_dir.tmp" "$h2spec_dir"
  fi
  ln -sfn "$h2spec_dir/h2spec" /usr/local/bin/h2spec
fi

# promtool (`cargo xtask rules`: check and unit-test dashboards/rules/, check /metrics), from
# Debian's prometheus package (2.42). Only promtool is taken: the .deb is downloaded and
# unpacked with dpkg-deb, never installed, so no prometheus user, service or running
# server comes with it. Cached by version under ~/.cache/skiff-tools and linked onto the PATH.
if [[ "${1:-}" != "--build" ]]; then
  promtool_dir=${SKIFF_TOOLS_CACHE:-$HOME/.cache/skiff-tools}/promtool
  if ! "$promtool_dir/promtool" --version 2>/dev/null | grep -q "^promtool, version 2\\."; then
    echo "install-deps: promtool from Debian's prometheus package (apt-get download, dpkg-deb -x)"
    rm -rf "$promtool_dir.tmp"
    mkdir -p "$promtool_dir.tmp"
    command -v apt-get >/dev/null 2>&1 && { apt-cache show prometheus >/dev/null 2>&1 || apt-get update -qq; }
    (cd "$promtool_dir.tmp" && apt-get download -qq prometheus >/dev/null && dpkg-deb -x prometheus_*.deb root)
    mv "$promtool_dir.tmp/root/usr/bin/promtool" "$promtool_dir.tmp/promtool"
    rm -rf "$promtool_dir.tmp/root" "$promtool_dir.tmp"/prometheus_*.deb
    rm -rf "$promtool_dir" && mv "$promtool_dir.tmp" "$promtool_dir"
  fi
  ln -sfn "$promtool_dir/promtool" /usr/local/bin/promtool
fi
# The Grafana dashboards' generator (dashboards/generator/) runs on the pinned
# grafana-foundation-sdk in a venv of its own, named after the pin so a new pin gets a
# fresh venv; generate.py finds it the same way.
if [[ "${1:-}" != "--build" ]]; then
  gfsdk_pin=$(grep -E '^grafana-foundation-sdk==' "$(dirname "$0")/../dashboards/generator/requirements.txt")
  gfsdk_version=${gfsdk_pin#*==}
  gfsdk_dir=${SKIFF_TOOLS_CACHE:-$HOME/.cache/skiff-tools}/grafana-foundation-sdk-${gfsdk_version/!/-}
  if ! "$gfsdk_dir/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("grafana-foundation-sdk") != sys.argv[1])' \
      "$gfsdk_version" 2>/dev/null; then
    echo "install-deps: pip install $gfsdk_pin (venv $gfsdk_dir)"
    # A venv cannot be moved (its scripts name their path), so it is built in place; the
    # version check above is what tells a finished one from a half-built one.
    rm -rf "$gfsdk_dir"
    python3 -m venv "$gfsdk_dir"
    "$gfsdk_dir/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "$gfsdk_pin"
  fi
fi
