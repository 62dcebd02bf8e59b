"""Reading an agent's records, nodes and passages into its recall index (`services.recall`'s cache):
all of them, or those a few recent writes changed."""

from __future__ import annotations

import logging
import math
from itertools import chain

import numpy as np

from collections_app.models import Agent
from ragsite.analyzers import analyzer

from ..models import KINDS, RECORD_MODELS, NodePassages, RecordNode
from ..nodes import runs_past_window
from ..recall_index import NodeRow, RecallIndex, RecordRow
from .common import recent_changes

logger = logging.getLogger("memory_app")


def _vector(data, model_of_row: str, model: str) -> np.ndarray | None:
    if data is None or model_of_row != model:
        return None
    return np.frombuffer(bytes(data), dtype="<f4")


def _read(agent: Agent, model: str, window: int | None, keys: set[tuple[str, int]] | None) -> list[RecordRow]:
    """The agent's records (all, or those of `keys` that still exist) with their nodes of `model`.

    A record is pending when `model` counted it past `window` (its nodes are queued or being rebuilt);
    it stops being pending once it holds nodes of `model`.
    """
    records: list[RecordRow] = []
    for kind, record_class in RECORD_MODELS.items():
        rows = record_class.objects.filter(agent=agent)
        nodes = RecordNode.objects.filter(parent_kind=kind, embedding_model=model, embedding__isnull=False)
        if keys is not None:
            wanted = sorted(id for key_kind, id in keys if key_kind == kind)
            if not wanted:
                continue
            rows = rows.filter(pk__in=wanted)
            nodes = nodes.filter(parent_id__in=wanted)
        else:
            nodes = nodes.filter(parent_id__in=record_class.objects.filter(agent=agent).values("pk"))
        order = KINDS.index(kind)
        these = {
            pk: RecordRow(
                kind,
                pk,
                order,
                text,
                _vector(data, by, model),
                pending=by == model and runs_past_window(tokens, window),
                created=created_at.timestamp(),
                valid_from=-math.inf if valid_from is None else valid_from.timestamp(),
                valid_until=math.inf if valid_until is None else valid_until.timestamp(),
                tags=tuple(tags or ()),
            )
            for pk, text, data, by, tokens, created_at, valid_from, valid_until, tags in rows.order_by(
                "pk"
            ).values_list(
                "pk",
                "text",
                "embedding",
                "embedding_model",
                "token_count",
                "created_at",
                "valid_from",
                "valid_until",
                "tags",
            )
        }
        passages = NodePassages.objects.filter(parent_kind=kind, embedding_model=model)
        passages = (
            passages.filter(parent_id__in=wanted)
            if keys is not None
            else passages.filter(parent_id__in=record_class.objects.filter(agent=agent).values("pk"))
        )
        passages_of = {
            (parent_id, index): (bounds, data)
            for parent_id, index, bounds, data in passages.values_list(
                "parent_id", "node_index", "bounds", "embeddings"
            )
        }
        for parent_id, index, start, end, data in nodes.order_by("parent_id", "node_index").values_list(
            "parent_id", "node_index", "start_char", "end_char", "embedding"
        ):
            record = these.get(parent_id)
            if record is None:
                continue
            node = NodeRow(index, start, end, _vector(data, model, model))
            bounds, passage_data = passages_of.get((parent_id, index), (None, None))
            if bounds is not None:
                bounds = np.frombuffer(bytes(bounds), dtype="<i4").tolist()
                # Passages of an older division of the text (not yet rebuilt) are not this node's.
                if bounds[0] == start and bounds[-1] == end:
                    node.passages = list(zip(bounds[:-1], bounds[1:], strict=True))
                    if passage_data is not None and node.vector is not None:
                        node.passage_vectors = list(
                            np.frombuffer(bytes(passage_data), dtype="<f2")
                            .astype(np.float32)
                            .reshape(len(node.passages), node.vector.size)
                        )
            record.nodes.append(node)
        records.extend(these.values())
    return records


def _width(records: list[RecordRow]) -> int:
    for record in records:
        for vector in chain([record.vector], (node.vector for node in record.nodes)):
            if vector is not None:
                return vector.size
    return 0


def _load(agent: Agent, analyzer_name: str, records: list[RecordRow]) -> RecallIndex:
    index = RecallIndex(_width(records), analyzer(analyzer_name).terms)
    index.put(records)
    logger.debug(
        "recall index of %s: %d records, %d nodes", agent.agent_id, index.size, index.node_owner.size
    )
    return index


def _update(agent: Agent, cached, generation: int) -> bool:
    """Replace the records changed since the cached generation in `cached` (`services.recall.AgentIndex`);
    False when they are not known."""
    keys = recent_changes(agent.pk, cached.generation, generation)
    if keys is None:
        return False
    records = _read(agent, cached.model, cached.window, keys)
    width = _width(records)
    if width and width != cached.index.width:  # the first vectors, or another width: start again
        return False
    for kind, id in keys:
        cached.index.drop(kind, id)
    cached.index.put(records)
    return True
