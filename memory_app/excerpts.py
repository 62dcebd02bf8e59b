"""Choosing what recall quotes: excerpts best-first within a character budget.

Pure: no models, no settings. `services.recall` scores the candidates (the nodes of divided
records, whole records that fit the window, the opening of a record whose nodes are pending) and
hands them here best first; this module turns them into the answer's excerpts:

* candidates are taken best first until `most` excerpts are held or `max_chars` is spent;
* a candidate that touches an excerpt of the same record already held (only whitespace between
  them) is merged into it, in text order, and does not count as another excerpt;
* with `longest`, a candidate longer than that is quoted by its best part of at most `longest`
  characters, so that a small budget holds several places rather than one node;
* the candidate that does not fit what is left of the budget is cut to fit around its
  best-scoring part, and is the last one taken;
* a cut keeps whole lines (one line of a conversation, a list's item), and whole sentences only
  when not one line fits;
* each excerpt keeps the best score of its pieces and the range of nodes it covers;
* with `repeat_penalty` or `redundancy`, the order is not the scores' alone: a candidate of a record
  already quoted, or like what is already quoted, yields to a new place (see `diversified`);
* with `piece` and `rest_score`, a node is quoted first by its best lines (a share of its length)
  and what they leave out competes again as candidates of its own (`rests_of`, `node_rest_score`).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

# Where a quoted piece may start or end: after a line break, or after a sentence's stop (a
# full-width 。．！？ anywhere, a half-width . ! ? before whitespace), the same sentence ends
# `ragsite.division` cuts nodes at. Whitespace after the boundary is left outside the excerpt.
_SENTENCE_END = re.compile(r"\n|[\u3002\uff0e\uff01\uff1f]|[.!?][\"'\u201d\u2019)\]]*(?=\s|\Z)")
_LINE_END = re.compile(r"\n")

# Candidate kinds: a node of a divided record, a whole record, a pending record's opening.
NODE, WHOLE, PENDING = "node", "whole", "pending"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One span recall may quote, with its score; `parts` are scored sub-spans used to cut it."""

    kind: str
    id: int
    source: str  # NODE, WHOLE or PENDING
    node: int | None  # the node index of a NODE candidate
    start: int
    end: int
    score: float
    parts: Sequence[tuple[int, int, float]] = ()  # (start, end, score) inside [start, end)
    vector: Any = None  # its unit-length embedding (a numpy vector), for `redundancy`; None without
    rest: bool = False  # what `select` left of a candidate it cut (`rests_of`)
    origin: tuple[int, int] | None = None  # a rest's: the span of the candidate it was left of


@dataclass(slots=True)
class Excerpt:
    """A contiguous span of one record in the answer."""

    kind: str
    id: int
    source: str
    start: int
    end: int
    score: float
    first_node: int | None
    last_node: int | None
    cut: bool = False
    pieces: list[tuple[int, int]] = field(default_factory=list)
    wanted: list[tuple[int, int]] = field(default_factory=list)  # the whole spans of its candidates


@dataclass(frozen=True, slots=True)
class Selection:
    excerpts: list[Excerpt]
    chars: int
    cut: bool


