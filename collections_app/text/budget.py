"""An answer within a character budget: each hit first, then its neighbours best-first, cut at sentences.

Pure: no models, no settings. `fit` takes the stitched runs of a search (best first, `stitch.stitch`) and
the rows they were made from, and returns the runs as they fit ``max_chars`` characters of text in all:

1. Every hit, best first, whole while it fits: a run's first hit alone, and a later hit of the same
   run (`stitch` merges hits that meet) together with the rows between it and what the run already
   holds. The first hit that does not fit ends this step: a run's first hit is cut at the last
   sentence end within the room left (at a word end when its opening has no sentence end), and the
   runs after it are left out. A hit of a merged run is a hit, not a neighbour: on the dev set a
   quarter of the answers' markers sit in such a hit (docs/decisions/0044).
2. Then the neighbours `stitch` widened the hits by, in rounds: the nearest row beyond each run's
   hits on each side (best run first), then the next nearest, and so on. A neighbour is added whole while the
   run's text still fits; the first that does not is cut at a sentence boundary (a neighbour before
   the hit keeps its closing sentences, one after it its opening ones), or left out when no sentence
   of it fits, and nothing more is added: the budget is spent.

A run stays one gap-free stretch of rows around its hit. Whether anything was left out or cut is told
(``cut``), so an agent knows the answer is not all the search found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .headings import SENTENCE_BREAK
from .stitch import Row, Stitched, join_rows

__all__ = ["Fitted", "fit"]


@dataclass(frozen=True)
class Fitted:
    """The runs that fit (their text, first and last row as kept), the rows as kept (a cut row holds only
    its kept part), and whether anything was cut or left out."""

    runs: list[Stitched]
    readable: dict[int, Row]
    cut: bool


def _sentence_ends(text: str) -> list[int]:
    ends = [match.start(1) for match in SENTENCE_BREAK.finditer(text)]
    stripped = text.rstrip()
    if stripped.endswith((".", "!", "?", '."', ".)", '!"', '?"')):
        ends.append(len(stripped))
    return ends


def _opening(row: Row, room: int, *, words: bool) -> Row | None:
    """The row's opening sentences within ``room`` characters (its opening words if ``words`` and no
    sentence ends in time), or None."""
    ends = [end for end in _sentence_ends(row.text) if 0 < end <= room]
    if ends:
        end = ends[-1]
    elif words:
        end = row.text.rfind(" ", 0, room + 1)
        if end <= 0:
            return None
    else:
        return None
    return replace(row, text=row.text[:end].rstrip(), end=row.start + len(row.text[:end].rstrip()))


def _closing(row: Row, room: int) -> Row | None:
    """The row's closing sentences within ``room`` characters, or None."""
    starts = [
        match.end(1) for match in SENTENCE_BREAK.finditer(row.text) if len(row.text) - match.end(1) <= room
    ]
    if not starts:
        return None
    begin = starts[0]
    return replace(row, text=row.text[begin:], start=row.start + begin)


def _hit_order(runs: Sequence[Stitched], members: list[list[int]], hits: Sequence[int] | None):
    """The hits in the order step 1 places them: best first, each run opened by its best hit and the
    runs opened in their order (a hit of a later run opens the runs before it first)."""
    owner = {o: number for number, member in enumerate(members) for o in member}
    opened = 0
    for ordinal in [] if hits is None else dict.fromkeys(hits):
        number = owner.get(ordinal)
        if number is None:
            continue  # a hit no run holds (wholly inside a hidden neighbour's copy)
        while opened <= number:
            yield runs[opened].hit
            opened += 1
        yield ordinal
    for number in range(opened, len(runs)):
        yield runs[number].hit


