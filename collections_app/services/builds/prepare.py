"""Reading one document into pieces ready to embed (`Prepared`), and the build's progress."""

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils import timezone

from ragsite import tracing
from ragsite.errors import RagsiteError

from ...conf import settings
from ...models import (
    BuildRun,
    Collection,
    Document,
)
from ...text.blocks import page_range
from ...text.chunking import chunk
from ...text.context import context_version, contexts_for
from ...text.entries import ENTRIES_BUILT
from ...text.extract import BAD_NAME, CORRUPT, EMPTY, TIMED_OUT, TOO_LARGE, Unreadable, summarize_opening
from ...text.stitch import carried_openings
from ..leases import LeaseLost
from ..sources import UNREADABLE_MARK, StillWriting, read_settled, settle_seconds, too_large_mark

logger = logging.getLogger("ragsite.builds")


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
    read_notes: list[str] = field(default_factory=list)  # the extraction's notes, kept on the document
    conflicts: list[str] = field(default_factory=list)
    held: list[int] = field(default_factory=list)  # k of its paragraphs waiting in review (conflicts)
    pieces: list = field(default_factory=list)  # chunking.Piece
    kept: int = 0  # paragraphs a reused document already has
    tokens: list = field(default_factory=list)
    vectors: list = field(default_factory=list)  # bytes | None per piece
    entry_vectors: list = field(default_factory=list)  # per piece, its entries' vectors (ENTRIES) or None
    contexts: list = field(default_factory=list)  # "title › section" per piece (context.py)
    carried: list = field(default_factory=list)  # per piece, the characters it shares with earlier pieces
    pages: list = field(default_factory=list)  # per piece, its (first, last) page; (None, None) without pages
    ocr_pages: int = 0  # pages of this document read by OCR
    source_token: str = ""  # a remote source's change token for these bytes (services.origins)
    source_readers: list = field(default_factory=list)  # the group names its source gives it
    source_labels: list = field(default_factory=list)  # the label ids they map to (origins.readers)


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
                raise LeaseLost(
                    f"build {self.run.pk} was marked failed while it ran; it stopped without writing"
                )
        if self.report:
            self.report(self.run)


def _prepare(
    source, document, collection, embedder, method, size, overlap, run, extractor, *, reuse: bool = True
) -> Prepared | None:
    """Read, cut and place one source; ``reuse`` False: never keep its stored paragraphs as they are
    (their vectors are of another width). None: a new file still being written, left for a later build."""
    if (
        reuse
        and source.token
        and _same_remote_version(source, document, collection, embedder, method, size, overlap)
    ):
        # The remote source says these are the bytes this document was built from: not downloaded again.
        run.documents_reused += 1
        return _kept(source, document)
    try:
        with tracing.span("read") as span:  # the bytes of one document; its name stays out of the span
            data = read_settled(source)
            span.set_attribute("ragsite.bytes", len(data))
    except StillWriting:
        return _still_writing(source, document, run, reuse=reuse)
    except Unreadable as exc:
        # Recorded as the sync check fingerprints it (sources.too_large_mark), so an unchanged file too
        # large to read is not "changed" at every check.
        fingerprint = _unread_fingerprint(source) if exc.category == TOO_LARGE else ""
        item = Prepared(
            name=source.name,
            kind=source.kind,
            fingerprint=fingerprint,
            stored=exc.category != BAD_NAME,
            source_token=source.token,
            source_readers=list(source.readers),
            source_labels=list(source.labels),
        )
        return _refuse(item, collection, exc.reason, exc.category, run)
    except OSError as exc:
        logger.warning(
            "document %r in %s/%s could not be opened: %s",
            source.name,
            collection.agent.agent_id,
            collection.name,
            exc.strerror or type(exc).__name__,
        )
        run.warnings.append(f"{source.name} was refused ({CORRUPT}): it could not be opened")
        return Prepared(
            name=source.name,
            kind=source.kind,
            fingerprint=UNREADABLE_MARK,
            status=Document.REFUSED,
            refusal=CORRUPT,
            source_token=source.token,
            source_readers=list(source.readers),
            source_labels=list(source.labels),
        )
    fingerprint = hashlib.sha256(data).hexdigest()
    item = Prepared(name=source.name, kind=source.kind, fingerprint=fingerprint, **source.carried())
    unchanged = (
        reuse
        and document is not None
        and document.fingerprint == fingerprint
        and _built_alike(source, document, collection, embedder, method, size, overlap)
    )
    if unchanged:
        item.reused, item.kept = True, document.paragraph_count
        item.summary, item.warnings = document.summary, list(document.scan_warnings)
        item.read_notes = list(document.read_notes)
        run.documents_reused += 1
        return item
    try:
        with tracing.span("extract", **{"ragsite.kind": source.kind or ""}):
            extracted = extractor.extract(source.name, data)
    except Unreadable as exc:
        return _refuse(item, collection, exc.reason, exc.category, run)
    del data
    with tracing.span("chunk", **{"ragsite.method": method}) as span:
        pieces = chunk(extracted.text, method, size=size, overlap=overlap, tokens=embedder)
        span.set_attribute("ragsite.paragraphs", len(pieces))
    item.warnings, item.read_notes = list(extracted.warnings), list(extracted.notes)
    item.notes += [f"{source.name}: {note}" for note in extracted.notes]  # after the sidecar's note
    if getattr(pieces, "truncated", False):
        # Seed 003 keeps the first 240 and says why; not a scan warning (which would send it to review).
        item.notes.append(
            f"{source.name}: only the first {len(pieces)} of "
            f"{len(pieces) + pieces.dropped} paragraphs were kept; a document that needs "
            "more is a document that should be several sources"
        )
    item.pieces = list(pieces)
    item.contexts = contexts_for(
        source.name,
        extracted.text,
        [p.start for p in item.pieces],
        [p.entry for p in item.pieces],
        per_reader=collection.per_reader,
    )
    item.carried = [length for length, _first in carried_openings((0, p.start, p.end) for p in item.pieces)]
    item.tokens = [embedder.count_tokens(p.text) for p in item.pieces]
    item.pages = [page_range(extracted.pages, p.start, p.end) for p in item.pieces]
    item.ocr_pages, run.ocr_pages = extracted.ocr_pages, run.ocr_pages + extracted.ocr_pages
    item.summary = summarize_opening(extracted.text)
    if not item.pieces:
        return _refuse(item, collection, "no text", EMPTY, run)
    run.documents_read += 1
    return item


