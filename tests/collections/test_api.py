"""The collections API as an agent uses it: create, build, read the build's outcome, strict input."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import BuildRun
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import request_build

pytestmark = pytest.mark.django_db

LEAVE = {
    "leave.md": "# Leave\n\nCarry-over of annual leave is capped at five days a year.\n",
    "bad.pdf": b"garbage",
}


@pytest.fixture
def caller(client):
    agent, raw = create_agent(agent_id="helpdesk")

    def call(method, path, body=None, **extra):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}", **extra}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    call.agent = agent
    return call


def test_a_collection_is_created_from_a_folder_under_the_root_built_and_its_outcome_read(
    caller, knowledge_root, tmp_path, django_capture_on_commit_callbacks
):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    created = caller(
        "post",
        "/collections",
        {
            "name": "handbook",
            "folder": "hr-share",
            "built_from": "the HR share",
            "method": "fixed",
            "per_reader": False,
        },
    )
    assert created.status_code == 201, created.content
    assert created.json()["folder"] == "hr-share" and created.json()["built"] is None

    with django_capture_on_commit_callbacks(execute=True):  # tests run the queued task at once
        queued = caller("post", "/collections/handbook/build")
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    build_id = queued.json()["build"]
    status = caller("get", f"/collections/handbook/builds/{build_id}")
    assert status.status_code == 200
    answer = status.json()
    assert answer["build"] == build_id and answer["status"] == "succeeded" and answer["percent"] == 100
    assert answer["passages"] >= 1 and answer["documents_read"] == 1 and answer["documents_reused"] == 0
    assert answer["refused"] == ["bad.pdf"] and answer["model"] == "hash-64" and answer["error"] is None
    assert answer["progress"]["documents_done"] == answer["progress"]["documents_total"] == 2
    assert answer["progress"]["phase"] == "finished"
    assert answer["waiting"] is None and answer["seconds"] is not None
    assert str(tmp_path) not in status.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        again = caller("post", "/collections/handbook/build").json()["build"]
    listed = caller("get", "/collections/handbook/builds?limit=1").json()
    assert [b["build"] for b in listed] == [again] and listed[0]["documents_reused"] == 1
    assert [b["build"] for b in caller("get", "/collections/handbook/builds").json()] == [again, build_id]
    assert caller("get", "/collections/handbook/builds?limit=0").status_code == 400
    assert caller("get", "/collections/handbook/builds?limit=51").status_code == 400


def test_refused_is_null_until_a_build_records_it(caller, knowledge_root):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    collection = create_collection(agent=caller.agent, name="handbook", folder="hr-share")
    run = request_build(collection=collection, enqueue=False)
    answer = caller("get", f"/collections/handbook/builds/{run.pk}").json()
    assert answer["status"] == "queued" and answer["refused"] is None and answer["passages"] == 0


def test_creating_a_collection_refuses_a_taken_name_or_a_missing_folder_with_409(
    caller, knowledge_root, tmp_path
):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    assert caller("post", "/collections/", {"name": "handbook", "folder": "hr-share"}).status_code == 201
    taken = caller("post", "/collections", {"name": "handbook"})
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "duplicate_collection"
    missing = caller("post", "/collections", {"name": "other", "folder": "nowhere"})
    assert missing.status_code == 409 and missing.json()["error"]["code"] == "unknown_folder"
    assert "hr-share" in missing.json()["error"]["message"] and str(tmp_path) not in missing.content.decode()
    path_like = caller("post", "/collections", {"name": "other", "folder": "../helpdesk"})
    assert path_like.status_code == 400 and path_like.json()["error"]["code"] == "invalid_folder"
    bad_method = caller("post", "/collections", {"name": "other", "method": "semantic"})
    assert bad_method.status_code == 400


def test_a_build_whose_source_the_server_cannot_see_is_409_naming_the_collection(caller):
    create_collection(agent=caller.agent, name="orphan")
    response = caller("post", "/collections/orphan/build")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_source"
    assert 'collection "orphan"' in response.json()["error"]["message"]
    assert not BuildRun.objects.exists()


def test_a_build_of_another_agent_answers_404_like_a_missing_one(caller, knowledge_root):
    other, _ = create_agent(agent_id="other")
    knowledge_root("other", "docs", LEAVE)
    theirs = create_collection(agent=other, name="handbook", folder="docs")
    run = request_build(collection=theirs, enqueue=False)
    knowledge_root("helpdesk", "docs", LEAVE)
    create_collection(agent=caller.agent, name="handbook", folder="docs")
    response = caller("get", f"/collections/handbook/builds/{run.pk}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "unknown_build"
    assert caller("get", "/collections/nothing/builds").status_code == 404


def test_a_build_queued_with_no_worker_says_so_after_the_stale_time(caller, knowledge_root, settings):
    settings.BUILD_STALE_SECONDS = 60
    knowledge_root("helpdesk", "docs", LEAVE)
    collection = create_collection(agent=caller.agent, name="handbook", folder="docs")
    run = request_build(collection=collection, enqueue=False)
    assert caller("get", f"/collections/handbook/builds/{run.pk}").json()["waiting"] is None
    BuildRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    waiting = caller("get", f"/collections/handbook/builds/{run.pk}").json()["waiting"]
    assert waiting.startswith("no task worker is running") and "manage.py qcluster" in waiting


def test_unknown_body_fields_are_422_naming_them(caller, knowledge_root):
    knowledge_root("helpdesk", "docs", LEAVE)
    caller("post", "/collections", {"name": "handbook", "folder": "docs"})
    response = caller("post", "/collections/handbook/search", {"question": "leave", "top_k": 3})
    assert response.status_code == 422
    assert (
        response.json()["error"]["code"] == "unknown_fields"
        and "'top_k'" in response.json()["error"]["message"]
    )
    created = caller("post", "/collections", {"name": "x", "path": "/etc"})
    assert created.status_code == 422 and "'path'" in created.json()["error"]["message"]


def test_wrong_methods_and_unknown_routes_answer_in_the_error_shape(caller, client):
    wrong = caller("get", "/collections/handbook/search")
    assert wrong.status_code == 405 and set(wrong.json()["error"]) == {"code", "message"}
    assert "POST" in wrong["Allow"]
    for path in ("/mcp/", "/v1/models"):
        missing = client.get(path)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_both_spellings_of_the_collections_list_work(caller):
    assert caller("get", "/collections").status_code == caller("get", "/collections/").status_code == 200


def test_the_schema_has_readable_operation_ids_and_declares_error_responses(client):
    schema = client.get("/api/v1/openapi.json").json()
    operations = {op["operationId"]: op for path in schema["paths"].values() for op in path.values()}
    assert {
        "search_collection",
        "create_collection",
        "build_collection",
        "read_build",
        "list_builds",
        "recall_records",
    } <= set(operations)
    search = operations["search_collection"]
    assert {"200", "400", "401", "404", "409", "422", "429"} <= set(search["responses"])
    error = search["responses"]["404"]["content"]["application/json"]["schema"]
    assert error["$ref"].endswith("/ErrorOut")
    assert schema["components"]["schemas"]["SearchIn"]["additionalProperties"] is False
    assert "/api/v1/collections/" not in schema["paths"]  # the slash spelling works but is not listed twice


def test_the_docs_page_uses_the_swagger_ui_shipped_with_django_ninja(client):
    page = client.get("/api/v1/docs").content.decode()
    assert "cdn.jsdelivr.net" not in page and "/static/ninja/swagger-ui-bundle.js" in page
    bundle = client.get("/static/ninja/swagger-ui-bundle.js")
    assert bundle.status_code == 200


def test_recall_takes_question_and_still_accepts_query(caller):
    caller("post", "/memory/memories", {"text": "river stone lantern by the harbor"})
    for body in ({"question": "river lantern"}, {"query": "river lantern"}):
        response = caller("post", "/memory/recall", body)
        assert response.status_code == 200 and len(response.json()["excerpts"]) == 1
    both = caller("post", "/memory/recall", {"question": "river", "query": "lantern"})
    assert both.status_code == 422 and "'query'" in both.json()["error"]["message"]
    missing = caller("post", "/memory/recall", {})
    assert missing.status_code == 400 and "question" in missing.json()["error"]["message"]


def test_a_live_cluster_listed_after_a_dead_one_still_counts_as_running():
    from django_q.brokers import Broker, get_broker
    from django_q.conf import Conf

    from collections_app.services.builds.status import worker_running

    broker = get_broker()
    on_redis = type(broker).get_stats is not Broker.get_stats

    def expire(key):
        (broker.connection if on_redis else broker.cache).delete(key)

    assert not worker_running()
    broker.set_stat(f"{Conf.Q_STAT}:dead", "a cluster that stopped", 30)
    broker.set_stat(f"{Conf.Q_STAT}:live", "a cluster that runs", 30)
    expire(f"{Conf.Q_STAT}:dead")
    assert worker_running()
    expire(f"{Conf.Q_STAT}:live")
    assert not worker_running()
