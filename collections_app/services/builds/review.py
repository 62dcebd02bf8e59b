"""Holding back for review: paragraphs that match another's except for their numbers."""

import re
from collections import defaultdict

from ragsite.slots import NUMBER, number_shape

from ...models import (
    Collection,
    Document,
    Paragraph,
)
from .prepare import Prepared
from .swap import approved


def _review_warnings(items) -> list[str]:
    notes = []
    for item in items:
        if item.status == Document.NEEDS_REVIEW:
            notes.append(f"{item.name} needs review: {'; '.join(item.warnings + item.conflicts)}")
        elif item.held:
            waits = "paragraph waits" if len(item.held) == 1 else "paragraphs wait"
            why = "; ".join(item.conflicts)
            notes.append(f"{item.name}: {len(item.held)} {waits} in review, the rest answers: {why}")
    return notes


# NUMBER and a block's shape (its numbers masked) are ragsite.slots', which memory's recall shares.
BLOCK_BREAK = re.compile(r"\n[ \t]*\n")


def _review(prepared: list[Prepared], collection: Collection, existing: dict | None = None) -> None:
    """Seed 003's review: scan warnings and exact copies put a whole document in needs_review; a paragraph
    that matches another document's except for its numbers is held on its own (`Prepared.held`).

    A conflict never takes a live paragraph out of search: of two conflicting paragraphs, one whose
    document is searched unchanged with that paragraph answering keeps answering, and only the other
    (a new or changed file's) waits for a person. When neither is live (a first build, two new files)
    both wait; when both are, both keep answering, as before the conflict was seen. The rest of a
    document answers either way."""
    existing = existing or {}
    readable = [p for p in prepared if p.status != Document.REFUSED]
    unchanged = _unchanged(readable, existing)
    by_fingerprint: dict[str, list[str]] = {}
    for item in readable:
        by_fingerprint.setdefault(item.fingerprint, []).append(item.name)
    for item in readable:
        twins = [n for n in by_fingerprint[item.fingerprint] if n != item.name]
        if twins and not (item.name in unchanged and any(n not in unchanged for n in twins)):
            item.conflicts.append(f"exact duplicate of {', '.join(twins)}")

    # Near-identical paragraphs that differ only in their numbers ("five days" vs "ten days" is
    # a different sentence; "5 days" vs "10 days" is caught here). Reused documents take part
    # through their stored paragraphs.
    shapes: dict[str, list[tuple[str, int, str]]] = {}
    stored = _stored_texts(collection, [item.name for item in readable if item.reused])
    for item in readable:
        texts = stored.get(item.name, []) if item.reused else list(enumerate(p.text for p in item.pieces))
        for k, text in texts:
            for block in BLOCK_BREAK.split(text):
                block = " ".join(line for line in block.splitlines() if not line.lstrip().startswith("#"))
                if NUMBER.search(block) and len(block) >= 40:
                    shapes.setdefault(number_shape(block), []).append((item.name, k, block))
    live: dict | None = None  # read once, at the first conflict
    items = {item.name: item for item in readable}
    held: dict[str, set[int]] = {}
    for entries in shapes.values():
        if len({" ".join(t.split()) for _n, _k, t in entries}) < 2:
            continue
        names = sorted({n for n, _k, _t in entries})
        if len(names) < 2:  # one name: repeats inside a man page or changelog, not a conflict
            continue
        if live is None:
            live = _live_paragraphs(collection, unchanged)
        answering = {(n, k) for n, k, _t in entries if (n, k) in live.get(n, ())}
        for name in names:
            others = [n for n in names if n != name]
            mine = {k for n, k, _t in entries if n == name}
            # Both sides name the conflict (the review page shows them side by side); only a paragraph
            # that is not answering already waits.
            items[name].conflicts.append(
                f"a paragraph matches one in {', '.join(others)} except for its numbers"
            )
            held.setdefault(name, set()).update(mine - {k for n, k in answering if n == name})
    for item in readable:
        item.conflicts = sorted(set(item.conflicts))
        if item.warnings or any(c.startswith("exact duplicate") for c in item.conflicts):
            item.status = Document.NEEDS_REVIEW
        elif held.get(item.name) and not approved(item, existing):
            item.held = sorted(held[item.name])


def waiting(prepared: list[Prepared], existing: dict) -> list[Prepared]:
    """The documents this build leaves waiting for a person: wholly (needs review, not approved) or for
    some paragraphs (`Prepared.held`)."""
    return [
        p
        for p in prepared
        if (p.status == Document.NEEDS_REVIEW and not approved(p, existing))
        or (p.status == Document.ACTIVE and p.held)
    ]


def held_passages(item: Prepared, existing: dict) -> int:
    """How many of the document's paragraphs no search reads for review's sake after this build."""
    if item.status == Document.NEEDS_REVIEW and not approved(item, existing):
        return len(item.pieces) + item.kept
    return len(item.held) if item.status == Document.ACTIVE else 0


def _unchanged(readable: list[Prepared], existing: dict) -> dict[str, int]:
    """{name: document id} of the documents searched now whose bytes this build reads unchanged."""
    return {
        item.name: existing[item.name].pk
        for item in readable
        if item.name in existing
        and existing[item.name].status == Document.ACTIVE
        and existing[item.name].enabled
        and existing[item.name].fingerprint == item.fingerprint
    }


def _live_paragraphs(collection: Collection, unchanged: dict[str, int]) -> dict[str, set]:
    """{document name: {(name, k)}}: the paragraphs that answer now and keep their text in this build —
    of a document searched now, unchanged, that are neither switched off nor waiting in review."""
    live: dict[str, set] = defaultdict(set)
    by_id = {pk: name for name, pk in unchanged.items()}
    if by_id:
        # One scan of the collection's rows (an IN list could outgrow SQLite's variable limit); only a
        # build that met a conflict gets here.
        rows = Paragraph.objects.filter(collection=collection, in_review=False, enabled=True)
        for document_id, k in rows.values_list("document_id", "index").iterator(chunk_size=5000):
            name = by_id.get(document_id)
            if name is not None:
                live[name].add((name, k))
    return live


def _stored_texts(collection: Collection, names: list[str]) -> dict[str, list[tuple[int, str]]]:
    """The stored paragraphs (k, text) of reused documents, by document name, in one query."""
    texts: dict[str, list[tuple[int, str]]] = defaultdict(list)
    wanted = set(names)
    if wanted:
        # One scan of the collection rather than an IN list that could outgrow SQLite's variable limit.
        # A paragraph a person switched off contradicts nobody: it is not read.
        rows = Paragraph.objects.filter(collection=collection, enabled=True).order_by("ordinal")
        for name, k, text in rows.values_list("document__name", "index", "text").iterator(chunk_size=2000):
            if name in wanted:
                texts[name].append((k, text))
    return texts
