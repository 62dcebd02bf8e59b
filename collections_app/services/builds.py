"""Building a collection: read, extract, chunk, embed — then one short transaction that replaces it.

The slow work (reading files, extracting text, embedding) happens before any
write to the collection. The swap itself is one transaction, so a reader sees
the old collection until the moment it sees the whole new one, and a build that
fails half way leaves the collection exactly as it was, still answering.
"""

import hashlib
import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ragsite import embedding
from ragsite.embedders import EmbeddingError
from ragsite.errors import Conflict, RagsiteError

from ..errors import BuildRefused, EmptyBuild
from ..interchange import fingerprint as text_fingerprint
from ..models import (
    Agent,
    BuildRun,
    Collection,
    CollectionBuilt,
    Document,
    ModelCall,
    Paragraph,
)
from ..text.chunking import MAX_PARAGRAPHS_PER_DOCUMENT, ChunkingError, chunk
from ..text.context import CONTEXT_VERSION, contexts_for, embedding_text
from ..text.extract import BAD_NAME, CORRUPT, EMPTY, TIMED_OUT, TOO_LARGE, Unreadable, summarize_opening
from ..text.stitch import carried_openings, fresh_text
from ..text.windows import embed_in_windows
from . import indexes, kept_labels, known_answers, webhooks
from .knowledge import require_source
from .leases import ACTIVE_STATES, STALE_MESSAGE, Heartbeat, LeaseLost, check_lease, fail_stale_builds
from .sources import collection_sources, document_extractor, read_bounded

__all__ = ["STALE_MESSAGE", "build_collection", "fail_stale_builds", "request_build", "run_build"]

logger = logging.getLogger("ragsite.builds")


# --- Starting and sweeping --------------------------------------------------


def request_build(*, collection: Collection, requested_by: str = "", enqueue: bool = True) -> BuildRun:
    """Queue a build of `collection`; refuse while another is queued or running.

    The task is enqueued when this transaction commits, so the worker never
    looks for a BuildRun that is not there yet.
    """
    fail_stale_builds()
    # A source this process cannot see would fail in the worker too: refuse now, not after queueing.
    require_source(collection)
    with transaction.atomic():
        # Lock the collection row so two requests cannot both see "no build running".
        Collection.objects.select_for_update().filter(pk=collection.pk).first()
        running = collection.runs.filter(status__in=ACTIVE_STATES).first()
        if running is not None:
            raise Conflict(f'a build of "{collection.name}" is already {running.status} (build {running.pk})',
                           code="build_running")
        # A new generation: whatever build held the previous one can no longer commit.
        Collection.objects.filter(pk=collection.pk).update(build_generation=F("build_generation") + 1)
        generation = Collection.objects.filter(pk=collection.pk).values_list("build_generation", flat=True).get()
        run = BuildRun.objects.create(collection=collection, requested_by=requested_by[:200],
                                      heartbeat_at=timezone.now(), generation=generation)
        if enqueue:
            transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(build_id: int) -> None:
    from django_q.tasks import async_task

    async_task("collections_app.tasks.run_build", build_id, task_name=f"build-{build_id}")


# --- The build --------------------------------------------------------------


@dataclass
class Prepared:
    """One document after the slow work, before anything is written."""

    name: str
    kind: str
    fingerprint: str
    status: str = Document.ACTIVE
    refusal: str = ""  # extract.REFUSAL_REASONS, when refused
    reused: bool = False
    stored: bool = True  # False for a name the store cannot hold: refused by name, no Document row
    summary: str = ""
    warnings: list[str] = field(default_factory=list)  # scan warnings: they send the document to review
    attributes: dict = field(default_factory=dict)  # from its sidecar (sources.Source.attributes)
    notes: list[str] = field(default_factory=list)  # told on the build, without sending it to review
    conflicts: list[str] = field(default_factory=list)
    pieces: list = field(default_factory=list)  # chunking.Piece
    kept: int = 0  # paragraphs a reused document already has
    tokens: list = field(default_factory=list)
    vectors: list = field(default_factory=list)  # bytes | None per piece
    contexts: list = field(default_factory=list)  # "title › section" per piece (context.py)
    carried: list = field(default_factory=list)  # per piece, the characters it shares with earlier pieces