def sentence_bounds(text: str, start: int, end: int, pattern: re.Pattern = _SENTENCE_END) -> list[int]:
    """Offsets in `text` where a quote of [start, end) may begin or end: start, each sentence end, end
    (with `_LINE_END`, each line's end instead)."""
    bounds = [start]
    for match in pattern.finditer(text, start, end):
        bounds.append(match.end())
    bounds.append(end)
    return sorted(set(bounds))


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def cut_to_fit(
    text: str,
    candidate: Candidate,
    room: int,
    terms_of: Callable[[str], set[str]] | None = None,
    query_terms: set[str] | None = None,
) -> tuple[int, int] | None:
    """The best run of whole lines of `candidate` of at most `room` characters, or None.

    Lines, not sentences, first: a line of a conversation or a list is what its reader quotes, and
    a run of sentences that cuts one of its lines in two quotes neither half usefully (on LoCoMo's
    dev split, pieces cut at lines held 4-11 points more evidence than pieces cut at sentences).
    When not one line fits, the same is done with sentences. Units are scored by the candidate's
    scored parts they overlap (the best such part), or, for a candidate without parts, by how many
    of the question's terms they hold. The run starts at the best unit and grows towards the better
    neighbour while it fits. A candidate with no sentence that fits is cut at the last whitespace
    that fits, or not at all when none does.
    """
    units: list[tuple[int, int]] = []
    for pattern in (_LINE_END, _SENTENCE_END):
        bounds = sentence_bounds(text, candidate.start, candidate.end, pattern)
        units = [_trim(text, a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
        units = [(a, b) for a, b in units if b > a]
        if any(b - a <= room for a, b in units):
            break
    if not units:
        return None

    def unit_score(a: int, b: int) -> float:
        if candidate.parts:
            return max((score for s, e, score in candidate.parts if s < b and e > a), default=0.0)
        if terms_of is not None and query_terms:
            return float(len(terms_of(text[a:b]) & query_terms))
        return 0.0

    scores = [unit_score(a, b) for a, b in units]
    fitting = [i for i, (a, b) in enumerate(units) if b - a <= room]
    if not fitting:
        # Not one sentence fits: the opening of the best one, to its last whitespace that fits.
        a, b = units[max(range(len(units)), key=lambda i: (scores[i], -i))]
        space = max(text.rfind(" ", a, a + room + 1), text.rfind("\n", a, a + room + 1))
        if space <= a:
            return None
        return _trim(text, a, space)
    best = max(fitting, key=lambda i: (scores[i], -i))
    lo = hi = best
    while True:
        options = []
        if lo > 0 and units[hi][1] - units[lo - 1][0] <= room:
            options.append((scores[lo - 1], 0, lo - 1))
        if hi + 1 < len(units) and units[hi + 1][1] - units[lo][0] <= room:
            options.append((scores[hi + 1], 1, hi + 1))
        if not options:
            break
        _score, side, _i = max(options)  # the better neighbour; a tie goes on in text order
        if side:
            hi += 1
        else:
            lo -= 1
    return units[lo][0], units[hi][1]


def _touches(text: str, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Two spans of one text touch when nothing but whitespace lies between them (or they overlap)."""
    (s1, e1), (s2, e2) = sorted([a, b])
    return s2 <= e1 or not text[e1:s2].strip()


def diversified(
    candidates: Iterable[Candidate], taken: list[Candidate], repeat_penalty: float, redundancy: float
) -> Iterator[Candidate]:
    """`candidates` (best first) in the order of their score once discounted for what `taken` holds
    (the caller appends each candidate it keeps there before asking for the next one):

    * times (1 - `repeat_penalty`) for each candidate already taken from the same record, neighbours
      included: at a large budget a record's third and fourth node yield to a new record's first;
    * minus `redundancy` times its highest cosine with a taken candidate's vector (maximal marginal
      relevance), so a neighbour that says again what its strong excerpt said waits, and one that adds
      new content does not.

    Both only lower a score, so the order is exact while reading no further than needed: a candidate
    is given once its discounted score is at least the raw score of the next one not yet read.
    Equal scores keep the order they came in.
    """
    source = iter(candidates)
    pool: list[tuple[int, Candidate]] = []
    upcoming: Candidate | None = next(source, None)
    read = 0
    per_record: dict[tuple[str, int], int] = {}
    counted = 0

    def discounted(candidate: Candidate) -> float:
        score = candidate.score * (1.0 - repeat_penalty) ** per_record.get((candidate.kind, candidate.id), 0)
        if redundancy and candidate.vector is not None:
            likeness = max(
                (float(candidate.vector @ other.vector) for other in taken if other.vector is not None),
                default=0.0,
            )
            score -= redundancy * max(0.0, likeness)
        return score

    while True:
        for candidate in taken[counted:]:
            key = (candidate.kind, candidate.id)
            per_record[key] = per_record.get(key, 0) + 1
        counted = len(taken)
        scored = [(discounted(c), -order, order) for order, c in pool]
        best = max(scored, default=None)
        while upcoming is not None and (best is None or best[0] < upcoming.score):
            pool.append((read, upcoming))
            entry = (discounted(upcoming), -read, read)
            best = entry if best is None or entry > best else best
            read += 1
            upcoming = next(source, None)
        if best is None:
            return
        at = next(i for i, (order, _c) in enumerate(pool) if order == best[2])
        yield pool.pop(at)[1]


def _with_rests(candidates: Iterable[Candidate], rests: list) -> Iterator[Candidate]:
    """`candidates` (best first) with the rests `select` pushes onto the heap `rests` meanwhile
    ((-score, order, candidate)), each given where its score places it; an equal score goes after."""
    source = iter(candidates)
    upcoming = next(source, None)
    while True:
        if rests and (upcoming is None or -rests[0][0] > upcoming.score):
            yield heapq.heappop(rests)[2]
        elif upcoming is not None:
            yield upcoming
            upcoming = next(source, None)
        else:
            return


def rests_of(
    text: str, candidate: Candidate, span: tuple[int, int], rest_score: Callable[[Candidate, list], float]
) -> list[Candidate]:
    """What a candidate quoted by `span` (its best part) leaves out: the run before and the run after,
    each a candidate of its own, scored by `rest_score` from the parts it holds."""
    out: list[Candidate] = []
    if not candidate.parts:
        return out  # nothing says what the rest is worth
    for start, end in ((candidate.start, span[0]), (span[1], candidate.end)):
        start, end = _trim(text, start, end)
        if end <= start:
            continue
        parts = [(a, b, score) for a, b, score in candidate.parts if a < end and b > start]
        score = rest_score(candidate, parts)
        origin = candidate.origin or (candidate.start, candidate.end)
        out.append(
            replace(candidate, start=start, end=end, parts=parts, score=score, rest=True, origin=origin)
        )
    return out


def node_rest_score(mix: tuple[float, float, float]) -> Callable[[Candidate, list], float]:
    """The score of part of a node, for `select`'s `rest_score`: the node's score
    (`RecallIndex.level_scores`: (best + a * itself + b * second-best passage + c * record) / (1 + a +
    b + c)) with its best and second-best passages replaced by those inside the part. The node itself
    and its record are not scored again: a part keeps their share."""
    a, b, c = mix
    norm = 1.0 + a + b + c

    def top(parts, i: int) -> float:
        ranked = sorted((score for _s, _e, score in parts), reverse=True)
        return ranked[i] if len(ranked) > i else 0.0

    def score(candidate: Candidate, parts: list) -> float:
        lost = (top(candidate.parts, 0) - top(parts, 0)) + b * (top(candidate.parts, 1) - top(parts, 1))
        return max(0.0, candidate.score - lost / norm)

    return score


def select(
    candidates: Iterable[Candidate],
    text_of: Callable[[str, int], str],
    *,
    max_chars: int,
    most: int,
    terms_of: Callable[[str], set[str]] | None = None,
    query_terms: set[str] | None = None,
    longest: int | None = None,
    repeat_penalty: float = 0.0,
    redundancy: float = 0.0,
    rest_score: Callable[[Candidate, list], float] | None = None,
    piece: float | None = None,
) -> Selection:
    """Excerpts from `candidates` (best first): at most `most`, at most `max_chars` characters in all;
    with `longest`, each candidate is first cut to its best part of at most that many characters; with
    `repeat_penalty` or `redundancy`, taken in the order `diversified` gives.

    With `rest_score` as well, what a candidate cut to `longest` leaves out is not dropped: the run
    before its best part and the run after are candidates again, each scored by `rest_score(candidate,
    its parts inside the run)`, and taken when that score's turn comes (a run that touches the excerpt
    is merged into it). A long node then competes part by part: its best lines first, the rest of it
    as what the rest holds deserves."""
    held: list[Excerpt] = []
    of_record: dict[tuple[str, int], list[Excerpt]] = {}
    chars = 0
    cut = False
    taken: list[Candidate] = []
    rests: list = []
    pushed = count()  # orders rests of equal score as they came
    if rest_score is not None:
        candidates = _with_rests(candidates, rests)
    if repeat_penalty or redundancy:
        candidates = diversified(candidates, taken, repeat_penalty, redundancy)
    source = iter(candidates)
    while True:
        # Once `most` excerpts are held, only the rests of what they quote may still join them.
        full = len(held) >= most
        if full and not rests:
            break
        candidate = heapq.heappop(rests)[2] if full else next(source, None)
        if candidate is None or chars >= max_chars:
            break
        text = text_of(candidate.kind, candidate.id)
        span = _trim(text, candidate.start, candidate.end)
        if span[1] <= span[0]:
            continue
        wanted = _trim(text, *candidate.origin) if candidate.origin else span
        limit = longest
        if piece and rest_score is not None and candidate.parts and not candidate.rest:
            limit = min(limit or span[1] - span[0], max(1, int(piece * (span[1] - span[0]))))
        shortened = not full and limit is not None and span[1] - span[0] > limit
        if shortened:
            part = cut_to_fit(text, candidate, limit, terms_of, query_terms)
            if part is None:
                continue
            if rest_score is not None:
                for rest in rests_of(text, candidate, part, rest_score):
                    heapq.heappush(rests, (-rest.score, next(pushed), rest))
            span = part
            candidate = replace(candidate, start=span[0], end=span[1])
        mine = of_record.setdefault((candidate.kind, candidate.id), [])
        touching = [e for e in mine if _touches(text, (e.start, e.end), span)]
        if full and not touching:
            continue
        merged_start = min([span[0], *(e.start for e in touching)])
        merged_end = max([span[1], *(e.end for e in touching)])
        cost = (merged_end - merged_start) - sum(e.end - e.start for e in touching)
        room = max_chars - chars
        if cost > room:
            # The last excerpt: cut to what is left, then stop.
            cut = True
            piece = cut_to_fit(
                text, candidate, room - _gap_cost(text, touching, candidate), terms_of, query_terms
            )
            if piece is None:
                break
            span = piece
            touching = [e for e in mine if _touches(text, (e.start, e.end), span)]
            merged_start = min([span[0], *(e.start for e in touching)])
            merged_end = max([span[1], *(e.end for e in touching)])
            cost = (merged_end - merged_start) - sum(e.end - e.start for e in touching)
            if cost > room:  # the whitespace between them tipped it over: quote it on its own
                touching, merged_start, merged_end, cost = [], span[0], span[1], span[1] - span[0]
            if full and not touching:
                break
        excerpt = _merge(
            candidate, span, touching, merged_start, merged_end, held, mine, partial=cut or shortened
        )
        excerpt.wanted.append(wanted)
        taken.append(candidate)
        chars += cost
        if cut:
            break
    for excerpt in held:
        # An excerpt whose pieces were cut but whose rests then joined it quotes its candidates whole.
        if excerpt.cut and all(excerpt.start <= a and b <= excerpt.end for a, b in excerpt.wanted):
            excerpt.cut = False
    return Selection(held, chars, cut)


def _gap_cost(text: str, touching: list[Excerpt], candidate: Candidate) -> int:
    """Whitespace a cut piece would add between it and an excerpt it touches (a bound, to leave room)."""
    if not touching:
        return 0
    gaps = []
    for e in touching:
        if e.end <= candidate.start:
            gaps.append(len(text[e.end : candidate.start]))
        elif candidate.end <= e.start:
            gaps.append(len(text[candidate.end : e.start]))
    return max(gaps, default=0)


def _merge(
    candidate: Candidate,
    span: tuple[int, int],
    touching: list[Excerpt],
    start: int,
    end: int,
    held: list[Excerpt],
    mine: list[Excerpt],
    *,
    partial: bool,
) -> Excerpt:
    """Add `span` as a new excerpt, or fold it and the excerpts it touches into the earliest held one."""
    node = candidate.node
    if not touching:
        excerpt = Excerpt(
            candidate.kind,
            candidate.id,
            candidate.source,
            start,
            end,
            candidate.score,
            node,
            node,
            cut=partial,
            pieces=[span],
        )
        held.append(excerpt)
        mine.append(excerpt)
        return excerpt
    # The excerpt held longest keeps its place in the answer; the others it now joins leave it.
    keep = min(touching, key=held.index)
    for other in touching:
        if other is keep:
            continue
        keep.pieces.extend(other.pieces)
        keep.wanted.extend(other.wanted)
        keep.score = max(keep.score, other.score)
        keep.cut = keep.cut or other.cut
        keep.first_node = _lowest(keep.first_node, other.first_node)
        keep.last_node = _highest(keep.last_node, other.last_node)
        held.remove(other)
        mine.remove(other)
    keep.start, keep.end = start, end
    keep.pieces.append(span)
    keep.score = max(keep.score, candidate.score)
    keep.cut = keep.cut or partial
    keep.first_node = _lowest(keep.first_node, node)
    keep.last_node = _highest(keep.last_node, node)
    return keep


def _lowest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _highest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
