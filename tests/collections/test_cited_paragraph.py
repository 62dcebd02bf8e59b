"""A cited paragraph read back by its chunk id through the API (issue 24, item 2): a per-reader id
counts the reader's own paragraphs, and one the reader may not read answers as a missing one."""

from urllib.parse import urlencode

import pytest

from collections_app.models import Label, Paragraph
from collections_app.services.agents import create_agent, create_collection, create_reader
from collections_app.services.builds import build_collection

from .test_reader_view import paragraph

pytestmark = pytest.mark.django_db

HIDDEN = {1, 3, 6}  # of eight paragraphs: alice may read 0, 2, 4, 5, 7 and cites them #0 to #4


@pytest.fixture
def keyed_collection(knowledge_folder):
    agent, raw = create_agent(agent_id="cites", name="Cites")
    collection = create_collection(
        agent=agent, name="ids", method="structure", size=120, overlap=0, per_reader=True
    )
    knowledge_folder("ids", {"doc.md": "\n\n".join(paragraph(i) for i in range(8)) + "\n"}, agent="cites")
    assert build_collection(collection=collection).status == "succeeded"
    secret, public = Label.objects.create(name="secret"), Label.objects.create(name="pub")
    for i, row in enumerate(Paragraph.objects.filter(collection=collection).order_by("ordinal")):
        row.labels.add(secret if i in HIDDEN else public)
    create_reader(external_id="alice", labels=["pub"])
    return raw


def read(client, raw, chunk_id, reader="alice", name="ids"):
    query = urlencode({"chunk_id": chunk_id, **({"reader": reader} if reader is not None else {})})
    return client.get(f"/api/v1/collections/{name}/paragraph?{query}", HTTP_AUTHORIZATION=f"Bearer {raw}")


def test_every_id_a_readers_search_cites_reads_back_what_it_showed(client, keyed_collection):
    raw = keyed_collection
    answer = client.post(
        "/api/v1/collections/ids/search",
        {"question": "paragraph policy staff", "reader": "alice", "min_score": 0, "most": 50, "around": 0},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    ).json()
    cited = {p["chunk_id"]: p for p in answer["paragraphs"]}
    assert sorted(cited) == [f"doc.md#{k}" for k in range(5)]
    for chunk_id, shown in cited.items():
        response = read(client, raw, chunk_id)
        assert response.status_code == 200, response.content
        assert response.json() == {
            "chunk_id": chunk_id,
            "document": "doc.md",
            "section": shown["section"],
            "text": shown["text"],
        }
    # #2 is alice's third readable paragraph (the document's fifth, "ember"), not the document's third.
    assert "ember" in read(client, raw, "doc.md#2").json()["text"]


def test_an_id_the_reader_may_not_read_answers_exactly_as_a_missing_one(client, keyed_collection):
    raw = keyed_collection
    missing = read(client, raw, "doc.md#99")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_paragraph"

    def said(response, chunk_id: str) -> dict:
        error = response.json()["error"]
        return {**error, "message": error["message"].replace(chunk_id, "<id>")}

    body = said(missing, "doc.md#99")
    # doc.md#5 to #7 exist in the document (its sixth to eighth paragraphs) but alice reads only five.
    for chunk_id in (
        "doc.md#5",
        "doc.md#7",
        "other.md#0",
        "doc.md#x",
        "#1",
        "doc\x00.md#0",
        "doc.md#١",
        "doc.md#01",
    ):
        response = read(client, raw, chunk_id)
        assert response.status_code == 404
        assert said(response, chunk_id) == body, response.content
    # A reader nobody holds reads unlabelled paragraphs only (none here), like a reader holding nothing.
    create_reader(external_id="nobody", labels=[])
    for reader in ("nobody", "ghost"):
        response = read(client, raw, "doc.md#0", reader=reader)
        assert response.status_code == 404
        assert said(response, "doc.md#0") == body
    assert read(client, raw, "doc.md#0", reader=None).json()["error"]["code"] == "reader_required"


def test_another_agents_key_cannot_read_the_collection(client, keyed_collection):
    _other, other_raw = create_agent(agent_id="other", name="Other")
    response = read(client, other_raw, "doc.md#0")
    assert response.status_code == 404 and response.json()["error"]["code"] == "unknown_collection"