class Progress:
    """Writes progress and a heartbeat to the BuildRun, at most every half second."""

    def __init__(self, run: BuildRun, report: Callable[[BuildRun], None] | None = None):
        self.run, self.report, self._last = run, report, 0.0

    def save(self, force: bool = False, **fields) -> None:
        for name, value in fields.items():
            setattr(self.run, name, value)
        now = time.monotonic()
        if force or now - self._last >= 0.5:
            self._last = now
            self.run.heartbeat_at = timezone.now()
            updated = BuildRun.objects.filter(pk=self.run.pk, status=BuildRun.RUNNING).update(
                heartbeat_at=self.run.heartbeat_at,
                documents_total=self.run.documents_total,
                documents_done=self.run.documents_done,
                paragraphs_total=self.run.paragraphs_total,
                paragraphs_done=self.run.paragraphs_done,
            )
            if not updated:
                # Failed by the sweep while this worker was busy: stop now rather than at the commit.
                raise LeaseLost(f"build {self.run.pk} was marked failed while it ran; it stopped without writing")
        if self.report:
            self.report(self.run)


def run_build(build_id: int, *, report: Callable[[BuildRun], None] | None = None) -> BuildRun:
    """Carry out a queued build. Never raises for a refusal or failure: the BuildRun records it."""
    run = BuildRun.objects.select_related("collection__agent").get(pk=build_id)
    if run.status != BuildRun.QUEUED:
        return run
    run.status, run.started_at, run.heartbeat_at = BuildRun.RUNNING, timezone.now(), timezone.now()
    run.save(update_fields=["status", "started_at", "heartbeat_at"])
    collection, announce = run.collection, True
    try:
        with Heartbeat(run):
            _build(collection, run, Progress(run, report))
    except LeaseLost as exc:
        # Keep what the sweep wrote (status failed, its message) where it wrote it; it told the webhooks.
        announce = bool(BuildRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATES).update(
            status=BuildRun.FAILED, finished_at=timezone.now(), error=str(exc)[:2000]))
        run.refresh_from_db()
        logger.warning("build %s of %s/%s rolled back: %s", run.pk, collection.agent.agent_id, collection.name, exc)
    except (RagsiteError, ChunkingError, EmbeddingError) as exc:
        status = BuildRun.REFUSED if isinstance(exc, BuildRefused) else BuildRun.FAILED
        _finish(run, status, error=str(exc))
        logger.warning("build %s of %s/%s %s: %s", run.pk, collection.agent.agent_id, collection.name, status, exc)
    except Exception as exc:
        _finish(run, BuildRun.FAILED, error=f"unexpected {type(exc).__name__}; see the server log")
        logger.exception("build %s of %s/%s failed", run.pk, collection.agent.agent_id, collection.name)
    if announce:
        webhooks.build_finished(run=run)
    return run


def build_collection(*, collection: Collection, requested_by: str = "", report=None) -> BuildRun:
    """Request a build and carry it out in this process (the command's --sync and the tests)."""
    run = request_build(collection=collection, requested_by=requested_by, enqueue=False)
    return run_build(run.pk, report=report)


def _finish(run: BuildRun, status: str, *, error: str = "") -> None:
    run.status, run.error, run.finished_at = status, error[:2000], timezone.now()
    run.save()


