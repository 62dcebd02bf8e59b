"""A collection's analyzer end to end: built and searched with it (exact and IVF paths), changed through
the API and the admin with the rebuild that takes it live, and never in the seed-004 export."""

import json
import logging
from io import StringIO

import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.urls import reverse

from collections_app import interchange as fmt
from collections_app.index.format import IndexUnusable
from collections_app.index.mapped import MappedIndex
from collections_app.models import BuildRun, Collection, CollectionBuilt
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.analyzers import ANALYZER_CHANGED, set_analyzer
from collections_app.services.builds import build_collection
from collections_app.services.indexes import build_key, collection_root
from collections_app.services.interchange import export_index
from collections_app.services.search import search_collection
from ragsite.errors import RagsiteError

pytestmark = pytest.mark.django_db

POLICY = {
    "travel.md": "# Travel\n\nThe travel policy covers flights and hotels for staff on business trips.\n",
    "food.md": "# Food\n\nLunch is served in the canteen at noon on every working day.\n",
}
# The first day, in Chinese and in Japanese: written without spaces, so seed 004 makes each sentence one
# term, and a question about it meets nothing lexically.
CJK = {
    "zh.md": "# 入职\n\n新员工第一天上午九点到前台报到，领取工牌和电脑。\n",
    "ja.md": "# 初日\n\n初日は午前九時に受付へ行き、社員証とノートパソコンを受け取ります。\n",
    "en.md": "# Parking\n\nVisitors park in the north car park and sign in at reception.\n",
}


def built(agent, knowledge_folder, name: str, files: dict, **options) -> Collection:
    collection = create_collection(agent=agent, name=name, method="structure", **options)
    knowledge_folder(name, files, agent=agent.agent_id)
    assert build_collection(collection=collection).status == "succeeded"
    collection.refresh_from_db()
    return collection


def documents(collection: Collection, question: str, **asked) -> list[str]:
    answer = search_collection(
        agent=collection.agent, collection=collection, question=question, around=0, **asked
    )
    return [p["document"] for p in answer["paragraphs"]]


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_policies_finds_the_policy_under_english_and_not_under_simple(agent, knowledge_folder, mode):
    english = built(agent, knowledge_folder, "english", POLICY, analyzer="english")
    simple = built(agent, knowledge_folder, "simple", POLICY, analyzer="simple")
    assert CollectionBuilt.objects.get(collection=english).analyzer == "english"
    # Lexical: a floor just above 0 keeps only paragraphs some question term reached.
    floor = 0.01 if mode == "lexical" else 0.0
    assert documents(english, "policies", mode=mode, min_score=floor, most=1) == ["travel.md"]
    if mode == "lexical":
        assert documents(simple, "policies", mode=mode, min_score=floor) == []
        assert documents(simple, "policy", mode=mode, min_score=floor) == ["travel.md"]


def test_the_ivf_path_asks_in_the_collections_analyzer_too(agent, knowledge_folder, settings, caplog):
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 1
    english = built(agent, knowledge_folder, "english", POLICY, analyzer="english")
    with caplog.at_level(logging.DEBUG, logger="ragsite.search"):
        answer = search_collection(
            agent=agent, collection=english, question="policies", around=0, most=1, min_score=0, explain=True
        )
    assert any("IVF cosine, nprobe 1" in record.getMessage() for record in caplog.records)
    assert [p["document"] for p in answer["paragraphs"]] == ["travel.md"]
    assert answer["explain"]["pieces"][0][0]["lexical"] > 0


def test_a_chinese_or_japanese_question_finds_its_paragraph_under_cjk_and_not_under_simple(
    agent, knowledge_folder
):
    cjk = built(agent, knowledge_folder, "cjk", CJK, analyzer="cjk")
    simple = built(agent, knowledge_folder, "plain", CJK)
    for question, document in [("第一天几点报到", "zh.md"), ("初日は何時に受付へ行きますか", "ja.md")]:
        assert documents(cjk, question, mode="lexical", min_score=0.01)[:1] == [document]
        assert documents(simple, question, mode="lexical", min_score=0.01) == []
    # English text in the same collection is read as simple reads it.
    assert documents(cjk, "Where do visitors park?", mode="lexical", min_score=0.01)[:1] == ["en.md"]


