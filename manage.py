#!/usr/bin/env python
"""Django's command-line utility for ragsite."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:
        # A store this code does not know is refused with one sentence and exit 2, not a traceback,
        # whichever command met it first (the guard runs when the store is opened).
        from collections_app.store import StoreSchemaError

        if not isinstance(exc, StoreSchemaError):
            raise
        sys.stderr.write(f"{exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
