"""Measuring a collection: its documents, variant by variant, against questions with known answers.

The documents are read and extracted once, exactly as a build reads them (`collection_sources`,
`extract`); each variant is then built in memory and ranked by the pure `collections_app.measure`, with
the entries of its lists, tables and Q/A runs when ENTRIES is on, as a build would index them.
Nothing is written to the collection, its paragraphs or its build record — the live collection
answers as before while and after it is measured. The one write, and only with the "http"
embedder, is the ledger entry for the embedding tokens the measurement spent, as a build records.
"""

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ragsite import embedding, queue, tracing
from ragsite.bodies import refuse_nul
from ragsite.embedders import EmbeddingError
from ragsite.errors import RagsiteError
from ragsite.fusion import FUSION_WEIGHT
from ragsite.lexical import DEFAULT_B, DEFAULT_K1

from ...conf import settings
from ...limits import MAX_AROUND, MAX_MOST
from ...measure import DEFAULT_AROUNDS, Question, Variant, VectorCache, default_sizes, grid, measure_variant
from ...models import Collection, MeasureRun, ModelCall
from ...text.chunking import AVAILABLE, TOKEN_METHODS, ChunkingError, resolve_sizes, validate_method
from ...text.extract import SUPPORTED_SUFFIXES, Unreadable
from ..questions import (
    MAX_MARKER_CHARS,
    MAX_QUESTIONS,
    InvalidMeasure,
    check_questions,
    parse_item,
    parse_items,
)
from ..sources import StillWriting, collection_sources, document_extractor, read_settled

logger = logging.getLogger("ragsite.measure")

# The question format lives in .questions, shared with known answers; these names stay importable from here.
__all__ = [
    "MAX_MARKER_CHARS",
    "MAX_QUESTIONS",
    "InvalidMeasure",
    "check_questions",
    "measure_collection",
    "parse_item",
    "parse_items",
]

MAX_VARIANTS = 60
DEFAULT_MOST = 10


def _questions(questions: Sequence[Mapping], controls: Sequence[str]) -> list[Question]:
    refuse_nul([list(questions), list(controls)], field="a question or answer")
    items = [
        *(
            Question(q.get("question"), q.get("answer") if isinstance(q.get("answer"), str) else "")
            for q in questions
        ),
        *(Question(c) for c in controls),
    ]
    return check_questions(items)


def _variants(
    requested: Sequence[Mapping] | None, can_count: bool, window: int | None, collection: Collection
):
    """The variants asked for (each checked), or the default grid of `measure.grid`.

    The default grid also holds the collection's own method and size, so the report always has
    the row that says how the live collection is doing.
    """
    if requested is None:
        sizes = {method: default_sizes(method, window) for method in AVAILABLE}
        if collection.method in sizes and collection.size not in sizes[collection.method]:
            sizes[collection.method].append(collection.size)
        return grid(
            AVAILABLE, sizes=sizes, arounds=DEFAULT_AROUNDS, can_count_tokens=can_count, window=window
        )
    if not requested or len(requested) > MAX_VARIANTS:
        raise InvalidMeasure(f"give 1 to {MAX_VARIANTS} variants")
    variants: list[Variant] = []
    skipped: list[dict] = []
    for item in requested:
        method = item.get("method")
        around = item.get("around", 1)
        try:
            validate_method(method if isinstance(method, str) else "")
            size, overlap = resolve_sizes(method, item.get("size"), item.get("overlap"))
        except ChunkingError as exc:
            raise InvalidMeasure(str(exc)) from None
        if not isinstance(around, int) or not 0 <= around <= MAX_AROUND:
            raise InvalidMeasure(f"around must be between 0 and {MAX_AROUND}")
        if method in TOKEN_METHODS and not can_count:
            skipped.append(
                {
                    "method": method,
                    "size": size,
                    "reason": f'"{method}" needs an embedder that counts tokens, and this one cannot',
                }
            )
            continue
        variant = Variant(method, size, overlap, around)
        if variant not in variants:
            variants.append(variant)
    return variants, skipped