def _build(collection: Collection, run: BuildRun, progress: Progress) -> None:
    embedder = embedding.get_embedder()
    method = collection.method
    size, overlap = collection.chunk_sizes()
    previous = CollectionBuilt.objects.filter(collection=collection).first()
    sources = collection_sources(collection)
    existing = {d.name: d for d in collection.documents.all()}
    progress.save(force=True, documents_total=len(sources))

    run.model, run.dimensions = embedder.model, embedder.dimensions
    if previous is not None:
        run.previous_model = previous.model
        if (previous.model, previous.dimensions) != (embedder.model, embedder.dimensions):
            run.problems.append(
                f"the model changed from {previous.model} ({previous.dimensions} dimensions) "
                f"to {embedder.model} ({embedder.dimensions} dimensions); every paragraph is embedded again"
            )

    prepared: list[Prepared] = []
    extractor = document_extractor()
    for number, source in enumerate(sources, start=1):
        prepared.append(
            _prepare(source, existing.get(source.name), collection, embedder, method, size, overlap, run, extractor)
        )
        progress.save(documents_done=min(number, len(sources) - 1))  # the last: with the paragraphs to embed

    _review(prepared, collection)
    # Embeddings already made by this model, by text fingerprint: an edited
    # document only re-embeds the paragraphs whose text changed.
    changed = any(not p.reused and p.status != Document.REFUSED for p in prepared)
    known_vectors = _known_vectors(collection, embedder.model) if changed else {}
    _embed_missing(prepared, embedder, known_vectors, run, progress, collection)

    refused = [p.name for p in prepared if p.status == Document.REFUSED]
    # What the build knew is kept on the run even when the build is refused below (seed 000).
    run.refused, run.documents_refused = refused, len(refused)
    run.refusal_reasons = {p.name: p.refusal for p in prepared if p.status == Document.REFUSED}
    run.warnings += [note for p in prepared for note in p.notes]
    passages = sum(len(p.pieces) + p.kept for p in prepared if p.status != Document.REFUSED)
    if passages == 0:
        raise EmptyBuild(f'the build of "{collection.name}" produced no paragraphs; '
                         "the collection keeps its current ones")
    held = [p for p in prepared if p.status == Document.NEEDS_REVIEW and not _approved(p, existing)]
    searchable = passages - sum(len(p.pieces) + p.kept for p in held)
    if searchable == 0 and Paragraph.objects.searchable(collection).exists():
        # Seed 000, refusal 3: paragraphs no reader may search would replace a collection that answers.
        run.warnings += _review_warnings(held)
        raise EmptyBuild(
            f'the build of "{collection.name}" would leave nothing readers could search: every document needs '
            f"review ({', '.join(p.name for p in held)}); the collection keeps its current ones"
        )
    # Known answers: measured from the candidate before the swap only when a gate may refuse it;
    # otherwise by a task once the swap has committed, so the build never waits for them.
    measured = known_answers.gate_build(collection=collection, run=run,
                                        candidate=lambda: _candidate_paragraphs(collection, prepared, existing))
    _commit(collection, run, prepared, existing, embedder, refused, previous)
    known_answers.after_build(run=run, measured=measured)


def _approved(item: "Prepared", existing: dict[str, Document]) -> bool:
    """A person approved this very version of the document, so it stays searchable despite its review."""
    document = existing.get(item.name)
    return document is not None and bool(document.approved_fingerprint) and document.approved_fingerprint == item.fingerprint


def _review_warnings(items) -> list[str]:
    return [f"{item.name} needs review: {'; '.join(item.warnings + item.conflicts)}" for item in items]


def _known_vectors(collection: Collection, model: str) -> dict[tuple[str, str, int], bytes]:
    """Vectors this model made, by what they embed: text fingerprint, context, carried characters left out.
    One built before CONTEXT_VERSION 2 embedded its whole text: reused only where nothing is carried."""
    rows = (Paragraph.objects.filter(collection=collection, document__built_model=model).order_by("ordinal")
            .values_list("document_id", "start_char", "end_char", "fingerprint", "context", "embedding",
                         "document__built_context"))
    known, current = {}, []  # current: the row carried_openings is at (it reads one row a step)

    def positions():
        for row in rows.iterator(chunk_size=2000):
            current[:] = [row]
            yield row[:3]

    for carried, _first in carried_openings(positions()):
        _document, _start, _end, fp, context, vector, version = current[0]
        if vector is not None and (version >= CONTEXT_VERSION or carried == 0):
            known[(fp, context, carried)] = vector
    return known


