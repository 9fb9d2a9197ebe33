#!/usr/bin/env bash
# The project's test command (README): installs what it needs, then formatting, lints and
# every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace -- --include-ignored
