"""Dividing a document's text into paragraphs (pieces) for the index, and a long record into nodes.

Pure: no models, no settings. Every strategy returns pieces that are exact slices of the text
they were cut from (``text[piece.start:piece.end] == piece.text``), in document order, trimmed of
whitespace at both ends, and together holding every non-whitespace character of the text. A
piece's section is the heading in force where its first line of text starts (`headings`): heading
lines at the very start of a piece are stepped over, so "# Handbook / ## Leave / text" is "Leave".

Strategies, by name. `STRATEGIES` is the one table: each built name's cutting function, default size
and overlap, whether it overlaps its pieces, whether its sizes count model tokens (and so need an
embedder that counts them), and its per-document cap; a planned name maps to None. `AVAILABLE`,
`DEFAULT_SIZES` and `TOKEN_METHODS` are derived from it, and `chunk` dispatches through it, so a name
without a strategy is refused rather than cut some other way.

``fixed``
    Pieces of at most ``size`` characters, broken at the last whitespace inside the window, so the
    break falls in the window's last tenth whenever there is whitespace there. Guarantee: a word (a
    maximal run of non-whitespace characters) of at most ``size`` characters is never split between
    pieces. A longer word is the only thing ever cut, at exactly ``size`` characters. Text without
    spaces (Chinese, Japanese) is one long "word" to this strategy and is cut every ``size``.
``structure``
    Heading-aware: whole (blank-line separated) paragraphs of one section packed up to ``size``
    characters; a heading line travels with the text under it. Every piece is at most ``size``
    characters. Consecutive pieces of one section overlap by at most ``overlap`` characters: the
    closing piece's last ``overlap`` characters moved forward to a word start (so "about"
    ``overlap``: less by at most the word straddling the mark), and less when the carried text and
    the next whole paragraph would not fit together. No overlap crosses a heading. See `_pack_section`.
    At most `MAX_PARAGRAPHS_PER_DOCUMENT` pieces are kept; the result reports what was dropped.
``parent``
    Small retrieval pieces (``size`` characters, 400 by default) of the structure strategy's sections,
    never across one: a list entry or table row each its own piece, its term or header carried as its
    ``entry``; a hit is answered with its section (`parent`, `returns_sections`).
``tokens``
    Windows of ``size`` model tokens, ``overlap`` tokens shared between neighbours.
``window``
    The record-node division of `ragsite.division.divide`, against the embedder's token window.

Every strategy returns a `Chunks` list; ``Chunks.truncated`` and ``Chunks.dropped`` say whether the
per-document cap removed pieces (``structure`` and ``parent`` have one).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ragsite.division import TokenCounter, divide

from .headings import (
    DEFAULT_SECTION,
    MAX_SECTION_LENGTH,
    SENTENCE_BREAK,
    SENTENCE_REACH,
    WHITESPACE,
    WORD_START,
    Outline,
    heading_lines,
    next_non_ws,
    trim,
)
from .parent import cut_parent
from .sections import section_units, sections

__all__ = [
    "AVAILABLE",
    "DEFAULT_SECTION",
    "DEFAULT_SIZES",
    "heading_lines",
    "MAX_PARAGRAPHS_PER_DOCUMENT",
    "MAX_SECTION_LENGTH",
    "STRATEGIES",
    "TOKEN_METHODS",
    "Chunks",
    "Strategy",
    "ChunkingError",
    "Piece",
    "chunk",
    "resolve_sizes",
    "validate_method",
]

MAX_PARAGRAPHS_PER_DOCUMENT = 240


# A strategy's cut: (text, size, overlap, token counter) -> the pieces' (start, end) spans, in order,
# or (start, end, entry) with the entry a piece is indexed beside (parent).
Cut = Callable[[str, "int | None", int, "TokenCounter | None"], list[tuple[int, ...]]]


@dataclass(frozen=True)
class Strategy:
    """One built chunking method (see the module docstring for what each does)."""

    version: str  # the version that introduced it
    cut: Cut
    size: int | None  # the default size: characters, or tokens when counts_tokens; None: the model's window
    overlap: int  # the default overlap, in the same unit
    overlaps: bool  # whether its pieces may overlap at all
    counts_tokens: bool  # sizes are model tokens: it needs an embedder that counts them
    cap: int | None = None  # at most this many pieces a document (the rest are reported as dropped)
    # A hit comes back with its section (the readable pieces of its section around it, stitch.stitch_sections)
    # rather than with `around` neighbours either side.
    returns_sections: bool = False


class ChunkingError(ValueError):
    """A chunking method or its settings cannot be used; the message is meant for a person."""


@dataclass(frozen=True)
class Piece:
    """One paragraph of the index: an exact slice of the document's text and the heading over it."""

    text: str
    start: int
    end: int
    section: str
    entry: str = ""  # the list entry's term or table's header over it, indexed as context (parent)


