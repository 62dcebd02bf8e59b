"""Statements of one slot with different values: the conflict rule documents and memory share.

A collection's build holds back a paragraph that matches another document's except for its numbers
("Annual leave is 25 days" beside "Annual leave is 30 days", collections_app/services/builds/review.py):
the two have one *shape* once their numbers are masked, and different numbers. `number_shape` is that
shape.

Memory applies the same rule sentence by sentence, with names as values too: "I live in Porto." and
"I live in Lisbon." have one shape, "i live in #", and two values. A value is a number or a run of
capitalised words that does not open its sentence (nor a speaker's line, "Anna: ..."), "I" excepted.
A shape must keep at least `MIN_SHAPE_WORDS` words besides its values, so that "Hi Anna!" and
"Hi Bob!" are not one slot. The rule is lexical: "I moved to Lisbon" restates "I live in Porto" in
other words, and is not caught (docs/memory.md says so).

Pure: no models, no settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

# Where a statement ends: a line break, or a sentence's stop (a full-width one anywhere, a half-width
# one before whitespace).
_STATEMENT_END = re.compile(r"\n|(?<=[\u3002\uff01\uff1f])|(?<=[.!?])(?=\s)")
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|\w+(?:['\u2019]\w+)*")
# A speaker's line: a short name and a colon before what they say.
_SPEAKER = re.compile(r"^\s*[^\W\d][^:\n]{0,39}:\s")
MIN_SHAPE_WORDS = 3


def number_shape(block: str) -> str:
    """A block's shape for the documents' rule: its whitespace collapsed, each number as "#"."""
    return NUMBER.sub("#", " ".join(block.split()))


@dataclass(frozen=True, slots=True)
class Statement:
    """One sentence's slot (its shape) and what it states there (its values, lowercased)."""

    shape: str
    values: tuple[str, ...]


def _is_value(token: str, opening: bool) -> bool:
    if NUMBER.fullmatch(token):
        return True
    return not opening and token[0].isupper() and token != "I"


def statement(sentence: str) -> Statement | None:
    """The slot and values of one sentence, or None when it has no value or too few other words."""
    speaker = _SPEAKER.match(sentence)
    start = speaker.end() if speaker else 0
    parts: list[str] = [" ".join(sentence[:start].lower().split())] if speaker else []
    values: list[str] = []
    run: list[str] = []
    words = 0
    for position, match in enumerate(_TOKEN.finditer(sentence, start)):
        token = match.group()
        if _is_value(token, opening=position == 0):
            run.append(token.lower())
            continue
        if run:
            parts.append("#")
            values.append(" ".join(run))
            run = []
        parts.append(token.lower())
        words += 1
    if run:
        parts.append("#")
        values.append(" ".join(run))
    if not values or words < MIN_SHAPE_WORDS:
        return None
    return Statement(" ".join(parts), tuple(values))


def statements(text: str) -> list[Statement]:
    """The statements of a text, sentence by sentence (and line by line)."""
    found = []
    for sentence in _STATEMENT_END.split(text):
        if sentence.strip():
            made = statement(sentence)
            if made is not None:
                found.append(made)
    return found


def slots_of(text: str) -> dict[str, tuple[str, ...]]:
    """{shape: values} of a text's statements (the last value a shape is given in the text)."""
    return {s.shape: s.values for s in statements(text)}


def conflict(one: dict[str, tuple[str, ...]], other: dict[str, tuple[str, ...]]) -> bool:
    """Whether two texts' `slots_of` give one slot different values."""
    return any(shape in other and other[shape] != values for shape, values in one.items())


def restated(earlier: str, later: str) -> bool:
    """Whether `later` states a slot of `earlier` with other values (the rule above)."""
    return conflict(slots_of(earlier), slots_of(later))
