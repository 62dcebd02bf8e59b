"""Building a collection: read, extract, chunk, embed — then one short transaction that replaces it.

The slow work (reading files, extracting text, embedding) happens before any
write to the collection. The swap itself is one transaction, so a reader sees
the old collection until the moment it sees the whole new one, and a build that
fails half way leaves the collection exactly as it was, still answering.

The stages live beside this module: prepare, embed, review, commit."""

import logging
import time
from collections.abc import Callable

from django.db import DatabaseError, transaction
from django.db.models import F, Max
from django.utils import timezone

from ragsite import embedding, instruments, queue, tracing
from ragsite.embedders import EmbeddingError
from ragsite.errors import Conflict, RagsiteError, StoreBusy
from ragsite.locks import short_lock_waits

from ...errors import BuildRefused, EmptyBuild
from ...models import BuildRun, Collection, CollectionBuilt, Document, Paragraph
from ...text.chunking import ChunkingError
from .. import known_answers, webhooks
from ..knowledge import require_source
from ..leases import ACTIVE_STATES, STALE_MESSAGE, Heartbeat, LeaseLost, fail_stale_builds
from ..sources import collection_sources, document_extractor
from .commit import _commit
from .embed import _embed_missing, _known_vectors
from .prepare import Prepared, Progress, StillWritingBuild, _prepare
from .review import _review, _review_warnings, held_passages, waiting
from .swap import candidate_paragraphs

__all__ = ["STALE_MESSAGE", "build_collection", "fail_stale_builds", "request_build", "run_build"]


logger = logging.getLogger("ragsite.builds")


def request_build(*, collection: Collection, requested_by: str = "", enqueue: bool = True) -> BuildRun:
    """Queue a build of `collection`; refuse while another is queued or running.

    The task is enqueued when this transaction commits, so the worker never
    looks for a BuildRun that is not there yet.
    """
    fail_stale_builds()
    # A source this process cannot see would fail in the worker too: refuse now, not after queueing.
    require_source(collection)
    with short_lock_waits():
        # Lock the collection row so two requests cannot both see "no build running"; a row another
        # transaction holds for long is a 503 with Retry-After, not a web thread held (PostgreSQL).
        Collection.objects.select_for_update().filter(pk=collection.pk).first()
        running = collection.runs.filter(status__in=ACTIVE_STATES).first()
        if running is not None:
            raise Conflict(
                # The number is what the admin's history shows; the id is what the API's URL takes.
                f'a build of "{collection.name}" is already {running.status} '
                f"(build {running.number}, id {running.pk})",
                code="build_running",
            )
        # A new generation: whatever build held the previous one can no longer commit.
        Collection.objects.filter(pk=collection.pk).update(build_generation=F("build_generation") + 1)
        generation = (
            Collection.objects.filter(pk=collection.pk).values_list("build_generation", flat=True).get()
        )
        last = collection.runs.aggregate(last=Max("number"))["last"] or 0
        run = BuildRun.objects.create(
            collection=collection,
            number=last + 1,
            requested_by=requested_by[:200],
            heartbeat_at=timezone.now(),
            generation=generation,
        )
        if enqueue:
            # In the request's trace context: the queued task carries it, and the worker's span continues it.
            transaction.on_commit(tracing.keeping_context(lambda: _enqueue(run.pk)))
    return run


def _enqueue(build_id: int) -> None:
    queue.enqueue("collections_app.tasks.run_build", build_id, name=f"build-{build_id}")


def run_build(build_id: int, *, report: Callable[[BuildRun], None] | None = None) -> BuildRun:
    """Carry out a queued build. Never raises for a refusal or failure: the BuildRun records it.

    Traced as a `build` span (children: a `read`, `extract` and `chunk` per document read, `embed`,
    `write`), carrying the build's id, outcome and counts, never a document's name or text."""
    with tracing.span("build", **{"ragsite.build": build_id}) as span:
        run = _run_build(build_id, report)
        if span.is_recording():
            span.set_attribute("ragsite.outcome", run.status)
            for name in ("documents_read", "documents_reused", "documents_refused", "paragraphs_embedded"):
                span.set_attribute(f"ragsite.{name}", getattr(run, name) or 0)
    return run


def _run_build(build_id: int, report: Callable[[BuildRun], None] | None) -> BuildRun:
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
        announce = bool(
            BuildRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATES).update(
                status=BuildRun.FAILED, finished_at=timezone.now(), error=str(exc)[:2000], transient=True
            )
        )
        run.refresh_from_db()
        logger.warning(
            "build %s of %s/%s rolled back: %s", run.pk, collection.agent.agent_id, collection.name, exc
        )
    except (RagsiteError, ChunkingError, EmbeddingError) as exc:
        status = BuildRun.REFUSED if isinstance(exc, BuildRefused) else BuildRun.FAILED
        # An embedder that did not answer, or a store busy with another write, may answer later.
        _finish(
            run,
            status,
            error=str(exc),
            transient=isinstance(exc, (EmbeddingError, StoreBusy, StillWritingBuild)),
        )
        logger.warning(
            "build %s of %s/%s %s: %s", run.pk, collection.agent.agent_id, collection.name, status, exc
        )
    except Exception as exc:
        # A locked or unreachable store (DatabaseError: OperationalError, InterfaceError) may pass.
        _finish(
            run,
            BuildRun.FAILED,
            error=f"unexpected {type(exc).__name__}; see the server log",
            transient=isinstance(exc, DatabaseError),
        )
        logger.exception("build %s of %s/%s failed", run.pk, collection.agent.agent_id, collection.name)
    observe_build(run)
    if announce:
        webhooks.build_finished(run=run)
    return run