def _read_corpus(collection: Collection) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Extracted texts, refused names, and (name, fingerprint) of every readable document."""
    texts: list[str] = []
    refused: list[str] = []
    fingerprints: list[tuple[str, str]] = []
    extractor = document_extractor()
    for source in collection_sources(collection):
        try:
            # The same rule as a build: a file still being written waits out the window once, and one
            # still moving after it is left out of the measurement as unreadable.
            data = read_settled(source)
        except (OSError, Unreadable, StillWriting):
            refused.append(source.name)
            continue
        if not source.name.lower().endswith(SUPPORTED_SUFFIXES):
            refused.append(source.name)
            continue
        try:
            extracted = extractor.extract(source.name, data)
        except Unreadable:
            refused.append(source.name)
            continue
        texts.append(extracted.text)
        fingerprints.append((source.name, hashlib.sha256(data).hexdigest()))
    return texts, refused, fingerprints


def corpus_digest(fingerprints: Sequence[tuple[str, str]]) -> str:
    """sha256 over "name<TAB>fingerprint" lines in name order: equal digests, equal documents."""
    lines = "".join(f"{name}\t{fingerprint}\n" for name, fingerprint in sorted(fingerprints))
    return hashlib.sha256(lines.encode()).hexdigest()


def _counts_tokens(embedder) -> bool:
    try:
        return embedder.count_tokens("measure") is not None
    except EmbeddingError:
        return False


def measure_collection(
    *,
    collection: Collection,
    questions: Sequence[Mapping],
    controls: Sequence[str] = (),
    variants: Sequence[Mapping] | None = None,
    most: int = DEFAULT_MOST,
    min_score: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Measure `collection`'s documents, built each variant's way in memory, against known answers.

    ``questions`` are ``{"question", "answer"}`` (the answer marker); ``controls`` are questions the
    documents cannot answer. ``variants`` are ``{"method", "size"?, "overlap"?, "around"?}``; by
    default every available method at three sizes and around 0 and 1. Unfloored unless
    ``min_score`` is given. ``progress(done, total)`` is called as variants finish. Returns a
    JSON-ready report; raises `RagsiteError` for bad input.
    """
    checked = _questions(questions, controls)
    if not isinstance(most, int) or not 1 <= most <= MAX_MOST:
        raise InvalidMeasure(f"most must be between 1 and {MAX_MOST}")
    floor = 0.0 if min_score is None else float(min_score)
    if not 0.0 <= floor <= 1.0:
        raise InvalidMeasure("min_score must be between 0 and 1")

    embedder = embedding.get_embedder()
    can_count = _counts_tokens(embedder)
    chosen, skipped = _variants(variants, can_count, embedder.window, collection)
    texts, refused, fingerprints = _read_corpus(collection)
    lexical_only = embedder.backend == "none"
    tokens_used = 0

    finished = 0

    def embed(batch):
        nonlocal tokens_used
        embedded = embedder.embed_with_usage(list(batch))
        tokens_used += embedded.tokens or 0
        if progress:
            # Each batch is a sign of life too: one variant of a large corpus can embed for minutes.
            progress(finished, len(chosen))
        return embedded.vectors

    cache = VectorCache(None if lexical_only else embed, batch_size=int(settings.EMBED_BATCH_SIZE))
    rows: list[dict] = []
    if progress:
        progress(0, len(chosen))
    try:
        for done, variant in enumerate(chosen, start=1):
            try:
                rows.append(
                    measure_variant(
                        texts,
                        variant,
                        checked,
                        cache=cache,
                        weight=FUSION_WEIGHT,
                        most=most,
                        floor=floor,
                        tokens=embedder,
                        names=[name for name, _ in fingerprints],
                        max_chars=int(settings.ANSWER_MAX_CHARS),
                        analyzer=collection.analyzer,
                        entries=bool(settings.ENTRIES),  # as a build with this setting indexes them
                    )
                )
            except ChunkingError as exc:
                skipped.append({"method": variant.method, "size": variant.size, "reason": str(exc)})
            finished = done
            if progress:
                progress(done, len(chosen))
    except EmbeddingError as exc:
        raise RagsiteError(f"the embedder failed: {exc}", code="embedder_unavailable", status=503) from None
    finally:
        if embedder.backend == "http" and tokens_used:
            from ..ledger import record_call

            record_call(
                agent=collection.agent,
                collection=collection,
                purpose=ModelCall.EMBED,
                model=embedder.model,
                tokens_in=tokens_used,
            )

    size, overlap = collection.chunk_sizes()
    for row in rows:
        row["current"] = (row["method"], row["size"], row["overlap"]) == (collection.method, size, overlap)
    logger.info(
        "measure %s/%s: %d variants, %d questions, %d texts embedded",
        collection.agent.agent_id,
        collection.name,
        len(rows),
        len(checked),
        cache.embedded,
    )
    return {
        "collection": collection.name,
        "agent": collection.agent.agent_id,
        "measured_at": timezone.now().isoformat(),
        "model": "lexical" if lexical_only else embedder.model,
        "dimensions": 0 if lexical_only else embedder.dimensions,
        "mode": "lexical" if lexical_only else "hybrid",
        "corpus": {
            "collection": collection.name,
            "documents": len(texts),
            "digest": corpus_digest(fingerprints),
            "refused": refused,
        },
        "settings": {
            "fusion_weight": FUSION_WEIGHT,
            "analyzer": collection.analyzer,
            "entries": bool(settings.ENTRIES),
            "most": most,
            "floor": floor,
            "max_chars": int(settings.ANSWER_MAX_CHARS),
            "bm25": {"k1": DEFAULT_K1, "b": DEFAULT_B},
            "collection": {"method": collection.method, "size": size, "overlap": overlap},
        },
        "questions": sum(1 for q in checked if not q.control),
        "controls": sum(1 for q in checked if q.control),
        "embedded": cache.embedded,
        "variants": rows,
        "skipped": skipped,
    }


