#!/usr/bin/env bash
# Builds the `skiff` binary as the image ships it (scripts/release-flags.sh), profile-guided
# when scripts/pgo-profile.sh can make a profile here, to
# target/x86_64-unknown-linux-gnu/release/skiff. Prints the profile used, or nothing for a
# plain build. Only skiff: building another package beside it would change its
# dependencies' features, and so their symbol names, which the profile is keyed by.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/release-flags.sh
profile=$(scripts/pgo-profile.sh)
flags=$release_rustflags
[ -z "$profile" ] || flags="$flags -Cprofile-use=$profile"
RUSTFLAGS="$flags" cargo build --release --target "$release_target" -p skiff --bin skiff >&2
echo "$profile"
