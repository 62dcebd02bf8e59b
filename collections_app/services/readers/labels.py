"""Labels on paragraphs and documents, as people set them in the admin.

A reader may read a paragraph when it holds at least one of the paragraph's
labels; a paragraph with no labels is readable by anybody. Labels set here
survive rebuilds (the build carries them forward by text fingerprint).
"""

import re
from collections.abc import Iterable

from django.db import transaction
from django.db.models import QuerySet

from ragsite.errors import RagsiteError

from ...models import Document, Label, Paragraph

LABEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


def labels_named(names: Iterable[str], *, create: bool = False) -> list[Label]:
    """Labels by name; unknown names are created when `create`, else refused."""
    wanted = []
    for name in names:
        name = (name or "").strip()
        if not name:
            continue
        if not LABEL_NAME.match(name):
            raise RagsiteError(
                "a label is 1-100 letters, digits, '-' or '_', starting with a letter or digit; got "
                f"{name[:100]!r}",
                code="invalid_label",
            )
        if name not in wanted:
            wanted.append(name)
    found = {label.name: label for label in Label.objects.filter(name__in=wanted)}
    missing = [n for n in wanted if n not in found]
    if missing and not create:
        raise RagsiteError(f"no such label: {', '.join(missing)}", code="unknown_label")
    for name in missing:
        found[name] = Label.objects.get_or_create(name=name)[0]
    return [found[n] for n in wanted]


BATCH = 500  # paragraph ids per query: well under every backend's limit on query parameters


def _ids(objects) -> list[int]:
    if isinstance(objects, QuerySet):
        return list(objects.values_list("pk", flat=True))  # never loads texts or embeddings
    return [o.pk if hasattr(o, "pk") else int(o) for o in objects]


def add_labels(paragraphs: Iterable[Paragraph], labels: Iterable[Label]) -> int:
    """Give every paragraph every label; returns how many paragraph-label pairs were new."""
    paragraph_ids, label_ids = _ids(paragraphs), _ids(labels)
    through = Paragraph.labels.through
    added = 0
    with transaction.atomic():
        for start in range(0, len(paragraph_ids), BATCH):
            batch = paragraph_ids[start : start + BATCH]
            existing = set(
                through.objects.filter(paragraph_id__in=batch, label_id__in=label_ids).values_list(
                    "paragraph_id", "label_id"
                )
            )
            links = [
                through(paragraph_id=p, label_id=lab)
                for p in batch
                for lab in label_ids
                if (p, lab) not in existing
            ]
            through.objects.bulk_create(links, batch_size=1000, ignore_conflicts=True)
            added += len(links)
    return added


def remove_labels(paragraphs: Iterable[Paragraph], labels: Iterable[Label]) -> int:
    """Take the labels off the paragraphs; returns how many paragraph-label pairs were removed."""
    paragraph_ids, label_ids = _ids(paragraphs), _ids(labels)
    through = Paragraph.labels.through
    removed = 0
    with transaction.atomic():
        for start in range(0, len(paragraph_ids), BATCH):
            deleted, _ = through.objects.filter(
                paragraph_id__in=paragraph_ids[start : start + BATCH], label_id__in=label_ids
            ).delete()
            removed += deleted
    return removed


def set_paragraph_labels(*, paragraph: Paragraph, labels: Iterable[Label]) -> None:
    """Make `labels` exactly the paragraph's labels."""
    wanted = set(_ids(labels))
    current = set(paragraph.labels.values_list("pk", flat=True))
    with transaction.atomic():
        add_labels([paragraph], wanted - current)
        remove_labels([paragraph], current - wanted)


def set_default_labels(*, document: Document, labels: Iterable[Label]) -> tuple[int, int]:
    """Make `labels` the document's default labels, and apply the change to its paragraphs now.

    Default labels are what every paragraph of the document carries. A label added
    here is given to the document's current paragraphs (the build gives it to new
    ones); a label removed here is taken off them. Returns (pairs added, pairs removed).
    """
    wanted = set(_ids(labels))
    current = set(document.default_labels.values_list("pk", flat=True))
    paragraphs = list(document.paragraphs.values_list("pk", flat=True))
    with transaction.atomic():
        document.default_labels.set(wanted)
        added = add_labels(paragraphs, wanted - current)
        removed = remove_labels(paragraphs, current - wanted)
    return added, removed


# Said to staff (and read by a synced collection's next check) once per-reader answering is switched on
# a built collection: its titles are chosen per mode (text.context.contexts_for), so it must be rebuilt.
PER_READER_SWITCHED = (
    "per reader was switched; rebuild so every paragraph's title and vector follow it (a plain first "
    "line is never a per-reader collection's title)"
)


def set_per_reader(*, collection, per_reader: bool) -> bool:
    """Turn a collection's per-reader answering on or off; returns whether it changed.

    On, every search of it must name a reader and labels decide what that reader sees; off, labels
    are kept but ignored and every reader sees every paragraph. A built collection is marked for a
    rebuild (`PER_READER_SWITCHED`).
    """
    from ...models import Collection, CollectionBuilt

    changed = bool(
        Collection.objects.filter(pk=collection.pk)
        .exclude(per_reader=per_reader)
        .update(per_reader=per_reader)
    )
    if changed and CollectionBuilt.objects.filter(collection_id=collection.pk).exists():
        Collection.objects.filter(pk=collection.pk).update(rebuild_needed=PER_READER_SWITCHED)
    return changed


def rebuild_after_switch(*, collection, requested_by: str):
    """Queue the rebuild a switch of per-reader answering calls for: (the build, "") or (None, why not).

    Until it is live agents get the last build, under the new rule (a reader is required, labels apply);
    only the titles and vectors lag. A build already queued or running is left to finish, and the answer
    says so: it may have read the collection before the switch."""
    from ragsite.errors import RagsiteError

    from ..builds import request_build

    try:
        return request_build(collection=collection, requested_by=requested_by), ""
    except RagsiteError as exc:
        return None, exc.message
