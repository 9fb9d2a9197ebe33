#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ (cargo-fuzz, libFuzzer with AddressSanitizer) for a
# bounded time each; any crash, panic, leak or timeout fails the run and leaves the input
# in fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 15 s, every target)
#
# cargo-fuzz needs nightly-only flags (-Zsanitizer, sancov). Nightly toolchains cannot be
# downloaded here, so the stable compiler is told to accept them with RUSTC_BOOTSTRAP=1.
# The sanitizer runtimes ship with the stable x86_64 Linux toolchain. This is for the
# fuzz build only; nothing shipped is built this way.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
shift || true
CARGO_FUZZ_VERSION=0.13.2
if [ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]; then
  cargo install --locked --version "$CARGO_FUZZ_VERSION" cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1
# Shares the workspace's target directory (and so CI's target cache).
target_dir=$PWD/target/fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd fuzz && cargo fuzz list)
fi
root=$PWD
(cd fuzz && cargo fuzz build -O --target-dir "$target_dir")
mkdir -p "$target_dir/logs"
for t in "${targets[@]}"; do
  corpus=$root/fuzz/corpus/$t
  mkdir -p "$corpus"
  seeds=()
  if [ -d "$root/fuzz/seeds/$t" ]; then seeds=("$root/fuzz/seeds/$t"); fi
  log=$target_dir/logs/$t.log
  echo "fuzz: $t for ${seconds}s"
  status=0
  (cd fuzz && cargo fuzz run -O --target-dir "$target_dir" "$t" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1) >"$log" 2>&1 || status=$?
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "fuzz: $t FAILED (exit $status); the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"
