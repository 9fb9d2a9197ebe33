#!/usr/bin/env bash
# Builds an OCI archive of Debian's php-fpm (the host's, with the shared libraries it
# links, found by ldd) and a small PHP app in /var/www/html, for the e2e tests of pools
# in the cluster. No Docker: images/oci_image.py writes the archive.
# Output: target/images/php-fpm.oci.tar (localhost/skiff/e2e-php-fpm:dev)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
fpm=$(ls /usr/sbin/php-fpm* 2>/dev/null | head -n 1)
[ -n "$fpm" ] || { echo "php-fpm is not installed (scripts/install-deps.sh)" >&2; exit 1; }
rootfs=$root/target/images/php-fpm-rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs/usr/sbin" "$rootfs/etc" "$rootfs/var/www/html" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp "$fpm" "$rootfs/usr/sbin/php-fpm"
# The binary's shared libraries and the dynamic loader, at their own paths.
ldd "$fpm" | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | while read -r lib; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
# Debian's PHP reads time zones from the system database; UTC is all the app needs.
mkdir -p "$rootfs/usr/share/zoneinfo/Etc"
cp /usr/share/zoneinfo/Etc/UTC "$rootfs/usr/share/zoneinfo/Etc/UTC"
cp /usr/share/zoneinfo/Etc/UTC "$rootfs/usr/share/zoneinfo/UTC"
cp "$here/php-fpm.conf" "$rootfs/etc/php-fpm.conf"
cp "$here/index.php" "$here/sleep.php" "$rootfs/var/www/html/"
cp "$root/images/skiff/passwd" "$rootfs/etc/passwd"
cp "$root/images/skiff/group" "$rootfs/etc/group"
python3 "$root/images/oci_image.py" "$rootfs" "${PHP_FPM_IMAGE:-localhost/skiff/e2e-php-fpm:dev}" \
  "$root/target/images/php-fpm.oci.tar" \
  --entrypoint '["/usr/sbin/php-fpm"]' --cmd '["-F","-O","-n","-y","/etc/php-fpm.conf"]' \
  --user 65532:65532 --port 9000
