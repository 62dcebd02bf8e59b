"""The health check: long records without nodes (or with stale ones), orphan nodes, triggers; its repair."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef

from collections_app.models import Agent
from ragsite import embedding
from ragsite.embedders import Embedder, EmbeddingError

from .. import conf
from ..models import KINDS, RECORD_MODELS, RecordNode
from ..nodes import runs_past_window
from ..triggers import UnsupportedDatabase, missing_triggers
from . import nodes as node_services
from . import vectors as vector_services
from .common import SETTLED, record_model, validate_repair_limit

logger = logging.getLogger("memory_app")


def _orphan_nodes():
    """Nodes whose parent no longer exists (only possible if a trigger was missing)."""
    orphans = RecordNode.objects.none()
    for kind, model in RECORD_MODELS.items():
        orphans = orphans | RecordNode.objects.filter(parent_kind=kind).exclude(
            parent_id__in=model.objects.values("pk")
        )
    return orphans


def _trigger_problems() -> list[str]:
    try:
        return missing_triggers(connection)
    except UnsupportedDatabase:
        return []


@dataclass(frozen=True)
class _Surveyed:
    id: int
    created_at: datetime
    tokens: int | None  # the whole text's tokens by the current model; None when unknown or not needed
    divided: bool  # has nodes of the current model and none of another: long by construction
    stale: bool  # has nodes of another model


def _survey(kind: str, agent: Agent | None, embedder: Embedder) -> tuple[list[_Surveyed], str]:
    """Every record of one kind, with what the health check needs to know; and an error, if any.

    A record's stored token count is used when the current model made it; otherwise the text is
    counted again (after a model change the stored count says nothing about today's window).
    """
    model = embedder.model
    nodes = RecordNode.objects.filter(parent_kind=kind, parent_id=OuterRef("pk"))
    rows = (
        record_model(kind).objects.all() if agent is None else record_model(kind).objects.filter(agent=agent)
    )
    facts = list(
        rows.annotate(
            current=Exists(nodes.filter(embedding_model=model)),
            stale=Exists(nodes.exclude(embedding_model=model)),
        )
        .order_by("pk")
        .values_list("pk", "created_at", "token_count", "embedding_model", "current", "stale")
    )
    tokens: dict[int, int | None] = {}
    recount = []
    for pk, _created, count, counted_by, current, stale in facts:
        if not (current and not stale):
            if count is not None and counted_by == model:
                tokens[pk] = count
            else:
                recount.append(pk)
    error = ""
    if embedder.window:
        for start in range(0, len(recount), 200):
            texts = (
                record_model(kind)
                .objects.filter(pk__in=recount[start : start + 200])
                .values_list("pk", "text")
            )
            try:
                for pk, text in texts:
                    tokens[pk] = embedder.count_tokens(text)
            except EmbeddingError as exc:
                # One failure is enough to know: the rest stay unknown rather than each waiting to fail.
                logger.warning("counting tokens for the health check failed: %s", exc)
                error = "the embedding model could not count tokens; some lengths are unknown"
                break
    surveyed = [
        _Surveyed(pk, created, tokens.get(pk), bool(current and not stale), bool(stale))
        for pk, created, _count, _by, current, stale in facts
    ]
    return surveyed, error


def check_health(*, agent: Agent | None = None, repair: bool = False, limit: int = conf.REPAIR_LIMIT) -> dict:
    """Report long records whose nodes are missing, and with `repair` build at most `limit` of them.

    A record needs nodes when its text runs past the current embedder's window and it has no
    nodes made by the current model; nodes of another model count as missing (seed 002 §4) and
    are replaced, or removed when the record now fits. Records are counted with the token count
    stored with them when it was counted by the current model, and counted again otherwise.

    The repair goes oldest first and uses `build_nodes`, which divides and embeds before its
    short write transaction and never modifies the record, so locked records are repaired too.
    Without `agent` the whole store is checked, and the repair also removes orphan nodes.
    """
    limit = validate_repair_limit(limit)
    embedder = embedding.get_embedder()
    model, window = embedder.model, embedder.window
    report: dict[str, Any] = {
        "model": model,
        "window": window,
        "can_divide": bool(window),
        "records": 0,
        "long_records": 0,
        "unknown_length": 0,
        "missing_nodes": 0,
        "stale_nodes": 0,
        "missing": [],
        "missing_triggers": _trigger_problems(),
    }
    needing: list[tuple[datetime, str, int, str]] = []
    for kind in KINDS:
        surveyed, error = _survey(kind, agent, embedder)
        if error:
            report["error"] = error
        report["records"] += len(surveyed)
        for item in surveyed:
            is_long = item.divided or runs_past_window(item.tokens, window)
            report["long_records"] += is_long
            report["unknown_length"] += not item.divided and item.tokens is None
            report["stale_nodes"] += item.stale
            report["missing_nodes"] += is_long and not item.divided
            if window and ((is_long and not item.divided) or item.stale):
                needing.append((item.created_at, kind, item.id, "stale" if item.stale else "missing"))
    needing.sort()
    report["missing"] = [
        {"kind": k, "id": pk, "reason": why} for _c, k, pk, why in needing[: conf.REPORT_IDS]
    ]
    report["missing_truncated"] = len(needing) > conf.REPORT_IDS
    if agent is None:
        report["orphan_nodes"] = _orphan_nodes().count()
    waiting = vector_services.waiting_for_vectors(agent)
    report["missing_vectors"] = len(waiting)
    if repair:
        # Records whose vector task never ran (a broker that was down): embedded here, as many as nodes.
        report["vectors"] = [
            vector_services.embed_vector_for_agent(kind, pk).as_dict() for kind, pk in waiting[:limit]
        ]
        repaired = []
        for _created, kind, pk, _why in needing[:limit]:
            # The survey and the orphans span agents (an orphan has no agent to scope by), so
            # they run as the tables' owner; each record's nodes are built in its agent's scope.
            repaired.append(node_services.build_nodes_for_agent(kind, pk).as_dict())
        report["repaired"] = repaired
        report["remaining"] = len(needing) - sum(1 for item in repaired if item["status"] in SETTLED)
        if agent is None and report["orphan_nodes"]:
            report["orphans_removed"] = _orphan_nodes().delete()[0]
    return report


def repair_all() -> dict:
    """The scheduled repair: the whole store, at most `REPAIR_LIMIT` records."""
    return check_health(repair=True, limit=conf.REPAIR_LIMIT)
