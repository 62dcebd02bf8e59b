"""Memory services: store, change and delete records, recall them, build and check their nodes.

Every interface (the API, the commands, the tasks) calls these and nothing else. The rules they
keep (seed 002):

* Recall ranks RECORDS ONLY. Nodes are read after the ranking is fixed, to choose each record's
  excerpt, so the records returned and their order are the same with or without nodes.
* Slow work (counting tokens, embedding) happens before a short write transaction, never in it.
* Node building runs on the task queue, enqueued when the record's row is committed; a store
  answers at once with `nodes: {"status": "queued"}` when the record runs past the window.
* Nodes never modify their record; the health repair therefore covers locked records too.
* An agent reaches only its own records: another agent's record answers exactly like a missing one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, cast

import numpy as np
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from collections_app.embedders import Embedder, EmbeddingError
from collections_app.fusion import DEFAULT_WEIGHT, hybrid_scores
from collections_app.lexical import BM25Index, terms
from collections_app.models import Agent
from ragsite.errors import Conflict, NotFound, RagsiteError

from . import conf
from .models import KINDS, MAX_TEXT_LENGTH, RECORD_MODELS, Episode, Memory, Record, RecordNode
from .nodes import DIVIDED, FITS, UNKNOWN, divide_record, runs_past_window
from .triggers import UnsupportedDatabase, missing_triggers

logger = logging.getLogger("memory_app")

QUEUED = "queued"

# What build_nodes can answer. "built", "fits", "present", "changed" and "gone" leave the record
# as it should be; "unknown" and "failed" leave it for a later repair.
BUILT, PRESENT, CHANGED, GONE, FAILED = "built", "present", "changed", "gone", "failed"
SETTLED = frozenset({BUILT, FITS, PRESENT, CHANGED, GONE})


# --- validation ----------------------------------------------------------------------------------


def validate_text(text: Any) -> str:
    """The text of a record, checked: a string of 1 to 16,000 characters with something in it."""
    if not isinstance(text, str):
        raise RagsiteError("text must be a string", code="invalid_text")
    if len(text) > MAX_TEXT_LENGTH:
        raise RagsiteError(
            f"text is {len(text):,} characters; a record holds at most {MAX_TEXT_LENGTH:,}", code="text_too_long"
        )
    if not text.strip():
        raise RagsiteError("text must not be empty", code="empty_text")
    if "\x00" in text:
        # PostgreSQL cannot store NUL in text; refusing it everywhere keeps the two stores alike.
        raise RagsiteError("text must not contain NUL characters", code="invalid_text")
    return text


def validate_query(query: Any, most: Any) -> tuple[str, int]:
    """A recall query of 1 to 2,000 characters and a `most` of 1 to 50."""
    if not isinstance(query, str) or not query.strip():
        raise RagsiteError("query must be a non-empty string", code="invalid_query")
    if len(query) > conf.MAX_QUERY_LENGTH:
        raise RagsiteError(f"query is at most {conf.MAX_QUERY_LENGTH:,} characters", code="query_too_long")
    if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= conf.MAX_MOST:
        raise RagsiteError(f"most must be a whole number from 1 to {conf.MAX_MOST}", code="invalid_most")
    return query, most


def record_model(kind: str) -> type[Record]:
    """The model of a record kind, "mem" or "ep"."""
    try:
        return RECORD_MODELS[kind]
    except (KeyError, TypeError):
        raise RagsiteError(f'kind must be one of {", ".join(KINDS)}, not {kind!r}', code="invalid_kind") from None


def get_record(*, agent: Agent, kind: str, id: int) -> Record:
    """The agent's own record; another agent's answers exactly as a missing one does."""
    record = record_model(kind).objects.filter(agent=agent, pk=id).first()
    if record is None:
        raise NotFound(f"no record {kind}:{id}", code="unknown_record")
    return record


# --- writing records -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    """What is computed from a text before its row is written (the slow part of a write)."""

    token_count: int | None
    embedding: bytes | None
    embedding_model: str
    runs_past_window: bool


def _can_embed(embedder: Embedder) -> bool:
    return bool(embedder.dimensions)


def _vector_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _unavailable(exc: EmbeddingError) -> RagsiteError:
    logger.warning("embedding failed while writing a memory record: %s", exc)
    return RagsiteError(
        "the embedding model could not be reached, so nothing was stored; try again",
        code="embedding_unavailable",
        status=503,
    )


def _prepare_many(texts: list[str], embedder: Embedder) -> list[_Prepared]:
    try:
        counts = [embedder.count_tokens(text) for text in texts]
        vectors = embedder.embed(texts) if texts and _can_embed(embedder) else None
    except EmbeddingError as exc:
        raise _unavailable(exc) from None
    window = embedder.window
    model = embedder.model if vectors is not None else ""
    return [
        _Prepared(
            token_count=count,
            embedding=_vector_bytes(vectors[row]) if vectors is not None else None,
            embedding_model=model,
            runs_past_window=runs_past_window(count, window),
        )
        for row, count in enumerate(counts)
    ]


def _queue_nodes(kind: str, id: int) -> None:
    """Enqueue `build_record_nodes` once the surrounding transaction commits."""

    def enqueue() -> None:
        from django_q.tasks import async_task

        async_task("memory_app.tasks.build_record_nodes", kind, id, task_name=f"nodes-{kind}-{id}")

    # robust: a broker that is down must not turn a stored record into an error; the health
    # repair finds long records without nodes and builds them later.
    transaction.on_commit(enqueue, robust=True)


def _store(model: type[Record], agent: Agent, text: str) -> tuple[Record, dict | None]:
    text = validate_text(text)
    (prepared,) = _prepare_many([text], conf.get_embedder())
    with transaction.atomic():
        record = model.objects.create(
            agent=agent,
            text=text,
            token_count=prepared.token_count,
            embedding=prepared.embedding,
            embedding_model=prepared.embedding_model,
        )
        if prepared.runs_past_window:
            _queue_nodes(model.KIND, record.pk)
    return record, ({"status": QUEUED} if prepared.runs_past_window else None)


def store_memory(*, agent: Agent, text: str) -> tuple[Memory, dict | None]:
    """Store a memory; returns it and `{"status": "queued"}` when its nodes were queued, else None."""
    record, nodes = _store(Memory, agent, text)
    return cast(Memory, record), nodes


def archive_episode(*, agent: Agent, text: str) -> tuple[Episode, dict | None]:
    """Archive an episode's summary; answers like `store_memory`."""
    record, nodes = _store(Episode, agent, text)
    return cast(Episode, record), nodes


