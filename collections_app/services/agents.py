"""Agents, their keys, their collections, and readers."""

import logging
import re
from contextlib import contextmanager

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from ragsite.bodies import refuse_nul
from ragsite.errors import Conflict, NotFound, RagsiteError

from ..models import Agent, ApiKey, BuildRun, Collection, Label, MeasureRun, Reader, built_from_problem
from ..text.chunking import ChunkingError, resolve_sizes
from .knowledge import agent_id_problem, available_folders, collection_name_problem, validate_folder_name

logger = logging.getLogger("ragsite.api")

SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


def _require_slug(value: str, what: str) -> str:
    if not SLUG.match(value or ""):
        raise RagsiteError(
            f"{what} must be 1-100 letters, digits, '-' or '_', starting with a letter or digit; got "
            f"{value!r}",
            code="invalid_name",
        )
    return value


def get_agent(agent_id: str) -> Agent:
    try:
        return Agent.objects.get(agent_id=agent_id)
    except Agent.DoesNotExist:
        raise NotFound(f'no agent "{agent_id}"', code="unknown_agent") from None


def agent_id_of_build(build_id: int) -> str:
    """The agent a queued build acts for, read as the tables' owner before its task takes that
    agent's scope (ragsite.rls.task_scope); "" when the build is gone, a scope that sees nothing."""
    found = BuildRun.objects.filter(pk=build_id).values_list("collection__agent__agent_id", flat=True).first()
    return found or ""


def agent_id_of_collection(collection_id: int) -> str:
    """The agent a sync check acts for (see agent_id_of_build); "" when the collection is gone."""
    return Collection.objects.filter(pk=collection_id).values_list("agent__agent_id", flat=True).first() or ""


def agent_id_of_delivery(delivery_id: int) -> str:
    """The agent a webhook delivery acts for (see agent_id_of_build); "" when it is gone."""
    from ..models import WebhookDelivery

    found = WebhookDelivery.objects.filter(pk=delivery_id).values_list("webhook__agent__agent_id", flat=True)
    return found.first() or ""


def agent_id_of_measure(measure_id: int) -> str:
    """The agent a queued measurement acts for; "" when it is gone (see agent_id_of_build)."""
    found = (
        MeasureRun.objects.filter(pk=measure_id).values_list("collection__agent__agent_id", flat=True).first()
    )
    return found or ""


def create_agent(*, agent_id: str, name: str = "") -> tuple[Agent, str]:
    """Create an agent with its first API key; returns the agent and the key, which is never shown again."""
    _require_slug(agent_id, "agent id")
    with transaction.atomic():
        if Agent.objects.filter(agent_id=agent_id).exists():
            raise Conflict(f'agent "{agent_id}" already exists', code="duplicate_agent")
        problem = agent_id_problem(agent_id)
        if problem:
            raise Conflict(problem, code="variable_taken")
        agent = Agent.objects.create(agent_id=agent_id, name=name[:200])
        _key, raw = issue_key(agent=agent, name="first key")
    return agent, raw


def issue_key(*, agent: Agent, name: str = "", may_act_for_others: bool = False) -> tuple[ApiKey, str]:
    raw = ApiKey.generate()
    key = ApiKey.objects.create(
        agent=agent,
        name=name[:100],
        prefix=raw[:12],
        hashed=ApiKey.hash(raw),
        may_act_for_others=may_act_for_others,
    )
    return key, raw


