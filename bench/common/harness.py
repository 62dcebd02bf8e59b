"""What the retrieval-quality benchmarks share: a scratch store, collections built from folders, and
every paragraph of a collection ranked for a question through the real search service.

`setup()` must run before anything imports Django models. The scratch store is an SQLite file under
``data/bench/`` (gitignored), reused between runs: a rebuild of an unchanged folder embeds nothing,
and `bench.common.embedding_cache` keeps every vector by text, so a new store or another chunking of the
same texts only embeds what was never seen.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KNOWN_ANSWERS = ROOT / "bench" / "answers" / "dev_set"
SAMPLE_DOCS = ROOT / "collections_app" / "sample_docs"
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"  # overridable with --scifact
MODES = ("hybrid", "vector", "lexical")


def setup(
    store: str, *, backend: str | None = None, environ: dict[str, str] | None = None, context: bool = True
) -> None:
    """Point Django at the scratch store ``data/bench/<store>-<backend>.sqlite3`` and migrate it.

    ``context`` False indexes paragraphs without their title and section (the representation before
    collections_app/text/context.py), in a store of its own, to measure what context adds.
    """
    work = ROOT / "data" / "bench"
    work.mkdir(parents=True, exist_ok=True)
    backend = backend or os.environ.get("EMBED_BACKEND", "local")
    os.environ["EMBED_BACKEND"] = backend
    suffix = "" if context else "-nocontext"
    os.environ["DATABASE_URL"] = f"sqlite:///{work / f'{store}-{backend}{suffix}.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.update(environ or {})
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.common.embedding_cache import install

    install()
    if not context:
        from collections_app import measure
        from collections_app.services.builds import prepare

        def no_context(name, text, starts):
            return [""] * len(starts)

        prepare.contexts_for = measure.contexts_for = no_context


def load_items(path: Path = KNOWN_ANSWERS / "questions.jsonl") -> tuple[list[dict], list[str]]:
    """The dev set's answerable questions ({"question", "answer"}) and its controls (questions)."""
    questions, controls = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            (controls.append(item["question"]) if item.get("control") else questions.append(item))
    return questions, controls


def built_collection(
    name: str,
    folder: Path,
    *,
    method: str = "structure",
    size: int | None = None,
    overlap: int | None = None,
    analyzer: str = "simple",
):
    """The bench agent's collection ``name``, (re)built from ``folder`` the given way, its keyword leg
    reading words with ``analyzer`` (ragsite.analyzers; another than last run's rewrites only the index)."""
    from collections_app.conf import folder_variable
    from collections_app.models import Agent, Collection
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection

    os.environ[folder_variable(name, "bench")] = str(folder)
    agent = Agent.objects.filter(agent_id="bench").first() or create_agent(agent_id="bench")[0]
    collection = Collection.objects.filter(agent=agent, name=name).first() or create_collection(
        agent=agent,
        name=name,
        method=method,
        size=size,
        overlap=overlap,
        built_from=f"the {name} bench corpus",
    )
    if (collection.method, collection.size, collection.overlap, collection.analyzer) != (
        method,
        size,
        overlap,
        analyzer,
    ):
        collection.method, collection.size, collection.overlap = method, size, overlap
        collection.analyzer = analyzer
        collection.save()
    run = build_collection(collection=collection, requested_by="bench")
    if run.status not in ("succeeded", "succeeded_with_review"):
        raise SystemExit(f"build of {name} {run.status}: {run.error}")
    # A person would read and approve what the review flagged (one PostgreSQL chapter's examples
    # differ only in their numbers, which the conflict check takes for a near-duplicate).
    from collections_app.models import Document
    from collections_app.services.review import approve_documents

    held = list(Document.objects.filter(collection=collection, status=Document.NEEDS_REVIEW))
    if held:
        approve_documents(held)
        print(f"# {name}: approved {', '.join(d.name for d in held)} (held for review)", file=sys.stderr)
    print(
        f"# {name}: {run.passages} paragraphs, {run.paragraphs_embedded} embedded, "
        f"{run.documents_reused} documents reused, model {run.model}",
        file=sys.stderr,
    )
    return agent, collection


def normalise(text: str) -> str:
    from collections_app.measure import normalise as measure_normalise

    return measure_normalise(text)


@dataclass
class Ranked:
    """Every paragraph of a collection for one question, best first, unfloored and unstitched."""

    texts: list[str]
    scores: list[float]
    documents: list[str]

    def best_holding(self, marker: str) -> tuple[int | None, float | None]:
        """(0-based rank, score) of the best paragraph holding ``marker``; (None, None) if none does."""
        wanted = normalise(marker)
        for position, text in enumerate(self.texts):
            if wanted in normalise(text):
                return position, self.scores[position]
        return None, None

    @property
    def top(self) -> float:
        return self.scores[0] if self.scores else 0.0


def rank_all(agent, collection, question: str, *, mode: str | None = None) -> Ranked:
    """The whole collection ranked for ``question`` by `search_collection`: floor 0, around 0.

    Each hit's text is its paragraph's whole text, read by its chunk id: the answer's character budget
    shortens hits past the first thirty or so to their least part, which may leave out the marker of an
    answer the ranking did put there (floor.py asks where the answer ranks, not what an answer quotes).
    """
    from collections_app.models import Paragraph
    from collections_app.services.search import search_collection

    rows = (
        Paragraph.objects.filter(collection=collection)
        .select_related("document")
        .only("text", "index", "document__name")
    )
    whole = {row.chunk_id: row.text for row in rows}
    size = len(whole)
    answer = search_collection(
        agent=agent,
        collection=collection,
        question=question,
        most=size,
        around=0,
        min_score=0.0,
        mode=mode,
        max_most=size,
    )
    paragraphs = answer["paragraphs"]
    return Ranked(
        [whole[p["chunk_id"]] for p in paragraphs],
        [p["score"] for p in paragraphs],
        [p["document"] for p in paragraphs],
    )


def ask(
    agent,
    collection,
    question: str,
    *,
    mode: str | None = None,
    most: int = 10,
    min_score: float | None = None,
    max_chars: int | None = None,
) -> list[dict]:
    """The paragraphs an agent gets: the collection's (or default) floor, around and budget unless told."""
    from collections_app.services.search import search_collection

    answer = search_collection(
        agent=agent,
        collection=collection,
        question=question,
        most=most,
        min_score=min_score,
        mode=mode,
        max_chars=max_chars,
    )
    return answer["paragraphs"]


def found_rank(paragraphs: list[dict], marker: str, document: str | None = None) -> int | None:
    """1-based position of the first returned paragraph holding ``marker`` (as `measure` compares); with
    ``document`` (a file name without its suffix), only a paragraph of that document counts: on a shelf
    of close versions (the licence shelf) the same sentence of another version is not the answer."""
    wanted = normalise(marker)
    for position, paragraph in enumerate(paragraphs, start=1):
        if document is not None and PurePosixPath(paragraph["document"]).stem != document:
            continue
        if wanted in normalise(paragraph["text"]):
            return position
    return None
