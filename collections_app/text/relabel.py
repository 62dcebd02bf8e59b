"""Which labels a rebuilt piece of a document carries over: by its own text, else from what it overlaps.

A piece that shares its opening with the piece before it (an overlapping strategy) holds a *carried
opening*: text of its neighbour. Labels used to follow each piece's whole text, so an edit to a
public paragraph changed the carried opening of the restricted piece after it, its fingerprint
changed, and it came back unlabelled: readable by anyone. Here a piece is known
by its *own* text, what follows its carried opening, which an edit next to it does not touch.

A piece whose own text matches no earlier piece (it was edited, or is new) takes the labels of the
earlier pieces it lies between: the pieces matched before and after it are anchors, and it overlaps
the earlier pieces between theirs (or, inserted where nothing stood, the two anchors themselves).
It keeps only what every labelled one of them demands (the labels they all share), so no reader
gains a paragraph by an edit; when they share none, no label can say that, and it is held back.

Pure: no models, no settings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field


def own_text(text: str, carried: int) -> str:
    """What of a piece no earlier piece of its document holds (its text after the carried opening)."""
    return text[max(carried, 0) :]


def own_fingerprint(text: str, carried: int) -> str:
    return hashlib.sha256(own_text(text, carried).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Carried:
    """The labels one new piece takes: `labels`, whether it matched an earlier piece by its own text,
    and `held_back` when the pieces it overlaps share no label (it must wait for a person)."""

    labels: frozenset[int] = frozenset()
    matched: bool = True
    held_back: bool = False
    overlapped: tuple[int, ...] = field(default=())


def carry_labels(old: Sequence[tuple[str, frozenset[int]]], new: Sequence[str]) -> list[Carried]:
    """For each new piece (its own-text fingerprint, in document order) the labels it carries.

    ``old``: the earlier pieces of the document in order, each (own-text fingerprint, label ids).
    """
    first_of: dict[str, int] = {}
    for index, (fingerprint, _labels) in enumerate(old):
        first_of.setdefault(fingerprint, index)
    # Anchors: new pieces matched by their own text, kept only while the old indices they match grow,
    # so the pieces between two anchors are aligned with the old pieces between theirs.
    anchor: list[int | None] = [None] * len(new)
    last = -1
    for j, fingerprint in enumerate(new):
        i = first_of.get(fingerprint)
        if i is not None and i > last:
            anchor[j], last = i, i
    labels_of = {i: labels for i, (_fp, labels) in enumerate(old)}
    result = []
    for j in range(len(new)):
        if anchor[j] is not None:
            result.append(Carried(labels=labels_of[anchor[j]]))
            continue
        before = next((anchor[k] for k in range(j - 1, -1, -1) if anchor[k] is not None), -1)
        after = next((anchor[k] for k in range(j + 1, len(new)) if anchor[k] is not None), len(old))
        between = tuple(range(before + 1, after)) or tuple(i for i in (before, after) if 0 <= i < len(old))
        result.append(_inherit(between, labels_of))
    return result


def _inherit(overlapped: tuple[int, ...], labels_of: dict[int, frozenset[int]]) -> Carried:
    labelled = [labels_of[i] for i in overlapped if labels_of[i]]
    if not labelled:
        return Carried(matched=False, overlapped=overlapped)
    shared = frozenset.intersection(*labelled)
    return Carried(labels=shared, matched=False, held_back=not shared, overlapped=overlapped)


__all__ = ["Carried", "carry_labels", "own_fingerprint", "own_text"]
