# Sourced by the scripts that build skiff as it ships (scripts/release-build.sh,
# scripts/pgo-profile.sh): the target and the flags of the images' static binaries.
# crt-static: static glibc binaries (the musl target cannot be installed here).
# pack-relative-relocs: a static-pie binary applies its relative relocations at start,
# reading its whole table; packed (RELR, glibc 2.36) it is 7 KB, not 651 KB.
# shellcheck shell=bash
release_target=x86_64-unknown-linux-gnu
release_rustflags="-C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