def _locked_refusal(record: Record) -> Conflict:
    return Conflict(f"record {record.KIND}:{record.pk} is locked", code="record_locked")


def _writable_record(*, agent: Agent, kind: str, id: int) -> Record:
    """The agent's record, row-locked for this transaction; refused when missing or locked.

    The row lock keeps a node build from writing for an old text in between (PostgreSQL;
    SQLite's IMMEDIATE transactions already serialise writers).
    """
    record = record_model(kind).objects.select_for_update().filter(agent=agent, pk=id).first()
    if record is None:
        raise NotFound(f"no record {kind}:{id}", code="unknown_record")
    if record.locked:
        raise _locked_refusal(record)
    return record


def update_text(*, agent: Agent, kind: str, id: int, text: str) -> tuple[Record, dict | None]:
    """Replace a record's text; its nodes go (the trigger) and new ones are queued when it is long.

    The record is re-embedded before the write. The same text again changes nothing. A locked
    record is refused (409).
    """
    text = validate_text(text)
    record = get_record(agent=agent, kind=kind, id=id)
    if record.locked:
        raise _locked_refusal(record)
    if record.text == text:
        return record, None
    (prepared,) = _prepare_many([text], conf.get_embedder())
    with transaction.atomic():
        record = _writable_record(agent=agent, kind=kind, id=id)
        record.text = text
        record.token_count = prepared.token_count
        record.embedding = prepared.embedding
        record.embedding_model = prepared.embedding_model
        record.updated_at = timezone.now()
        record.save(update_fields=["text", "token_count", "embedding", "embedding_model", "updated_at"])
        if prepared.runs_past_window:
            _queue_nodes(kind, record.pk)
    return record, ({"status": QUEUED} if prepared.runs_past_window else None)


def delete_record(*, agent: Agent, kind: str, id: int) -> None:
    """Delete one of the agent's records (its nodes go with it, by trigger). A locked record is refused."""
    with transaction.atomic():
        _writable_record(agent=agent, kind=kind, id=id).delete()


