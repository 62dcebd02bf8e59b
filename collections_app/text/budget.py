"""An answer within a character budget: every hit first, shortened to its best part rather than dropped, then
its neighbours nearest first, cut at sentences.

Pure: no models, no settings. `fit` takes the stitched runs of a search (best first, `stitch.stitch`) and
the rows they were made from, and returns the runs as they fit ``max_chars`` characters of text in all:

1. Every hit (the rows the ranking chose, not their neighbours), best first. When every hit fits whole,
   each is placed whole. When they do not, each is shortened to its best part (`best_part`: the whole
   sentences or lines of it that hold most of the question's words, at least `MIN_PART` characters or
   the whole hit when shorter), the budget shared out evenly over the hits that need cutting, so a hit
   is never dropped to make room for another's text. Only when even `MIN_PART` characters a hit do not
   fit are the last hits left out (at the default 10,000 characters, 33 hits fit).
2. Then the neighbours `stitch` widened the hits by, in rounds: the rows one step from a hit of a run
   (best run first; rows between two hits of one run are neighbours too), then two steps, and so on. A
   neighbour is added whole while the run's text still fits; the first that does not is cut at a sentence
   boundary (one before the nearest hit keeps its closing sentences, one after it its opening ones), or
   left out when no sentence of it fits, and nothing more is added: the budget is spent.

Pieces of a run that are not contiguous in the document (a row left out between two hits, a shortened
hit) are joined by `stitch.join_rows` with a visible elision. Whether anything was left out or cut is told
(``cut``), and which rows were shortened, to which part (``excerpts``), so an agent knows the answer is
not all the search found.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ragsite.lexical import terms

from .headings import SENTENCE_BREAK
from .stitch import ELISION, Row, Stitched, join_rows

__all__ = ["MIN_PART", "Fitted", "best_part", "centred_part", "fit"]

# The least a shortened hit keeps (the whole hit when shorter): about three sentences of prose, enough to
# hold an answer and the words around it.
MIN_PART = 300
# How the budget left after every hit's least part is shared: "by run" (each run in turn, best first: its
# hits back to whole, then its neighbours), "by hit" (each hit in turn, best first: the hit, then its own
# neighbours, so a lower hit sharing the best run waits for its turn), "outward" (each run in turn, best
# first, from its best hit outward, nearest row first, hit or neighbour alike: `_outward`), "best first"
# (the best hit whole before the next grows) or "even" (water filling). "by hit" keeps found@10 >= found@5
# with the stemming analyzers where "by run" does not, but loses two dev-set questions at found@5 with
# `simple` (today's default analyzer); "outward" keeps it on the man shelf by losing there at found@5 and
# breaks it on the dev set, so "by run" stays (docs/benchmarks.md, *The budget: asking for more*).
SHARING = "by run"
# The order neighbours are added in: "rounds" (the nearest of every run, best run first, then the next
# nearest) or "by run" (every neighbour of the best run, nearest first, then the next run's).
NEIGHBOURS = "by run"


@dataclass(frozen=True)
class Fitted:
    """The runs that fit (their text, first and last row as kept), the rows as kept (a shortened row holds
    only its kept part; a row left out of a run is absent), whether anything was cut or left out, and for
    each shortened row its kept part as ``(start, end)`` within its text as stitching had it."""

    runs: list[Stitched]
    readable: dict[int, Row]
    cut: bool
    excerpts: dict[int, tuple[int, int]] = field(default_factory=dict)


def _sentence_ends(text: str) -> list[int]:
    ends = [match.start(1) for match in SENTENCE_BREAK.finditer(text)]
    stripped = text.rstrip()
    if stripped.endswith((".", "!", "?", '."', ".)", '!"', '?"')):
        ends.append(len(stripped))
    return ends


def _part(row: Row, begin: int, end: int) -> Row:
    """``row`` holding only ``text[begin:end]`` (whitespace at its edges dropped), marked where it was cut."""
    text = row.text
    while begin < end and text[begin].isspace():
        begin += 1
    while end > begin and text[end - 1].isspace():
        end -= 1
    if begin == 0 and end == len(text):
        return row
    return replace(
        row,
        text=text[begin:end],
        start=row.start + begin,
        end=row.start + end,
        cut_before=row.cut_before or begin > 0,
        cut_after=row.cut_after or end < len(text),
    )


def _opening(row: Row, room: int) -> Row | None:
    """The row's opening sentences within ``room`` characters, or None."""
    ends = [end for end in _sentence_ends(row.text) if 0 < end <= room]
    return _part(row, 0, ends[-1]) if ends else None


