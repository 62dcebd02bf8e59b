"""Bringing each hit back with the paragraphs around it, stitched in document order.

The behaviour is seed 000 ("The collection format", *A hit may arrive with the paragraphs
around it*) and DESIGN.md §5 (*Around*):

* each hit comes back with up to ``around`` paragraphs either side, in document order,
  carrying the best score of its pieces and a ``passages`` count;
* pieces join as the document joins them where its text runs on, and with a visible elision
  where it does not (:func:`join_rows`);
* neighbours come only from the rows this reader may read; a row the reader may not read is
  stepped over (the caller numbers the readable rows) and its place is an elision, as it is in
  the collection without that row;
* a run never crosses from one document into the next, although ordinals run on across the
  whole collection;
* overlapping hits merge, and text that two chunks share is not repeated;
* a row never brings back text it shares with an earlier row the reader may not read
  (:func:`cut_hidden_overlap`).

Pure: no Django models, no settings. The caller passes the readable rows it already holds.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from ragsite.lexical import terms


@dataclass(frozen=True)
class Row:
    """One stored paragraph, as far as stitching needs it."""

    ordinal: int  # position across the whole collection
    document: int  # document id; the ordinals of one document are consecutive
    start: int  # character offsets of the paragraph in its document's text
    end: int
    text: str  # == document_text[start:end]
    section: str
    index: int = 0  # position within its document, the k of the citation <document>#<k>
    pages: tuple[int, int] | None = None  # first and last page of its text (None: no pages)
    # Shortened by the answer budget at its opening / its close: nothing joins it there without an elision.
    cut_before: bool = False
    cut_after: bool = False


@dataclass(frozen=True)
class Stitched:
    """A run of consecutive readable paragraphs of one document, around one or more hits."""

    first: int  # first and last ordinal of the run
    last: int
    document: int
    section: str  # the section of the best-scoring hit in the run
    hit: int  # ordinal of that best-scoring hit: the paragraph the question matched
    text: str
    score: float  # the best score among the hits in the run
    passages: int  # how many stored paragraphs the run stitches (last - first + 1)


def stitch(hits: Sequence[tuple[int, float]], readable: Mapping[int, Row], around: int) -> list[Stitched]:
    """Widen each hit by up to ``around`` readable rows either side and merge what meets.

    ``hits`` are (ordinal, score) pairs of the top paragraphs, each of which must be in
    ``readable``; ``readable`` maps ordinal → row for the rows this reader may read (and that
    are searchable), nothing else. A hit repeated in ``hits`` counts once, at its best score.

    Decisions (seed 000's where it makes one; the merging of touching runs and the choice
    of section are this module's):

    * Widening walks ordinal by ordinal and stops at the first ordinal missing from
      ``readable`` (a gap) or belonging to another document (a seam), so a run is always a
      gap-free stretch of one document.
    * Runs of one document that overlap *or touch* (the next run's first ordinal is the
      previous run's last plus one) merge into one. Touching runs are contiguous text, and
      returning them apart would split a clause at an arbitrary paragraph boundary and, for
      a model reading them, look like two separate findings. The exception is
      ``around = 0``, which seed 000 defines as the behaviour before stitching existed,
      somebody deciding "that the matching paragraph alone is what they want": there each
      distinct hit comes back alone, even beside another hit (only repeats merge).
    * A run's score is the best score among the hits it contains (neighbours bring no score
      of their own): ranking by the mean would push a long clause below a single sharp
      unrelated hit. Its section is that best hit's section (the earliest such hit on a
      tie), since that is the paragraph the question matched.
    * Text is joined in document order by :func:`join_rows`.
    * Runs come back best score first, ties by first ordinal.
    """
    if around < 0:
        raise ValueError(f"around must not be negative, got {around}")

    best = _best_scores(hits, readable)
    if around == 0:
        # Each distinct hit alone (nothing to widen, and distinct hits never merge): its row as a run.
        alone = [
            Stitched(
                first=o,
                last=o,
                document=readable[o].document,
                section=readable[o].section,
                hit=o,
                text=readable[o].text,
                score=score,
                passages=1,
            )
            for o, score in best.items()
        ]
        alone.sort(key=lambda run: (-run.score, run.first))
        return alone
    spans = sorted(_widen(ordinal, readable, around) for ordinal in best)
    # With around = 0 every span is one distinct hit, and touching ones stay apart.
    return _merged(spans, readable, best, 1 if around > 0 else 0, _same_document)


def _best_scores(hits: Sequence[tuple[int, float]], readable: Mapping[int, Row]) -> dict[int, float]:
    """Each distinct hit at its best score."""
    best: dict[int, float] = {}
    for ordinal, score in hits:
        if ordinal not in readable:
            # A hit the reader may not read would be a disclosure; it can only come from a
            # caller that ranked before filtering, which DESIGN.md §5 forbids.
            raise ValueError(f"hit {ordinal} is not among the readable rows")
        if ordinal not in best or score > best[ordinal]:
            best[ordinal] = score
    return best


def _merged(
    spans: list[tuple[int, int]], readable: Mapping[int, Row], best: Mapping[int, float], reach: int, joins
) -> list[Stitched]:
    """Sorted spans merged where one overlaps the next (or comes within ``reach``) and ``joins`` says
    their rows may join, as runs best first, ties by first ordinal."""
    merged: list[list[int]] = []
    for first, last in spans:
        previous = merged[-1] if merged else None
        if previous is not None and first <= previous[1] + reach and joins(readable, previous[1], first):
            previous[1] = max(previous[1], last)
        else:
            merged.append([first, last])
    runs = [_run(first, last, readable, best) for first, last in merged]
    runs.sort(key=lambda run: (-run.score, run.first))
    return runs


def _same_document(readable: Mapping[int, Row], one: int, other: int) -> bool:
    return readable[one].document == readable[other].document


# What a hit of the parent strategy brings back at most: its section's readable pieces nearest it, this
# many characters of text in all. Measured on the dev set (docs/decisions/0049):
# found@1 34, 38, 41, 43 of 69 at 1,200, 1,800, 3,000, 5,400; found@5 flat from 3,000 on.
SECTION_CHARS = 3000


def stitch_sections(
    hits: Sequence[tuple[int, float]], readable: Mapping[int, Row], bound: int | None = None
) -> list[Stitched]:
    """Each hit with the readable rows of its section nearest it (the parent strategy).

    A hit's run grows one row at a time, nearest first, alternating sides starting before it, while the
    joined text stays within ``bound`` characters (`SECTION_CHARS`), and never past a gap (an ordinal
    missing from ``readable``), a seam or another section: a run is the hit's section, or the window of it
    around the hit when the section is longer. Runs of one section that overlap or touch merge, scored by
    their best hit (`stitch`'s rules); runs of two sections never do. Like `stitch`, it reads only
    ``readable``, so what comes back is what a collection without the other rows would give.
    """
    bound = SECTION_CHARS if bound is None else bound
    best = _best_scores(hits, readable)
    spans = sorted(_section_span(ordinal, readable, bound) for ordinal in best)
    return _merged(spans, readable, best, 1, _same_section)


def _same_section(readable: Mapping[int, Row], one: int, other: int) -> bool:
    a, b = readable.get(one), readable.get(other)
    return a is not None and b is not None and (a.document, a.section) == (b.document, b.section)


def _section_span(ordinal: int, readable: Mapping[int, Row], bound: int) -> tuple[int, int]:
    first = last = ordinal
    length = len(readable[ordinal].text)
    open_sides = [True, True]
    while any(open_sides):
        for side in (0, 1):
            if not open_sides[side]:
                continue
            step = first - 1 if side == 0 else last + 1
            edge = first if side == 0 else last
            if not _same_section(readable, edge, step) or length + 1 + len(readable[step].text) > bound:
                open_sides[side] = False
                continue
            length += 1 + len(readable[step].text)
            first, last = (step, last) if side == 0 else (first, step)
    return first, last


def _widen(ordinal: int, readable: Mapping[int, Row], around: int) -> tuple[int, int]:
    """The widest stretch around ``ordinal``, at most ``around`` either side, without a gap or seam."""
    document = readable[ordinal].document
    first = last = ordinal
    for _ in range(around):
        row = readable.get(first - 1)
        if row is None or row.document != document:
            break
        first -= 1
    for _ in range(around):
        row = readable.get(last + 1)
        if row is None or row.document != document:
            break
        last += 1
    return first, last


def _run(first: int, last: int, readable: Mapping[int, Row], best: Mapping[int, float]) -> Stitched:
    """Assemble one merged stretch of rows into a :class:`Stitched`."""
    rows = [readable[ordinal] for ordinal in range(first, last + 1)]
    # max over (score, -ordinal): the best hit, the earliest of equals.
    top = max((ordinal for ordinal in range(first, last + 1) if ordinal in best), key=lambda o: (best[o], -o))
    return Stitched(
        first=first,
        last=last,
        document=rows[0].document,
        section=readable[top].section,
        hit=top,
        text=join_rows(rows),
        score=best[top],
        passages=len(rows),
    )


# Where the document's text does not run on from one row to the next (a row between them that this
# search may not use, a deleted one, a cut piece), the join says so rather than reading as one sentence
# the document does not contain (seed 000: a run never bridges a gap silently).
ELISION = "\n\n…\n\n"


def contiguous(before: Row, after: Row, covered_end: int | None = None) -> bool:
    """Whether the document's text runs on from ``before`` (ending at ``covered_end``, its end when None)
    to ``after``, two rows of one document in order: they overlap, or ``after`` is the piece cut right
    after ``before`` (its position in the document, `Row.index`, is the next) and neither was shortened
    on the side they meet. Positions, offsets and cuts are the rows' own, so a collection with the rows
    between them deleted answers the same (the twin rule)."""
    end = before.end if covered_end is None else covered_end
    if before.cut_after or after.cut_before:
        return False
    return after.start < end or after.index == before.index + 1


def _seam(whitespace: str, gap: int, following: str) -> str:
    """What joins two contiguous rows: the whitespace between them as the document has it when it is
    known (an overlap's), else read off the gap's width: none inside a word, a space for one character
    (a new line before a heading), a paragraph break for more."""
    if whitespace:
        return "\n\n" if "\n\n" in whitespace else "\n" if "\n" in whitespace else " "
    if gap <= 0:
        return ""
    if gap == 1:
        return "\n" if following.startswith("#") else " "
    return "\n\n"


def join_rows(rows: Sequence[Row]) -> str:
    """The text of rows of one document, in order, without repeating shared text, joined as the
    document joins them (DESIGN.md §5, *Around*).

    Where the text runs on (`contiguous`) the rows continue as the document stands, keeping its line
    breaks so a heading stays on its own line (`_seam`); where it does not, the join is `ELISION`.

    A row that starts before the text so far ends (chunks made with an overlap, such as the
    structure strategy's 180 characters) contributes only what lies past that end:
    ``text[covered_end - start:]``, nothing when the row is wholly inside. That remainder
    continues the document exactly where the previous text stopped: whitespace it opens with is
    the document's own (collapsed to one space, new line or paragraph break), and with none the
    cut fell inside a word and the rest of the word is glued on.
    """
    if not rows:
        return ""
    parts = [rows[0].text]
    covered_end = rows[0].end
    for before, row in zip(rows, rows[1:], strict=False):
        if not contiguous(before, row, covered_end):
            parts.append(ELISION + row.text)
        elif row.start < covered_end:
            tail = row.text[covered_end - row.start :]
            stripped = tail.lstrip()
            if stripped:
                parts.append(_seam(tail[: len(tail) - len(stripped)], 0, stripped) + stripped)
        else:
            parts.append(_seam("", row.start - covered_end, row.text) + row.text)
        covered_end = max(covered_end, row.end)
    return "".join(parts)


def cut_hidden_overlap(rows: Sequence[Row], position: int, readable: Sequence[bool]) -> Row:
    """``rows[position]`` less the opening it shares with earlier rows of its document that are not readable.

    Chunking with an overlap (the structure strategy's 180 characters) copies the end of a piece
    into the start of the next. The copied text belongs to the earlier piece: when this reader may
    not read that piece, the copy is cut, and the row starts where the hidden piece ends (nothing
    is left of a row wholly inside a hidden one). Labels are per paragraph and change after a
    build, so this is done per search rather than trusted to a build-time rule.

    ``rows`` are in ordinal order and ``readable[i]`` says whether ``rows[i]`` may be read. The rows
    of a document advance in both start and end (every chunking strategy does), so the walk back
    stops at the first earlier row that ends before this one starts.
    """
    row = rows[position]
    hidden_ends = []
    j = position - 1
    while j >= 0 and rows[j].document == row.document and rows[j].end > row.start:
        if not readable[j]:
            hidden_ends.append(rows[j].end)
        j -= 1
    return cut_opening(row, hidden_ends)


def cut_opening(row: Row, hidden_ends: Sequence[int]) -> Row:
    """``row`` starting at the furthest of ``hidden_ends`` (the ends of earlier, unreadable rows of its
    document) that lies inside it; the row itself when none does."""
    cut = max((end for end in hidden_ends if end > row.start), default=row.start)
    if cut == row.start:
        return row
    cut = min(cut, row.end)
    return replace(row, start=cut, text=row.text[cut - row.start :])


# --- What a row shares with earlier rows, for scoring (docs/decisions/0017) ---


def carried_openings(rows: Iterable[tuple[int, int, int]]) -> Iterator[tuple[int, int]]:
    """For rows in ordinal order, given as (document, start, end): per row, how many characters of its
    opening earlier rows of its document also hold (its *carried opening*, from its start to the
    furthest end before it), and the first earlier row of its document that ends past its start (the
    row itself when none does).

    Streamed, one row at a time (it keeps the ends of one document). The earlier rows a row can
    share text with are exactly those from that first one up to it: ends only grow along a document
    (a prefix maximum is used, so that holds even if a strategy ever broke it, at the price of
    counting a row that does not overlap).
    """
    document = None
    ends: list[int] = []  # the prefix maximum of the ends of the current document's rows
    begin = 0  # the ordinal of the current document's first row
    for ordinal, (doc, start, end) in enumerate(rows):
        if doc != document:
            document, ends, begin = doc, [], ordinal
        reach = ends[-1] if ends else start
        yield max(0, min(end, reach) - start), begin + bisect_right(ends, start)
        ends.append(max(reach, end))


def _term_char(character: str) -> bool:
    return bool(terms(character))


def carried_terms_text(text: str, carried: int) -> str:
    """The opening of ``text`` whose terms a reader that may not read an earlier row must not be scored on.

    The carried opening, extended to the end of a word it stops inside (a hard cut through a long
    word): the word's terms hold characters of the earlier row, and splitting it would count terms
    the row does not have. So the terms of the result are always a sub-multiset of the row's terms,
    and the row's terms less them are those of ``text`` after it.
    """
    cut = min(max(carried, 0), len(text))
    if cut == 0:
        return ""
    while cut < len(text) and _term_char(text[cut - 1]) and _term_char(text[cut]):
        cut += 1
    return text[:cut]


def fresh_text(text: str, carried: int) -> str:
    """What of a row no earlier row of its document holds: what its vector is embedded from."""
    return text[max(carried, 0) :]