def fit(
    runs: Sequence[Stitched], readable: Mapping[int, Row], max_chars: int, hits: Sequence[int] | None = None
) -> Fitted:
    """`runs` (best first: `stitch.stitch`'s or `stitch.stitch_sections`' over ``readable``) as they fit
    ``max_chars`` characters of text in all (see the module).

    ``hits``: the ordinals of every hit, best first (None: each run's best hit only). A run's rows are
    the readable ones between its first and last: a run may step over rows the search may not use, so
    neighbours are counted among the readable rows, never by ordinal."""
    kept: dict[int, Row] = dict(readable)
    members = [[o for o in range(run.first, run.last + 1) if o in readable] for run in runs]
    # Each piece of a joined text is a row's text or a tail of it, after at most one space: when the rows
    # and a space each fit in all, every text tried below fits, every run comes back whole, and the runs
    # are those given (`stitch` joined each from these same rows), so the steps are skipped.
    if sum(len(readable[o].text) + 1 for member in members for o in member) <= max_chars:
        return Fitted(list(runs), kept, False)
    owner: dict[int, int] = {}  # a row's run: the first run holding it
    for number, member in enumerate(members):
        for o in member:
            owner.setdefault(o, number)
    spans: list[list[int] | None] = [None] * len(runs)  # [first, last] kept, as indexes into members
    texts = [""] * len(runs)
    spent = 0
    cut = False

    def joined(number: int, span: list[int]) -> str:
        return join_rows([kept[o] for o in members[number][span[0] : span[1] + 1]])

    def within(number: int, index: int) -> bool:
        return 0 <= index < len(members[number])

    def place(number: int, span: list[int], text: str) -> None:
        nonlocal spent
        spans[number], spent, texts[number] = span, spent - len(texts[number]) + len(text), text

    # 1. Every hit, best first: a run's first hit alone, a later hit of the run with the rows between
    # it and what the run holds (a run stays one stretch of rows).
    for ordinal in _hit_order(runs, members, hits):
        number = owner[ordinal]
        at = members[number].index(ordinal)
        span = spans[number]
        if span is not None and span[0] <= at <= span[1]:
            continue
        trial = [at, at] if span is None else [min(span[0], at), max(span[1], at)]
        text = joined(number, trial)
        if spent - len(texts[number]) + len(text) <= max_chars:
            place(number, trial, text)
            continue
        cut = True
        if span is None:
            opening = _opening(kept[ordinal], max_chars - spent, words=True)
            if opening is not None:
                kept[ordinal] = opening
                place(number, trial, opening.text)
        break
    made = [number for number in range(len(runs)) if spans[number] is not None]
    cut = cut or len(made) < len(runs)
    full = not cut

    # 2. Neighbours in rounds: the nearest row beyond each run's hits on either side, best run first.
    base = {number: list(spans[number]) for number in made}
    distance = 1
    while full and any(
        within(number, base[number][0] - distance) or within(number, base[number][1] + distance)
        for number in made
    ):
        for number in made:
            for index, side in ((base[number][0] - distance, 0), (base[number][1] + distance, 1)):
                if not full or not within(number, index):
                    continue
                ordinal = members[number][index]
                trial = list(spans[number])
                trial[side] = index
                text = joined(number, trial)
                if spent - len(texts[number]) + len(text) <= max_chars:
                    place(number, trial, text)
                    continue
                full, cut = False, True
                room = max_chars - spent - 1  # the space that joins it
                part = (
                    _closing(kept[ordinal], room) if side == 0 else _opening(kept[ordinal], room, words=False)
                )
                if part is None:
                    continue
                kept[ordinal] = part
                text = joined(number, trial)
                if spent - len(texts[number]) + len(text) <= max_chars:
                    place(number, trial, text)
        distance += 1
    if full:
        cut = cut or any(spans[number] != [0, len(members[number]) - 1] for number in made)
    fitted = [
        replace(
            runs[number],
            first=members[number][spans[number][0]],
            last=members[number][spans[number][1]],
            text=texts[number],
            passages=spans[number][1] - spans[number][0] + 1,
        )
        for number in made
    ]
    return Fitted(fitted, kept, cut)
