"""An answer within a character budget: each hit first, then its neighbours best-first, cut at sentences.

Pure: no models, no settings. `fit` takes the stitched runs of a search (best first, `stitch.stitch`) and
the rows they were made from, and returns the runs as they fit ``max_chars`` characters of text in all:

1. Each run's best hit, in the runs' order, whole while it fits. The first that does not is cut at the
   last sentence end within the room left (at a word end when its opening has no sentence end), and
   the runs after it are left out.
2. Then the neighbours `stitch` widened each hit by, in rounds: the nearest neighbour on each side of
   every run (best run first), then the next nearest, and so on. A neighbour is added whole while the
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


def fit(runs: Sequence[Stitched], readable: Mapping[int, Row], max_chars: int) -> Fitted:
    """`runs` (best first) as they fit ``max_chars`` characters of text in all (see the module).

    A run's rows are the readable ones between its first and last: a run may step over rows the
    search may not use, so neighbours are counted among the readable rows, never by ordinal."""
    kept: dict[int, Row] = dict(readable)
    members = [[o for o in range(run.first, run.last + 1) if o in readable] for run in runs]
    spans: list[list[int]] = []  # [first, last] kept of each run that made it, as indexes into members
    texts: list[str] = []
    spent = 0
    cut = False
    for number, run in enumerate(runs):
        hit = readable[run.hit]
        at = members[number].index(run.hit)
        if spent + len(hit.text) <= max_chars:
            spans.append([at, at])
            texts.append(hit.text)
            spent += len(hit.text)
            continue
        opening = _opening(hit, max_chars - spent, words=True)
        if opening is not None:
            kept[run.hit] = opening
            spans.append([at, at])
            texts.append(opening.text)
        cut = True
        break
    cut = cut or len(spans) < len(runs)
    full = not cut

    def joined(number: int, span: list[int]) -> str:
        return join_rows([kept[o] for o in members[number][span[0] : span[1] + 1]])

    def within(number: int, index: int) -> bool:
        return 0 <= index < len(members[number])

    distance = 1
    while full and any(
        within(number, members[number].index(run.hit) - distance)
        or within(number, members[number].index(run.hit) + distance)
        for number, run in enumerate(runs[: len(spans)])
    ):
        for number, run in enumerate(runs[: len(spans)]):
            at = members[number].index(run.hit)
            for index, side in ((at - distance, 0), (at + distance, 1)):
                if not full or not within(number, index):
                    continue
                ordinal = members[number][index]
                trial = list(spans[number])
                trial[side] = index
                text = joined(number, trial)
                if spent - len(texts[number]) + len(text) <= max_chars:
                    spans[number], spent, texts[number] = trial, spent - len(texts[number]) + len(text), text
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
                    spans[number], spent, texts[number] = trial, spent - len(texts[number]) + len(text), text
        distance += 1
    if full:
        cut = cut or any(span != [0, len(members[number]) - 1] for number, span in enumerate(spans))
    fitted = [
        replace(
            run,
            first=members[number][first],
            last=members[number][last],
            text=text,
            passages=last - first + 1,
        )
        for number, (run, (first, last), text) in enumerate(zip(runs, spans, texts, strict=False))
    ]
    return Fitted(fitted, kept, cut)
