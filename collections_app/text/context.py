"""Where a paragraph sits: its document's title and section path, indexed beside its text.

A paragraph deep in a chapter rarely repeats the chapter's subject: "Temporary tables cannot be
accessed by autovacuum" never says "vacuum" in the way a question about it does, but its document
is "Routine Vacuuming" and its section "The Autovacuum Daemon". So each paragraph is indexed with
a *context*, ``title › section › subsection``, on both arms of the search:

* **vector**: the embedded text is the context, a blank line, then the paragraph
  (`embedding_text`); the stored and returned ``text`` stays the paragraph itself;
* **lexical**: the contexts get a BM25 index of their own, and a question's lexical score is the
  paragraph's seed-004 BM25 over its text divided by the question's upper bound, plus
  ``CONTEXT_WEIGHT`` times the same over its context (`lexical_with_context`), clipped to 1. The
  text's BM25 is untouched, so the interchange export's ``bm25.idx`` stays exactly seed 004's.

The weight and the shape were chosen on the known-answers dev set; see docs/decisions/0034.

Pure: no Django models, no settings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from .headings import HEADING, heading_lines

# Share of a full context match added to the text's normalised BM25 (docs/decisions/0034).
CONTEXT_WEIGHT = 0.3
SEPARATOR = " › "
MAX_CONTEXT_CHARS = 600
MAX_TITLE_LINE = 200  # a longer first line is a paragraph, not a title
# Bumped when what goes into a paragraph's representation changes: a build re-reads every document
# whose paragraphs were indexed by an older version, so no collection mixes the two silently.
# 2: a paragraph is embedded without the opening it shares with earlier paragraphs (builds.py).
CONTEXT_VERSION = 2
# What a per-reader collection's documents record instead (`context_version`): their titles are never a
# plain first line, so switching per-reader on or off re-reads every document at the next build.
PER_READER = 100


def context_version(per_reader: bool) -> int:
    """The context version a collection's documents are built at: CONTEXT_VERSION, or that plus
    PER_READER for a per-reader one (`contexts_for`). Both compare as at least
    CONTEXT_VERSION, so such a vector counts as fresh (embedded without carried text)."""
    return CONTEXT_VERSION + (PER_READER if per_reader else 0)


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(offset, level, name) of every named heading line outside fenced code, in order."""
    return [
        (start, len(match.group(1)), match.group(2).strip())
        for start, _end, match in heading_lines(text)
        if (match.group(2) or "").strip()
    ]


def document_title(name: str, text: str, *, plain_first_line: bool = True) -> str:
    """The document's title, by the first rule that gives one.

    1. its first line, when that line is a heading (``# Northwind Robotics Employee Handbook``);
    2. its first level-1 heading (a page whose navigation text comes before ``# Travel policy``);
    3. its first line, when it is short and a blank line follows it: the plain-text convention
       of a title over the body (SciFact's abstracts, ``WELCOME TO NORTHWIND ROBOTICS``), unless
       ``plain_first_line`` is False (a per-reader collection, `contexts_for`);
    4. its name in words (``travel-policy.html`` is "travel policy"), unless the name has no
       letters at all (``4983.txt``), since a number would only add noise to both arms.
    """
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        heading = HEADING.fullmatch(lines[first])
        if heading and (heading.group(2) or "").strip():
            return heading.group(2).strip()
    for _offset, level, heading_name in _headings(text):
        if level == 1:
            return heading_name
    if first is not None and plain_first_line:
        line = lines[first].strip()
        followed_by_blank = first + 1 < len(lines) and not lines[first + 1].strip()
        if followed_by_blank and len(line) <= MAX_TITLE_LINE:
            return line
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    words = " ".join(re.sub(r"[-_.]+", " ", stem).split())
    return words if any(ch.isalpha() for ch in words) else ""


