"""The strategy table is the one place a chunking method is declared: `chunk` cuts with the table's
function, and every list of methods (available, default sizes, token-counted) is derived from it."""

import re

from collections_app import measure
from collections_app.services import interchange
from collections_app.services import measure as measure_service
from collections_app.text import chunking
from collections_app.text.chunking import (
    STRATEGIES,
    TOKEN_METHODS,
    ChunkingError,
    Strategy,
    chunk,
    resolve_sizes,
)


def lines(text, size, overlap, tokens):
    return [(found.start(), found.end()) for found in re.finditer(r"[^\n]+", text)]


def test_a_strategy_added_to_the_table_is_the_one_chunk_cuts_with(monkeypatch):
    monkeypatch.setitem(
        STRATEGIES, "lines", Strategy("9.9", lines, size=80, overlap=0, overlaps=False, counts_tokens=False)
    )
    assert [piece.text for piece in chunk("one\ntwo\n\nthree", "lines")] == ["one", "two", "three"]
    assert resolve_sizes("lines") == (80, 0)


def test_a_strategy_that_does_not_overlap_refuses_an_overlap(monkeypatch):
    monkeypatch.setitem(
        STRATEGIES, "lines", Strategy("9.9", lines, size=80, overlap=0, overlaps=False, counts_tokens=False)
    )
    try:
        resolve_sizes("lines", 80, 5)
    except ChunkingError as exc:
        assert "does not overlap" in str(exc)
    else:
        raise AssertionError("an overlap was accepted")


def test_the_token_counted_methods_are_derived_once_and_shared():
    assert TOKEN_METHODS == ("tokens", "window")
    assert TOKEN_METHODS == tuple(name for name, s in STRATEGIES.items() if s is not None and s.counts_tokens)
    assert measure.TOKEN_METHODS is chunking.TOKEN_METHODS
    assert measure_service.TOKEN_METHODS is chunking.TOKEN_METHODS
    assert interchange.TOKEN_METHODS is chunking.TOKEN_METHODS