class Chunks(list[Piece]):
    """The pieces of one document, plus whether a per-document cap dropped some.

    A plain list in every other respect (it compares equal to a list of the same pieces). Slicing it
    gives a plain list, so read ``truncated`` and ``dropped`` from the object `chunk` returned.
    """

    def __init__(self, pieces: Iterable[Piece] = (), *, dropped: int = 0) -> None:
        super().__init__(pieces)
        self.dropped = dropped

    @property
    def truncated(self) -> bool:
        """True when pieces after the cap were left out of the result."""
        return self.dropped > 0


def validate_method(name: str) -> str:
    """Return ``name`` if it is an available chunking method; raise `ChunkingError` naming the choices."""
    if STRATEGIES.get(name) is not None:
        return name
    available = ", ".join(AVAILABLE)
    if name in STRATEGIES:
        raise ChunkingError(f'"{name}" is planned but not built yet; available: {available}')
    raise ChunkingError(f'unknown chunking method "{name}"; available: {available}')


def resolve_sizes(method: str, size: int | None = None, overlap: int | None = None) -> tuple[int | None, int]:
    """The (size, overlap) a method will use: defaults filled in for None, then checked.

    An empty overlap takes the method's default, scaled down in proportion when the default would not
    be smaller than an explicitly chosen size (structure at size 100: overlap 10, not 180).

    Callers that validate a collection's settings before building (a form, a service) can use this
    to refuse bad settings up front; `chunk` calls it too. Raises `ChunkingError`.
    """
    validate_method(method)
    strategy = STRATEGIES[method]
    default_size, default_overlap = strategy.size, strategy.overlap
    size = default_size if size is None else size
    if overlap is None:
        overlap = default_overlap
        # A default overlap too large for a small chosen size shrinks in proportion instead of
        # turning "leave it empty" into an error.
        if default_size and isinstance(size, int) and overlap >= size:
            overlap = default_overlap * size // default_size
    if size is not None and (not isinstance(size, int) or size < 1):
        raise ChunkingError(f"{method}: size must be a whole number of at least 1, not {size!r}")
    if not isinstance(overlap, int) or overlap < 0:
        raise ChunkingError(f"{method}: overlap must be a whole number of at least 0, not {overlap!r}")
    if not strategy.overlaps and overlap:
        raise ChunkingError(f"{method} does not overlap its pieces; set overlap to 0 or leave it empty")
    if size is not None and overlap >= size:
        raise ChunkingError(f"{method}: overlap ({overlap}) must be smaller than size ({size})")
    return size, overlap


def chunk(
    text: str,
    method: str,
    *,
    size: int | None = None,
    overlap: int | None = None,
    tokens: TokenCounter | None = None,
) -> Chunks:
    """Divide ``text`` into pieces with the chunking ``method``; see the module docstring for each one.

    ``size`` and ``overlap`` default to `DEFAULT_SIZES`. ``tokens`` is required by ``tokens`` and
    ``window``. Raises `ChunkingError` for an unknown or planned method, bad sizes, or a token-aware
    method whose embedder cannot count.
    """
    size, overlap = resolve_sizes(method, size, overlap)
    strategy = STRATEGIES[method]
    spans = strategy.cut(text, size, overlap, tokens)
    dropped = 0
    if strategy.cap is not None and len(spans) > strategy.cap:
        dropped = len(spans) - strategy.cap
        spans = spans[: strategy.cap]
    outline = Outline(text)
    pieces = (
        Piece(text[s:e], s, e, outline.section_of(text, s, e), *entry)
        for s, e, *entry in spans  # a strategy may name each piece's entry (parent)
        if e > s
    )
    return Chunks(pieces, dropped=dropped)


# --- fixed ---------------------------------------------------------------------------------------


def _fixed(text: str, size: int) -> list[tuple[int, int]]:
    """Pieces of at most ``size`` characters, each ending before the last whitespace in its window.

    Taking the last whitespace in the window means a break falls in the window's last tenth whenever
    there is whitespace there, and further back only when there is not. Because a piece always starts
    at the first character of a word (or of the rest of a word already cut), a word of at most
    ``size`` characters always has its following whitespace inside the window, so it is never split.
    Only a window with no whitespace after its first character is cut hard, at ``size``.
    """
    spaces = [match.start() for match in WHITESPACE.finditer(text)]
    spans: list[tuple[int, int]] = []
    length = len(text)
    position = next_non_ws(text, 0)
    while position < length:
        limit = position + size
        if limit >= length:
            end = length
        else:
            index = bisect.bisect_right(spaces, limit) - 1
            end = spaces[index] if index >= 0 and spaces[index] > position else limit
        start, end = trim(text, position, end)
        spans.append((start, end))
        position = next_non_ws(text, end)
    return spans