def _closing(row: Row, room: int) -> Row | None:
    """The row's closing sentences within ``room`` characters, or None."""
    starts = [
        match.end(1) for match in SENTENCE_BREAK.finditer(row.text) if len(row.text) - match.end(1) <= room
    ]
    return _part(row, starts[0], len(row.text)) if starts else None


def _units(text: str) -> list[tuple[int, int]]:
    """The text's sentences and lines, as (start, end) spans that cover it in order. A line that only wraps
    a sentence (`_wraps`) is not a unit of its own: a part never starts in a sentence's middle."""
    cuts = {0, len(text)}
    cuts.update(match.end(1) for match in SENTENCE_BREAK.finditer(text))
    cuts.update(at + 1 for at, character in enumerate(text) if character == "\n" and not _wraps(text, at))
    bounds = sorted(cuts)
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if a < b]


def _wraps(text: str, at: int) -> bool:
    """Whether the line break at ``at`` only wraps a sentence, as a PDF's or a plain-text file's hard-wrapped
    lines do: the line before it ends in a word or a comma, not a sentence's or a clause's end, and the
    next line goes on in lower case (a list item, a heading or a new sentence starts otherwise)."""
    before = text[at - 1] if at > 0 else "\n"
    if before.isspace() or before in ".!?:;":
        return False
    following = text[at + 1 : at + 80].lstrip(" \t")
    return bool(following) and following[0].islower()


def _words_within(text: str, begin: int, room: int) -> tuple[int, int]:
    """A span of whole words from ``begin`` within ``room`` characters (for a sentence too long for it)."""
    end = text.rfind(" ", begin, begin + room + 1)
    return (begin, end if end > begin else begin + room)


def best_part(row: Row, room: int, weights: Mapping[str, float]) -> Row:
    """The part of ``row`` within ``room`` characters that holds most of the question's words: the run of
    whole sentences and lines, as long as fits, whose distinct question terms weigh most (``weights``, a
    term's weight; more occurrences break a tie, then the earlier run). With no question word in reach it
    is the opening; a single sentence longer than ``room`` is cut at a word."""
    text = row.text
    if len(text) <= room:
        return row
    units = _units(text)
    counted = [Counter(t for t in terms(text[a:b]) if t in weights) for a, b in units]
    best_key, best_span = None, None
    for i, (a, _b) in enumerate(units):
        held: Counter[str] = Counter()
        j = i
        while j < len(units) and len(text[a : units[j][1]].strip()) <= room:
            held.update(counted[j])
            j += 1
        span = (a, units[j - 1][1]) if j > i else _words_within(text, a + _leading(text, a), room)
        if j == i:
            held = Counter(t for t in terms(text[span[0] : span[1]]) if t in weights)
        key = (sum(weights[t] for t in held), sum(held.values()), -i)
        if best_key is None or key > best_key:
            best_key, best_span = key, span
        if j == len(units):
            break  # every later start holds a subset of this run
    assert best_span is not None
    return _part(row, *_filled(text, best_span, room))


def _filled(text: str, span: tuple[int, int], room: int) -> tuple[int, int]:
    """``span`` of whole sentences and lines grown by the whole words after it (before it at the text's
    end) while it fits ``room``: a part's next sentence may be too long for the room while half of it is
    not, and a part of 151 characters where 300 were granted quotes less than the budget allows."""
    begin, end = span
    left = room - len(text[begin:end].strip())
    if left <= 1:
        return span
    if end < len(text):
        cut = text.rfind(" ", end, end + left)
        return (begin, cut) if cut > end else span
    cut = text.find(" ", max(begin - left, 0), begin)
    return (cut + 1, end) if 0 <= cut < begin else span