def _prepare(source, document, collection, embedder, method, size, overlap, run, extractor) -> Prepared:
    try:
        data = read_bounded(source)
    except Unreadable as exc:
        item = Prepared(name=source.name, kind=source.kind, fingerprint="", stored=exc.category != BAD_NAME)
        return _refuse(item, collection, exc.reason, exc.category, run)
    except OSError as exc:
        logger.warning("document %r in %s/%s could not be opened: %s", source.name, collection.agent.agent_id,
                       collection.name, exc.strerror or type(exc).__name__)
        return Prepared(name=source.name, kind=source.kind, fingerprint="", status=Document.REFUSED, refusal=CORRUPT)
    fingerprint = hashlib.sha256(data).hexdigest()
    item = Prepared(name=source.name, kind=source.kind, fingerprint=fingerprint, **source.carried())
    unchanged = (
        document is not None
        and document.status != Document.REFUSED
        and document.fingerprint == fingerprint
        and (document.built_method, document.built_size, document.built_overlap, document.built_model,
             document.built_context) == (method, size, overlap, embedder.model, CONTEXT_VERSION)
    )
    if unchanged:
        item.reused, item.kept = True, document.paragraph_count
        item.summary, item.warnings = document.summary, list(document.scan_warnings)
        run.documents_reused += 1
        return item
    try:
        extracted = extractor.extract(source.name, data)
    except Unreadable as exc:
        return _refuse(item, collection, exc.reason, exc.category, run)
    del data
    pieces = chunk(extracted.text, method, size=size, overlap=overlap, tokens=embedder)
    item.warnings = list(extracted.warnings)
    if getattr(pieces, "truncated", False):
        # Seed 003 keeps the first 240 and says why; the document stays searchable, so this is not
        # a scan warning (which would hold all of it back for review).
        item.notes.append(
            f"{source.name}: only the first {MAX_PARAGRAPHS_PER_DOCUMENT} of "
            f"{MAX_PARAGRAPHS_PER_DOCUMENT + pieces.dropped} paragraphs were kept; a document that needs more "
            "is a document that should be several sources"
        )
    item.pieces = list(pieces)
    item.contexts = contexts_for(source.name, extracted.text, [p.start for p in item.pieces])
    item.carried = [length for length, _first in carried_openings((0, p.start, p.end) for p in item.pieces)]
    item.tokens = [embedder.count_tokens(p.text) for p in item.pieces]
    item.summary = summarize_opening(extracted.text)
    if not item.pieces:
        return _refuse(item, collection, "no text", EMPTY)
    run.documents_read += 1
    return item


def _refuse(item: Prepared, collection: Collection, reason: str, category: str,
            run: BuildRun | None = None) -> Prepared:
    # The detailed reason goes to the server log, with the document's name (escaped: a name can
    # hold a newline that would forge a log line) but never its path; the category (a word from
    # extract.REFUSAL_REASONS) is what the store keeps and people see.
    logger.warning("document %r in %s/%s was refused (%s): %s", item.name, collection.agent.agent_id,
                   collection.name, category, reason)
    if run is not None and category in (TOO_LARGE, TIMED_OUT, BAD_NAME):
        # Limits a person may want to raise, or a file to rename: said in the build's history.
        run.warnings.append(f"{item.name} was refused ({category}): {reason}")
    item.status, item.pieces, item.refusal = Document.REFUSED, [], category
    return item


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
BLOCK_BREAK = re.compile(r"\n[ \t]*\n")


