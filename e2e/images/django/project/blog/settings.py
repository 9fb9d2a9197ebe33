"""Settings of the demo site that the e2e tests and the quickstart run behind skiff.

The image is immutable and every replica is alike: sessions live in signed cookies, and
the user database is an SQLite file built by build.sh and opened read-only (see
blog/apps.py for the one write Django would otherwise make at login).
"""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "skiff-demo-insecure-secret-key-change-me")
DEBUG = False
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "*").split(",") if h.strip()]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.staticfiles",
    # After django.contrib.auth: BlogConfig.ready undoes a signal that auth's ready connects.
    "blog.apps.BlogConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "blog.urls"
WSGI_APPLICATION = "blog.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "blog.views.hostname",
            ],
        },
    },
]

# No session table: the session is the (signed, HttpOnly) cookie itself.
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"

# build.sh sets BLOG_DB_WRITABLE=1 to create the database; at run time it is read-only
# (the image's files belong to root, uWSGI runs as 65532), and saying so to SQLite keeps
# it from ever trying to lock or journal.
DB_PATH = BASE_DIR / "db.sqlite3"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        # Django's SQLite backend opens NAME as a URI.
        "NAME": str(DB_PATH) if os.environ.get("BLOG_DB_WRITABLE") else f"file:{DB_PATH}?mode=ro",
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/welcome/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_L10N = False
USE_TZ = True

# skiff serves /static/ itself: a `static` rule maps /static/x to ROOT/static/x, so the
# virtual server's root is /srv/blog/static-root and the files are collected under it.
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "static-root" / "static"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