# --- nodes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeBuild:
    """What `build_nodes` did for one record."""

    kind: str
    id: int
    status: str  # built, fits, present, changed, gone, unknown, failed
    nodes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


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
    embedder = conf.get_embedder()
    existing = RecordNode.objects.filter(parent_kind=kind, parent_id=id)
    if existing.exists() and not existing.exclude(embedding_model=embedder.model).exists():
        return NodeBuild(kind, id, PRESENT, existing.count())
    try:
        division = divide_record(text, embedder)
        if division.status == UNKNOWN:
            return NodeBuild(kind, id, UNKNOWN)
        pieces = [text[span.start : span.end] for span in division.spans]
        vectors = embedder.embed(pieces) if pieces and _can_embed(embedder) else None
    except EmbeddingError as exc:
        logger.warning("building the nodes of %s:%s failed: %s", kind, id, exc)
        return NodeBuild(kind, id, FAILED)
    rows = [
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
        for span in division.spans
    ]
    with transaction.atomic():
        current = model.objects.select_for_update().filter(pk=id).values_list("text", flat=True).first()
        if current is None:
            return NodeBuild(kind, id, GONE)
        if current != text:
            return NodeBuild(kind, id, CHANGED)
        RecordNode.objects.filter(parent_kind=kind, parent_id=id).delete()
        RecordNode.objects.bulk_create(rows)
    return NodeBuild(kind, id, BUILT if division.status == DIVIDED else FITS, len(rows))


def get_node(*, agent: Agent, kind: str, id: int, index: int) -> dict:
    """One node of the agent's own record: its text, offsets, token count, window and model."""
    record = get_record(agent=agent, kind=kind, id=id)
    node = RecordNode.objects.filter(parent_kind=kind, parent_id=record.pk, node_index=index).first()
    if node is None:
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


# --- recall --------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    kind: str
    id: int
    text: str
    embedding: bytes | None
    embedding_model: str


def _agent_records(agent: Agent) -> list[_Candidate]:
    candidates: list[_Candidate] = []
    for kind, model in RECORD_MODELS.items():
        rows = model.objects.filter(agent=agent).order_by("pk")
        for pk, text, embedding, embedding_model in rows.values_list("pk", "text", "embedding", "embedding_model"):
            candidates.append(_Candidate(kind, pk, text, embedding, embedding_model))
    return candidates


class _QueryVector:
    """The query's embedding, computed at most once and only when something needs it."""

    def __init__(self, query: str, embedder: Embedder) -> None:
        self.query = query
        self.embedder = embedder
        self._vector: np.ndarray | None = None
        self._tried = False

    def get(self) -> np.ndarray | None:
        if not self._tried:
            self._tried = True
            try:
                if _can_embed(self.embedder):
                    self._vector = self.embedder.embed([self.query])[0]
            except EmbeddingError as exc:
                # Recall still answers, lexically, when the embedder is down.
                logger.warning("embedding a recall query failed: %s", exc)
        return self._vector


def _rank_records(
    candidates: list[_Candidate], query: str, query_vector: _QueryVector
) -> list[tuple[int, float]]:
    """(candidate position, score) best first, over the records alone.

    BM25 over the records' texts and cosine over their embeddings, fused by
    `collections_app.fusion.hybrid_scores` into one [0, 1] score. Only embeddings of the current
    model take part; a record without one scores 0 on the vector side. With no such embedding
    at all the query is not embedded and the ranking is lexical. Ties go by kind, then id, so
    the order is fully determined. Records scoring 0 are left out.
    """
    index = BM25Index.from_texts(candidate.text for candidate in candidates)
    query_terms = terms(query)
    bm25 = index.scores(query_terms)
    model = query_vector.embedder.model
    with_vectors = [
        row for row, c in enumerate(candidates) if c.embedding is not None and c.embedding_model == model
    ]
    cosine = None
    if with_vectors:
        vector = query_vector.get()
        if vector is not None:
            cosine = np.zeros(len(candidates), dtype=np.float64)
            matrix = np.stack([np.frombuffer(bytes(candidates[row].embedding), dtype="<f4") for row in with_vectors])
            cosine[with_vectors] = matrix @ np.asarray(vector, dtype=np.float32)
    scores, _mode = hybrid_scores(cosine, bm25, index.upper_bound(query_terms), weight=DEFAULT_WEIGHT)
    order = sorted(range(len(candidates)), key=lambda row: (-scores[row], candidates[row].kind, candidates[row].id))
    return [(row, float(scores[row])) for row in order if scores[row] > 0]


def opening(text: str, length: int = conf.OPENING_LENGTH) -> tuple[int, int]:
    """(0, end) of a record's opening: about `length` characters, ending at a word's end when possible."""
    if len(text) <= length:
        end = len(text)
    else:
        # Back to the last whitespace, unless that would give up more than half the opening.
        space = max(text.rfind(" ", 0, length + 1), text.rfind("\n", 0, length + 1))
        end = space if space >= length // 2 else length
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return 0, end


