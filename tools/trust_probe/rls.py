"""tools/trust_probe/probe.py's `rls` family (PostgreSQL only): deliberately unfiltered queries on every
agent-scoped table inside agent B's row-level-security scope — a request's, and inside B's own
build task and node-building task as a django-q worker runs them. Leaked = a row of agent A.
Run by `tools/trust_probe/probe.py`, in its child, after the world it builds; not a script of its own."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def rls_family(tally) -> None:
    from collections_app.models import (
        BuildRun,
        Collection,
        CollectionBuilt,
        Document,
        KnownAnswer,
        KnownAnswersReport,
        MeasureRun,
        ModelCall,
        Paragraph,
    )
    from collections_app.services import known_answers, measure
    from memory_app.models import Episode, Memory, RecordNode
    from ragsite.rls import agent_scope

    # Agent A's questions and history, for the tables that hold them: known answers (measured at
    # once, Q_SYNC), a report, a measure run.
    alpha = Collection.objects.get(agent__agent_id="agent-a", name="alpha")
    known_answers.set_known_answers(
        collection=alpha, items=[{"question": "how long is carry-over", "answer": "7 days"}]
    )
    measure.request_measure(
        collection=alpha, questions=[{"question": "carry-over", "answer": "7 days"}], enqueue=False
    )
    a_collections = {
        pk: "agent-a"
        for pk in Collection.objects.filter(agent__agent_id="agent-a").values_list("pk", flat=True)
    }

    def by_collection(
        model,
    ):  # the row's own column, no join (a join through a collection is filtered by its policy)
        return lambda: [
            a_collections.get(pk, "other")
            for pk in model.objects.order_by().values_list("collection_id", flat=True)
        ]

    queries = {
        "paragraphs": lambda: Paragraph.objects.values_list("agent_id", flat=True),
        "collections": lambda: Collection.objects.values_list("agent__agent_id", flat=True),
        "documents": lambda: Document.objects.values_list("collection__agent__agent_id", flat=True),
        "built": lambda: CollectionBuilt.objects.values_list("agent_id", flat=True),
        "ledger": lambda: ModelCall.objects.values_list("agent__agent_id", flat=True),
        "memories": lambda: Memory.objects.values_list("agent__agent_id", flat=True),
        "episodes": lambda: Episode.objects.values_list("agent__agent_id", flat=True),
        "nodes": lambda: RecordNode.objects.values_list("parent_id", flat=True),
        "build runs": by_collection(BuildRun),
        "measure runs": by_collection(MeasureRun),
        "known answers": by_collection(KnownAnswer),
        "known-answer reports": by_collection(KnownAnswersReport),
    }
    a_memories = set(Memory.objects.filter(agent__agent_id="agent-a").values_list("pk", flat=True))

    def tally_scope(where: str, seen_by_name: dict) -> None:
        for name, seen in seen_by_name.items():
            leaked = "agent-a" in seen or (name == "nodes" and bool(seen & a_memories))
            tally.count(
                "rls", leaked=leaked, note=f"{name}: agent B's {where} saw {sorted(map(str, seen))[:5]}"
            )

    with agent_scope("agent-b"):
        tally_scope("request scope", {name: set(query()) for name, query in queries.items()})
    inside = _inside_agent_b_tasks(queries)
    for where in ("build task", "node task"):
        if where in inside:
            tally_scope(where, inside[where])
        else:  # the query never ran inside the task: nothing was shown, which is a probe failure
            tally.count("rls", failed=True, note=f"agent B's {where} did not reach its unfiltered queries")


def _inside_agent_b_tasks(queries) -> dict[str, dict]:
    """The same unfiltered queries run from inside agent B's own build task and node-building task,
    called as a django-q worker calls them (each in B's task scope, over several transactions)."""
    from collections_app import tasks as collection_tasks
    from collections_app.services import builds
    from collections_app.services.agents import create_collection, get_agent
    from memory_app import tasks as memory_tasks
    from memory_app.models import MEMORY
    from memory_app.services import nodes, store_memory

    seen: dict[str, dict] = {}

    def peek(where, real):
        def wrapper(*args, **kwargs):
            seen[where] = {name: set(query()) for name, query in queries.items()}
            return real(*args, **kwargs)

        return wrapper

    folder = Path(tempfile.mkdtemp(prefix="ragsite-trust-beta-"))
    (folder / "beta.md").write_text("# Beta\n\nAgent B's own note, built by its own task.")
    os.environ["KNOWLEDGE_AGENT_B__BETA_FOLDER"] = str(folder)
    b = get_agent("agent-b")
    run = builds.request_build(collection=create_collection(agent=b, name="beta"), enqueue=False)
    memory, _nodes = store_memory(agent=b, text="Agent B's memory. " * 400)
    real_review, real_nodes = builds._review, nodes.build_nodes
    builds._review, nodes.build_nodes = peek("build task", real_review), peek("node task", real_nodes)
    try:
        collection_tasks.run_build(run.pk)
        memory_tasks.build_record_nodes(MEMORY, memory.pk)
    finally:
        builds._review, nodes.build_nodes = real_review, real_nodes
    return seen
