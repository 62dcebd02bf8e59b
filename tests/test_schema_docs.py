"""The field lists in docs/api.md and docs/mcp.md are the declarations' (collections_app.schemas,
memory_app.schemas), checked here.

A reference page marks a list it keeps with an HTML comment, invisible when rendered:

* `<!-- answer: module.Model -->`: the paragraph it starts holds the answer's outline, in backticks,
  exactly as `ragsite.schemas.outline(Model)` writes it (`{"a", "b": [{"c"}], "d"?}`);
* `<!-- arguments: module.A module.B -->`: the table that follows names, in its first column and in
  order, exactly the fields of a request made of those models (`ragsite.schemas.tool_input`).

A failure prints the line to write. A page that keeps a field list unmarked is not checked, so each
answer and tool of the pages is required to be marked at least once (`MARKED`).
"""

import importlib
import re
from pathlib import Path

import pytest

from ragsite.schemas import outline, tool_input

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ("api.md", "mcp.md")
MARKER = re.compile(r"<!-- (answer|arguments): ([\w. ]+?) -->")

# What each page must mark at least once.
MARKED = {
    "api.md": {
        "collections_app.schemas.search.SearchIn",
        "collections_app.schemas.search.SearchOut",
        "collections_app.schemas.collections.CitedOut",
        "collections_app.schemas.collections.CollectionOut",
        "collections_app.schemas.builds.BuildStatusOut",
        "collections_app.schemas.known_answers.KnownAnswersOut",
        "memory_app.schemas.StoredOut",
        "memory_app.schemas.RecallOut",
        "memory_app.schemas.RecordOut",
        "memory_app.schemas.ListOut",
        "memory_app.schemas.HealthOut",
        "memory_app.schemas.ChangedOut",
    },
    "mcp.md": {
        "collections_app.schemas.search.SearchIn",
        "collections_app.schemas.search.SearchOut",
        "collections_app.schemas.builds.BuildOut",
        "collections_app.schemas.builds.BuildStatusIn",
        "collections_app.schemas.collections.CollectionsOut",
        "collections_app.schemas.measure.MeasureIn",
        "memory_app.schemas.StoredOut",
        "memory_app.schemas.RecallIn",
        "memory_app.schemas.RecallOut",
        "memory_app.schemas.ListOut",
        "memory_app.schemas.RecordOut",
        "memory_app.schemas.RecordChangeIn",
        "memory_app.schemas.ChangedOut",
    },
}


def model(dotted: str):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def marks(page: str):
    """(kind, dotted names, the marker's line and the paragraph or table after it, line number)."""
    lines = (DOCS / page).read_text().splitlines()
    for number, line in enumerate(lines):
        for kind, names in MARKER.findall(line):
            block, following = [line], number + 1
            if not MARKER.sub("", line).strip():  # a marker alone on its line: the next paragraph
                while following < len(lines) and not lines[following].strip():
                    following += 1
            while following < len(lines) and lines[following].strip():
                block.append(lines[following])
                following += 1
            yield kind, names.split(), block, number + 1


def table_names(block: list[str]) -> list[str]:
    rows = [line for line in block if line.startswith("|") and not set(line) <= set("|-: ")]
    return [match.group(1) for row in rows[1:] if (match := re.match(r"\|\s*`([^`]+)`", row))]


@pytest.mark.parametrize("page", PAGES)
def test_the_marked_field_lists_are_the_declarations(page):
    problems = []
    for kind, names, block, number in marks(page):
        if kind == "answer":
            (name,) = names
            expected = f"`{outline(model(name))}`"
            if expected not in "\n".join(block):
                problems.append(f"{page}:{number}: the answer {name} is {expected}")
        else:
            expected = list(tool_input(*(model(name) for name in names))["properties"])
            if table_names(block) != expected:
                problems.append(f"{page}:{number}: the table names {table_names(block)}, declared {expected}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES)
def test_every_answer_and_request_the_page_describes_is_marked(page):
    marked = {name for _kind, names, _block, _number in marks(page) for name in names}
    assert MARKED[page] <= marked, sorted(MARKED[page] - marked)
