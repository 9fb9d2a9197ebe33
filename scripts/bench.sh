#!/usr/bin/env bash
# Side-by-side static benchmark (../shared/bench/static_bench.py) against nginx, lighttpd,
# Apache and h2o, each pinned to CPU 0 with wrk on CPU 1. Extra arguments go to the bench.
# Skiff is the binary the image ships (scripts/release-build.sh: static, profile-guided
# where a profile can be made).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
scripts/release-build.sh >/dev/null
exec python3 ../shared/bench/static_bench.py \
  --server-cmd 'target/x86_64-unknown-linux-gnu/release/skiff serve {root} --listen 127.0.0.1:{port} --threads 1' "$@"
