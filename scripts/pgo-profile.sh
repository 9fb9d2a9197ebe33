#!/usr/bin/env bash
# Makes the profile for a profile-guided (PGO) release build of `skiff` and prints its path:
# an instrumented build (target/pgo-gen), a training run (scripts/pgo_train.py), and
# llvm-profdata's merge (target/pgo/skiff.profdata). scripts/release-build.sh, which the
# images and the bench use, builds with it: the served path costs 3-5 % less CPU per
# request (BENCHMARKS.md, session 20).
#
# Prints nothing, with the reason on stderr, when no profile can be made here (no
# llvm-tools, wrk or openssl; or the instrumented build or its training failed): the
# caller then builds plainly. A profile made from the same inputs is reused.
#   scripts/pgo-profile.sh --check   only says (exit status) whether the tools are here
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/release-flags.sh

skip() {
  echo "pgo-profile: $*; building without a profile" >&2
  exit 0
}

find_profdata() {
  ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-profdata 2>/dev/null | head -1 || true
}
profdata=$(find_profdata)
if [ "${1:-}" = --check ]; then
  [ -n "$profdata" ] && command -v wrk >/dev/null 2>&1 && command -v openssl >/dev/null 2>&1
  exit
fi
if [ -z "$profdata" ] && command -v rustup >/dev/null 2>&1; then
  rustup component add llvm-tools >&2 || true
  profdata=$(find_profdata)
fi
[ -n "$profdata" ] || skip "llvm-profdata (rustup component llvm-tools) is missing"
command -v wrk >/dev/null 2>&1 || skip "wrk is missing (scripts/install-deps.sh installs it)"
command -v openssl >/dev/null 2>&1 || skip "openssl is missing"

mkdir -p target/pgo
# The resolved path: in CI target/ is a link to a cache, and a path that moved with the
# clone would change RUSTFLAGS, and so rebuild everything, on every run.
out=$(cd target/pgo && pwd -P)
profile=$out/skiff.profdata

# Everything the profile depends on: the server's sources (untracked ones too), the
# toolchain, this recipe, and whether the training can speak HTTP/2.
key=$(
  {
    rustc -V
    cat scripts/pgo-profile.sh scripts/pgo_train.py scripts/release-flags.sh bench/benchlib.py
    command -v h2load || echo "no h2load"
    if git rev-parse --git-dir >/dev/null 2>&1; then
      git ls-files -s -- Cargo.toml Cargo.lock .cargo server
      git diff HEAD -- Cargo.toml Cargo.lock .cargo server
      git ls-files -o --exclude-standard -z -- server | xargs -0 -r sha256sum
    else
      find Cargo.toml Cargo.lock server -type f -print0 | sort -z | xargs -0 sha256sum
    fi
  } | sha256sum | cut -c1-32
)

# One maker at a time: target/ may be a cache that several checkouts share.
exec 9>"$out/.lock"
flock 9
if [ -f "$profile" ] && [ "$(cat "$out/key" 2>/dev/null)" = "$key" ]; then
  echo "$profile"
  exit 0
fi

raw=$out/raw
rm -rf "$raw"
echo "pgo-profile: instrumented build (target/pgo-gen)" >&2
# The same target, flags and package selection as the build that uses the profile: symbol
# names carry a hash of all three, and a function whose name does not match gets nothing.
RUSTFLAGS="$release_rustflags -Cprofile-generate=$raw" CARGO_TARGET_DIR=target/pgo-gen \
  cargo build --release --target "$release_target" -p skiff --bin skiff >&2 ||
  skip "the instrumented build failed"
echo "pgo-profile: training run (scripts/pgo_train.py)" >&2
python3 scripts/pgo_train.py "target/pgo-gen/$release_target/release/skiff" >&2 ||
  skip "the training run failed"
"$profdata" merge -o "$profile.new" "$raw" >&2 || skip "llvm-profdata could not merge the profile"
mv "$profile.new" "$profile"
echo "$key" >"$out/key"
rm -rf "$raw"
echo "$profile"
