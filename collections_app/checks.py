"""System checks with stable ids: `manage.py check` and every start-up run them."""

from django.core.checks import Error, Tags, register
from django.db import connections

from .models import SCHEMA_VERSION
from .store import read_schema_version, refusal_message


@register(Tags.database)
def check_store_schema(app_configs=None, databases=None, **kwargs):
    errors = []
    for alias in databases or []:
        found = read_schema_version(connections[alias])
        if found is not None and found > SCHEMA_VERSION:
            errors.append(
                Error(
                    refusal_message(found),
                    hint="Install the ragsite version that wrote this store, or use a different DATABASE_URL.",
                    id="collections.E001",
                )
            )
    return errors


@register(Tags.security)
def check_secret_key(app_configs=None, **kwargs):
    """`ragsite.E001`: with DEBUG off, a missing or public SECRET_KEY stops the server from starting."""
    from django.conf import settings

    from ragsite.security import FIX, insecure_start_reason

    reason = insecure_start_reason(settings)
    if reason is None:
        return []
    return [Error(f"{reason} and DEBUG is off: anyone could forge signed data (django-q tasks run "
                  "in the workers are signed with it)", hint=FIX, id="ragsite.E001")]
