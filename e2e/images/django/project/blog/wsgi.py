"""The WSGI entry point uWSGI loads (`module = blog.wsgi` in /etc/uwsgi/blog.ini)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blog.settings")
application = get_wsgi_application()
