"""System checks with stable ids: `manage.py check` and every start-up run them."""

from django.core.checks import Error, Tags, register
from django.db import DatabaseError, connections

from .store import schema_problem

HINT = "Install the ragsite version that wrote this store, or use a different DATABASE_URL."


def _schema_errors(aliases) -> list[Error]:
    errors = []
    for alias in aliases:
        problem = schema_problem(connections[alias])
        if problem is not None:
            errors.append(Error(problem, hint=HINT, id="collections.E001"))
    return errors


@register(Tags.database)
def check_store_schema(app_configs=None, databases=None, **kwargs):
    return _schema_errors(databases or [])


@register()
def check_store_schema_at_start(app_configs=None, databases=None, **kwargs):
    """The same check for a plain `manage.py check` and each command's start-up, which name no database.

    Opening the store is what the guard watches, so a refusal met while connecting is reported here
    as collections.E001 rather than raised. A store that cannot be reached at all is left to
    whatever needs it: that is not this check's question.
    """
    if databases is not None:
        return []  # check_store_schema answers for the databases named
    try:
        return _schema_errors(list(connections))
    except DatabaseError:
        return []
