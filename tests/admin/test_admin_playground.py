"""The admin's search playground."""
# ruff: noqa: F811  (fixtures imported from test_admin are requested by name)

import pytest

from collections_app.models import (
    ModelCall,
    Paragraph,
)
from collections_app.services.agents import create_collection

from .conftest import HANDBOOK, make_built, texts, url

pytestmark = pytest.mark.django_db


def test_the_playground_runs_the_search_service_and_shows_the_answer(admin_client, handbook):
    page = admin_client.get(url("collection_playground", query=f"collection={handbook.pk}"))
    assert page.status_code == 200 and f'value="{handbook.pk}" selected' in page.content.decode()
    response = admin_client.post(
        url("collection_playground"),
        {
            "collection": handbook.pk,
            "question": "how many days of annual leave carry over",
            "most": 3,
            "around": 1,
            "min_score": "0.1",
        },
    )
    [answer] = response.context["answers"]
    assert (answer["mode"], answer["floor"], answer["around"], answer["refused"]) == ("hybrid", 0.1, 1, None)
    body = response.content.decode()
    assert "capped at five days" in body and 'data-role="passages"' in body and 'data-role="score"' in body
    assert 'data-role="floor">0.1<' in body and 'data-role="mode">hybrid (words and meaning)' in body
    assert "not judged</span> (not configured)" in body
    best = answer["results"][0]
    assert best["passages"] >= 2 and len(best["pieces"]) == best["passages"]
    # The hit inside the stitched run is marked, and links to its paragraph by its seed-004 chunk id.
    capped = Paragraph.objects.get(collection=handbook, text__contains="capped at five")
    assert (
        best["hit"]["paragraph"] == capped.pk
        and best["chunk_id"] == capped.chunk_id == f"leave.md#{capped.index}"
    )
    assert (
        url("paragraph_change", capped.pk) in body
        and 'data-role="hit"' in body
        and 'data-role="parts"' in body
    )


def test_the_playground_shows_reranked_positions_beside_the_fused_score(admin_client, handbook, settings):
    from tests.servers import RerankServer, serving

    with serving(RerankServer(favourite="lapse")) as reranker:
        settings.RERANK_URL, settings.RERANK_MODEL = reranker.url + "/v1/rerank", "rerank-mini"
        response = admin_client.post(
            url("collection_playground"),
            {
                "collection": handbook.pk,
                "question": "how many days of annual leave carry over",
                "most": 3,
                "around": 0,
                "min_score": "0",
            },
        )
    [answer] = response.context["answers"]
    assert answer["rerank"]["status"] == "reranked" and "lapse" in answer["paragraphs"][0]["text"]
    body = response.content.decode()
    assert "rerank-mini reordered the top" in body
    assert f"reranked 0.900, fused #{answer['paragraphs'][0]['fused_rank']}" in body


def test_playground_errors_are_messages_not_server_errors(admin_client, agent, knowledge_folder):
    secret = make_built(agent, knowledge_folder, "secret", {"a.md": HANDBOOK["leave.md"]}, per_reader=True)
    never = create_collection(agent=agent, name="never")
    for collection, expected in [
        (secret, "Collection secret answers per reader: pick a Reader above"),
        (never, "Collection never has not been built yet: press Rebuild"),
    ]:
        response = admin_client.post(
            url("collection_playground"), {"collection": collection.pk, "question": "leave", "most": 5}
        )
        assert response.status_code == 200 and response.context["answers"] == []
        said = texts(response)
        assert any(expected in m for m in said), said
        assert not any("reader_required" in m or "not_built" in m for m in said)  # no API codes
    response = admin_client.post(
        url("collection_playground"), {"collection": secret.pk, "question": "", "most": 99}
    )
    assert response.status_code == 200 and response.context["form"].errors.keys() == {"question", "most"}


def test_the_playground_charges_only_the_agent_named(admin_client, handbook, agent):
    before = ModelCall.objects.count()
    admin_client.post(
        url("collection_playground"),
        {"collection": handbook.pk, "question": "badges", "most": 5, "on_behalf_of": agent.agent_id},
    )
    assert ModelCall.objects.count() == before  # the hash embedder and no judge make no charged calls


def test_viewing_collections_alone_does_not_open_the_playground(handbook, staff_user):
    """Issue 24, item 10: the playground shows paragraph text, so it needs paragraph view permission."""
    from django.contrib.auth.models import Permission
    from django.test import Client

    staff_user.user_permissions.add(Permission.objects.get(codename="view_collection"))
    client = Client()
    client.force_login(staff_user)
    ask = {"collection": handbook.pk, "question": "how many days of annual leave carry over", "most": 3}
    assert client.get(url("paragraph_changelist")).status_code == 403
    assert client.get(url("collection_playground")).status_code == 403
    refused = client.post(url("collection_playground"), ask)
    assert refused.status_code == 403 and "capped at five" not in refused.content.decode()
    assert "Search playground" not in client.get(url("collection_changelist")).content.decode()
    assert "Search playground" not in client.get(url("collection_change", handbook.pk)).content.decode()

    staff_user.user_permissions.add(Permission.objects.get(codename="view_paragraph"))
    client.force_login(staff_user)  # permissions are cached on the user object
    assert "Search playground" in client.get(url("collection_changelist")).content.decode()
    assert "capped at five" in client.post(url("collection_playground"), ask).content.decode()


def test_the_playground_names_each_piece_as_the_agent_cites_it(admin_client, handbook):
    """With a paragraph switched off inside a document, the later ones are cited one lower (decision 0073):
    the playground names every stitched piece by the id the agent's answer gives it, so one paragraph does
    not show two ids on the same page."""
    from collections_app.services.documents import set_paragraphs_enabled

    leave = list(Paragraph.objects.filter(collection=handbook, document__name="leave.md").order_by("index"))
    assert len(leave) >= 3
    set_paragraphs_enabled(paragraphs=[leave[0]], enabled=False)
    response = admin_client.post(
        url("collection_playground"),
        {"collection": handbook.pk, "question": "unused days lapse on the first of April", "most": 1},
    )
    [answer] = response.context["answers"]
    best = answer["results"][0]
    named = [piece["chunk_id"] for piece in best["pieces"]]
    assert len(named) >= 2 and named == best["chunk_ids"], (named, best["chunk_ids"])
    assert best["hit"]["chunk_id"] == best["chunk_id"]
    # The link still opens the stored paragraph, whose own page keeps its stored index.
    assert best["hit"]["url"] == url("paragraph_change", best["hit"]["paragraph"])