def _excerpts(
    chosen: list[_Candidate], query_vector: _QueryVector
) -> dict[tuple[str, int], dict]:
    """Each chosen record's excerpt: its node closest to the query (cosine), or its opening."""
    model = query_vector.embedder.model
    nodes: dict[tuple[str, int], list[tuple[int, int, int, bytes]]] = {}
    for kind in KINDS:
        ids = [c.id for c in chosen if c.kind == kind]
        if not ids:
            continue
        rows = RecordNode.objects.filter(
            parent_kind=kind, parent_id__in=ids, embedding_model=model, embedding__isnull=False
        ).order_by("parent_id", "node_index")
        for parent_id, index, start, end, embedding in rows.values_list(
            "parent_id", "node_index", "start_char", "end_char", "embedding"
        ):
            nodes.setdefault((kind, parent_id), []).append((index, start, end, bytes(embedding)))
    excerpts = {}
    for candidate in chosen:
        key = (candidate.kind, candidate.id)
        own = [node for node in nodes.get(key, []) if node[2] <= len(candidate.text)]
        vector = query_vector.get() if own else None
        if own and vector is not None:
            matrix = np.stack([np.frombuffer(node[3], dtype="<f4") for node in own])
            # argmax takes the first of equal scores: the earlier node wins a tie.
            index, start, end, _ = own[int(np.argmax(matrix @ np.asarray(vector, dtype=np.float32)))]
            excerpts[key] = {"text": candidate.text[start:end], "node_index": index, "start": start, "end": end}
        else:
            start, end = opening(candidate.text)
            excerpts[key] = {"text": candidate.text[start:end], "node_index": None, "start": start, "end": end}
    return excerpts


def recall(*, agent: Agent, query: str, most: int = conf.DEFAULT_MOST) -> list[dict]:
    """The agent's records that best answer `query`, best first, each quoted by an excerpt.

    Ranking is `_rank_records` over the records only; nodes then choose each excerpt (the
    record's most relevant node by cosine, with its node_index and offsets, or the record's
    opening when it has no nodes of the current model). Each result is
    `{"kind", "id", "score", "excerpt": {"text", "node_index", "start", "end"}}`.
    """
    query, most = validate_query(query, most)
    candidates = _agent_records(agent)
    if not candidates:
        return []
    query_vector = _QueryVector(query, conf.get_embedder())
    ranked = _rank_records(candidates, query, query_vector)[:most]
    chosen = [candidates[row] for row, _score in ranked]
    excerpts = _excerpts(chosen, query_vector)
    return [
        {
            "kind": candidate.kind,
            "id": candidate.id,
            "score": round(score, 6),
            "excerpt": excerpts[(candidate.kind, candidate.id)],
        }
        for candidate, (_row, score) in zip(chosen, ranked, strict=True)
    ]


# --- health --------------------------------------------------------------------------------------


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
    rows = record_model(kind).objects.all() if agent is None else record_model(kind).objects.filter(agent=agent)
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
            texts = record_model(kind).objects.filter(pk__in=recount[start : start + 200]).values_list("pk", "text")
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
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise RagsiteError("limit must be a whole number of at least 0", code="invalid_limit")
    embedder = conf.get_embedder()
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
    report["missing"] = [{"kind": k, "id": pk, "reason": why} for _c, k, pk, why in needing[: conf.REPORT_IDS]]
    report["missing_truncated"] = len(needing) > conf.REPORT_IDS
    if agent is None:
        report["orphan_nodes"] = _orphan_nodes().count()
    if repair:
        repaired = []
        for _created, kind, pk, _why in needing[:limit]:
            repaired.append(build_nodes(kind, pk).as_dict())
        report["repaired"] = repaired
        report["remaining"] = len(needing) - sum(1 for item in repaired if item["status"] in SETTLED)
        if agent is None and report["orphan_nodes"]:
            report["orphans_removed"] = _orphan_nodes().delete()[0]
    return report


def repair_all() -> dict:
    """The scheduled repair: the whole store, at most `REPAIR_LIMIT` records."""
    return check_health(repair=True, limit=conf.REPAIR_LIMIT)


# --- one record's nodes, for people (the admin) --------------------------------------------------

# What `node_state` says about one record's nodes.
NODES_CURRENT = "current"  # nodes of the current model and none of another: divided, nothing to do
NODES_STALE = "stale"  # holds nodes of another model: the repair replaces them (or removes them if it now fits)
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
    tokens = record.token_count if record.token_count is not None and record.embedding_model == model else None
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
    return _node_state(record, record_nodes(record.KIND, record.pk), conf.get_embedder())


