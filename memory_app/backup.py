"""The agent's memories in a backup archive: the part "memory" of an agent's archive (ragsite.backup).

Records keep their texts, vectors and times; their nodes and node passages come back under the new
records' ids, so a recall after a restore quotes the same excerpts without building anything again.
Registered from `MemoryConfig.ready`, so collections never import this app.
"""

from ragsite.backup import Part, fields_of, register_part, row_of

from .models import EPISODE, MEMORY, RECORD_MODELS, NodePassages, RecordNode
from .services.common import raise_generation

NODES, PASSAGES = "nodes.jsonl", "node_passages.jsonl"


def dump(agent) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    ids: dict[str, list[int]] = {}
    for kind, model in RECORD_MODELS.items():
        records = list(model.objects.filter(agent=agent).order_by("pk"))
        rows[f"{kind}.jsonl"] = [{"id": r.pk, **row_of(r, skip=("agent_id",))} for r in records]
        ids[kind] = [r.pk for r in records]
    for member, model in ((NODES, RecordNode), (PASSAGES, NodePassages)):
        found = []
        for kind in (MEMORY, EPISODE):
            query = model.objects.filter(parent_kind=kind, parent_id__in=ids[kind]) if ids[kind] else []
            found += [
                {
                    "parent_kind": n.parent_kind,
                    "parent_id": n.parent_id,
                    "node_index": n.node_index,
                    **row_of(n),
                }
                for n in sorted(query, key=lambda n: (n.parent_id, n.node_index))
            ]
        rows[member] = found
    return rows


def restore(agent, rows: dict[str, list[dict]]) -> None:
    new_ids: dict[str, dict[int, int]] = {}
    for kind, model in RECORD_MODELS.items():
        new_ids[kind] = {}
        for row in rows.get(f"{kind}.jsonl", []):
            # One at a time, without the save signal's node build: the nodes come from the archive.
            record = model(agent=agent, **fields_of(model, row, skip=("id",)))
            model.objects.bulk_create([record])
            if record.pk is None:
                record = model.objects.filter(agent=agent).order_by("-pk").first()
            new_ids[kind][row["id"]] = record.pk
    for member, model in ((NODES, RecordNode), (PASSAGES, NodePassages)):
        made = []
        for row in rows.get(member, []):
            parent = new_ids.get(row["parent_kind"], {}).get(row["parent_id"])
            if parent is None:
                continue  # a node whose record is not in the archive
            values = fields_of(model, row, skip=("parent_kind", "parent_id", "node_index"))
            made.append(
                model(
                    parent_kind=row["parent_kind"], parent_id=parent, node_index=row["node_index"], **values
                )
            )
        model.objects.bulk_create(made, batch_size=500)
    raise_generation(agent.pk)  # bulk writes send no signal: recall indexes read the agent afresh


def register() -> None:
    register_part(Part(name="memory", dump=dump, restore=restore))
