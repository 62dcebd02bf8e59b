"""Search filters in OpenAI's vector-store shape: parsed within bounds, then turned into a row mask.

A filter is a comparison `{"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key", "value"}` or a
compound `{"type": "and"|"or", "filters": [...]}`. Keys name a document attribute (a string or a
number, from the document's `<file>.meta.json`), or one of the paragraph's own facts: `document`
(its document's name), `section` (its heading path) and `page` (a page it spans, when its
collection knows pages). The mask is applied before ranking, like a reader's labels, so a
filtered-out paragraph takes no place, is never stitched in, and moves no statistic.

Comparing a key a document or paragraph does not have is false, whatever the operator (`ne` and
`nin` too): a filter speaks of values that exist. `gt`/`gte`/`lt`/`lte` compare numbers; `eq`,
`ne`, `in` and `nin` compare strings with strings and numbers with numbers (`1` equals `1.0`).
Pure: no models, no settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragsite.bodies import SAFE_INTEGER, bounded_number

COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
COMPOUNDS = ("and", "or")
ORDERED = ("gt", "gte", "lt", "lte")
DOCUMENT, SECTION, PAGE = "document", "section", "page"
CHUNK_ID = "chunk_id"
RESERVED_KEYS = (DOCUMENT, SECTION, PAGE, CHUNK_ID)  # `chunk_id` is shown in results, never an attribute
MAX_DEPTH = 5  # compounds nested in one another: five `and`/`or`, one inside the next, are allowed
MAX_COMPARISONS = 50
MAX_LIST_VALUES = 100
MAX_KEY_CHARS = 64
MAX_STRING_CHARS = 512


class FilterError(ValueError):
    """A filter outside its shape or its bounds; the message says where (`filters.filters[1].value`)."""


@dataclass(frozen=True)
class Comparison:
    op: str
    key: str
    value: object  # str | float, or a tuple of them for in/nin


@dataclass(frozen=True)
class Compound:
    op: str
    filters: tuple[Comparison | Compound, ...]


Filter = Comparison | Compound


def parse_filter(raw: object, *, where: str = "filters") -> Filter:
    """The filter `raw` describes, checked against its shape and bounds; raises FilterError."""
    return _parse(raw, where, 1, [0])


def _parse(raw: object, where: str, depth: int, count: list[int]) -> Filter:
    if not isinstance(raw, dict):
        raise FilterError(f"{where} must be an object")
    kind = raw.get("type")
    if kind in COMPOUNDS:
        if depth > MAX_DEPTH:
            raise FilterError(f"{where}: filters nest at most {MAX_DEPTH} deep")
        _only(raw, ("type", "filters"), where)
        items = raw.get("filters")
        if not isinstance(items, list) or not items:
            raise FilterError(f"{where}.filters must be a non-empty list")
        return Compound(
            kind,
            tuple(_parse(item, f"{where}.filters[{i}]", depth + 1, count) for i, item in enumerate(items)),
        )
    if kind not in COMPARISONS:
        raise FilterError(f"{where}.type must be one of {', '.join(COMPARISONS + COMPOUNDS)}")
    count[0] += 1
    if count[0] > MAX_COMPARISONS:
        raise FilterError(f"a filter holds at most {MAX_COMPARISONS} comparisons")
    _only(raw, ("type", "key", "value"), where)
    key = raw.get("key")
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS:
        raise FilterError(f"{where}.key must be a string of 1-{MAX_KEY_CHARS} characters")
    if key == CHUNK_ID:
        # A citation id depends on the reader (its position among what they may read): it names one
        # result to read back (GET .../paragraph?chunk_id=), not a set of paragraphs to search.
        raise FilterError(
            f"{where}.key: chunk_id cannot be filtered on; filter on document (and section or page), or "
            "read one cited paragraph back by its chunk_id"
        )
    if "value" not in raw:
        raise FilterError(f"{where}.value is required")
    value = raw["value"]
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_LIST_VALUES:
            raise FilterError(
                f"{where}.value must be a list of 1-{MAX_LIST_VALUES} strings or numbers for {kind}"
            )
        return Comparison(kind, key, tuple(_scalar(v, f"{where}.value[{i}]") for i, v in enumerate(value)))
    value = _scalar(value, f"{where}.value")
    if kind in ORDERED and isinstance(value, str):
        raise FilterError(f"{where}.value must be a number for {kind}")
    return Comparison(kind, key, value)


def _only(raw: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise FilterError(f"{where} has unknown field(s) {', '.join(repr(u[:40]) for u in unknown[:5])}")


def _scalar(value: object, where: str) -> str | float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FilterError(f"{where} must be a string or a number (attributes are strings and numbers)")
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise FilterError(f"{where} is at most {MAX_STRING_CHARS} characters")
        return value
    if not bounded_number(value):
        raise FilterError(f"{where} must be a finite number, an integer within ±2**53 ({SAFE_INTEGER})")
    return float(value)


MAX_ATTRIBUTES = 16  # OpenAI's limit on a file's attributes


def checked_attributes(raw: object) -> dict[str, str | float]:
    """A document's attributes (a sidecar's JSON object) checked: at most 16, each key 1-64 characters and
    not one of the paragraph's own facts, each value a string of at most 512 characters or a finite number.
    Raises FilterError saying what is wrong."""
    if not isinstance(raw, dict):
        raise FilterError("attributes must be a JSON object of key: value")
    if len(raw) > MAX_ATTRIBUTES:
        raise FilterError(f"a document has at most {MAX_ATTRIBUTES} attributes")
    checked = {}
    for key, value in raw.items():
        if not 1 <= len(key) <= MAX_KEY_CHARS:
            raise FilterError(f"an attribute's key is 1-{MAX_KEY_CHARS} characters")
        if key in RESERVED_KEYS:
            raise FilterError(f"{key!r} is the paragraph's own and cannot be an attribute")
        _scalar(value, f"attribute {key[:64]!r}")
        checked[key] = value  # as written: 3 stays 3 in answers, and still compares equal to 3.0
    return checked


def keys_of(parsed: Filter) -> set[str]:
    """Every key a filter compares."""
    if isinstance(parsed, Comparison):
        return {parsed.key}
    return set().union(*(keys_of(f) for f in parsed.filters))


def compare(op: str, have: object, want: object) -> bool:
    """One comparison of a value that exists (`have`) with the filter's (`want`)."""
    if isinstance(have, bool) or not isinstance(have, str | int | float):
        return False
    have = float(have) if not isinstance(have, str) else have
    if op in ("in", "nin"):
        return (have in want) == (op == "in")
    if op in ORDERED:
        if isinstance(have, str):
            return False
        return {"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[op]
    if type(have) is not type(want):
        return False
    return (have == want) == (op == "eq")


@dataclass(frozen=True)
class RowFacts:
    """What a filter may read of an index's rows: each row's document id, and lazily its section and pages.

    `documents` maps a document id to its name and attributes. `sections()` answers one section per
    row and `pages()` a (first, last) pair of arrays (NaN where unknown), or None when the collection
    knows no pages; both are read only when a filter names them.
    """

    row_document: np.ndarray
    documents: Mapping[int, tuple[str, Mapping[str, object]]]
    sections: Callable[[], Sequence[str]]
    pages: Callable[[], tuple[np.ndarray, np.ndarray] | None]


def row_mask(parsed: Filter, facts: RowFacts) -> np.ndarray:
    """The rows `parsed` keeps, as a boolean mask over `facts.row_document`. Raises FilterError for a
    `page` filter over a collection that knows no pages."""
    cache: dict[str, object] = {}
    return _mask(parsed, facts, cache)


def _mask(parsed: Filter, facts: RowFacts, cache: dict) -> np.ndarray:
    if isinstance(parsed, Compound):
        masks = [_mask(f, facts, cache) for f in parsed.filters]
        return np.logical_and.reduce(masks) if parsed.op == "and" else np.logical_or.reduce(masks)
    if parsed.key == SECTION:
        if SECTION not in cache:
            cache[SECTION] = list(facts.sections())
        return np.fromiter(
            (compare(parsed.op, s, parsed.value) for s in cache[SECTION]),
            dtype=bool,
            count=len(facts.row_document),
        )
    if parsed.key == PAGE:
        return _page_mask(parsed, facts, cache)
    kept = [
        doc
        for doc, (name, attributes) in facts.documents.items()
        if compare(
            parsed.op, name if parsed.key == DOCUMENT else attributes.get(parsed.key, None), parsed.value
        )
    ]
    return np.isin(facts.row_document, np.asarray(kept, dtype=np.int64))


def _page_mask(parsed: Comparison, facts: RowFacts, cache: dict) -> np.ndarray:
    """A paragraph spans pages first..last; it matches when some page it spans does (`ne`/`nin`: none)."""
    if PAGE not in cache:
        cache[PAGE] = facts.pages()
    if cache[PAGE] is None:
        raise FilterError(
            "this collection's paragraphs carry no page numbers: filter on page is not available"
        )
    first, last = cache[PAGE]
    known = ~(np.isnan(first) | np.isnan(last))
    if isinstance(parsed.value, str) or (
        isinstance(parsed.value, tuple) and any(isinstance(v, str) for v in parsed.value)
    ):
        return np.zeros(len(first), dtype=bool)
    op, want = parsed.op, parsed.value
    with np.errstate(invalid="ignore"):
        if op in ("eq", "ne"):
            spans = (first <= want) & (want <= last)
        elif op in ("in", "nin"):
            spans = np.logical_or.reduce([(first <= w) & (w <= last) for w in want])
        else:
            spans = {"gt": last > want, "gte": last >= want, "lt": first < want, "lte": first <= want}[op]
    if op in ("ne", "nin"):
        spans = ~spans
    return spans & known
