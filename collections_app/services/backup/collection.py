"""One collection as a backup archive, and back: everything a librarian made, not only what search reads.

The archive holds the collection's settings, its build record and history (with the known answers each
build was measured on, and the measure runs with their reports), every document (review state and
decisions, attributes, default labels, the bytes of uploads), every paragraph (text, section, pages,
offsets, vector, switches, labels), the known answers, the labels kept for documents that left, the sync
settings, the labels and readers its paragraphs name, and, when search can export it, the collection as
seed 004's `rag/<name>/` (for other tools: a restore reads the paragraphs, which hold what the export
leaves out). No credential is ever in it.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory

from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from ragsite.backup import fields_of, row_of
from ragsite.errors import Conflict, RagsiteError

from ...models import (
    Agent,
    BuildRun,
    Collection,
    CollectionBuilt,
    CollectionSync,
    Document,
    KeptLabels,
    KnownAnswer,
    KnownAnswersReport,
    Label,
    MeasureRun,
    Paragraph,
    Reader,
)
from ..indexes import index_committed_build
from .archive import Archive

COLLECTION, BUILT, RUNS, REPORTS = (
    "collection.jsonl",
    "built.jsonl",
    "builds.jsonl",
    "known_answer_reports.jsonl",
)
DOCUMENTS, PARAGRAPHS, KNOWN = "documents.jsonl", "paragraphs.jsonl", "known_answers.jsonl"
KEPT, SYNC, LABELS, READERS = "kept_labels.jsonl", "sync.jsonl", "labels.jsonl", "readers.jsonl"
MEASURES = "measure_runs.jsonl"
# What a store holds for one machine or one moment, not the collection's: never carried.
COLLECTION_SKIP = ("agent_id", "build_generation")
SYNC_KEEP = ("enabled", "every", "last_checked_at", "last_changed_at", "last_outcome")


def dump_collection(collection: Collection) -> Archive:
    """The collection as an `Archive` (see the module's docstring)."""
    labels_of = _paragraph_labels(collection)
    label_ids: set[int] = {label for labels in labels_of.values() for label in labels}
    documents = []
    files = {}
    for document in collection.documents.prefetch_related("default_labels").order_by("name"):
        row = row_of(document, skip=("collection_id",))
        row["default_labels"] = sorted(label.pk for label in document.default_labels.all())
        label_ids.update(row["default_labels"])
        if document.upload:
            with document.upload.open("rb") as handle:
                files[f"uploads/{document.name}"] = handle.read()
        documents.append(row)
    names = dict(Document.objects.filter(collection=collection).values_list("pk", "name"))
    paragraphs = []
    for paragraph in (
        Paragraph.objects.filter(collection=collection).order_by("ordinal").iterator(chunk_size=2000)
    ):
        row = row_of(paragraph, skip=("agent_id", "collection_id", "document_id"))
        row["document"] = names[paragraph.document_id]
        row["labels"] = sorted(labels_of.get(paragraph.pk, ()))
        paragraphs.append(row)
    kept = []
    for item in KeptLabels.objects.filter(collection=collection).order_by("name"):
        row = row_of(item, skip=("collection_id",))
        label_ids.update(row["default_labels"])
        label_ids.update(i for ids in row["paragraph_labels"].values() for i in ids)
        kept.append(row)
    labels = {label.pk: label for label in Label.objects.filter(pk__in=label_ids)}
    by_name = {pk: label.name for pk, label in labels.items()}
    for row in documents:
        row["default_labels"] = [by_name[i] for i in row["default_labels"] if i in by_name]
    for row in paragraphs:
        row["labels"] = [by_name[i] for i in row["labels"] if i in by_name]
    for row in kept:
        row["default_labels"] = [by_name[i] for i in row["default_labels"] if i in by_name]
        row["paragraph_labels"] = {
            fingerprint: [by_name[i] for i in ids if i in by_name]
            for fingerprint, ids in row["paragraph_labels"].items()
        }
    readers = []
    for reader in Reader.objects.filter(labels__in=list(labels)).distinct().prefetch_related("labels"):
        held = sorted(label.name for label in reader.labels.all() if label.pk in labels)
        withdrawn = reader.withdrawn_at.isoformat() if reader.withdrawn_at else None
        readers.append({"external_id": reader.external_id, "labels": held, "withdrawn_at": withdrawn})
    runs = [
        {"id": run.pk, **row_of(run, skip=("collection_id",))}
        for run in BuildRun.objects.filter(collection=collection).order_by("pk")
    ]
    reports = [
        row_of(report, skip=("collection_id",))
        for report in KnownAnswersReport.objects.filter(collection=collection).order_by("build_id")
    ]
    measures = [
        row_of(measure, skip=("collection_id",))
        for measure in MeasureRun.objects.filter(collection=collection).order_by("pk")
    ]
    built = CollectionBuilt.objects.filter(collection=collection).first()
    sync = CollectionSync.objects.filter(collection=collection).first()
    archive = Archive(
        manifest={
            "kind": "collection",
            "agent": collection.agent.agent_id,
            "collection": collection.name,
            "created_at": timezone.now().isoformat(),
        },
        rows={
            COLLECTION: [row_of(collection, skip=COLLECTION_SKIP)],
            BUILT: [row_of(built, skip=("collection_id", "agent_id"))] if built else [],
            RUNS: runs,
            REPORTS: reports,
            MEASURES: measures,
            DOCUMENTS: documents,
            PARAGRAPHS: paragraphs,
            KNOWN: [
                row_of(k, skip=("collection_id",)) for k in collection.known_answers.order_by("position")
            ],
            KEPT: kept,
            SYNC: [{k: v for k, v in row_of(sync).items() if k in SYNC_KEEP}] if sync else [],
            LABELS: [{"name": label.name, "description": label.description} for label in labels.values()],
            READERS: sorted(readers, key=lambda r: r["external_id"]),
        },
        files=files,
    )
    archive.files.update(_rag_files(collection))
    return archive


def _paragraph_labels(collection: Collection) -> dict[int, set[int]]:
    through = Paragraph.labels.through
    labels: dict[int, set[int]] = defaultdict(set)
    rows = through.objects.filter(paragraph__collection=collection).values_list("paragraph_id", "label_id")
    for paragraph_id, label_id in rows.iterator(chunk_size=5000):
        labels[paragraph_id].add(label_id)
    return labels


def _rag_files(collection: Collection) -> dict[str, bytes]:
    """seed 004's `rag/<name>/` of what search reads, when it can be written (else nothing: the paragraphs
    hold the collection whole either way)."""
    from ..interchange import export_index

    with TemporaryDirectory() as scratch:
        try:
            folder = export_index(collection=collection, directory=Path(scratch))
        except RagsiteError:
            return {}
        return {f"rag/{collection.name}/{path.name}": path.read_bytes() for path in sorted(folder.iterdir())}


def restore_collection(archive: Archive, *, agent: Agent, name: str | None = None) -> Collection:
    """Bring a collection archive back for `agent`, under its own name or `name`; refused when the agent
    already has a collection of that name (a restore never overwrites). Searches answer from it at once."""
    if archive.manifest.get("kind") != "collection":
        raise RagsiteError("this archive holds an agent, not a collection", code="invalid_backup")
    rows = archive.rows
    [settings] = rows.get(COLLECTION) or [None]
    if settings is None:
        raise RagsiteError(f"{COLLECTION} is missing from the archive", code="invalid_backup")
    name = name or settings["name"]
    with transaction.atomic():
        if Collection.objects.filter(agent=agent, name=name).exists():
            raise Conflict(
                f'agent "{agent.agent_id}" already has a collection "{name}"; restore it under another name',
                code="duplicate_collection",
            )
        labels = _restore_labels(rows.get(LABELS, []), rows.get(READERS, []))
        values = fields_of(Collection, settings, skip=("name",))
        collection = Collection.objects.create(agent=agent, name=name, **values)
        runs = {}
        for row in rows.get(RUNS, []):
            run = BuildRun.objects.create(collection=collection, **fields_of(BuildRun, row, skip=("id",)))
            runs[row["id"]] = run.pk
        for row in rows.get(REPORTS, []):
            values = fields_of(KnownAnswersReport, row, skip=("build_id",))
            if row.get("build_id") in runs:
                KnownAnswersReport.objects.create(
                    collection=collection, build_id=runs[row["build_id"]], **values
                )
        for row in rows.get(MEASURES, []):
            MeasureRun.objects.create(collection=collection, **fields_of(MeasureRun, row))
        documents = {}
        for row in rows.get(DOCUMENTS, []):
            values = fields_of(Document, row, skip=("default_labels", "upload"))
            document = Document(collection=collection, **values)
            upload = archive.files.get(f"uploads/{row['name']}")
            if upload is not None:
                document.upload.save(Path(row["name"]).name, ContentFile(upload), save=False)
            document.save()
            document.default_labels.set([labels[n] for n in row.get("default_labels", [])])
            documents[row["name"]] = document
        _restore_paragraphs(collection, agent, rows.get(PARAGRAPHS, []), documents, labels)
        for row in rows.get(KNOWN, []):
            KnownAnswer.objects.create(collection=collection, **fields_of(KnownAnswer, row))
        for row in rows.get(KEPT, []):
            values = fields_of(KeptLabels, row)
            values["default_labels"] = [labels[n] for n in row.get("default_labels", [])]
            values["paragraph_labels"] = {
                f: [labels[n] for n in ns] for f, ns in row.get("paragraph_labels", {}).items()
            }
            KeptLabels.objects.create(collection=collection, **values)
        for row in rows.get(SYNC, []):
            sync = CollectionSync(collection=collection, **fields_of(CollectionSync, row))
            sync.next_check_at = timezone.now() if sync.enabled else None
            sync.save()
        for row in rows.get(BUILT, []):
            CollectionBuilt.objects.create(
                collection=collection, agent_id=agent.agent_id, **fields_of(CollectionBuilt, row)
            )
    if rows.get(BUILT):
        index_committed_build(collection=collection)
    return collection


def _restore_labels(labels: list[dict], readers: list[dict]) -> dict[str, int]:
    """{label name: id} in this store, made where missing; readers made where missing, given the labels."""
    ids = {}
    for row in labels:
        label, _made = Label.objects.get_or_create(
            name=row["name"], defaults={"description": row.get("description", "")}
        )
        ids[label.name] = label.pk
    for row in readers:
        # A reader de-provisioned when the archive was made comes back withdrawn, never holding its labels
        # again; one this store already knows keeps this store's state (its provisioning is newer).
        withdrawn = row.get("withdrawn_at")
        reader, _made = Reader.objects.get_or_create(
            external_id=row["external_id"],
            defaults={"withdrawn_at": datetime.fromisoformat(withdrawn) if withdrawn else None},
        )
        reader.labels.add(*[ids[n] for n in row.get("labels", []) if n in ids])
    return ids


def _restore_paragraphs(collection, agent, rows: list[dict], documents: dict, labels: dict[str, int]) -> None:
    through = Paragraph.labels.through
    batch: list[Paragraph] = []
    marks: list[list[str]] = []

    def flush() -> None:
        created = Paragraph.objects.bulk_create(batch)
        if not all(p.pk for p in created):  # backends that return no ids on bulk insert
            ordinals = [p.ordinal for p in batch]
            found = dict(
                Paragraph.objects.filter(collection=collection, ordinal__in=ordinals).values_list(
                    "ordinal", "pk"
                )
            )
            for paragraph in created:
                paragraph.pk = found[paragraph.ordinal]
        through.objects.bulk_create(
            [
                through(paragraph_id=p.pk, label_id=labels[n])
                for p, names in zip(created, marks, strict=True)
                for n in names
            ]
        )
        batch.clear()
        marks.clear()

    for row in rows:
        values = fields_of(Paragraph, row, skip=("document", "labels"))
        batch.append(
            Paragraph(
                agent_id=agent.agent_id, collection=collection, document=documents[row["document"]], **values
            )
        )
        marks.append(row.get("labels", []))
        if len(batch) >= 500:
            flush()
    if batch:
        flush()
