"""System checks with stable ids: `manage.py check --database default` and `migrate` run them."""

import secrets
from dataclasses import dataclass

from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections, transaction
from django.db.migrations.recorder import MigrationRecorder

from .triggers import SUPPORTED_VENDORS, TRIGGERS, missing_triggers

# The migration that creates the first triggers: before it is applied, their absence is expected.
TRIGGER_MIGRATION = ("memory_app", "0002_record_node_triggers")

HINT = (
    "Run `manage.py migrate --skip-checks`: every migrate recreates record-node triggers that are "
    "missing or do not do their work (this check would otherwise stop migrate itself)."
)


def _applied(connection) -> set[str]:
    """Names of the memory_app migrations applied on this database."""
    recorder = MigrationRecorder(connection)
    try:
        if not recorder.has_table():
            return set()
        return set(recorder.migration_qs.filter(app="memory_app").values_list("name", flat=True))
    except DatabaseError:
        return set()


def triggers_expected(connection) -> bool:
    """True once the trigger migration is recorded as applied on this database."""
    return TRIGGER_MIGRATION[1] in _applied(connection)


def expected_triggers(connection) -> list[str]:
    """The `TRIGGERS` whose migration has run here, in `TRIGGERS` order."""
    applied = _applied(connection)
    return [name for name, trigger in TRIGGERS.items() if trigger.migration in applied]


@dataclass(frozen=True)
class Fault:
    trigger: str
    what: str  # what it failed to do, for a person


def trigger_faults(connection, names: list[str]) -> list[Fault]:
    """What the triggers `names` fail to do, found by doing it: in a transaction that is rolled back.

    A probe agent gets a memory and an episode, each with a node; each record's text is changed by
    a raw UPDATE and then the record is deleted by a raw DELETE, and the nodes (and the stored token
    count) are looked at after each. Checking names alone would pass a same-named trigger whose body
    does nothing, and then every delete would leave stale nodes behind. Nothing is kept.
    """
    from collections_app.models import Agent

    from .models import RECORD_MODELS

    faults: list[Fault] = []
    with transaction.atomic(using=connection.alias):
        agent = Agent.objects.using(connection.alias).create(agent_id=f"trigger-probe-{secrets.token_hex(6)}")
        for kind, model in RECORD_MODELS.items():
            faults += _probe(connection, agent, kind, model, names)
        transaction.set_rollback(True, using=connection.alias)
    return faults


def _probe(connection, agent, kind: str, model, names: list[str]) -> list[Fault]:
    from .models import MEMORY, RecordNode

    alias, table = connection.alias, model._meta.db_table
    noun = "memory" if kind == MEMORY else "episode"
    record = model.objects.using(alias).create(agent=agent, text="trigger probe", token_count=4)
    nodes = RecordNode.objects.using(alias).filter(parent_kind=kind, parent_id=record.pk)
    node = dict(
        parent_kind=kind, parent_id=record.pk, node_index=0, start_char=0, end_char=7, token_count=2, window=2
    )
    faults = []

    RecordNode.objects.using(alias).create(**node)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET text = %s WHERE id = %s", ["trigger probe, edited", record.pk])
    if f"{table}_text_change_deletes_nodes" in names and nodes.exists():
        faults.append(Fault(f"{table}_text_change_deletes_nodes", f"a changed {noun} text kept its nodes"))
    count = model.objects.using(alias).filter(pk=record.pk).values_list("token_count", flat=True).get()
    if f"{table}_text_change_forgets_count" in names and count is not None:
        faults.append(
            Fault(
                f"{table}_text_change_forgets_count", "a text changed without its token count kept the count"
            )
        )

    nodes.delete()
    RecordNode.objects.using(alias).create(**node)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [record.pk])
    if f"{table}_delete_nodes" in names and nodes.exists():
        faults.append(Fault(f"{table}_delete_nodes", f"a deleted {noun} kept its nodes"))
    return faults


@register(Tags.database)
def check_record_node_triggers(app_configs=None, databases=None, **kwargs):
    """memory.E001: a record-node trigger is missing from the database, or is there and does not work."""
    errors = []
    for alias in databases or []:
        connection = connections[alias]
        try:
            if connection.vendor not in SUPPORTED_VENDORS:
                continue
            expected = expected_triggers(connection)
        except ImproperlyConfigured:
            # The store's guard refused it on opening (a schema this code does not know): collections.E001
            # says so.
            continue
        if not expected:
            continue
        missing = [name for name in missing_triggers(connection) if name in expected]
        if missing:
            errors.append(
                Error(
                    f"database {alias!r} lacks the record-node trigger(s) {', '.join(missing)}; without them "
                    "deleting or changing a memory or episode leaves stale nodes behind",
                    hint=HINT,
                    id="memory.E001",
                )
            )
            continue
        try:
            faults = trigger_faults(connection, expected)
        except DatabaseError as exc:
            errors.append(
                Warning(
                    f"database {alias!r}: the record-node triggers could not be tried ({type(exc).__name__}: "
                    f"{str(exc)[:200]}); their names are all present",
                    hint="Run the check again when the database accepts writes; a trigger that raises "
                    "an error also stops every write to memories and episodes.",
                    id="memory.W001",
                )
            )
            continue
        if faults:
            errors.append(
                Error(
                    f"database {alias!r} has record-node trigger(s) that do not do their work: "
                    + "; ".join(f"{fault.trigger} ({fault.what})" for fault in faults),
                    hint=HINT,
                    id="memory.E001",
                )
            )
    return errors


@register()
def check_recall_max_chars(app_configs=None, **kwargs):
    """memory.E002: MEMORY_RECALL_MAX_CHARS is not a whole number from 1 to the API's own limit."""
    from django.conf import settings

    from .conf import MAX_RECALL_CHARS

    value = getattr(settings, "MEMORY_RECALL_MAX_CHARS", None)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RECALL_CHARS:
        return [
            Error(
                f"MEMORY_RECALL_MAX_CHARS is {value!r}; it must be a whole number from 1 to "
                f"{MAX_RECALL_CHARS:,}",
                hint="The characters a memory recall answers when the request does not say "
                "(docs/configuration.md).",
                id="memory.E002",
            )
        ]
    return []


@register()
def check_memory_analyzer(app_configs=None, **kwargs):
    """memory.E003: MEMORY_ANALYZER is not the name of an analyzer (ragsite.analyzers)."""
    from .conf import memory_analyzer

    try:
        memory_analyzer()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint="The analyzer memory recall's keyword leg reads words with; simple (seed 004's terms) "
                "is the default (docs/configuration.md, docs/memory.md).",
                id="memory.E003",
            )
        ]
    return []