def centred_part(row: Row, room: int, span: tuple[int, int]) -> Row:
    """The part of ``row`` within ``room`` characters centred on ``span`` (start and end in the document's
    text, as ``row.start``): the sentences and lines that hold it, then those after and before it in turn
    while they fit. A span longer than ``room`` keeps its opening, cut at a word."""
    text = row.text
    if len(text) <= room:
        return row
    a = min(max(span[0] - row.start, 0), len(text))
    b = min(max(span[1] - row.start, a), len(text))
    if a == b:
        return best_part(row, room, {})
    if b - a >= room:
        return _part(row, *_words_within(text, a + _leading(text, a), room))
    units = _units(text)
    lo = next(i for i, (_u, v) in enumerate(units) if v > a)
    hi = next(i for i, (_u, v) in enumerate(units) if v >= b)
    begin, end = units[lo][0], units[hi][1]
    if end - begin > room:
        return _part(row, a, b)
    before, after = lo - 1, hi + 1
    grew = True
    while grew:
        grew = False
        if after < len(units) and units[after][1] - begin <= room:
            end, after, grew = units[after][1], after + 1, True
        if before >= 0 and end - units[before][0] <= room:
            begin, before, grew = units[before][0], before - 1, True
    return _part(row, begin, end)


def _leading(text: str, at: int) -> int:
    return len(text[at:]) - len(text[at:].lstrip())


def _weights(question_terms: Sequence[str] | None, rows: Sequence[Row]) -> dict[str, float]:
    """Each distinct question term's weight for choosing a part: its BM25 idf over ``rows`` (the rows this
    answer read), so a word every row holds weighs little and a rare one much."""
    if not question_terms:
        return {}
    wanted = set(question_terms)
    df: Counter[str] = Counter()
    for row in rows:
        df.update(wanted & set(terms(row.text)))
    n = len(rows)
    return {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}


def _shortened(
    row: Row, room: int, weights: Mapping[str, float], focus: Mapping[int, tuple[int, int]] | None, o: int
) -> Row:
    """A hit cut to ``room`` characters: centred on its entry (``focus``) if it has one, else `best_part`."""
    if focus and o in focus:
        return centred_part(row, room, focus[o])
    return best_part(row, room, weights)


def _hit_order(runs: Sequence[Stitched], owner: Mapping[int, int], hits: Sequence[int] | None) -> list[int]:
    """The hits, best first (``hits``), then the best hit of any run they left out."""
    ordered = [o for o in dict.fromkeys(hits or []) if o in owner]
    seen = set(ordered)
    ordered += [run.hit for run in runs if run.hit not in seen and run.hit in owner]
    return ordered


def _by_hit(
    order: Sequence[int],
    kept: Mapping[int, Row],
    readable: Mapping[int, Row],
    owner: Mapping[int, int],
    members: Sequence[Sequence[int]],
    made: Sequence[int],
    steps: Callable[[int], list[tuple[int, int]]],
) -> list[tuple[int, int]]:
    """What grows after every hit has its least part, as (run, index in the run), for `SHARING` "by hit":
    hit by hit, best first, the hit back towards whole (when shortened), then its own neighbours (those
    nearer to it than to any other hit of its run; between two as near, the better hit's), nearest
    first. A lower hit that shares the best hit's run so waits for its own turn instead of taking the
    room of a better hit in another run."""
    rank = {o: position for position, o in enumerate(order)}
    owned: dict[int, list[tuple[int, int, int]]] = {o: [] for o in order}
    for number in made:
        at = {o: members[number].index(o) for o in members[number] if o in kept and o in rank}
        for distance, index in steps(number):
            nearest = min(at, key=lambda h: (abs(at[h] - index), rank[h]))
            owned[nearest].append((distance, index, number))
    grown: list[tuple[int, int]] = []
    for o in order:
        if o not in kept:
            continue  # left out: not even its least part fitted
        if kept[o] is not readable[o]:
            grown.append((owner[o], members[owner[o]].index(o)))
        grown += [(run, index) for _distance, index, run in sorted(owned[o])]
    return grown


def _outward(
    order: Sequence[int],
    kept: Mapping[int, Row],
    readable: Mapping[int, Row],
    owner: Mapping[int, int],
    members: Sequence[Sequence[int]],
    made: Sequence[int],
) -> list[tuple[int, int]]:
    """What grows after every hit has its least part, as (run, index in the run), for `SHARING` "outward":
    run by run, best first, each run from its best hit outward, nearest row first (the earlier of two as
    near), whether the row is a hit (grown back towards whole) or a neighbour (cut at sentences on the side
    facing the best hit when it does not fit whole). A row so grows in the turn its place in the run gives
    it, not later because a lower hit happened to land on it."""
    grown: list[tuple[int, int]] = []
    for number in made:
        centre = members[number].index(next(o for o in order if owner[o] == number and o in kept))
        for index in sorted(range(len(members[number])), key=lambda index: (abs(index - centre), index)):
            o = members[number][index]
            if o not in kept or kept[o] is not readable[o]:
                grown.append((number, index))
    return grown


