"""A paragraph's entries: the items of a list, a definition or option list, a table or a run of Q/A items
that it holds, each a unit a search scores on its own.

A paragraph of the `structure` strategy packs several blocks, and a question about one option of a man
page's long list meets the whole list: the paragraph that holds the right entry loses to one that
repeats the question's words more often. So a build that indexes entries (`ENTRIES`) also embeds each
entry of such a paragraph and indexes its words (with the paragraph's title and section), and ranking
scores the paragraph by its best entry and itself (`ranking.entry_scores`); the answer's excerpt of a
shortened hit is centred on that entry (`budget.fit`'s ``focus``).

Entries are found the way the parent strategy finds its pieces (`parent._items`: a table's rows, list
items, a term line over its indented description), plus Q/A items (a block opening ``Q:`` or
``Question:``, with the blocks after it up to the next). Only the text a row does not share with an
earlier one (after its carried opening, `stitch.fresh_text`) is read, as its vector is: an entry never
holds words of a paragraph whose labels may differ. A paragraph with fewer than five entries has none:
it is its own unit.

Pure: no models, no settings. The build and the index writer both call `entry_spans` on the same text,
so the vectors the build stored line up with the spans the writer indexes.
"""

from __future__ import annotations

import re

from .headings import Outline
from .parent import _items
from .sections import section_units

# At most this many entries a paragraph (a structure paragraph of 1,800 characters holds far fewer).
MAX_ENTRIES = 64
# Fewer than this and the paragraph is its own unit. A paragraph with two to four "entries" is mostly prose
# around a few indented blocks the parent strategy reads as term and description (code such as
# ``class B(Exception):`` over ``pass``, a ``positional arguments:`` label over one line), and such a short
# block's cosine beats its paragraph's by chance; a list a question picks one entry from (an option list,
# a table, a FAQ) has more. Measured: 5 to 8 keep the man shelf's gain and lose no dev-set question, 4 or
# fewer lose dev-set questions, 9 gives up man-shelf gains (docs/benchmarks.md, *Entries as units*).
MIN_ENTRIES = 5
# Added to a document's built context version (`context.context_version`) when its paragraphs' entries
# were embedded too: a build with ENTRIES switched reads such a document again, once. 2000 since entries
# need `MIN_ENTRIES` 5 (1000 was 2): a document built at 1000 holds vectors for spans no longer read.
ENTRIES_BUILT = 2000
_QUESTION = re.compile(r"[ \t]*(?:[*_]{0,2})(?:Q|Question)[ \t]*\d{0,3}[ \t]*[:.)][ \t]*\S", re.IGNORECASE)


def entry_spans(text: str, carried: int = 0) -> list[tuple[int, int]]:
    """(start, end) within ``text`` of each entry of the paragraph, in order, from ``carried`` on (the
    characters it shares with earlier rows are not read); [] when it has fewer than `MIN_ENTRIES`."""
    start = max(int(carried), 0)
    if start >= len(text):
        return []
    units = section_units(text, Outline(text), start, len(text))
    spans: list[tuple[int, int]] = []
    question: tuple[int, int] | None = None  # the Q/A item being gathered
    for unit_start, unit_end in units:
        if _QUESTION.match(text, unit_start) or _QUESTION.match(_body(text, unit_start, unit_end)):
            if question is not None:
                spans.append(question)
            question = (unit_start, unit_end)
            continue
        if question is not None:  # the answer, up to the next question
            question = (question[0], unit_end)
            continue
        items = _items(text, [(unit_start, unit_end)])
        spans.extend((a, b) for a, b, _entry, is_prose in items if not is_prose)
    if question is not None:
        spans.append(question)
    spans = [(a, b) for a, b in spans if text[a:b].strip()]
    return spans[:MAX_ENTRIES] if len(spans) >= MIN_ENTRIES else []


def _body(text: str, start: int, end: int) -> str:
    """A block less the heading lines at its top (a Q/A item under a heading)."""
    lines = text[start:end].split("\n")
    while len(lines) > 1 and lines[0].lstrip().startswith("#"):
        lines = lines[1:]
    return "\n".join(lines)


def entry_texts(text: str, carried: int = 0) -> list[str]:
    """The text of each of `entry_spans`."""
    return [text[a:b] for a, b in entry_spans(text, carried)]


__all__ = ["ENTRIES_BUILT", "MAX_ENTRIES", "MIN_ENTRIES", "entry_spans", "entry_texts"]
