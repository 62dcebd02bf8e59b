"""Search's seed rules: citations by document and index, chunk ids stable across rebuilds, rows of
another width refused, a per-reader collection's unlabelled paragraphs, and explain."""

# ruff: noqa: F811  (the fixture `api_key` comes from test_search, requested by name)

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone

from collections_app.models import CollectionBuilt, Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from ragsite.errors import Conflict
from ragsite.fusion import FUSION_WEIGHT
from tests.conftest import HANDBOOK

from .test_search import QUESTION, api_key, ask, post  # noqa: F401

pytestmark = pytest.mark.django_db


# --- seed rules: citations and refusals -------------------------------------------


def test_seed_003_a_paragraph_is_cited_by_document_and_its_index_within_the_document(agent, handbook):
    """Seed 003: the index is the passage's position in its document, the second half of the citation;
    seed 004: chunk_id is <doc_id>#<k>."""
    answer = ask(agent, around=1, min_score=0, most=50)
    for paragraph in answer["paragraphs"]:
        # Every paragraph is readable here, so position p (from 1) is ordinal p - 1.
        stitched = Paragraph.objects.filter(
            collection=handbook, ordinal__gte=paragraph["first"] - 1, ordinal__lte=paragraph["last"] - 1
        ).order_by("ordinal")
        assert paragraph["chunk_ids"] == [f"{p.document.name}#{p.index}" for p in stitched]
    best = ask(agent, around=1, most=1)["paragraphs"][0]
    matched = Paragraph.objects.get(collection=handbook, text__contains="capped at five")
    assert best["chunk_id"] == f"leave.md#{matched.index}" and best["passages"] > 1


def test_seed_003_chunk_ids_are_stable_across_a_rebuild_that_changes_other_documents(
    agent, handbook, knowledge_folder
):
    """Seed 003/004: the source identifier and the passage's index within it are the citation, so a
    document that did not change keeps its chunk ids while the collection-wide positions move."""
    before = ask(agent, around=0, most=1)["paragraphs"][0]
    # "a-first.md" sorts before leave.md, so every ordinal of leave.md moves.
    knowledge_folder("handbook", {"a-first.md": "# Intro\n\n" + "Welcome to the company handbook. " * 20})
    assert build_collection(collection=handbook).status == "succeeded"
    after = ask(agent, around=0, most=1)["paragraphs"][0]
    assert after["text"] == before["text"]
    assert after["chunk_id"] == before["chunk_id"]
    assert after["first"] != before["first"]  # a position, not an id


def test_the_search_command_cites_chunk_ids(handbook):
    out = StringIO()
    call_command("search", "alpha", "handbook", QUESTION, "--around", "0", stdout=out)
    matched = Paragraph.objects.get(collection=handbook, text__contains="capped at five")
    assert f"leave.md#{matched.index} § Leave" in out.getvalue()


def test_the_api_answer_carries_chunk_ids(client, handbook, api_key):
    response = post(
        client, api_key, "/api/v1/collections/handbook/search", {"question": QUESTION, "around": 1}
    )
    best = response.json()["paragraphs"][0]
    assert best["chunk_id"].startswith("leave.md#") and best["chunk_id"] in best["chunk_ids"]
    schema = client.get("/api/v1/openapi.json").json()["components"]["schemas"]["ParagraphOut"]
    assert {"chunk_id", "chunk_ids"} <= set(schema["required"])