def observe_build(run: BuildRun) -> None:
    """The build's outcome, duration and document counts, to the metrics (ragsite.instruments)."""
    instruments.BUILDS.labels(outcome=run.status).inc()
    if run.started_at is not None and run.finished_at is not None:
        seconds = (run.finished_at - run.started_at).total_seconds()
        instruments.BUILD_SECONDS.labels(outcome=run.status).observe(max(0.0, seconds))
    for outcome, count in (
        ("read", run.documents_read),
        ("reused", run.documents_reused),
        ("refused", run.documents_refused),
    ):
        instruments.DOCUMENTS.labels(outcome=outcome).inc(count)
    instruments.OCR_PAGES.inc(run.ocr_pages)


def build_collection(*, collection: Collection, requested_by: str = "", report=None) -> BuildRun:
    """Request a build and carry it out in this process (the command's --sync and the tests)."""
    run = request_build(collection=collection, requested_by=requested_by, enqueue=False)
    return run_build(run.pk, report=report)


def _finish(run: BuildRun, status: str, *, error: str = "", transient: bool = False) -> None:
    run.status, run.error, run.finished_at = status, error[:2000], timezone.now()
    run.transient = transient and status == BuildRun.FAILED
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

    # Vectors are reused by model name; a model that changed width under its name (seed 000: "checked
    # per row, because the model can change underneath") has none reused, or a row twice the new
    # width would read as two windows of it and be scored.
    reuse = previous is None or previous.dimensions in (0, embedder.dimensions)
    prepared: list[Prepared] = []
    extractor = document_extractor()
    for number, source in enumerate(sources, start=1):
        item = _prepare(
            source,
            existing.get(source.name),
            collection,
            embedder,
            method,
            size,
            overlap,
            run,
            extractor,
            reuse=reuse,
        )
        if item is not None:  # None: a new file still being written, read by a later build
            prepared.append(item)
        progress.save(documents_done=min(number, len(sources) - 1))  # the last: with the paragraphs to embed

    _review(prepared, collection, existing)
    # Embeddings already made by this model, by text fingerprint: an edited
    # document only re-embeds the paragraphs whose text changed.
    changed = any(not p.reused and p.status != Document.REFUSED for p in prepared)
    known_vectors = _known_vectors(collection, embedder.model) if changed and reuse else {}
    embedded_before, started = run.paragraphs_embedded, time.perf_counter()
    with tracing.span("embed") as span:
        _embed_missing(prepared, embedder, known_vectors, run, progress, collection)
        span.set_attribute("ragsite.paragraphs", run.paragraphs_embedded - embedded_before)
    if run.paragraphs_embedded > embedded_before:
        instruments.EMBEDDED.labels(purpose="build").inc(run.paragraphs_embedded - embedded_before)
        instruments.EMBED_SECONDS.labels(purpose="build").inc(time.perf_counter() - started)

    refused = [p.name for p in prepared if p.status == Document.REFUSED]
    # What the build knew is kept on the run even when the build is refused below (seed 000).
    run.refused, run.documents_refused = refused, len(refused)
    run.refusal_reasons = {p.name: p.refusal for p in prepared if p.status == Document.REFUSED}
    run.warnings += [note for p in prepared for note in p.notes]
    passages = sum(len(p.pieces) + p.kept for p in prepared if p.status != Document.REFUSED)
    if passages == 0:
        raise EmptyBuild(
            f'the build of "{collection.name}" produced no paragraphs; the collection keeps its current ones'
        )
    held = waiting(prepared, existing)
    searchable = passages - sum(held_passages(p, existing) for p in held)
    if searchable == 0 and Paragraph.objects.searchable(collection).exists():
        # Seed 000, refusal 3: paragraphs no reader may search would replace a collection that answers.
        run.warnings += _review_warnings(held)
        raise EmptyBuild(
            f'the build of "{collection.name}" would leave nothing readers could search: every document '
            f"needs review ({', '.join(p.name for p in held)}); the collection keeps its current ones"
        )
    # Known answers: measured from the candidate before the swap only when a gate may refuse it;
    # otherwise by a task once the swap has committed, so the build never waits for them.
    measured = known_answers.gate_build(
        collection=collection, run=run, candidate=lambda: candidate_paragraphs(collection, prepared, existing)
    )
    with tracing.span("write"):
        _commit(collection, run, prepared, existing, embedder, refused, previous)
    if run.status in BuildRun.LIVE:
        known_answers.after_build(run=run, measured=measured)
