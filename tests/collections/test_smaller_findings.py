"""Issue 39's smaller findings where no other test held them end to end: five nested compounds pass on every
surface that takes a filter (the docs allow five), and every refusal category reaches the build's warnings,
by the document's name (docs/security.md promises it for each one)."""

import json

import pytest

from collections_app.models import BuildRun, Document
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.text.reading import REFUSAL_REASONS, TIMED_OUT, TOO_LARGE
from tests.collections.test_mcp import call_tool, tool_error
from tests.conftest import HANDBOOK
from tests.hostile import looping_pdf, non_utf8_name, sparse_file
from tests.office_files import epub_bytes

pytestmark = pytest.mark.django_db


def nested(compounds: int) -> dict:
    """`compounds` and/or filters, one inside the next, around one comparison that keeps leave.md."""
    inner = {"type": "eq", "key": "document", "value": "leave.md"}
    for depth in range(compounds):
        inner = {"type": "and" if depth % 2 else "or", "filters": [inner]}
    return inner


@pytest.fixture
def keyed(knowledge_folder):
    agent, raw = create_agent(agent_id="alpha", name="Alpha")
    knowledge_folder("handbook", HANDBOOK)
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    return raw


def _post(client, raw, url, body):
    return client.post(
        url,
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )


def test_five_nested_compounds_filter_on_every_surface_and_a_sixth_is_refused_by_name(client, keyed):
    raw = keyed
    five, six = nested(5), nested(6)
    api = _post(
        client,
        raw,
        "/api/v1/collections/handbook/search",
        {"question": "leave", "filters": five, "min_score": 0},
    )
    assert api.status_code == 200, api.content
    assert {p["document"] for p in api.json()["paragraphs"]} == {"leave.md"}
    store = _post(
        client,
        raw,
        "/v1/vector_stores/handbook/search",
        {"query": "leave", "filters": five, "ranking_options": {"score_threshold": 0}},
    )
    assert store.status_code == 200, store.content
    assert {r["filename"] for r in store.json()["data"]} == {"leave.md"}
    tool = call_tool(
        client,
        raw,
        "search",
        {"collection": "handbook", "question": "leave", "filters": five, "min_score": 0},
    )
    assert not tool.get("isError"), tool
    assert {p["document"] for p in tool["structuredContent"]["paragraphs"]} == {"leave.md"}

    refused = _post(client, raw, "/api/v1/collections/handbook/search", {"question": "leave", "filters": six})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_filters"
    assert "at most 5 deep" in refused.json()["error"]["message"]
    error = tool_error(
        call_tool(client, raw, "search", {"collection": "handbook", "question": "q", "filters": six})
    )
    assert error["code"] == "invalid_filters" and "at most 5 deep" in error["message"]


def test_every_refusal_category_is_in_the_builds_warnings_by_name(agent, knowledge_folder, settings):
    """One build over a file of each kind a build refuses: each refused document's warning names it and
    its category, and the kinds cover the whole vocabulary (a new category without a warning fails here)."""
    from collections_app.samples import pdf_bytes

    settings.EXTRACT_TIMEOUT, settings.EXTRACT_MEMORY_MB = 3, 256
    settings.OCR_LANGUAGES = ""  # OCR off: an image can only be refused as needing it
    folder = knowledge_folder(
        "kinds",
        {
            "good.md": "# Good\n\nThe canteen opens at eight.\n",
            "broken.pdf": b"%PDF-1.4 not really",
            "locked.epub": epub_bytes([("One", "<p>Sealed words.</p>")], encrypted=True),
            "scan.pdf": pdf_bytes([[], []]),
            "notes.xyz": "x",
            "blank.md": "  \n",
        },
    )
    sparse_file(folder / "big.txt")
    looping_pdf(folder / "loop.pdf")
    bad = non_utf8_name(folder)
    from PIL import Image

    Image.new("L", (200, 80), 255).save(folder / "photo.png", format="PNG")
    collection = create_collection(agent=agent, name="kinds", method="structure")

    run = build_collection(collection=collection)

    assert run.status == BuildRun.SUCCEEDED, run.error
    shown_bad = bad.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    assert run.refusal_reasons == {
        "broken.pdf": "corrupt",
        "locked.epub": "encrypted",
        "scan.pdf": "no text layer — scanned?",
        "notes.xyz": "unsupported type",
        "big.txt": TOO_LARGE,
        "blank.md": "empty",
        "loop.pdf": TIMED_OUT,
        shown_bad: "bad name",
        "photo.png": "needs OCR (not installed)",
    }
    assert set(run.refusal_reasons.values()) == set(REFUSAL_REASONS)
    for name, category in run.refusal_reasons.items():
        assert any(w.startswith(f"{name} was refused ({category})") for w in run.warnings), (
            name,
            run.warnings,
        )
    # The warnings are the build's, for people: no library's words, no path.
    assert str(folder.parent) not in json.dumps(run.warnings, ensure_ascii=False)
    assert Document.objects.get(collection=collection, name="good.md").status == Document.ACTIVE
