#!/usr/bin/env bash
# Builds the skiff and skiff-operator images as OCI archives without Docker (for
# `ctr images import`): static glibc binaries (crt-static; the musl target cannot be
# installed here), stripped, in the same layouts as images/*/Dockerfile.
# Output: target/images/skiff.oci.tar and target/images/skiff-operator.oci.tar
set -euo pipefail
cd "$(dirname "$0")/.."
name="${SKIFF_IMAGE:-localhost/skiff/skiff:dev}"
RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release --target x86_64-unknown-linux-gnu -p skiff -p skiff-operator --bin skiff --bin skiff-operator
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
cp target/x86_64-unknown-linux-gnu/release/skiff-operator "$operator_rootfs/skiff-operator"
strip "$operator_rootfs/skiff-operator"
cp images/skiff/passwd "$operator_rootfs/etc/passwd"
cp images/skiff/group "$operator_rootfs/etc/group"
python3 images/oci_image.py "$operator_rootfs" "${SKIFF_OPERATOR_IMAGE:-localhost/skiff/skiff-operator:dev}" \
  target/images/skiff-operator.oci.tar --entrypoint '["/skiff-operator"]' --user 65532:65532 --port 8081