def built_version(collection) -> int:
    """The context version this build gives its documents: `context.context_version`, plus ENTRIES_BUILT
    when ENTRIES has their entries embedded too (so switching it reads each document again, once)."""
    return context_version(collection.per_reader) + (ENTRIES_BUILT if settings.ENTRIES else 0)


def _built_alike(source, document, collection, embedder, method, size, overlap) -> bool:
    """Whether the document's stored paragraphs were cut and embedded as this build would cut them."""
    return (
        document.status != Document.REFUSED
        and (
            document.built_method,
            document.built_size,
            document.built_overlap,
            document.built_model,
            document.built_context,
        )
        == (method, size, overlap, embedder.model, built_version(collection))
        and not (
            source.name.lower().endswith(".pdf")  # built before pages: read once more
            and document.paragraphs.filter(page_first=None).exists()
        )
    )


def _same_remote_version(source, document, collection, embedder, method, size, overlap) -> bool:
    return (
        document is not None
        and bool(document.fingerprint)
        and document.source_token == source.token
        and _built_alike(source, document, collection, embedder, method, size, overlap)
    )


def _kept(source, document) -> Prepared:
    """A document kept as the live build has it, its stored paragraphs reused."""
    return Prepared(
        name=source.name,
        kind=source.kind,
        fingerprint=document.fingerprint,
        reused=True,
        kept=document.paragraph_count,
        summary=document.summary,
        warnings=list(document.scan_warnings),
        read_notes=list(document.read_notes),
        attributes=document.attributes,
        source_token=document.source_token,
        # What the source says of it now: a change of its readers alone re-labels it, unread.
        source_readers=list(source.readers),
        source_labels=list(source.labels),
    )


def _still_writing(source, document, run: BuildRun, *, reuse: bool) -> Prepared | None:
    """A file written to within the settle window (or while it was read): nothing of it is read now. Its
    previous version keeps answering as it is; a new file is left out, to be read once it stands still."""
    window = f"{settle_seconds():g} s"
    if document is None or document.status == Document.REFUSED or not document.fingerprint:
        run.warnings.append(
            f"{source.name} is still being written: not read yet (read once unchanged for {window})"
        )
        return None
    if not reuse:
        # Its stored vectors are of another model's width, so its previous version cannot stay either.
        raise StillWritingBuild(
            f"{source.name} is still being written and its previous version cannot be kept (the model "
            "changed); build again once it stands still"
        )
    run.documents_reused += 1
    run.warnings.append(
        f"{source.name} is still being written: its previous version keeps answering (read once unchanged "
        f"for {window})"
    )
    return Prepared(
        name=source.name,
        kind=source.kind,
        fingerprint=document.fingerprint,
        reused=True,
        kept=document.paragraph_count,
        summary=document.summary,
        warnings=list(document.scan_warnings),
        attributes=document.attributes,
        source_token=document.source_token,
        source_readers=list(document.source_readers),
        source_labels=list(document.source_labels),
    )


class StillWritingBuild(RagsiteError):
    """A build that cannot keep a file's previous version while the file is being written (it may pass)."""

    code = "still_writing"
    status = 409


def _unread_fingerprint(source) -> str:
    try:
        return too_large_mark(source.size())
    except OSError:
        return ""


def _refuse(
    item: Prepared, collection: Collection, reason: str, category: str, run: BuildRun | None = None
) -> Prepared:
    # The detailed reason goes to the server log, with the document's name (escaped: a name can
    # hold a newline that would forge a log line) but never its path; the category (a word from
    # extract.REFUSAL_REASONS) is what the store keeps and people see.
    logger.warning(
        "document %r in %s/%s was refused (%s): %s",
        item.name,
        collection.agent.agent_id,
        collection.name,
        category,
        reason,
    )
    if run is not None:
        # Every refusal is in the build's history with its category (docs/security.md); the reason too
        # for limits a person may want to raise or a file to rename, which name no library's words.
        detail = f": {reason}" if category in (TOO_LARGE, TIMED_OUT, BAD_NAME) else ""
        run.warnings.append(f"{item.name} was refused ({category}){detail}")
    item.status, item.pieces, item.refusal = Document.REFUSED, [], category
    return item