def test_seed_refusal_2_a_question_of_another_width_is_refused_per_row_under_the_same_model_name(
    agent, knowledge_folder, embedding_server
):
    """Seed 000, refusal 2: a question embedded at a width other than the rows' is refused, "checked
    per row, because the model can change underneath" - here the endpoint keeps its model's name."""
    from ragsite import embedding

    collection = create_collection(agent=agent, name="drift", method="fixed", size=80)
    knowledge_folder("drift", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    assert ask(agent, "drift")["paragraphs"]
    embedding_server.width = 4  # the model behind the same name changed...
    embedding._embedder_for.cache_clear()  # ...and the server process restarted with it
    with pytest.raises(Conflict) as caught:
        ask(agent, "drift")
    assert caught.value.code == "width_mismatch" and caught.value.status == 409
    assert "4 dimensions" in caught.value.message and "8" in caught.value.message


@pytest.mark.parametrize("width", [16, 24])
def test_a_question_vector_a_whole_multiple_of_the_rows_width_is_refused_not_read_as_windows(
    agent, knowledge_folder, embedding_server, client, width
):
    """Issue 24, seed audit: a question vector exactly twice (or three times) the rows' width is a
    whole number of the rows' vectors, so read as windows it would be scored. It is checked against
    the build's dimensions and refused, through the API, in the one error shape with a 409."""
    from collections_app.services.agents import create_agent
    from ragsite import embedding

    owner, raw = create_agent(agent_id="wide", name="Wide")
    collection = create_collection(agent=owner, name="drift", method="fixed", size=80)
    knowledge_folder("drift", HANDBOOK, agent="wide")
    assert build_collection(collection=collection).status == "succeeded"
    assert post(client, raw, "/api/v1/collections/drift/search", {"question": QUESTION}).status_code == 200
    embedding_server.width = width
    embedding._embedder_for.cache_clear()
    response = post(client, raw, "/api/v1/collections/drift/search", {"question": QUESTION})
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "width_mismatch"
    assert f"{width} dimensions" in response.json()["error"]["message"]


def test_a_width_change_under_one_model_name_re_embeds_every_row_none_read_as_two_windows(
    agent, knowledge_folder, embedding_server
):
    """Issue 24, seed audit, per row: the endpoint's model halves its width under the same name. The
    documents did not change, but none of their 16-wide vectors may be kept: each would be a whole
    number (two) of the new 8-wide vectors and read as two windows. Every row is embedded again."""
    from ragsite import embedding

    embedding_server.width = 16
    embedding._embedder_for.cache_clear()
    collection = create_collection(agent=agent, name="halved", method="fixed", size=80)
    knowledge_folder("halved", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    embedding_server.width = 8
    embedding._embedder_for.cache_clear()
    assert build_collection(collection=collection).status == "succeeded"
    widths = {
        len(bytes(e))
        for e in Paragraph.objects.filter(collection=collection).values_list("embedding", flat=True)
    }
    assert widths == {8 * 2}  # one float16 window of 8 a row, none of 16
    assert ask(agent, "halved")["paragraphs"]


def test_seed_refusal_2_a_row_of_another_width_in_the_collection_is_refused(agent, handbook, client, api_key):
    """Seed 000, refusal 2, the per-row half: one row written at another width (a raw edit, a partial
    migration) refuses the collection rather than scoring the others."""
    odd = Paragraph.objects.filter(collection=handbook).order_by("ordinal").last()
    # 40 float16 values: no whole number of the collection's 64-wide vectors (a blob that happens to
    # be a multiple of the width reads as several windows; the build's model check guards that case).
    Paragraph.objects.filter(pk=odd.pk).update(embedding=np.ones(40, dtype="<f2").tobytes())
    CollectionBuilt.objects.filter(collection=handbook).update(built_at=timezone.now())  # reload the index
    with pytest.raises(Conflict) as caught:
        ask(agent)
    assert caught.value.code == "width_mismatch"
    response = post(client, api_key, "/api/v1/collections/handbook/search", {"question": QUESTION})
    assert response.status_code == 409 and response.json()["error"]["code"] == "width_mismatch"


def test_seed_unlabelled_paragraphs_of_a_per_reader_collection_are_readable_by_any_reader(
    agent, knowledge_folder
):
    """Seed 000: "A paragraph with no labels is readable by anybody" - shown positively: a reader holding
    none of the collection's labels still receives every unlabelled paragraph, and only those."""
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    hr = Label.objects.create(name="hr")
    for paragraph in Paragraph.objects.filter(collection=collection, document__name="leave.md"):
        paragraph.labels.add(hr)
    create_reader(external_id="eve", labels=["visitors"])
    answer = ask(
        agent,
        "secret",
        reader="eve",
        question="badges laptops mileage trains leave",
        min_score=0,
        most=50,
        around=0,
    )
    seen = {p["chunk_id"] for p in answer["paragraphs"]}
    unlabelled = {
        f"{p.document.name}#{p.index}"
        for p in Paragraph.objects.filter(collection=collection)
        if not p.labels.exists()
    }
    assert unlabelled and seen == unlabelled


def test_explain_splits_each_piece_into_its_lexical_and_semantic_parts_and_marks_the_hit(agent, handbook):
    answer = ask(agent, around=1, most=1, explain=True)
    [run] = answer["paragraphs"]
    [pieces] = answer["explain"]["pieces"]
    assert [p["ordinal"] for p in pieces] == list(range(run["first"], run["last"] + 1))
    [hit] = [p for p in pieces if p["hit"]]
    assert "capped at five days" in hit["text"] and hit["score"] == run["score"]
    # The fused score is the convex sum of its parts, at the search's weight.
    assert hit["score"] == pytest.approx(
        FUSION_WEIGHT * hit["semantic"] + (1 - FUSION_WEIGHT) * hit["lexical"], abs=1e-5
    )
    assert answer["explain"]["hidden_by_labels"] == 0
    assert "explain" not in ask(agent)  # only when asked: the API never sends it


def test_explain_counts_the_paragraphs_a_readers_labels_hid_and_nothing_more(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    hr = Label.objects.create(name="hr")
    create_reader(external_id="bob", labels=["staff"])
    for paragraph in Paragraph.objects.filter(collection=collection, document__name="leave.md"):
        paragraph.labels.add(hr)
    everyone = ask(agent, "secret", reader="bob", min_score=0, most=50, around=0, explain=True)
    assert everyone["explain"]["hidden_by_labels"] == 3  # leave.md's three paragraphs, all above a 0 floor
    assert all(p["document"] != "leave.md" for p in everyone["paragraphs"])
    strict = ask(agent, "secret", reader="bob", min_score=0.99, explain=True)
    assert strict["explain"]["hidden_by_labels"] == 0  # hidden only counts what would have made the floor
