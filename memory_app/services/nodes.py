"""A record's nodes: building them (a task), reading one, and their state for people."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
from django.db import transaction

from collections_app.models import Agent
from ragsite import embedding
from ragsite.embedders import Embedder, EmbeddingError
from ragsite.errors import Conflict, NotFound
from ragsite.rls import task_scope

from .. import conf
from ..models import KINDS, NodePassages, Record, RecordNode
from ..nodes import DIVIDED, FITS, UNKNOWN, divide_record, runs_past_window
from .common import (
    BUILT,
    CHANGED,
    FAILED,
    GONE,
    PRESENT,
    SETTLED,
    _can_embed,
    _vector_bytes,
    get_record,
    raise_generation,
    record_model,
    validate_repair_limit,
)

logger = logging.getLogger("memory_app")

# Seconds a node read that found the nodes still being built tells its caller to wait (Retry-After).
NODES_RETRY_AFTER = 5


@dataclass(frozen=True)
class NodeBuild:
    """What `build_nodes` did for one record."""

    kind: str
    id: int
    status: str  # built, fits, present, changed, gone, unknown, failed
    nodes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def agent_id_of_record(kind: str, id: int) -> str:
    """The agent a record belongs to, read as the tables' owner; "" when it is gone (a scope that sees
    nothing)."""
    return record_model(kind).objects.filter(pk=id).values_list("agent__agent_id", flat=True).first() or ""


def build_nodes_for_agent(kind: str, id: int) -> NodeBuild:
    """`build_nodes` in the record's agent's row-level security scope on PostgreSQL (the task, the
    repairs): a query in it that forgets its agent filter sees only that agent's records."""
    with task_scope(agent_id_of_record(kind, id)):
        return build_nodes(kind, id)


def build_nodes(kind: str, id: int) -> NodeBuild:
    """Divide one record and embed its nodes, then write them in one short transaction.

    Dividing and embedding happen before the transaction. Inside it the record is read again;
    if it was deleted or its text changed meanwhile nothing is written ("gone", "changed": the
    change queued its own build). Nodes already made by the current model are left alone
    ("present"), so a queued build and a repair of the same record do the work once. A record
    that fits the window keeps no nodes ("fits": any of an earlier model are removed). The record
    itself is never modified.
    """
    model = record_model(kind)
    text = model.objects.filter(pk=id).values_list("text", flat=True).first()
    if text is None:
        return NodeBuild(kind, id, GONE)
    embedder = embedding.get_embedder()
    existing = RecordNode.objects.filter(parent_kind=kind, parent_id=id)
    # Nodes built before passages existed are built again, so their record gains passages.
    passages = NodePassages.objects.filter(parent_kind=kind, parent_id=id, embedding_model=embedder.model)
    if (
        existing.exists()
        and not existing.exclude(embedding_model=embedder.model).exists()
        and passages.count() == existing.count()
    ):
        return NodeBuild(kind, id, PRESENT, existing.count())
    try:
        division = divide_record(text, embedder)
        if division.status == UNKNOWN:
            return NodeBuild(kind, id, UNKNOWN)
        # Nodes, then every node's passages, embedded in one call.
        pieces = [text[span.start : span.end] for span in division.spans]
        pieces += [text[start:end] for span in division.spans for start, end in span.passages]
        vectors = embedder.embed(pieces) if pieces and _can_embed(embedder) else None
    except EmbeddingError as exc:
        logger.warning("building the nodes of %s:%s failed: %s", kind, id, exc)
        return NodeBuild(kind, id, FAILED)
    rows, passage_rows = [], []
    first_passage = len(division.spans)  # where this node's passage vectors begin in `vectors`
    for span in division.spans:
        passages = slice(first_passage, first_passage + len(span.passages))
        first_passage = passages.stop
        rows.append(
            RecordNode(
                parent_kind=kind,
                parent_id=id,
                node_index=span.index,
                start_char=span.start,
                end_char=span.end,
                token_count=span.token_count,
                window=division.window,
                embedding=_vector_bytes(vectors[span.index]) if vectors is not None else None,
                embedding_model=embedder.model,
            )
        )
        passage_rows.append(
            NodePassages(
                parent_kind=kind,
                parent_id=id,
                node_index=span.index,
                bounds=np.asarray(
                    [span.start, *(end for _start, end in span.passages)], dtype="<i4"
                ).tobytes(),
                # float16: passages are most of a divided record's bytes; their cosines move by ~1e-3.
                embeddings=np.asarray(vectors[passages], dtype="<f2").tobytes()
                if vectors is not None
                else None,
                embedding_model=embedder.model,
            )
        )
    with transaction.atomic():
        current = model.objects.select_for_update().filter(pk=id).values_list("text", "agent_id").first()
        if current is None:
            return NodeBuild(kind, id, GONE)
        if current[0] != text:
            return NodeBuild(kind, id, CHANGED)
        RecordNode.objects.filter(parent_kind=kind, parent_id=id).delete()
        NodePassages.objects.filter(parent_kind=kind, parent_id=id).delete()
        RecordNode.objects.bulk_create(rows)
        NodePassages.objects.bulk_create(passage_rows)
        raise_generation(
            current[1], changed=[(kind, id)]
        )  # nodes rank their record: its agent's recall index is stale
    return NodeBuild(kind, id, BUILT if division.status == DIVIDED else FITS, len(rows))


