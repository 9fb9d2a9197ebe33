"""Creates the blog's SQLite database for the image, run by build.sh on the host with
Debian's python3 (the interpreter the image carries) from the project's folder in the
root filesystem: the tables of django.contrib.auth and contenttypes, and the user
`demo` (password `skiff-demo`). Timestamps and the password's salt are fixed and the
file is vacuumed, so the same Django and SQLite give the same bytes (and the image the
same digest) on every build.
"""
import datetime
import os
import sqlite3
import sys

os.environ["BLOG_DB_WRITABLE"] = "1"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blog.settings")
sys.path.insert(0, os.getcwd())

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.hashers import identify_hasher, make_password  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)

db = settings.DB_PATH
if db.exists():
    db.unlink()
call_command("migrate", interactive=False, verbosity=0)
User.objects.create(
    username="demo",
    # A fixed salt, long enough (22+ characters) that Django does not ask to rehash it
    # at login: that would be a write to a read-only database.
    password=make_password("skiff-demo", salt="skiffDemoFixedSalt2025"),
    first_name="Demo",
    date_joined=EPOCH,
)
# At login Django rehashes (and saves) a hash it finds weak: not this one. (Asked before
# check_password, which would do that rehash.)
demo = User.objects.get(username="demo")
assert not identify_hasher(demo.password).must_update(demo.password), "the demo hash would be rehashed"
assert demo.check_password("skiff-demo")
connection.close()
with sqlite3.connect(db) as con:
    con.execute("UPDATE django_migrations SET applied = ?", (EPOCH.strftime("%Y-%m-%d %H:%M:%S"),))
con.execute("VACUUM")
con.close()
