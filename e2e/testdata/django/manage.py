#!/usr/bin/env python3
"""Django's command-line utility for the end-to-end test's project.

The database comes from the environment (see settings.py), so the same
project runs through the proxy and directly against the backend.
"""
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
