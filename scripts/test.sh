#!/usr/bin/env bash
# The project's test command (README): installs what it needs, then formatting, lints and
# every test in the workspace, then the e2e suite on a real local Kubernetes cluster
# (e2e/run.sh: brings the cluster up, runs the e2e tests, always tears it down).
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
echo "== cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
echo "== generated docs are current"
python3 scripts/config-reference.py --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo clippy --target-dir ../target/fuzz-clippy -- -D warnings)
echo "== the skiff image, built without Docker, checked"
images/build.sh
python3 images/check_image.py target/images/skiff.oci.tar
python3 images/check_image.py target/images/skiff-operator.oci.tar skiff-operator
echo "== the Helm chart"
scripts/chart-check.sh
echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --exclude skiff-e2e -- --include-ignored 2>&1 | tee "$log"
echo "== fuzz the codecs and parsers (bounded)"
scripts/fuzz.sh "${SKIFF_FUZZ_SECONDS:-15}"
echo "== e2e on the local cluster"
e2e/run.sh 2>&1 | tee -a "$log"
# One closing line for the whole run (cargo prints one per test binary, the last often
# being the doc-tests' "0 passed").
awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed\n", p, f }' "$log"