def section_paths(text: str, starts: Sequence[int]) -> list[list[str]]:
    """For each offset in ``starts``, the headings in force there, outermost first.

    A heading closes every open heading of its level or deeper. Heading lines that open a piece
    count as in force for it (a piece "# 1. Overview / text" sits under "1. Overview"), as the
    chunker files such a piece under the heading its text actually sits under.
    """
    headings = _headings(text)
    paths: list[list[str]] = []
    for start in starts:
        position = _first_text_line(text, start)
        stack: list[tuple[int, str]] = []
        for offset, level, name in headings:
            if offset > position:
                break
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, name))
        paths.append([name for _level, name in stack])
    return paths


def _first_text_line(text: str, start: int) -> int:
    """Offset of the first line at or after ``start`` that is neither blank nor a heading."""
    offset = start
    while offset < len(text):
        end = text.find("\n", offset)
        end = len(text) if end < 0 else end
        line = text[offset:end]
        heading = HEADING.fullmatch(line)
        if line.strip() and not (heading and (heading.group(2) or "").strip()):
            return offset
        offset = end + 1
    return len(text)


def paragraph_context(title: str, path: Sequence[str]) -> str:
    """``title › section › subsection``, leaving out a heading that repeats the one before it."""
    parts: list[str] = []
    for part in (title, *path):
        part = " ".join(part.split())
        if part and (not parts or parts[-1].casefold() != part.casefold()):
            parts.append(part)
    return SEPARATOR.join(parts)[:MAX_CONTEXT_CHARS]


def contexts_for(
    name: str,
    text: str,
    starts: Sequence[int],
    entries: Sequence[str] | None = None,
    *,
    per_reader: bool = False,
) -> list[str]:
    """The context of each piece of document ``name`` (its extracted ``text``) starting at ``starts``;
    ``entries`` (one a piece, `chunking.Piece.entry`) add the list entry or table header over a piece.

    ``per_reader`` (a per-reader collection): the title is never a plain first line (rule 3 of
    `document_title`). Such a line is a paragraph of its own, which labels may hide from a reader, and
    a context is part of every paragraph's vector and lexical score: a hidden first paragraph would
    move the scores of the paragraphs a reader may read. Headings stay: a heading
    belongs to every paragraph under it (docs/security.md).
    """
    title = document_title(name, text, plain_first_line=not per_reader)
    paths = section_paths(text, starts)
    if entries is not None:
        paths = [[*path, entry] if entry else path for path, entry in zip(paths, entries, strict=True)]
    return [paragraph_context(title, path) for path in paths]


def embedding_text(text: str, context: str) -> str:
    """What the embedder reads for a paragraph: its context, a blank line, then the paragraph.

    A paragraph that already opens with its whole context (a document's first paragraph under a
    plain-text title) is embedded as it is: saying the title twice would only tilt the vector.
    """
    return f"{context}\n\n{text}" if context and not text.startswith(context) else text


def lexical_with_context(
    text_bm25: np.ndarray,
    text_bound: float,
    context_bm25: np.ndarray | None,
    context_bound: float,
    weight: float | None = None,
) -> tuple[np.ndarray, float]:
    """The text's BM25 plus ``weight`` × the context's, on the text's scale: (scores, upper bound).

    Returned so that ``scores / bound`` is ``text/text_bound + weight * context/context_bound``, which
    `fusion.normalise_bm25` then clips to [0, 1]: a paragraph whose context does not match keeps
    exactly the score it had without contexts, and one whose context matches every term gains
    ``weight``. With no contexts (``context_bm25`` None) or a zero bound the text's own score is
    returned unchanged. ``weight`` None is `CONTEXT_WEIGHT`.
    """
    weight = CONTEXT_WEIGHT if weight is None else weight
    if context_bm25 is None or context_bound <= 0 or text_bound <= 0 or weight == 0:
        return text_bm25, text_bound
    combined = np.asarray(text_bm25, dtype=np.float64) + weight * (text_bound / context_bound) * np.asarray(
        context_bm25, dtype=np.float64
    )
    return combined, text_bound