def revoke_key(*, key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def authenticate(raw: str) -> ApiKey | None:
    """The active key matching `raw`, or None. Records when it was last used (at most once a minute).

    A read: the use is recorded by `_record_use`, outside the request's transaction and never waiting
    for a lock, so a search keeps answering while another process holds the store's write lock.
    """
    if not raw or len(raw) > 200:
        return None
    key = ApiKey.objects.active().select_related("agent").filter(hashed=ApiKey.hash(raw)).first()
    if key is not None:
        now = timezone.now()
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > KEY_USE_EVERY_SECONDS:
            if connection.in_atomic_block:
                transaction.on_commit(lambda: _record_use(key_pk=key.pk, at=now))
            else:
                _record_use(key_pk=key.pk, at=now)
    return key


# How stale `ApiKey.last_used_at` may be: it says which keys are in use, not when each request came.
KEY_USE_EVERY_SECONDS = 60


def _record_use(*, key_pk: int, at) -> None:
    """Best effort: write `last_used_at` if the store's lock is free now, else leave it to a later request."""
    try:
        if connection.vendor == "sqlite":
            with _sqlite_no_wait():
                ApiKey.objects.filter(pk=key_pk).update(last_used_at=at)
        else:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '100ms'")
                ApiKey.objects.filter(pk=key_pk).update(last_used_at=at)
    except OperationalError as exc:
        logger.debug("key use not recorded now (%s)", type(exc).__name__)


@contextmanager
def _sqlite_no_wait():
    """SQLite's busy timeout off for one statement (autocommit): a held write lock fails it at once."""
    waits_ms = int(float(connection.settings_dict.get("OPTIONS", {}).get("timeout", 5)) * 1000)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 0")
        try:
            yield
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {waits_ms}")


def key_from_request(request) -> ApiKey | None:
    """The active key in `Authorization: Bearer <key>`, or None (no header, another scheme, a wrong key)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return request_key(request, token.strip()) if scheme.lower() == "bearer" else None


def request_key(request, raw: str) -> ApiKey | None:
    """`authenticate(raw)`, once per request: on PostgreSQL the middleware (`AgentScope`) checks the
    key before the view does, and both ask for the same token within the same request, so the
    second is answered from the first (a lookup with its join, and its statement, saved per request).
    Another token is looked up afresh."""
    verified = getattr(request, "_ragsite_key", None)
    if verified is not None and verified[0] == raw:
        return verified[1]
    key = authenticate(raw)
    request._ragsite_key = (raw, key)
    return key


def create_collection(
    *,
    agent: Agent,
    name: str,
    folder: str = "",
    method: str = "structure",
    built_from: str = "",
    analyzer: str | None = None,
    per_reader: bool = False,
    judge: bool = False,
    size: int | None = None,
    overlap: int | None = None,
    sync_every: int | None | str = "default",
    source: dict | None = None,
) -> Collection:
    """A new collection of `agent`; with `sync_every` (minutes) it keeps itself current (services.sync).

    `source` ({kind, settings, credentials}) makes it read a remote source (services.origins) rather
    than a folder. `"default"`: a collection with a folder or a remote source checks it every
    SYNC_EVERY minutes, one of uploads only is built when asked; None: built only when asked.
    `analyzer`: how its keyword leg reads words (ragsite.analyzers); None: ANALYZER."""
    from .. import conf
    from . import origins, sync
    from .analyzers import analyzer_or_default

    remote = bool(source) and source.get("kind", "folder") != "folder"
    if remote and folder:
        raise RagsiteError("a collection reads a folder or a remote source, not both", code="invalid_source")
    if sync_every == "default":
        sync_every = conf.sync_every() if folder or remote else None

    _require_slug(name, "collection name")
    taken = collection_name_problem(agent=agent, name=name)
    if taken:
        raise Conflict(taken, code="variable_taken")
    try:
        resolve_sizes(method, size, overlap)
    except ChunkingError as exc:
        raise RagsiteError(str(exc), code="invalid_method") from None
    if size is not None and size > 100_000:
        raise RagsiteError("size must be at most 100000", code="invalid_size")
    problem = built_from_problem(built_from)
    if problem:
        raise RagsiteError(problem, code="invalid_built_from")
    refuse_nul(built_from, field="built_from")
    analyzer = analyzer_or_default(analyzer)
    validate_folder_name(folder)
    if folder and folder not in available_folders(agent):
        # Named only: the answer says which folder name is missing, never where it was looked for.
        raise Conflict(
            f'agent "{agent.agent_id}" has no folder "{folder}" under KNOWLEDGE_ROOT; '
            f"available: {', '.join(available_folders(agent)) or 'none'}",
            code="unknown_folder",
        )
    try:
        with transaction.atomic():
            collection = Collection.objects.create(
                agent=agent,
                name=name,
                folder=folder,
                method=method,
                built_from=built_from,
                analyzer=analyzer,
                per_reader=per_reader,
                judge=judge,
                size=size,
                overlap=overlap,
            )
            if source:
                origins.set_source(
                    collection=collection,
                    kind=source.get("kind", "folder"),
                    settings=source.get("settings"),
                    credentials=source.get("credentials"),
                )
            if sync_every is not None:
                sync.set_sync(collection=collection, every=sync_every)
            return collection
    except IntegrityError:
        raise Conflict(
            f'agent "{agent.agent_id}" already has a collection "{name}"', code="duplicate_collection"
        ) from None


def get_collection(*, agent: Agent, name: str) -> Collection:
    """The agent's own collection; another agent's answers exactly as a missing one does."""
    if "\x00" in name:  # no name holds one, and PostgreSQL refuses to compare with it
        raise NotFound(f'no collection "{name}"', code="unknown_collection")
    try:
        return Collection.objects.select_related("agent").get(agent=agent, name=name)
    except Collection.DoesNotExist:
        raise NotFound(f'no collection "{name}"', code="unknown_collection") from None


def create_reader(*, external_id: str, labels: list[str]) -> Reader:
    """A reader holding the named labels (created when new)."""
    external_id = (external_id or "").strip()
    if not external_id or len(external_id) > 200:
        raise RagsiteError("a reader's id is 1-200 characters", code="invalid_reader")
    for label in labels:
        _require_slug(label, "label")
    with transaction.atomic():
        if Reader.objects.filter(external_id=external_id).exists():
            raise Conflict(f'reader "{external_id}" already exists', code="duplicate_reader")
        reader = Reader.objects.create(external_id=external_id)
        reader.labels.set([Label.objects.get_or_create(name=name)[0] for name in labels])
    return reader
