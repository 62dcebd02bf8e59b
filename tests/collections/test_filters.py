"""The filter language (OpenAI's vector-store filters) and its row mask, without a database."""

import numpy as np
import pytest

from collections_app.index.filters import (
    MAX_COMPARISONS,
    MAX_DEPTH,
    FilterError,
    RowFacts,
    checked_attributes,
    parse_filter,
    row_mask,
)

# Six rows over three documents; pages known for rows of document 1 and 2 only.
DOCUMENTS = {
    1: ("policy/leave.pdf", {"team": "hr", "year": 2024}),
    2: ("policy/travel.pdf", {"team": "finance", "year": 2022}),
    3: ("notes.md", {}),
}
ROWS = np.asarray([1, 1, 2, 2, 3, 3], dtype=np.int64)
SECTIONS = ["Leave", "Leave > Carry-over", "Travel", "Travel > Hotels", "Notes", "Notes"]
FIRST = np.asarray([1, 2, 1, 3, np.nan, np.nan])
LAST = np.asarray([1, 4, 2, 3, np.nan, np.nan])


def facts(pages=True):
    return RowFacts(
        row_document=ROWS,
        documents=DOCUMENTS,
        sections=lambda: SECTIONS,
        pages=(lambda: (FIRST, LAST)) if pages else (lambda: None),
    )


def rows(raw, **kwargs):
    return list(np.flatnonzero(row_mask(parse_filter(raw), facts(**kwargs))))


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"type": "eq", "key": "team", "value": "hr"}, [0, 1]),
        (
            {"type": "ne", "key": "team", "value": "hr"},
            [2, 3],
        ),  # a document without `team` matches no comparison
        ({"type": "gte", "key": "year", "value": 2023}, [0, 1]),
        ({"type": "lt", "key": "year", "value": 2024.5}, [0, 1, 2, 3]),
        ({"type": "eq", "key": "year", "value": 2024.0}, [0, 1]),
        ({"type": "eq", "key": "year", "value": "2024"}, []),  # a string never equals a number
        ({"type": "in", "key": "team", "value": ["finance", "legal"]}, [2, 3]),
        ({"type": "nin", "key": "team", "value": ["finance"]}, [0, 1]),
        ({"type": "eq", "key": "document", "value": "notes.md"}, [4, 5]),
        ({"type": "eq", "key": "section", "value": "Travel > Hotels"}, [3]),
        ({"type": "eq", "key": "page", "value": 3}, [1, 3]),
        ({"type": "gt", "key": "page", "value": 2}, [1, 3]),
        ({"type": "lte", "key": "page", "value": 1}, [0, 2]),
        ({"type": "in", "key": "page", "value": [4, 9]}, [1]),
        ({"type": "ne", "key": "page", "value": 1}, [1, 3]),  # unknown pages match nothing
        (
            {
                "type": "and",
                "filters": [
                    {"type": "eq", "key": "team", "value": "hr"},
                    {"type": "eq", "key": "page", "value": 1},
                ],
            },
            [0],
        ),
        (
            {
                "type": "or",
                "filters": [
                    {"type": "eq", "key": "document", "value": "notes.md"},
                    {
                        "type": "and",
                        "filters": [
                            {"type": "eq", "key": "team", "value": "finance"},
                            {"type": "gte", "key": "page", "value": 3},
                        ],
                    },
                ],
            },
            [3, 4, 5],
        ),
    ],
)
def test_a_filter_keeps_exactly_the_rows_it_describes(raw, expected):
    assert rows(raw) == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ([], "filters must be an object"),
        ({"type": "like", "key": "a", "value": "b"}, "filters.type must be one of"),
        ({"type": "eq", "key": "", "value": "b"}, "filters.key must be a string of 1-64"),
        ({"type": "eq", "key": "a" * 65, "value": "b"}, "1-64"),
        ({"type": "eq", "key": "a"}, "filters.value is required"),
        ({"type": "eq", "key": "a", "value": True}, "strings and numbers"),
        ({"type": "eq", "key": "a", "value": None}, "string or a number"),
        ({"type": "eq", "key": "a", "value": "x" * 513}, "at most 512"),
        ({"type": "gt", "key": "a", "value": "b"}, "must be a number for gt"),
        ({"type": "in", "key": "a", "value": "b"}, "must be a list"),
        ({"type": "in", "key": "a", "value": []}, "must be a list of 1-100"),
        ({"type": "in", "key": "a", "value": list(range(101))}, "1-100"),
        ({"type": "eq", "key": "a", "value": "b", "extra": 1}, "unknown field"),
        ({"type": "and", "filters": []}, "filters.filters must be a non-empty list"),
        (
            {"type": "or", "filters": [{"type": "eq", "key": "a", "value": float("nan")}]},
            "filters.filters[0].value",
        ),
    ],
)
def test_a_malformed_filter_is_refused_saying_where(raw, message):
    with pytest.raises(FilterError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_filter(raw)


def test_depth_and_comparisons_are_bounded():
    leaf = {"type": "eq", "key": "a", "value": "b"}
    nested = leaf
    for _ in range(MAX_DEPTH):
        nested = {"type": "and", "filters": [nested]}
    parse_filter(nested)  # at the limit: five compounds, one inside the next, as the docs allow
    with pytest.raises(FilterError, match=f"at most {MAX_DEPTH} deep"):
        parse_filter({"type": "or", "filters": [nested]})
    parse_filter({"type": "or", "filters": [leaf] * MAX_COMPARISONS})
    with pytest.raises(FilterError, match=f"at most {MAX_COMPARISONS} comparisons"):
        parse_filter({"type": "or", "filters": [leaf] * (MAX_COMPARISONS + 1)})


def test_chunk_id_is_refused_as_a_filter_key_rather_than_never_matching():
    with pytest.raises(FilterError, match=r"filters\.filters\[1\]\.key: chunk_id cannot be filtered on"):
        parse_filter(
            {
                "type": "or",
                "filters": [
                    {"type": "eq", "key": "document", "value": "leave.md"},
                    {"type": "eq", "key": "chunk_id", "value": "leave.md#0"},
                ],
            }
        )


def test_a_page_filter_over_a_collection_without_pages_is_refused():
    with pytest.raises(FilterError, match="no page numbers"):
        rows({"type": "eq", "key": "page", "value": 1}, pages=False)
    assert rows({"type": "eq", "key": "team", "value": "hr"}, pages=False) == [0, 1]


def test_attributes_are_few_short_strings_and_numbers_under_free_keys():
    assert checked_attributes({"team": "hr", "year": 2024, "weight": 0.5}) == {
        "team": "hr",
        "year": 2024,
        "weight": 0.5,
    }
    for bad, message in [
        ([], "JSON object"),
        ({f"k{i}": 1 for i in range(17)}, "at most 16"),
        ({"section": "x"}, "paragraph's own"),
        ({"page": 1}, "paragraph's own"),
        ({"ok": True}, "strings and numbers"),
        ({"ok": [1]}, "string or a number"),
        ({"": 1}, "1-64"),
    ]:
        with pytest.raises(FilterError, match=message):
            checked_attributes(bad)