# --- Measuring as a background job --------------------------------------------------------------

MEASURE_ACTIVE = (MeasureRun.QUEUED, MeasureRun.RUNNING)


def request_measure(
    *,
    collection: Collection,
    questions: Sequence[Mapping],
    controls: Sequence[str] = (),
    most: int = DEFAULT_MOST,
    min_score: float | None = None,
    requested_by: str = "",
    enqueue: bool = True,
    estimate_seconds: int | None = None,
) -> MeasureRun:
    """Check a measurement's input now, store it as a queued `MeasureRun` and hand it to a task.

    A collection's tens of variants take minutes on a real corpus, so they never run inside a
    web request; the page polls the run's progress as it does a build's.
    """
    _questions(questions, controls)  # bad input is refused here, not in the worker
    if not isinstance(most, int) or not 1 <= most <= MAX_MOST:
        raise InvalidMeasure(f"most must be between 1 and {MAX_MOST}")
    if min_score is not None and not 0.0 <= float(min_score) <= 1.0:
        raise InvalidMeasure("min_score must be between 0 and 1")
    fail_stale_measures()
    with transaction.atomic():
        run = MeasureRun.objects.create(
            collection=collection,
            requested_by=requested_by[:150],
            heartbeat_at=timezone.now(),
            request={
                "questions": [dict(q) for q in questions],
                "controls": list(controls),
                "most": most,
                "min_score": min_score,
                "estimate_seconds": estimate_seconds,
            },
        )
        if enqueue:
            transaction.on_commit(tracing.keeping_context(lambda: _enqueue_measure(run.pk)))
    return run


def _enqueue_measure(measure_id: int) -> None:
    queue.enqueue("collections_app.tasks.run_measure", measure_id, name=f"measure-{measure_id}")


def run_measure(measure_id: int) -> MeasureRun:
    """Carry out a queued measurement, writing progress and then the report to its `MeasureRun`.

    Never raises for a refusal or a failure: the run records it.
    """
    run = MeasureRun.objects.select_related("collection__agent").get(pk=measure_id)
    if run.status != MeasureRun.QUEUED:
        return run
    run.status, run.started_at, run.heartbeat_at = MeasureRun.RUNNING, timezone.now(), timezone.now()
    run.save(update_fields=["status", "started_at", "heartbeat_at"])

    def progress(done: int, total: int) -> None:
        MeasureRun.objects.filter(pk=run.pk).update(
            variants_done=done, variants_total=total, heartbeat_at=timezone.now()
        )

    asked = run.request
    try:
        report = measure_collection(
            collection=run.collection,
            questions=asked.get("questions", []),
            controls=asked.get("controls", []),
            most=asked.get("most", DEFAULT_MOST),
            min_score=asked.get("min_score"),
            progress=progress,
        )
    except RagsiteError as exc:
        _finish_measure(run, MeasureRun.FAILED, error=f"{exc.message} ({exc.code})")
    except Exception as exc:
        logger.exception("measure %s of collection %s failed", run.pk, run.collection_id)
        _finish_measure(run, MeasureRun.FAILED, error=f"unexpected {type(exc).__name__}; see the server log")
    else:
        run.refresh_from_db(fields=["variants_done", "variants_total"])
        run.report = report
        _finish_measure(run, MeasureRun.SUCCEEDED)
    return run


def _finish_measure(run: MeasureRun, status: str, *, error: str = "") -> None:
    run.status, run.error, run.finished_at = status, error[:2000], timezone.now()
    run.save()


def fail_stale_measures(now=None) -> int:
    """A measurement whose heartbeat is older than BUILD_HEARTBEAT_TIMEOUT lost its worker: mark it failed.

    The heartbeat beats once per variant, and one variant embeds at most the corpus once, as a build does.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=int(settings.BUILD_HEARTBEAT_TIMEOUT))
    return MeasureRun.objects.filter(status__in=MEASURE_ACTIVE, heartbeat_at__lt=cutoff).update(
        status=MeasureRun.FAILED,
        finished_at=now,
        error="the measurement stopped reporting progress (its worker died)",
    )