def _shares(lengths: Sequence[int], extra: Sequence[int], max_chars: int) -> list[int]:
    """The most characters each hit (in order) may keep; the hits past those returned are left out.

    The hits whose ``MIN_PART`` (or whole length, when shorter) and joining characters (``extra``) fit are
    kept, each first given that least part; what is left goes to them in `SHARING`'s way."""
    kept, need = 0, 0
    for length, joining in zip(lengths, extra, strict=True):
        need += min(length, MIN_PART) + joining
        if need > max_chars:
            break
        kept += 1
    if kept == 0:
        return [max_chars]
    shares = [min(length, MIN_PART) for length in lengths[:kept]]
    left = max_chars - sum(shares) - sum(extra[:kept])
    if SHARING in ("by hit", "by run", "outward"):
        return shares  # the rest goes to each hit (or run) in turn, then its neighbours (`fit`)
    if SHARING == "best first":
        for number, length in enumerate(lengths[:kept]):
            more = min(length - shares[number], left)
            shares[number] += more
            left -= more
        return shares
    # Evenly (water filling): a hit shorter than its share keeps its whole text and leaves the rest.
    room = left + sum(shares)
    level = math.inf
    for position, length in enumerate(sorted(lengths[:kept])):
        share = room / (kept - position)
        if length > share:
            level = share
            break
        room -= length
    return [int(min(length, level)) for length in lengths[:kept]]