@pytest.mark.parametrize("name", ["english", "english_exact"])
def test_the_export_is_seed_004s_whatever_analyzer_the_collection_searches_with(
    agent, knowledge_folder, tmp_path, name
):
    other = create_agent(agent_id="beta", name="Beta")[0]
    english = built(agent, knowledge_folder, "handbook", POLICY, analyzer=name)
    simple = built(other, knowledge_folder, "handbook", POLICY, analyzer="simple")
    first = export_index(collection=english, directory=tmp_path / "english")
    second = export_index(collection=simple, directory=tmp_path / "simple")
    for name in fmt.FILES:
        if name == "meta.json":  # the same but for when each was built
            ours, theirs = (json.loads((folder / name).read_text()) for folder in (first, second))
            ours.pop("created_at"), theirs.pop("created_at")
            assert ours == theirs
            continue
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    # And those are seed 004's postings of the texts, with no stemmed term among them.
    index = fmt.read_index(first, index_id="handbook")
    assert "policy" in index.bm25.vocabulary
    assert not {"polici", "~polici"} & set(index.bm25.vocabulary)


def test_an_index_of_another_analyzer_is_refused_and_written_again(agent, knowledge_folder):
    english = built(agent, knowledge_folder, "english", POLICY, analyzer="english")
    record = CollectionBuilt.objects.get(collection=english)
    folder = collection_root(english.pk) / build_key(record)
    assert MappedIndex(folder, analyzer="english").analyzer == "english"
    with pytest.raises(IndexUnusable, match="english analyzer's, not the simple"):
        MappedIndex(folder, analyzer="simple")
    # A copy written by another analyzer (a node that wrote it from the rows before the change) is not
    # used: the search writes the build's own and answers in its terms.
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "analyzer": "simple"}))
    from collections_app.services import indexes

    indexes.forget(english.pk)
    assert documents(english, "policies", mode="lexical", min_score=0.01) == ["travel.md"]
    assert MappedIndex(folder).analyzer == "english"


