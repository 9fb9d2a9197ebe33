#!/usr/bin/env python3
"""Django's command-line utility, for build.sh (migrate, the demo user, collectstatic)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blog.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
