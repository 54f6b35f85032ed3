#!/usr/bin/env python
"""Django's command-line utility."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        # A bad setting: its variable and what is wrong, as the servers say it (chatsite/asgi.py).
        sys.exit(f"Configuration error: {error}")