def test_changing_the_analyzer_queues_a_rebuild_that_takes_it_live(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    collection = built(agent, knowledge_folder, "handbook", POLICY)
    with django_capture_on_commit_callbacks(execute=True):
        changed, run, why = set_analyzer(collection=collection, analyzer="english", requested_by="test")
        # Until the rebuild is live, searches keep the build's analyzer.
        assert Collection.objects.get(pk=collection.pk).rebuild_needed == ANALYZER_CHANGED
        assert documents(collection, "policies", mode="lexical", min_score=0.01) == []
    assert changed and run is not None and why == ""
    run.refresh_from_db()
    assert run.status == BuildRun.SUCCEEDED and run.paragraphs_embedded == 0  # nothing re-embedded
    assert CollectionBuilt.objects.get(collection=collection).analyzer == "english"
    assert Collection.objects.get(pk=collection.pk).rebuild_needed == ""
    assert documents(collection, "policies", mode="lexical", min_score=0.01) == ["travel.md"]
    # The same analyzer again changes nothing and queues nothing.
    assert set_analyzer(collection=collection, analyzer="english", requested_by="test") == (
        False,
        None,
        "unchanged",
    )


def test_a_never_built_collection_takes_its_analyzer_at_its_first_build(agent):
    collection = create_collection(agent=agent, name="fresh")
    assert set_analyzer(collection=collection, analyzer="cjk", requested_by="test") == (
        True,
        None,
        "never built",
    )
    assert not BuildRun.objects.filter(collection=collection).exists()
    with pytest.raises(RagsiteError) as refused:
        set_analyzer(collection=collection, analyzer="klingon", requested_by="test")
    assert refused.value.code == "invalid_analyzer" and "english" in refused.value.message


def test_a_new_collection_takes_the_analyzer_setting(agent, settings):
    assert create_collection(agent=agent, name="plain").analyzer == "simple"
    settings.ANALYZER = "english"
    assert create_collection(agent=agent, name="stemmed").analyzer == "english"
    assert create_collection(agent=agent, name="asked", analyzer="cjk").analyzer == "cjk"
    call_command("create_collection", "alpha", "by-command", "--analyzer", "french", stdout=StringIO())
    assert Collection.objects.get(name="by-command").analyzer == "french"


def test_an_unknown_analyzer_setting_fails_the_system_check(settings):
    from django.core.management.base import SystemCheckError

    settings.ANALYZER = "klingon"
    with pytest.raises(SystemCheckError, match=r"collections.E009.*ANALYZER: analyzer must be one of"):
        call_command("check")


@pytest.fixture
def caller(client):
    agent, raw = create_agent(agent_id="helpdesk")

    def call(method, path, body=None):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    call.agent = agent
    return call


def test_the_api_creates_with_an_analyzer_and_changes_it_with_a_rebuild(
    caller, knowledge_root, django_capture_on_commit_callbacks
):
    knowledge_root("helpdesk", "hr", POLICY)
    refused = caller("post", "/collections", {"name": "handbook", "folder": "hr", "analyzer": "klingon"})
    assert refused.status_code == 400 and "analyzer" in refused.json()["error"]["message"], refused.json()
    created = caller("post", "/collections", {"name": "handbook", "folder": "hr", "analyzer": "cjk"})
    assert created.status_code == 201 and created.json()["analyzer"] == "cjk"
    with django_capture_on_commit_callbacks(execute=True):
        caller("post", "/collections/handbook/build")
    assert caller("get", "/collections/handbook").json()["built"]["analyzer"] == "cjk"
    with django_capture_on_commit_callbacks(execute=True):
        changed = caller("put", "/collections/handbook/analyzer", {"analyzer": "english"})
    assert changed.status_code == 200, changed.content
    answer = changed.json()
    assert answer["analyzer"] == "english" and answer["rebuild"] is not None
    status = caller("get", f"/collections/handbook/builds/{answer['rebuild']}").json()
    assert status["status"] == "succeeded"
    assert caller("get", "/collections/handbook").json()["built"]["analyzer"] == "english"
    unchanged = caller("put", "/collections/handbook/analyzer", {"analyzer": "english"}).json()
    assert (unchanged["rebuild"], unchanged["rebuild_note"]) == (None, "unchanged")
    assert caller("put", "/collections/nope/analyzer", {"analyzer": "english"}).status_code == 404
    bad = caller("put", "/collections/handbook/analyzer", {"analyzer": "Snowball"})
    assert bad.status_code == 400 and "english" in bad.json()["error"]["message"], bad.json()


def test_the_admin_offers_every_analyzer_and_a_change_queues_the_rebuild(
    admin_client, agent, knowledge_folder, django_capture_on_commit_callbacks, settings
):
    settings.ANALYZER = "english"
    add = admin_client.get(reverse("admin:collections_app_collection_add")).content.decode()
    assert '<option value="english" selected>english</option>' in add and '<option value="cjk">' in add
    collection = built(agent, knowledge_folder, "handbook", POLICY, analyzer="simple")
    form = {
        "built_from": "",
        "folder": "",
        "method": collection.method,
        "size": "",
        "overlap": "",
        "min_score": "",
        "around": "",
        "on_conflict": collection.on_conflict,
    }
    page = reverse("admin:collections_app_collection_change", args=[collection.pk])
    # A form posted without the field keeps the analyzer and queues nothing.
    assert admin_client.post(page, form).status_code == 302
    assert Collection.objects.get(pk=collection.pk).analyzer == "simple"
    assert BuildRun.objects.filter(collection=collection).count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        saved = admin_client.post(page, {**form, "analyzer": "english"})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    said = [str(m) for m in get_messages(saved.wsgi_request)]
    assert any("queued so that the keyword index reads words the new way" in m for m in said), said
    assert CollectionBuilt.objects.get(collection=collection).analyzer == "english"
    assert documents(collection, "policies", mode="lexical", min_score=0.01) == ["travel.md"]


def test_known_answers_are_measured_in_the_builds_analyzer(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    from collections_app.models import KnownAnswersReport
    from collections_app.services import known_answers

    items = [{"question": "policies", "answer": "travel policy"}, {"question": "sourdough", "control": True}]
    scores = {}
    for analyzer in ("simple", "english"):
        collection = create_collection(agent=agent, name=analyzer, method="structure", analyzer=analyzer)
        knowledge_folder(analyzer, POLICY)
        known_answers.set_known_answers(collection=collection, items=items)
        with django_capture_on_commit_callbacks(execute=True):
            run = build_collection(collection=collection)
        result = KnownAnswersReport.objects.get(build=run).results[0]
        answer = search_collection(
            agent=agent, collection=collection, question="policies", min_score=0, most=2, around=0
        )
        travel = next(p for p in answer["paragraphs"] if p["document"] == "travel.md")
        # The report scores the answer as a search of the live build scores the same paragraph.
        assert result["score"] == pytest.approx(travel["score"], abs=1e-6)
        scores[analyzer] = result["score"]
    # The keyword leg met "policy" only when stemmed: english finds it above the floor, simple does not.
    assert scores["english"] > 0.22 > scores["simple"]


def test_a_change_made_while_a_build_runs_is_the_analyzer_it_commits_with(
    agent, knowledge_folder, monkeypatch
):
    from collections_app.services import builds

    collection = create_collection(agent=agent, name="handbook", method="structure")
    knowledge_folder("handbook", POLICY)
    reading = builds.collection_sources

    def sources_then_a_change(collection):
        # The build has read its collection; a person changes the analyzer before it commits.
        Collection.objects.filter(pk=collection.pk).update(analyzer="english")
        return reading(collection)

    monkeypatch.setattr(builds, "collection_sources", sources_then_a_change)
    assert build_collection(collection=collection).status == "succeeded"
    assert CollectionBuilt.objects.get(collection=collection).analyzer == "english"
    assert documents(collection, "policies", mode="lexical", min_score=0.01) == ["travel.md"]
