"""A stored record's own vector, made by a task after the store has answered.

A store counts the record's tokens and writes it at once, naming in `embedding_model` the model
that will embed it; `embed_vector` (the task `embed_record_vector`, or the health repair for a
task that never ran) embeds the text and writes the vector, unless the text changed meanwhile.
Until then recall scores the record by its words alone.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass

from django.db import transaction

from collections_app.models import Agent
from ragsite import embedding
from ragsite.embedders import EmbeddingError
from ragsite.rls import task_scope

from ..models import KINDS
from .common import (
    BUILT,
    CHANGED,
    FAILED,
    GONE,
    PRESENT,
    _can_embed,
    _vector_bytes,
    raise_generation,
    record_model,
)
from .nodes import agent_id_of_record

logger = logging.getLogger("memory_app")


@dataclass(frozen=True)
class VectorBuild:
    kind: str
    id: int
    status: str  # built, present, changed, gone, unknown (nothing can embed it), failed

    def as_dict(self) -> dict:
        return asdict(self)


def embed_vector(kind: str, id: int) -> VectorBuild:
    """Embed one record's text and write its vector; the record's text and nodes are left as they are."""
    model = record_model(kind)
    row = model.objects.filter(pk=id).values_list("text", "embedding", "embedding_model").first()
    if row is None:
        return VectorBuild(kind, id, GONE)
    text, vector, by = row
    embedder = embedding.get_embedder()
    if vector is not None and by == embedder.model:
        return VectorBuild(kind, id, PRESENT)
    if not _can_embed(embedder):
        return VectorBuild(kind, id, "unknown")
    try:
        data = _vector_bytes(embedder.embed([text])[0])
    except EmbeddingError as exc:
        logger.warning("embedding %s:%s failed: %s", kind, id, exc)
        return VectorBuild(kind, id, FAILED)
    with transaction.atomic():
        current = model.objects.select_for_update().filter(pk=id).values_list("text", "agent_id").first()
        if current is None:
            return VectorBuild(kind, id, GONE)
        if current[0] != text:
            return VectorBuild(kind, id, CHANGED)  # the change made its own vector
        model.objects.filter(pk=id).update(embedding=data, embedding_model=embedder.model)
        raise_generation(current[1], changed=[(kind, id)])
    return VectorBuild(kind, id, BUILT)


def embed_vector_for_agent(kind: str, id: int) -> VectorBuild:
    """`embed_vector` in the record's agent's row-level security scope (the task, the repair)."""
    with task_scope(agent_id_of_record(kind, id)):
        return embed_vector(kind, id)


def waiting_for_vectors(agent: Agent | None) -> list[tuple[str, int]]:
    """(kind, id) of the records, oldest first, whose vector the current model has still to make."""
    embedder = embedding.get_embedder()
    if not _can_embed(embedder):
        return []
    waiting = []
    for kind in KINDS:
        rows = record_model(kind).objects.filter(embedding__isnull=True, embedding_model=embedder.model)
        if agent is not None:
            rows = rows.filter(agent=agent)
        waiting += [(created, kind, pk) for pk, created in rows.values_list("pk", "created_at")]
    return [(kind, pk) for _created, kind, pk in sorted(waiting)]