def _review(prepared: list[Prepared], collection: Collection) -> None:
    """Seed 003's review: scan warnings and detected conflicts put a document in needs_review."""
    readable = [p for p in prepared if p.status != Document.REFUSED]
    by_fingerprint: dict[str, list[str]] = {}
    for item in readable:
        by_fingerprint.setdefault(item.fingerprint, []).append(item.name)
    for item in readable:
        twins = [n for n in by_fingerprint[item.fingerprint] if n != item.name]
        if twins:
            item.conflicts.append(f"exact duplicate of {', '.join(twins)}")

    # Near-identical paragraphs that differ only in their numbers ("five days" vs "ten days" is
    # a different sentence; "5 days" vs "10 days" is caught here). Reused documents take part
    # through their stored paragraphs.
    shapes: dict[str, list[tuple[str, str]]] = {}
    stored = _stored_texts(collection, [item.name for item in readable if item.reused])
    for item in readable:
        texts = stored.get(item.name, []) if item.reused else [p.text for p in item.pieces]
        for block in (b for text in texts for b in BLOCK_BREAK.split(text)):
            block = " ".join(line for line in block.splitlines() if not line.lstrip().startswith("#"))
            if NUMBER.search(block) and len(block) >= 40:
                shapes.setdefault(NUMBER.sub("#", " ".join(block.split())), []).append((item.name, block))
    for entries in shapes.values():
        if len({" ".join(t.split()) for _n, t in entries}) < 2:
            continue
        names = sorted({n for n, _t in entries})  # one name: repeats inside a man page or changelog, not a conflict
        for item in (item for item in readable if len(names) > 1 and item.name in names):
            others = [n for n in names if n != item.name]
            item.conflicts.append(f"a paragraph matches one in {', '.join(others)} except for its numbers")
    for item in readable:
        item.conflicts = sorted(set(item.conflicts))
        if item.warnings or item.conflicts:
            item.status = Document.NEEDS_REVIEW


def _stored_texts(collection: Collection, names: list[str]) -> dict[str, list[str]]:
    """The stored paragraph texts of reused documents, by document name, in one query."""
    texts: dict[str, list[str]] = defaultdict(list)
    wanted = set(names)
    if wanted:
        # One scan of the collection rather than an IN list that could outgrow SQLite's variable limit.
        rows = Paragraph.objects.filter(collection=collection).order_by("ordinal")
        for name, text in rows.values_list("document__name", "text").iterator(chunk_size=2000):
            if name in wanted:
                texts[name].append(text)
    return texts


def _embed_missing(prepared, embedder, known_vectors, run, progress, collection) -> None:
    todo: list[tuple[Prepared, int]] = []
    lexical_only = embedder.backend == "none"
    for item in prepared:
        if item.reused or item.status == Document.REFUSED:
            continue
        item.vectors = [None] * len(item.pieces)
        for i, piece in enumerate(item.pieces):
            vector = known_vectors.get((text_fingerprint(piece.text), item.contexts[i], item.carried[i]))
            if vector is not None:
                item.vectors[i] = bytes(vector)
            elif not lexical_only:
                todo.append((item, i))
    progress.save(force=True, documents_done=run.documents_total, paragraphs_total=len(todo), paragraphs_done=0)
    if not todo:
        return
    batch = embedding.progress_step(embedder, len(todo))  # the bar moves after each call
    tokens_used = 0
    for start in range(0, len(todo), batch):
        chunk_of = todo[start : start + batch]
        # Embedded from the end of the text a piece shares with earlier ones, so no vector holds words
        # of a paragraph whose labels may differ (docs/security.md).
        blobs, tokens = embed_in_windows([embedding_text(fresh_text(item.pieces[i].text, item.carried[i]),
                                                         item.contexts[i]) for item, i in chunk_of], embedder)
        for (item, i), blob in zip(chunk_of, blobs, strict=True):
            item.vectors[i] = blob
        tokens_used += tokens or 0
        run.paragraphs_embedded += len(chunk_of)
        progress.save(paragraphs_done=run.paragraphs_embedded)
    if embedder.backend == "http" and tokens_used:
        from .ledger import record_call

        record_call(agent=collection.agent, collection=collection, purpose=ModelCall.EMBED, model=embedder.model,
                    tokens_in=tokens_used)


