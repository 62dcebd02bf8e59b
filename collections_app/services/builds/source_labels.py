"""The labels a document's source gives it, on its paragraphs, beside the labels people set.

A source names a document's readers (services.origins.readers); the build maps them to labels and
every paragraph of the document holds those labels in `Paragraph.labels`, where searches read them. A
`SourceLabel` row marks each link the source made, so that when the source stops giving a label the
build takes away exactly the links it made: a label a person had set on a paragraph before its source
gave it too stays theirs. Everything here runs inside the build's one transaction (builds.commit).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ...models import Document, Label, Paragraph, SourceLabel
from ..origins.readers import UNMAPPED_LABEL, group_labels


def source_links(paragraph_ids: Iterable[int]) -> dict[int, set[int]]:
    """{paragraph id: the label ids on it that its source gave}."""
    links: dict[int, set[int]] = defaultdict(set)
    ids = list(paragraph_ids)
    for start in range(0, len(ids), 500):
        for paragraph_id, label_id in SourceLabel.objects.filter(
            paragraph_id__in=ids[start : start + 500]
        ).values_list("paragraph_id", "label_id"):
            links[paragraph_id].add(label_id)
    return links


def apply(*, document: Document, labels: Iterable[int]) -> int:
    """Make the source's links on `document`'s paragraphs exactly `labels` (those that still exist):
    links it made to labels it no longer gives are removed, missing ones made; a label a paragraph held
    already, not from the source, is left as it is. Returns the links added and removed."""
    wanted = set(Label.objects.filter(pk__in=set(labels)).values_list("pk", flat=True)) if labels else set()
    through = Paragraph.labels.through
    paragraphs = list(document.paragraphs.values_list("pk", flat=True))
    if not paragraphs:
        return 0
    held: dict[int, set[int]] = defaultdict(set)
    for paragraph_id, label_id in through.objects.filter(paragraph__document=document).values_list(
        "paragraph_id", "label_id"
    ):
        held[paragraph_id].add(label_id)
    made = source_links(paragraphs)
    add_links, add_marks, drop = [], [], []
    for paragraph_id in paragraphs:
        for label_id in made[paragraph_id] - wanted:
            drop.append((paragraph_id, label_id))
        for label_id in wanted - made[paragraph_id]:
            if label_id in held[paragraph_id]:
                continue  # a person's own label: not the source's to take away later
            add_links.append(through(paragraph_id=paragraph_id, label_id=label_id))
            add_marks.append(SourceLabel(paragraph_id=paragraph_id, label_id=label_id))
    by_label: dict[int, list[int]] = defaultdict(list)
    for paragraph_id, label_id in drop:
        by_label[label_id].append(paragraph_id)
    for label_id, ids in by_label.items():
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            through.objects.filter(paragraph_id__in=chunk, label_id=label_id).delete()
            SourceLabel.objects.filter(paragraph_id__in=chunk, label_id=label_id).delete()
    through.objects.bulk_create(add_links, batch_size=1000, ignore_conflicts=True)
    SourceLabel.objects.bulk_create(add_marks, batch_size=1000, ignore_conflicts=True)
    return len(add_links) + len(drop)


def unmapped_warning(prepared: list) -> str:
    """What the build says when sources name reader groups the admin has mapped to no label: those
    documents get no label from them (docs/sources.md, "Permissions")."""
    named = {group for item in prepared for group in item.source_readers}
    if not named:
        return ""
    mapping = group_labels()
    missing = sorted(group for group in named if not mapping.get(group))
    if not missing:
        return ""
    documents = sum(
        1 for item in prepared if item.source_readers and not any(mapping.get(g) for g in item.source_readers)
    )
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
    return (
        f"the source names reader groups no identity-provider group maps to a label ({shown}): "
        f"{documents} document{'' if documents == 1 else 's'} whose groups are all unmapped "
        f"{'is' if documents == 1 else 'are'} held from every reader (label {UNMAPPED_LABEL}) until the "
        "groups are mapped in the admin (identity provider groups); a sync check then re-labels them"
    )
