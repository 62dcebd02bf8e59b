"""A changed document's paragraphs swapped inside a build's commit, and the labels they carry over.

Labels follow each piece's own text (text.relabel), so an edit next to a restricted paragraph never
makes it public: a piece that matches no earlier one takes what the pieces it
overlaps all demand, the run says so, and one whose pieces share no label is held back (disabled).
"""

from __future__ import annotations

from collections import defaultdict

from ...interchange import fingerprint as text_fingerprint
from ...models import Agent, BuildRun, Collection, Document, Paragraph
from ...text.relabel import carry_labels, own_fingerprint
from ...text.stitch import carried_openings
from ..known_answers import CandidateRow
from ..known_answers.scratch import STORED_FIELDS
from .source_labels import source_links

# `item`s are builds.Prepared (not imported here: builds imports this module).


def approved(item, existing: dict[str, Document]) -> bool:
    """A person approved this very version of the document, so it stays searchable despite its review."""
    document = existing.get(item.name)
    return (
        document is not None
        and bool(document.approved_fingerprint)
        and document.approved_fingerprint == item.fingerprint
    )


def replace_paragraphs(
    *,
    document: Document,
    item,
    agent: Agent,
    ordinal: int,
    run: BuildRun,
    kept: dict[str, set[int]] | None = None,
) -> int:
    """Swap a changed document's paragraphs; each new piece carries labels by its own text (text.relabel),
    unchanged texts keep their disabled marks, and `kept` (the labels a returning document had when it
    left, by text fingerprint) adds to them. A piece that matches no earlier one by its own text takes
    what the pieces it overlaps all demand, and the run says so; when they share no label it is held
    back (disabled) for a person to label."""
    through = Paragraph.labels.through
    earlier = list(document.paragraphs.order_by("index").values_list("pk", "text", "start_char", "end_char"))
    labels_of: dict[int, set[int]] = defaultdict(set)
    for paragraph_id, label_id in through.objects.filter(paragraph__document=document).values_list(
        "paragraph_id", "label_id"
    ):
        labels_of[paragraph_id].add(label_id)
    # Labels its source gave are not carried by text: the commit gives the new pieces the source's own.
    for paragraph_id, given in source_links(pk for pk, *_rest in earlier).items():
        labels_of[paragraph_id] -= given
    openings = carried_openings((0, start, end) for _pk, _text, start, end in earlier)
    old = [
        (own_fingerprint(text, carried), frozenset(labels_of[pk]))
        for (pk, text, _s, _e), (carried, _first) in zip(earlier, openings, strict=True)
    ]
    shared = [*item.carried, *[0] * (len(item.pieces) - len(item.carried))]
    carried_over = carry_labels(
        old, [own_fingerprint(piece.text, shared[i]) for i, piece in enumerate(item.pieces)]
    )
    disabled = set(document.paragraphs.filter(enabled=False).values_list("fingerprint", flat=True))
    document.paragraphs.all().delete()
    defaults = set(document.default_labels.values_list("pk", flat=True))
    rows = []
    for index, piece in enumerate(item.pieces):
        first, last = item.pages[index] if index < len(item.pages) else (None, None)
        rows.append(
            Paragraph(
                agent_id=agent.agent_id,
                collection_id=document.collection_id,
                document=document,
                ordinal=ordinal + index,
                index=index,
                section=(piece.section or "")[:300],
                context=item.contexts[index] if index < len(item.contexts) else "",
                text=piece.text,
                start_char=piece.start,
                end_char=piece.end,
                page_first=first,
                page_last=last,
                token_count=item.tokens[index] if index < len(item.tokens) else None,
                fingerprint=text_fingerprint(piece.text),
                embedding=item.vectors[index] if item.vectors else None,
                entry_embedding=item.entry_vectors[index] if item.entry_vectors else None,
                enabled=text_fingerprint(piece.text) not in disabled and not carried_over[index].held_back,
            )
        )
    created = Paragraph.objects.bulk_create(rows, batch_size=500)
    if not all(p.pk for p in created):  # backends that do not return ids on bulk insert
        created = list(document.paragraphs.order_by("index"))
    links = []
    for paragraph, carried in zip(created, carried_over, strict=True):
        for label_id in set(carried.labels) | set((kept or {}).get(paragraph.fingerprint, ())) | defaults:
            links.append(through(paragraph_id=paragraph.pk, label_id=label_id))
    through.objects.bulk_create(links, batch_size=1000, ignore_conflicts=True)
    run.warnings += _relabel_warnings(document.name, carried_over)
    return ordinal + len(rows)


def _relabel_warnings(name: str, carried_over: list) -> list[str]:
    """What a person must know about labels a changed document's pieces took without matching."""
    inherited = [n for n, c in enumerate(carried_over) if not c.matched and c.labels]
    held = [n for n, c in enumerate(carried_over) if c.held_back]
    notes = []
    if inherited:
        notes.append(
            f"{name}: {len(inherited)} changed paragraphs (#{', #'.join(map(str, inherited))}) took "
            "the labels the labelled paragraphs they replace all share; check them"
        )
    if held:
        notes.append(
            f"{name}: {len(held)} changed paragraphs (#{', #'.join(map(str, held))}) replace "
            "paragraphs with no label in common, so they are disabled until a person labels them"
        )
    return notes


def candidate_paragraphs(collection: Collection, prepared: list, existing: dict) -> list[CandidateRow]:
    """The paragraphs `_commit` will leave, in its ordinal order, for measuring a build before its swap.

    One tuple per paragraph: (document, searched, start, end, text, section, index, vector bytes or None,
    context, entry vector bytes or None), where ``document`` tells documents apart and ``searched`` says
    whether a search ranks it.
    """
    reused = {existing[p.name].pk for p in prepared if p.reused}
    stored: dict[int, list[tuple]] = defaultdict(list)
    if reused:
        rows = (
            Paragraph.objects.filter(collection=collection)
            .order_by("document_id", "index")
            .values_list("document_id", *STORED_FIELDS)
        )
        for document_id, *row in rows.iterator(chunk_size=2000):
            if document_id in reused:
                stored[document_id].append(tuple(row))
    paragraphs: list[CandidateRow] = []
    for number, item in enumerate(prepared):
        if item.status == Document.REFUSED:
            continue
        # The status the swap gives the document: in review unless a person approved this very version.
        searched = item.status == Document.ACTIVE or (
            item.status == Document.NEEDS_REVIEW and approved(item, existing)
        )
        if item.reused:
            pieces = stored[existing[item.name].pk]
        else:
            pieces = [
                (
                    p.start,
                    p.end,
                    p.text,
                    (p.section or "")[:300],
                    i,
                    item.vectors[i] if item.vectors else None,
                    item.contexts[i],
                    item.entry_vectors[i] if item.entry_vectors else None,
                )
                for i, p in enumerate(item.pieces)
            ]
        held = set(item.held)  # paragraphs waiting in review for a conflict: the rest is searched
        paragraphs.extend(
            CandidateRow(number, searched and k not in held, *piece) for k, piece in enumerate(pieces)
        )
    return paragraphs
