#!/usr/bin/env bash
# Builds the skiff image as an OCI archive without Docker (for `ctr images import`):
# a static glibc binary (crt-static; the musl target cannot be installed here), stripped,
# in the same layout as images/skiff/Dockerfile. Output: target/images/skiff.oci.tar
set -euo pipefail
cd "$(dirname "$0")/.."
name="${SKIFF_IMAGE:-localhost/skiff/skiff:dev}"
RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release --target x86_64-unknown-linux-gnu -p skiff
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
