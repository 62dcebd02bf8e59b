"""Holding back for review: paragraphs that match another's except for their numbers."""

import re
from collections import defaultdict

from ...models import (
    Collection,
    Document,
    Paragraph,
)
from .prepare import Prepared


def _review_warnings(items) -> list[str]:
    return [f"{item.name} needs review: {'; '.join(item.warnings + item.conflicts)}" for item in items]


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
        names = sorted(
            {n for n, _t in entries}
        )  # one name: repeats inside a man page or changelog, not a conflict
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