def fit(
    runs: Sequence[Stitched],
    readable: Mapping[int, Row],
    max_chars: int,
    hits: Sequence[int] | None = None,
    question_terms: Sequence[str] | None = None,
    *,
    focus: Mapping[int, tuple[int, int]] | None = None,
) -> Fitted:
    """`runs` (best first: `stitch.stitch`'s or `stitch.stitch_sections`' over ``readable``) as they fit
    ``max_chars`` characters of text in all (see the module).

    ``hits``: the ordinals of every hit, best first (None: each run's best hit only). ``question_terms``:
    the question's terms, which choose a shortened hit's part (None: its opening). ``focus``: for a hit
    its best entry scored (`ranking.Ranking.focus`), that entry's (start, end) in the document's text: its
    shortened part is centred on it (`centred_part`) rather than chosen by the words. A run's rows are the
    readable ones between its first and last: a run may step over rows the search may not use, so
    neighbours are counted among the readable rows, never by ordinal."""
    if sum(len(run.text) for run in runs) <= max_chars:
        return Fitted(list(runs), dict(readable), False)
    members = [[o for o in range(run.first, run.last + 1) if o in readable] for run in runs]
    owner: dict[int, int] = {}  # a row's run: the first run holding it
    for number, member in enumerate(members):
        for o in member:
            owner.setdefault(o, number)
    kept: dict[int, Row] = {}
    placed: list[set[int]] = [set() for _ in runs]  # indexes into members
    cut = False

    def text_of(number: int, with_index: int | None = None, row: Row | None = None) -> str:
        at = placed[number] if with_index is None else placed[number] | {with_index}
        pieces = []
        for index in sorted(at):
            o = members[number][index]
            pieces.append(row if index == with_index and row is not None else kept[o])
        return join_rows(pieces)

    # 1. Every hit: whole when all fit, else each shortened to its best part.
    order = _hit_order(runs, owner, hits)
    lengths = [len(readable[o].text) for o in order]
    extra, opened = [], set()
    for o in order:
        extra.append(len(ELISION) if owner[o] in opened else 0)
        opened.add(owner[o])
    for o in order:
        placed[owner[o]].add(members[owner[o]].index(o))
        kept[o] = readable[o]
    if sum(len(text_of(number)) for number in set(owner[o] for o in order)) > max_chars:
        cut = True
        shares = _shares(lengths, extra, max_chars)
        weights = _weights(question_terms, list(readable.values()))
        placed = [set() for _ in runs]
        kept = {}
        for o, share in zip(order, shares, strict=False):
            row = readable[o]
            kept[o] = _shortened(row, share, weights, focus, o) if len(row.text) > share else row
            placed[owner[o]].add(members[owner[o]].index(o))
    made = [number for number in range(len(runs)) if placed[number]]
    cut = cut or len(made) < len(runs)
    texts = {number: text_of(number) for number in made}
    spent = sum(len(text) for text in texts.values())

    # 2. Neighbours, nearest first: in rounds over the runs (one step from a hit in each run, best run
    # first, then two steps), or run by run (`NEIGHBOURS`).
    hits_of = {number: sorted(placed[number]) for number in made}

    def nearest(number: int, index: int) -> int:
        return min(hits_of[number], key=lambda h: (abs(h - index), h))

    def steps(number: int) -> list[tuple[int, int]]:
        """(distance, index) of the run's rows that are not placed, nearest first, earlier first."""
        return sorted(
            (abs(nearest(number, index) - index), index)
            for index in range(len(members[number]))
            if index not in placed[number]
        )

    grow = {number: [] for number in made}
    if SHARING == "by hit":
        order_of = _by_hit(order, kept, readable, owner, members, made, steps)
    elif SHARING == "by run":
        for o in order:
            if owner[o] in grow and o in kept and kept[o] is not readable[o]:
                grow[owner[o]].append(o)
    if SHARING == "outward":
        order_of = _outward(order, kept, readable, owner, members, made)
    elif SHARING == "by hit":
        pass
    elif NEIGHBOURS == "rounds" and SHARING != "by run":
        queue = sorted(
            (
                (distance, position, index)
                for position, number in enumerate(made)
                for distance, index in steps(number)
            ),
        )
        order_of = [(made[position], index) for _distance, position, index in queue]
    else:
        order_of = [
            (number, index)
            for number in made
            for index in [members[number].index(o) for o in grow[number]]
            + [index for _distance, index in steps(number)]
        ]
    centres = {number: members[number].index(next(o for o in order if owner[o] == number)) for number in made}
    shortened = any(kept[o] is not readable[o] for o in kept)
    weights = _weights(question_terms, list(readable.values())) if shortened else {}
    for number, index in order_of:
        o = members[number][index]
        if index in placed[number]:  # a shortened hit, grown to its whole text or as much as fits
            text = text_of(number, index, readable[o])
            if spent - len(texts[number]) + len(text) <= max_chars:
                kept[o] = readable[o]
            else:
                part = _shortened(readable[o], len(kept[o].text) + max_chars - spent, weights, focus, o)
                text = text_of(number, index, part)
                if spent - len(texts[number]) + len(text) <= max_chars:
                    kept[o] = part
                    spent += len(text) - len(texts[number])
                    texts[number] = text
                break
            spent += len(text) - len(texts[number])
            texts[number] = text
            continue
        text = text_of(number, index, readable[o])
        if spent - len(texts[number]) + len(text) <= max_chars:
            kept[o] = readable[o]
        else:
            # What joins it: a space or a paragraph break where the text runs on, else an elision.
            side = index < (centres[number] if SHARING == "outward" else nearest(number, index))
            for joining in (1, 2, len(ELISION)):
                room = max_chars - spent - joining
                part = _closing(readable[o], room) if side else _opening(readable[o], room)
                if part is not None:
                    text = text_of(number, index, part)
                    if spent - len(texts[number]) + len(text) <= max_chars:
                        break
            else:
                break  # not a sentence of it fits: the budget is spent
            kept[o] = part
            placed[number].add(index)
            spent += len(text) - len(texts[number])
            texts[number] = text
            break  # the budget is spent
        placed[number].add(index)
        spent += len(text) - len(texts[number])
        texts[number] = text
    cut = cut or any(len(placed[number]) < len(members[number]) for number in made)
    fitted = []
    for number in made:
        at = [members[number][index] for index in sorted(placed[number])]
        fitted.append(replace(runs[number], first=at[0], last=at[-1], text=texts[number], passages=len(at)))
    excerpts = {
        o: (row.start - readable[o].start, row.end - readable[o].start)
        for o, row in kept.items()
        if row is not readable[o]
    }
    return Fitted(fitted, kept, cut, excerpts)
