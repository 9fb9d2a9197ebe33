#!/usr/bin/env bash
# Builds Skiff and serves the example site with zero config on http://127.0.0.1:8080
# (admin, health and metrics on 127.0.0.1:9145). Ctrl-C drains and stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --build
cargo build --release -p skiff
exec target/release/skiff serve examples/site --listen "${SKIFF_LISTEN:-127.0.0.1:8080}" "$@"