def _commit(collection, run, prepared, existing, embedder, refused, previous) -> None:
    """The one short transaction: documents, paragraphs, labels, the build record.

    Only what changed is written: an unchanged folder costs a handful of queries
    and the build record, however many documents it holds.
    """
    agent: Agent = collection.agent
    now = timezone.now()
    size, overlap = collection.chunk_sizes()
    with transaction.atomic():
        check_lease(collection, run)
        was_searchable = Paragraph.objects.searchable(collection).exists()
        names = {p.name for p in prepared}
        # Documents gone from the source go, with their paragraphs. Uploads are
        # listed among the sources, so they never vanish here.
        gone = [document for name, document in existing.items() if name not in names]
        if gone:
            # Their labels wait for their return (services.kept_labels), then they go in this same swap.
            kept_labels.keep(collection=collection, documents=gone)
            Document.objects.filter(pk__in=[document.pk for document in gone]).delete()
        returning = kept_labels.kept_for(collection) if any(not p.reused for p in prepared) else {}
        stored: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for pk, document_id, ordinal in (
            Paragraph.objects.filter(collection=collection).order_by("document_id", "index")
            .values_list("pk", "document_id", "ordinal")
        ):
            stored[document_id].append((pk, ordinal))
        renumbered: list[Paragraph] = []
        passages = ordinal = 0
        for item in prepared:
            if not item.stored:
                continue
            document = existing.get(item.name) or Document(collection=collection, name=item.name, source=item.kind)
            before = _document_state(document)
            # A person approved this very version: it stays searchable.
            approved = _approved(item, existing)
            document.status = Document.ACTIVE if item.status == Document.NEEDS_REVIEW and approved else item.status
            document.fingerprint, document.summary = item.fingerprint, item.summary
            document.scan_warnings, document.conflicts = item.warnings, item.conflicts
            document.refusal, document.attributes = item.refusal, item.attributes
            if item.status == Document.REFUSED:
                document.paragraph_count, document.built_method, document.built_model = 0, "", ""
                if document.pk and stored.get(document.pk):
                    Paragraph.objects.filter(document=document).delete()
            elif item.reused:
                for pk, old in stored.get(document.pk, []):
                    if old != ordinal:
                        renumbered.append(Paragraph(pk=pk, ordinal=ordinal))
                    ordinal += 1
                document.paragraph_count = len(stored.get(document.pk, []))
            else:
                document.built_method, document.built_model = collection.method, embedder.model
                document.built_size, document.built_overlap, document.built_context = size, overlap, CONTEXT_VERSION
                document.paragraph_count = len(item.pieces)
            if document.pk is None:
                document.updated_at = now
                document.save()
            elif _document_state(document) != before:
                # Only the fields a build owns: an approval or label edit made while the
                # build ran is not overwritten with what was read at its start.
                document.updated_at = now
                document.save(update_fields=[*BUILD_FIELDS, "updated_at"])
            if item.status != Document.REFUSED and not item.reused:
                kept = returning.pop(item.name, None)
                if kept is not None:
                    kept_labels.restore_defaults(document=document, kept=kept)
                    kept.delete()
                ordinal = _replace_paragraphs(document, item, agent, ordinal,
                                              kept=kept_labels.paragraph_labels(kept) if kept else None)
            passages += document.paragraph_count
        if renumbered:
            Paragraph.objects.bulk_update(renumbered, ["ordinal"], batch_size=500)
        Paragraph.objects.guard_not_empty(collection, was_searchable=was_searchable)
        if collection.per_reader:
            unlabelled = Paragraph.objects.filter(collection=collection, labels__isnull=True).count()
            if unlabelled:
                run.warnings.append(f"{unlabelled} paragraphs have no label, so any reader may read them")
        run.warnings += _review_warnings(p for p in prepared
                                         if p.status == Document.NEEDS_REVIEW and not _approved(p, existing))
        if not Paragraph.objects.searchable(collection).exists():
            run.warnings.append("no paragraph is searchable until a person approves the documents in review")
        CollectionBuilt.objects.update_or_create(
            collection=collection,
            defaults=dict(
                agent_id=agent.agent_id,
                model=embedder.model,
                dimensions=embedder.dimensions,
                method=collection.method,
                built_from=collection.built_from, passages=passages, built_at=now,
                refused=refused, index_id="",  # built here: the IVF seeds from the collection's name
            ),
        )
        Collection.objects.filter(pk=collection.pk).exclude(rebuild_needed="").update(rebuild_needed="")
        run.passages = passages
        run.documents_done = run.documents_total
        run.paragraphs_done = run.paragraphs_total
        run.status, run.finished_at, run.heartbeat_at = BuildRun.SUCCEEDED, now, now
        run.save()
    indexes.index_committed_build(collection=collection)
    logger.info("build %s of %s/%s: %s paragraphs, %s documents read, %s reused, %s refused, %s embedded",
                run.pk, agent.agent_id, collection.name, passages, run.documents_read, run.documents_reused,
                len(refused), run.paragraphs_embedded)


