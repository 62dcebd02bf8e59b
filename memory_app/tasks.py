"""django-q2 tasks: thin adapters that take ids and call one service.

Node building runs in the record's agent's row-level security scope (ragsite.rls.task_scope).
The scheduled repair surveys every agent's records and removes orphan nodes, which have no agent,
as the tables' owner; it builds each record's nodes in that record's agent's scope."""

from ragsite import tracing

from . import services


@tracing.continues_trace
def build_record_nodes(kind: str, id: int) -> dict:
    """Build the nodes of one record (queued when a long record is stored, changed or imported)."""
    return services.build_nodes_for_agent(kind, id).as_dict()


@tracing.continues_trace
def embed_record_vector(kind: str, id: int) -> dict:
    """Embed a stored record's own text (queued by a store, which answers before the vector exists)."""
    return services.embed_vector_for_agent(kind, id).as_dict()


def repair_record_nodes() -> dict:
    """The scheduled health repair: at most REPAIR_LIMIT records per run; returns a short summary."""
    report = services.repair_all()
    return {
        "missing_nodes": report["missing_nodes"],
        "repaired": len(report["repaired"]),
        "remaining": report["remaining"],
        "missing_triggers": report["missing_triggers"],
    }
