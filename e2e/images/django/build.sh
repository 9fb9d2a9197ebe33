#!/usr/bin/env bash
# Builds an OCI archive of Debian's uWSGI with its python3 plugin, the Python standard
# library, Debian's Django and a small Django project (project/, package `blog`) in
# /srv/blog, for the e2e tests of uwsgi pools and the quickstart. No Docker:
# images/oci_image.py writes the archive. Everything is the host's (scripts/install-deps.sh
# installs uwsgi, uwsgi-plugin-python3 and python3-django): the binaries with the shared
# libraries that ldd finds for them and for every Python extension module copied.
#
# The entrypoint loads /etc/uwsgi/blog.ini (plugin, master, chdir, module, graceful
# SIGTERM); the CMD only adds the listener, so a pool's `args`, which replace CMD, need
# only say where to listen (and may override module or processes):
#   ENTRYPOINT ["/usr/bin/uwsgi", "--ini", "/etc/uwsgi/blog.ini"]
#   CMD        ["--socket", "0.0.0.0:8000"]        (the uwsgi protocol, not HTTP)
# The demo user is `demo` / `skiff-demo`; collected static files are under
# /srv/blog/static-root (a skiff root: /static/x is static-root/static/x).
# Output: target/images/django.oci.tar (localhost/skiff/e2e-django:dev), and the root
# filesystem it packs in target/images/django-rootfs (check.sh runs it with chroot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=/usr/bin/python3
uwsgi=/usr/bin/uwsgi-core
plugin=$(readlink -f /usr/lib/uwsgi/plugins/python3_plugin.so 2>/dev/null || true)
[ -x "$uwsgi" ] && [ -f "$plugin" ] || {
  echo "uwsgi and uwsgi-plugin-python3 are not installed (scripts/install-deps.sh)" >&2; exit 1; }
"$python" -c 'import django' 2>/dev/null || {
  echo "python3-django is not installed (scripts/install-deps.sh)" >&2; exit 1; }
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# The plugin embeds the libpython of Debian's python3: the same standard library, and
# the bytecode compiled below is for that interpreter.
case $(ldd "$plugin") in *"libpython$pyver.so"*) ;; *)
  echo "$plugin does not link libpython$pyver (the version of $python)" >&2; exit 1 ;; esac

rootfs=$root/target/images/django-rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/usr/lib/uwsgi/plugins" "$rootfs/etc/uwsgi" "$rootfs/srv" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp "$uwsgi" "$rootfs/usr/bin/uwsgi"
# uWSGI finds a plugin's entry symbol by its file name (python311_plugin), following
# links: `plugin = python3` loads the link, as on Debian.
cp "$plugin" "$rootfs/usr/lib/uwsgi/plugins/"
ln -s "$(basename "$plugin")" "$rootfs/usr/lib/uwsgi/plugins/python3_plugin.so"

# Python: the standard library and Django with the packages it depends on, as Debian's
# packages list them (not the folders, which may hold files of other origins), without
# what a WSGI app never imports: the test suite, IDLE, Tk, 2to3, ensurepip and venv, the
# docs of pydoc, the terminal's modules (curses, readline), dbm's Berkeley DB and NIS
# (their libraries are 5 MB: Kerberos, ncurses, libdb), Debian's sitecustomize (a link
# to /etc, for apport), and from Django the translations (USE_I18N is off; English
# formats stay) and contrib.gis and contrib.postgres (they need GDAL and psycopg2, which
# the image does not have). Links (Debian points Django admin's jQuery at
# /usr/share/javascript) are followed.
dpkg -L "libpython$pyver-minimal" "libpython$pyver-stdlib" \
    python3-django python3-asgiref python3-sqlparse python3-tz |
  grep -E "^/usr/lib/python($pyver|3/dist-packages)/" |
  grep -v -E "^/usr/lib/python$pyver/(test|idlelib|tkinter|turtledemo|lib2to3|ensurepip|venv|pydoc_data|curses)(/|$)" |
  grep -v -E "^/usr/lib/python$pyver/lib-dynload/(readline|_curses|_curses_panel|_dbm|nis)\." |
  grep -v -E "^/usr/lib/python$pyver/sitecustomize\.py$" |
  grep -v -E "/django/contrib/(gis|postgres)(/|$)" |
  grep -v -P "/django/(conf|contrib/[^/]+)/locale/(?!__init__\.py$|en(/|$))" |
  sed 's|^/||' | sort -u >"$root/target/images/django-python.list"
tar -C / --no-recursion -h -cf - -T "$root/target/images/django-python.list" | tar -C "$rootfs" -xf -

# The shared libraries of every binary and module, with the dynamic loader, at their own
# paths: uWSGI (libxml2 brings ICU's 30 MB of data), the plugin (libpython) and the
# extension modules (_ssl and _hashlib: OpenSSL; _sqlite3: SQLite; _ctypes: libffi...).
find "$rootfs" -type f \( -name '*.so' -o -name '*.so.*' -o -path "$rootfs/usr/bin/*" \) -print0 |
  xargs -0 ldd 2>/dev/null |
  awk '/not found/{print "missing: " $0 > "/dev/stderr"; bad=1} /=> \//{print $3} /^\t\/lib/{print $1} END{exit bad}' |
  sort -u | while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done

# The time zone database (tzdata, a dependency of python3-tz): Debian's pytz reads its
# version from tzdata.zi at import and its zones from here. 200 KB compressed, without
# the leap-second (right/) and posix/ copies.
mkdir -p "$rootfs/usr/share"
tar -C /usr/share --exclude=zoneinfo/right --exclude=zoneinfo/posix -cf - zoneinfo | tar -C "$rootfs/usr/share" -xf -
cp "$root/images/skiff/passwd" "$rootfs/etc/passwd"
cp "$root/images/skiff/group" "$rootfs/etc/group"
cp "$here/blog.ini" "$rootfs/etc/uwsgi/blog.ini"

# The project, its database (seed_db.py: read-only at run time, see blog/apps.py) and its
# collected static files, made with the host's python3, which is the image's.
cp -r "$here/project" "$rootfs/srv/blog"
find "$rootfs/srv/blog" -name __pycache__ -prune -exec rm -rf {} +
(cd "$rootfs/srv/blog" && PYTHONDONTWRITEBYTECODE=1 "$python" -s "$here/seed_db.py" &&
  BLOG_DB_WRITABLE=1 PYTHONDONTWRITEBYTECODE=1 "$python" -s manage.py collectstatic --noinput -v 0)

# Bytecode: the layer's files all get mtime 0, which no .pyc built from a source's real
# mtime matches, and uid 65532 cannot write __pycache__, so without this every worker
# would compile Django at each start. Unchecked hash-based .pyc files are used as they are.
"$python" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$rootfs" -p / \
  "$rootfs/usr/lib/python$pyver" "$rootfs/usr/lib/python3/dist-packages" "$rootfs/srv/blog" >/dev/null

python3 "$root/images/oci_image.py" "$rootfs" "${DJANGO_IMAGE:-localhost/skiff/e2e-django:dev}" \
  "$root/target/images/django.oci.tar" \
  --entrypoint '["/usr/bin/uwsgi","--ini","/etc/uwsgi/blog.ini"]' --cmd '["--socket","0.0.0.0:8000"]' \
  --user 65532:65532 --port 8000
