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