def get_node(*, agent: Agent, kind: str, id: int, index: int) -> dict:
    """One node of the agent's own record: its text, offsets, token count, window and model."""
    record = get_record(agent=agent, kind=kind, id=id)
    node = RecordNode.objects.filter(parent_kind=kind, parent_id=record.pk, node_index=index).first()
    if node is None or node.embedding_model != embedding.get_embedder().model:
        # Pending: queued, or held from another model and about to be rebuilt; it may well exist in
        # a moment. Otherwise the record fits, cannot be counted, or has fewer nodes: it never will.
        if node is not None or (index >= 0 and node_state(record).state in _NEEDS_NODES):
            raise Conflict(
                f"the nodes of record {kind}:{id} are being built; ask again shortly",
                code="nodes_pending",
                headers={"Retry-After": str(NODES_RETRY_AFTER)},
            )
        raise NotFound(f"record {kind}:{id} has no node {index}", code="unknown_node")
    return {
        "kind": kind,
        "id": record.pk,
        "node_index": node.node_index,
        "text": record.text[node.start_char : node.end_char],
        "start": node.start_char,
        "end": node.end_char,
        "token_count": node.token_count,
        "window": node.window,
        "embedding_model": node.embedding_model,
    }


def record_nodes(kind: str, id: int) -> list[RecordNode]:
    """A record's nodes in text order (for people and tests; agents go through `get_node`)."""
    return list(RecordNode.objects.filter(parent_kind=kind, parent_id=id).order_by("node_index"))


# What `node_state` says about one record's nodes.
NODES_CURRENT = "current"  # nodes of the current model and none of another: divided, nothing to do
NODES_STALE = (
    "stale"  # holds nodes of another model: the repair replaces them (or removes them if it now fits)
)
NODES_MISSING = "missing"  # runs past the window without nodes: queued, or waiting for a repair
NODES_NOT_NEEDED = "fits"  # fits the window: the record is its own only span
NODES_UNKNOWN = "unknown"  # its length cannot be counted, so no nodes can be built
_NEEDS_NODES = frozenset({NODES_STALE, NODES_MISSING})


@dataclass(frozen=True)
class NodeState:
    """One record's nodes and what they mean, as `node_state` finds them."""

    state: str
    model: str  # the current embedder's model
    window: int | None  # the current embedder's window; None when it cannot count
    tokens: int | None  # the whole text's tokens by the current model, when known
    nodes: list[RecordNode]


def _node_state(record: Record, nodes: list[RecordNode], embedder: Embedder) -> NodeState:
    model, window = embedder.model, embedder.window
    # The stored count is used only when the current model made it, as the health check does.
    tokens = (
        record.token_count if record.token_count is not None and record.embedding_model == model else None
    )
    if nodes:
        state = NODES_CURRENT if all(node.embedding_model == model for node in nodes) else NODES_STALE
        return NodeState(state, model, window, tokens, nodes)
    if tokens is None and window:
        try:
            tokens = embedder.count_tokens(record.text)
        except EmbeddingError as exc:
            logger.warning("counting the tokens of %s failed: %s", record, exc)
    if not window or tokens is None:
        state = NODES_UNKNOWN
    else:
        state = NODES_MISSING if runs_past_window(tokens, window) else NODES_NOT_NEEDED
    return NodeState(state, model, window, tokens, nodes)


def node_state(record: Record) -> NodeState:
    """A record's nodes in text order, and whether they are current, stale, missing or not needed."""
    return _node_state(record, record_nodes(record.KIND, record.pk), embedding.get_embedder())


def repair_records(records: Iterable[Record], *, limit: int = conf.REPAIR_LIMIT) -> dict:
    """Build the nodes of those `records` that need them, oldest first, at most `limit` (the admin's action).

    A record needs nodes when it runs past the window without nodes of the current model, or
    holds another model's nodes (`node_state`: missing or stale). Each is built by `build_nodes`,
    which never modifies the record. Answers `{"repaired": [build_nodes answers], "current": n,
    "fits": n, "unknown": n, "remaining": n}`: records already divided, records that need no
    nodes, records whose length cannot be counted, and records needing nodes past the limit.
    """
    limit = validate_repair_limit(limit)
    embedder = embedding.get_embedder()
    records = sorted(records, key=lambda record: (record.created_at, record.KIND, record.pk))
    held: dict[tuple[str, int], list[RecordNode]] = {}
    for kind in KINDS:
        ids = [record.pk for record in records if record.KIND == kind]
        for start in range(0, len(ids), 500):
            for node in RecordNode.objects.filter(parent_kind=kind, parent_id__in=ids[start : start + 500]):
                held.setdefault((kind, node.parent_id), []).append(node)
    counts = {NODES_CURRENT: 0, NODES_NOT_NEEDED: 0, NODES_UNKNOWN: 0}
    needing = []
    for record in records:
        state = _node_state(record, held.get((record.KIND, record.pk), []), embedder).state
        if state in _NEEDS_NODES:
            needing.append(record)
        else:
            counts[state] += 1
    repaired = [build_nodes_for_agent(record.KIND, record.pk).as_dict() for record in needing[:limit]]
    return {
        "repaired": repaired,
        "current": counts[NODES_CURRENT],
        "fits": counts[NODES_NOT_NEEDED],
        "unknown": counts[NODES_UNKNOWN],
        "remaining": len(needing) - sum(1 for item in repaired if item["status"] in SETTLED),
    }
