#!/usr/bin/env bash
# The project's test command (README): installs what it needs, then runs the task runner's
# `ci` target (xtask/): formatting, lints, the images, the chart, every test in the
# workspace, the fuzzers, then the e2e suite on a real local Kubernetes cluster (e2e/run.sh:
# brings the cluster up, runs the e2e tests, always tears it down), and a closing
# "N passed, M failed" line. `cargo xtask help` lists the steps as separate targets.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI builds in a fresh clone each time: keep cargo's target directory in a cache outside
# it (as CI systems cache target/), so a warm run compiles only what changed.
if [ "${CI:-}" = true ] && [ ! -e target ]; then
  cache=${SKIFF_CARGO_TARGET_CACHE:-$HOME/.cache/skiff-cargo-target}
  mkdir -p "$cache"
  ln -s "$cache" target
fi
scripts/install-deps.sh
exec cargo xtask ci
