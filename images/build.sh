#!/usr/bin/env bash
# Builds the skiff and skiff-operator images as OCI archives without Docker (for
# `ctr images import`): static glibc binaries (crt-static; the musl target cannot be
# installed here), stripped, in the same layouts as images/*/Dockerfile.
# Output: target/images/skiff.oci.tar and target/images/skiff-operator.oci.tar
#
# A built pair is kept in $SKIFF_IMAGE_CACHE (default ~/.cache/skiff-images), keyed by
# the sources that go into it, so a fresh clone of a commit built before (the quickstart,
# CI) copies it instead of a release build with fat LTO. SKIFF_IMAGE_CACHE=off disables it.
set -euo pipefail
cd "$(dirname "$0")/.."
name="${SKIFF_IMAGE:-localhost/skiff/skiff:dev}"
operator_name="${SKIFF_OPERATOR_IMAGE:-localhost/skiff/skiff-operator:dev}"
out=target/images
mkdir -p "$out"

# The cache key: every tracked, modified or untracked file the images are built from
# (not the docs, tests' harness, chart or tools), the toolchain and the image names.
cache_key() {
  git rev-parse --git-dir >/dev/null 2>&1 || return 1
  local paths=(Cargo.toml Cargo.lock .cargo server operator images examples/site scripts/release-build.sh scripts/release-flags.sh scripts/pgo-profile.sh scripts/pgo_train.py bench/benchlib.py)
  {
    rustc -V
    echo "$name $operator_name"
    git ls-files -s -- "${paths[@]}"
    git diff HEAD -- "${paths[@]}"
    git ls-files -o --exclude-standard -z -- "${paths[@]}" | xargs -0 -r sha256sum
  } | sha256sum | cut -c1-32
}
# Profile-guided when a profile can be made here (scripts/release-build.sh): the key says
# which, so a plain build is never taken for a profiled one.
pgo_tag=plain
if scripts/pgo-profile.sh --check; then
  pgo_tag=pgo
fi
cache_root=${SKIFF_IMAGE_CACHE:-$HOME/.cache/skiff-images}
key=
if [ "$cache_root" != off ] && key=$(cache_key); then
  key=$key-$pgo_tag
  cached=$cache_root/$key
  if [ -f "$cached/skiff.oci.tar" ] && [ -f "$cached/skiff-operator.oci.tar" ]; then
    cp "$cached/skiff.oci.tar" "$cached/skiff-operator.oci.tar" "$out/"
    echo "images: the build of these sources from $cached" >&2
    exit 0
  fi
fi
# Static glibc binaries with packed relocations (scripts/release-flags.sh). The operator is
# built apart, in a target directory of its own: built beside skiff, it would change the
# features (and so the symbol names) of their shared dependencies, and with other
# RUSTFLAGS in one directory each build would undo the other's.
profile=$(scripts/release-build.sh)
if [ -z "$profile" ] && [ -n "$key" ]; then
  key=${key%-pgo}-plain
fi
source scripts/release-flags.sh
RUSTFLAGS="$release_rustflags" CARGO_TARGET_DIR=target/operator \
  cargo build --release --target "$release_target" -p skiff-operator --bin skiff-operator
rootfs=target/images/skiff-rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs/etc" "$rootfs/srv"
cp target/x86_64-unknown-linux-gnu/release/skiff "$rootfs/skiff"
strip "$rootfs/skiff"
cp -r examples/site "$rootfs/srv/www"
cp images/skiff/passwd "$rootfs/etc/passwd"
cp images/skiff/group "$rootfs/etc/group"
python3 images/oci_image.py "$rootfs" "$name" target/images/skiff.oci.tar \
  --entrypoint '["/skiff"]' --cmd '["serve","/srv/www","--admin-listen","0.0.0.0:9145"]' \
  --user 65532:65532 --port 8080 --port 9145

operator_rootfs=target/images/skiff-operator-rootfs
rm -rf "$operator_rootfs"
mkdir -p "$operator_rootfs/etc"
cp target/operator/x86_64-unknown-linux-gnu/release/skiff-operator "$operator_rootfs/skiff-operator"
strip "$operator_rootfs/skiff-operator"
cp images/skiff/passwd "$operator_rootfs/etc/passwd"
cp images/skiff/group "$operator_rootfs/etc/group"
python3 images/oci_image.py "$operator_rootfs" "$operator_name" \
  target/images/skiff-operator.oci.tar --entrypoint '["/skiff-operator"]' --user 65532:65532 --port 8081

if [ -n "$key" ]; then
  # Written aside and renamed, so a concurrent or interrupted build never leaves half a
  # pair; only the three newest keys are kept.
  mkdir -p "$cache_root"
  tmp=$(mktemp -d "$cache_root/.new.XXXXXX")
  cp "$out/skiff.oci.tar" "$out/skiff-operator.oci.tar" "$tmp/"
  rm -rf "${cache_root:?}/$key"
  mv "$tmp" "$cache_root/$key"
  ls -1dt "$cache_root"/*/ | tail -n +4 | xargs -r rm -rf
fi