def repair_records(records: Iterable[Record], *, limit: int = conf.REPAIR_LIMIT) -> dict:
    """Build the nodes of those `records` that need them, oldest first, at most `limit` (the admin's action).

    A record needs nodes when it runs past the window without nodes of the current model, or
    holds another model's nodes (`node_state`: missing or stale). Each is built by `build_nodes`,
    which never modifies the record. Answers `{"repaired": [build_nodes answers], "current": n,
    "fits": n, "unknown": n, "remaining": n}`: records already divided, records that need no
    nodes, records whose length cannot be counted, and records needing nodes past the limit.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise RagsiteError("limit must be a whole number of at least 0", code="invalid_limit")
    embedder = conf.get_embedder()
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
    repaired = [build_nodes(record.KIND, record.pk).as_dict() for record in needing[:limit]]
    return {
        "repaired": repaired,
        "current": counts[NODES_CURRENT],
        "fits": counts[NODES_NOT_NEEDED],
        "unknown": counts[NODES_UNKNOWN],
        "remaining": len(needing) - sum(1 for item in repaired if item["status"] in SETTLED),
    }


# --- export and import ---------------------------------------------------------------------------


def export_records(*, agent: Agent) -> Iterator[dict]:
    """The agent's records as JSON-ready dicts, oldest first. Nodes are not exported: they are derived."""
    rows: list[tuple[datetime, str, int, dict]] = []
    for kind, model in RECORD_MODELS.items():
        for pk, text, locked, created_at in model.objects.filter(agent=agent).values_list(
            "pk", "text", "locked", "created_at"
        ):
            rows.append((created_at, kind, pk, {"kind": kind, "text": text, "locked": locked,
                                                "created_at": created_at.isoformat()}))
    rows.sort(key=lambda row: row[:3])
    for *_key, item in rows:
        yield item


@dataclass(frozen=True)
class _ImportItem:
    kind: str
    text: str
    locked: bool
    created_at: datetime | None


def _parse_import_line(number: int, line: str) -> _ImportItem | None:
    def refuse(why: str) -> RagsiteError:
        return RagsiteError(f"line {number}: {why}; nothing was imported", code="invalid_import")

    if not line.strip():
        return None
    try:
        item = json.loads(line)
    except ValueError:
        raise refuse("not valid JSON") from None
    if not isinstance(item, dict):
        raise refuse("not a JSON object")
    kind = item.get("kind", "mem")
    if kind not in KINDS:
        raise refuse(f'kind must be one of {", ".join(KINDS)}')
    try:
        text = validate_text(item.get("text"))
    except RagsiteError as exc:
        raise refuse(exc.message) from None
    locked = item.get("locked", False)
    if not isinstance(locked, bool):
        raise refuse("locked must be true or false")
    created_at = None
    if item.get("created_at") is not None:
        created_at = parse_datetime(str(item["created_at"])) if isinstance(item["created_at"], str) else None
        if created_at is None:
            raise refuse("created_at must be an ISO 8601 date and time")
        if timezone.is_naive(created_at):
            created_at = timezone.make_aware(created_at, timezone.UTC)
    return _ImportItem(kind, text, locked, created_at)


def import_records(*, agent: Agent, lines: Iterable[str]) -> dict:
    """Import JSON lines written by `export_records` into `agent`'s store, all or nothing.

    Every line is checked before anything is embedded or written; a bad line refuses the whole
    file, naming the line. Records get new ids. Long records have their nodes queued, as a store
    would. Returns how many memories and episodes were imported and how many builds were queued.
    """
    items = [item for number, line in enumerate(lines, start=1) if (item := _parse_import_line(number, line))]
    prepared = _prepare_many([item.text for item in items], conf.get_embedder())
    now = timezone.now()
    counts = {"memories": 0, "episodes": 0, "nodes_queued": 0}
    with transaction.atomic():
        for kind, model in RECORD_MODELS.items():
            chosen = [(item, prep) for item, prep in zip(items, prepared, strict=True) if item.kind == kind]
            created = model.objects.bulk_create(
                model(
                    agent=agent,
                    text=item.text,
                    locked=item.locked,
                    token_count=prep.token_count,
                    embedding=prep.embedding,
                    embedding_model=prep.embedding_model,
                    created_at=item.created_at or now,
                    updated_at=now,
                )
                for item, prep in chosen
            )
            counts["memories" if kind == Memory.KIND else "episodes"] += len(created)
            for record, (_item, prep) in zip(created, chosen, strict=True):
                if prep.runs_past_window:
                    _queue_nodes(kind, record.pk)
                    counts["nodes_queued"] += 1
    return counts