BUILD_FIELDS = (
    "fingerprint", "status", "refusal", "summary", "scan_warnings", "conflicts", "paragraph_count", "attributes",
    "built_method", "built_size", "built_overlap", "built_model", "built_context",
)


def _document_state(document: Document) -> tuple:
    return tuple(getattr(document, name) for name in BUILD_FIELDS)


def _replace_paragraphs(document: Document, item: Prepared, agent: Agent, ordinal: int,
                        kept: dict[str, set[int]] | None = None) -> int:
    """Swap a changed document's paragraphs; unchanged texts keep their labels and disabled marks
    (`kept`: the labels a returning document had when it left, by text fingerprint)."""
    old_labels: dict[str, set[int]] = {fp: set(ids) for fp, ids in (kept or {}).items()}
    through = Paragraph.labels.through
    labelled = through.objects.filter(paragraph__document=document)
    for fingerprint, label_id in labelled.values_list("paragraph__fingerprint", "label_id"):
        old_labels.setdefault(fingerprint, set()).add(label_id)
    disabled = set(document.paragraphs.filter(enabled=False).values_list("fingerprint", flat=True))
    document.paragraphs.all().delete()
    defaults = set(document.default_labels.values_list("pk", flat=True))
    rows = []
    for index, piece in enumerate(item.pieces):
        rows.append(
            Paragraph(
                agent_id=agent.agent_id, collection_id=document.collection_id, document=document,
                ordinal=ordinal + index, index=index, section=(piece.section or "")[:300],
                context=item.contexts[index] if index < len(item.contexts) else "", text=piece.text,
                start_char=piece.start, end_char=piece.end,
                token_count=item.tokens[index] if index < len(item.tokens) else None,
                fingerprint=text_fingerprint(piece.text),
                embedding=item.vectors[index] if item.vectors else None,
                enabled=text_fingerprint(piece.text) not in disabled,
            )
        )
    created = Paragraph.objects.bulk_create(rows, batch_size=500)
    if not all(p.pk for p in created):  # backends that do not return ids on bulk insert
        created = list(document.paragraphs.order_by("index"))
    links = []
    for paragraph in created:
        for label_id in old_labels.get(paragraph.fingerprint, set()) | defaults:
            links.append(through(paragraph_id=paragraph.pk, label_id=label_id))
    through.objects.bulk_create(links, batch_size=1000, ignore_conflicts=True)
    return ordinal + len(rows)


def _candidate_paragraphs(collection: Collection, prepared: list[Prepared],
                          existing: dict) -> list[known_answers.CandidateRow]:
    """The paragraphs `_commit` will leave, in its ordinal order, for measuring a build before its swap;
    a document is told apart by its position in ``prepared``."""
    reused = {existing[p.name].pk for p in prepared if p.reused}
    stored: dict[int, list[tuple]] = defaultdict(list)
    if reused:
        rows = Paragraph.objects.filter(collection=collection).order_by("document_id", "index").values_list(
            "document_id", "start_char", "end_char", "text", "section", "embedding", "context")
        for document_id, *row in rows.iterator(chunk_size=2000):
            if document_id in reused:
                stored[document_id].append(tuple(row))
    paragraphs: list[known_answers.CandidateRow] = []
    for number, item in enumerate(prepared):
        if item.status == Document.REFUSED:
            continue
        # The status the swap gives the document: in review unless a person approved this very version.
        searched = item.status == Document.ACTIVE or (item.status == Document.NEEDS_REVIEW and _approved(item, existing))
        if item.reused:
            pieces = stored[existing[item.name].pk]
        else:
            pieces = [(p.start, p.end, p.text, (p.section or "")[:300], item.vectors[i] if item.vectors else None,
                       item.contexts[i]) for i, p in enumerate(item.pieces)]
        paragraphs.extend(known_answers.CandidateRow(number, searched, *piece) for piece in pieces)
    return paragraphs