# --- structure -----------------------------------------------------------------------------------


def _structure(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    outline = Outline(text)
    spans: list[tuple[int, int]] = []
    for section_start, section_end in sections(text, outline):
        units = section_units(text, outline, section_start, section_end)
        spans.extend(_pack_section(text, units, size, overlap))
    return spans


def _pack_section(text: str, units: list[tuple[int, int]], size: int, overlap: int) -> list[tuple[int, int]]:
    """Pack one section's paragraphs into pieces of at most ``size`` characters.

    Whole paragraphs are added while the piece still fits. When a piece closes, its last ``overlap``
    characters, moved forward to the start of a word, open the next piece of the section, so a
    sentence across the join can be found from either side. If that carried text and the next
    paragraph do not fit together although the paragraph alone does, less is carried (the paragraph
    stays whole; the overlap shrinks). A paragraph longer than ``size`` is split at the last
    whitespace of each window (a hard cut only when a window has none), keeping the overlap.
    Every piece ends further on than the one before, so the loop always finishes.
    """
    spans: list[tuple[int, int]] = []
    if not units:
        return spans
    index = 0
    cursor = units[0][0]
    last_end = units[0][0]
    while index < len(units):
        unit_start, unit_end = units[index]
        if cursor < unit_start and unit_end - cursor > size and unit_end - unit_start <= size:
            shrunk = _word_start(text, unit_end - size, unit_start + 1)
            cursor = shrunk if shrunk is not None else unit_start
        # The first character this piece adds beyond the previous one. If the carried text leaves
        # no room for it (only possible across a huge run of whitespace), nothing is carried.
        fresh = next_non_ws(text, max(unit_start, last_end))
        if fresh - cursor >= size:
            cursor = fresh
        start = cursor
        if unit_end - start <= size:
            last = index
            while last + 1 < len(units) and units[last + 1][1] - start <= size:
                last += 1
            end = units[last][1]
            index = last + 1
        else:
            # Split inside the paragraph: end just before the last whitespace of the window that
            # follows new text; with none, cut hard at the window's end (a word longer than the room).
            limit = start + size
            if _is_table(text, unit_start, unit_end):
                end = _row_end(text, fresh, limit)
            else:
                end = _sentence_end(text, max(fresh + 1, limit - int(size * SENTENCE_REACH)), limit)
            if end is None:
                end = limit
                for position in range(limit, fresh, -1):
                    if text[position].isspace() and not text[position - 1].isspace():
                        end = position
                        break
        spans.append((start, end))
        last_end = end
        if index >= len(units):
            break
        # Rows stand on their own (each block repeats its header), and a carried opening would
        # start the next piece mid-row: nothing is carried out of a table.
        carried = None if _ends_in_table_row(text, end) else _carry(text, start, end, overlap)
        cursor = carried if carried is not None else next_non_ws(text, end)
    return spans


_TABLE_ROW = re.compile(r"[ \t]*\|")


def _is_table(text: str, start: int, end: int) -> bool:
    """A block whose every line is a Markdown table row (`tables`): it is divided only between rows."""
    return all(_TABLE_ROW.match(line) for line in text[start:end].split("\n"))


def _row_end(text: str, fresh: int, limit: int) -> int | None:
    """The end of the last whole row inside ``(fresh, limit]``, or None when one row overflows."""
    end = text.rfind("\n", fresh + 1, limit + 1)
    return end if end > fresh else None


def _ends_in_table_row(text: str, end: int) -> bool:
    line_start = text.rfind("\n", 0, end) + 1
    return bool(_TABLE_ROW.match(text, line_start)) and text[end - 1] == "|"


def _sentence_end(text: str, lo: int, hi: int) -> int | None:
    """The end of the last sentence that ends within ``text[lo:hi]`` (just after its ., ! or ?), or None."""
    best = None
    for match in SENTENCE_BREAK.finditer(text, lo, min(len(text), hi + 8)):
        if lo < match.start(1) <= hi:
            best = match.start(1)
    return best


def _word_start(text: str, lo: int, hi: int) -> int | None:
    match = WORD_START.search(text, lo, hi)
    return match.start() if match else None


def _carry(text: str, start: int, end: int, overlap: int) -> int | None:
    """Where the next piece starts so that it repeats the end of ``text[start:end]``, or None."""
    if overlap <= 0:
        return None
    lo = max(end - overlap, start + 1)
    if lo >= end:
        return None
    # A sentence that starts inside the overlap opens the next piece: it does not begin mid-sentence.
    sentence = SENTENCE_BREAK.search(text, max(start, lo - 3), end)
    if sentence is not None and lo <= sentence.end(1) < end:
        return sentence.end(1)
    if SENTENCE_BREAK.match(text, end - 1) or SENTENCE_BREAK.match(text, end - 2):
        # The piece ends a sentence and none starts within the overlap: no sentence crosses the join,
        # so the next piece starts at the next sentence rather than inside this one.
        return None
    found = _word_start(text, lo, end)
    if found is not None:
        return found
    # The piece was cut inside a word longer than the overlap (or unspaced CJK text): there is no
    # word start to align to, and the word is split anyway, so overlap by characters.
    if end < len(text) and not text[end].isspace() and not text[end - 1].isspace():
        return lo
    return None


# --- tokens and window ---------------------------------------------------------------------------


def _tokens(text: str, size: int, overlap: int, tokens: TokenCounter | None) -> list[tuple[int, int]]:
    """Windows of ``size`` tokens stepping by ``size - overlap``, cut at the token offsets.

    A window runs from its first token's start to the next window-external token's start, so the
    whitespace (and anything the tokenizer skipped) between tokens is never lost; trimming then
    removes the whitespace. Zero-width spans (special tokens) are ignored.
    """
    spans = tokens.token_spans(text) if tokens is not None else None
    if spans is None:
        raise ChunkingError('"tokens" needs an embedder that can split text into tokens, and this one cannot')
    length = len(text)
    offsets = sorted(
        (max(0, min(s, length)), max(0, min(e, length))) for s, e in spans if e > s and s < length
    )
    if not offsets:
        return [trim(text, 0, length)]
    pieces: list[tuple[int, int]] = []
    first = 0
    while True:
        after = min(first + size, len(offsets))
        start = 0 if first == 0 else offsets[first][0]
        end = length if after == len(offsets) else offsets[after][0]
        pieces.append(trim(text, start, end))
        if after == len(offsets):
            break
        first = after - overlap
    return pieces


def _window(text: str, size: int | None, tokens: TokenCounter | None) -> list[tuple[int, int]]:
    if tokens is None:
        raise ChunkingError('"window" needs an embedder that can count tokens, and none was given')
    window = size if size is not None else tokens.window
    if window is None:
        raise ChunkingError('"window" needs the embedder\'s token window, and this embedder has none')
    spans = divide(text, lambda remaining: tokens.window_end_char(remaining, window))
    if spans is None:
        raise ChunkingError('"window" needs an embedder that can count tokens, and this one cannot')
    return [trim(text, start, end) for start, end in spans]


# --- The table -----------------------------------------------------------------------------------

# Each name maps to its strategy, or to None while it is only planned: naming a planned one is a clear
# validation error rather than "unknown". fixed and structure count characters.
STRATEGIES: dict[str, Strategy | None] = {
    "fixed": Strategy(
        "0.1",
        lambda text, size, overlap, tokens: _fixed(text, size),
        size=350,
        overlap=0,
        overlaps=False,
        counts_tokens=False,
    ),
    "structure": Strategy(
        "0.1",
        lambda text, size, overlap, tokens: _structure(text, size, overlap),
        size=1800,
        overlap=180,
        overlaps=True,
        counts_tokens=False,
        cap=MAX_PARAGRAPHS_PER_DOCUMENT,
    ),
    "tokens": Strategy(
        "0.1",
        lambda text, size, overlap, tokens: _tokens(text, size, overlap, tokens),
        size=200,
        overlap=32,
        overlaps=True,
        counts_tokens=True,
    ),
    "window": Strategy(
        "0.1",
        lambda text, size, overlap, tokens: _window(text, size, tokens),
        size=None,
        overlap=0,
        overlaps=False,
        counts_tokens=True,
    ),
    "parent": Strategy(
        "0.1",
        lambda text, size, overlap, tokens: cut_parent(text, size),
        size=400,  # measured against 200, 300, 600 and 900 (docs/decisions/0049)
        overlap=0,
        overlaps=False,
        counts_tokens=False,
        cap=MAX_PARAGRAPHS_PER_DOCUMENT * 6,  # pieces about a sixth of structure's
        returns_sections=True,
    ),
    "semantic": None,
    "page": None,
    "proposition": None,
}
# Derived, never written out, so none can disagree with the table.
AVAILABLE: tuple[str, ...] = tuple(name for name, strategy in STRATEGIES.items() if strategy is not None)
# (size, overlap) when a collection leaves them empty.
DEFAULT_SIZES: dict[str, tuple[int | None, int]] = {
    name: (strategy.size, strategy.overlap) for name, strategy in STRATEGIES.items() if strategy is not None
}
TOKEN_METHODS: tuple[str, ...] = tuple(name for name in AVAILABLE if STRATEGIES[name].counts_tokens)


def returns_sections(method: str) -> bool:
    """Whether a collection chunked by ``method`` answers a hit with its section (`returns_sections`)."""
    strategy = STRATEGIES.get(method)
    return strategy is not None and strategy.returns_sections
