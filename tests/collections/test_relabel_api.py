"""Issue 24, item 5 through the HTTP API, on whichever store the suite runs (SQLite by default) and
marked for PostgreSQL, where every request runs in its agent's row-level-security scope: a label
survives an edit to the public paragraph before it, and editing the secret one keeps it secret."""

import json

import pytest
from django.db import connection

from collections_app.models import BuildRun, Label, Paragraph
from collections_app.services.agents import create_agent, create_collection, create_reader
from ragsite.rls import installed

from .test_relabel import MEMO

pytestmark = pytest.mark.django_db


def _call(client, raw, method, path, body=None):
    kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    if body is not None:
        kwargs.update(data=json.dumps(body), content_type="application/json")
    return getattr(client, method)(path, **kwargs)


def label_survives_an_edit_next_to_it(client, knowledge_folder, on_commit):
    agent, raw = create_agent(agent_id="editor", name="Editor")
    # Chunk sizes are staff's (the admin); the agent builds and searches through the API.
    collection = create_collection(
        agent=agent, name="edit", method="structure", size=400, overlap=150, per_reader=True
    )
    folder = knowledge_folder("edit", {"memo.md": MEMO}, agent="editor")

    def build() -> dict:
        with on_commit(execute=True):  # the queued build runs when the request's transaction commits
            queued = _call(client, raw, "post", "/api/v1/collections/edit/build")
        assert queued.status_code == 202, queued.content
        record = _call(client, raw, "get", f"/api/v1/collections/edit/builds/{queued.json()['build']}")
        assert record.status_code == 200 and record.json()["status"] == BuildRun.SUCCEEDED, record.content
        return record.json()

    def alice_reads() -> str:
        answer = _call(
            client,
            raw,
            "post",
            "/api/v1/collections/edit/search",
            {
                "question": "zanzibarquux SECRETSALARY",
                "reader": "alice",
                "min_score": 0,
                "most": 50,
                "around": 0,
            },
        )
        assert answer.status_code == 200, answer.content
        return " ".join(p["text"] for p in answer.json()["paragraphs"])

    build()
    pub, secret = Label.objects.create(name="pub"), Label.objects.create(name="secret")
    for paragraph in Paragraph.objects.filter(collection=collection):
        paragraph.labels.add(secret if "zanzibarquux" in paragraph.text else pub)
    create_reader(external_id="alice", labels=["pub"])
    assert alice_reads() and "SECRETSALARY" not in alice_reads()

    reviewed = MEMO.replace("to everyone. \n", "to everyone. Reviewed in 2026.\n")
    assert reviewed != MEMO
    (folder / "memo.md").write_text(reviewed)
    record = build()
    # Only the edited public piece (#0) is new; the restricted one after it matched by its own text,
    # not merely by inheriting from its neighbours.
    changed = [w for w in record["warnings"] if "took the labels" in w]
    assert changed == [
        "memo.md: 1 changed paragraphs (#0) took the labels the labelled paragraphs they "
        "replace all share; check them"
    ], record["warnings"]
    assert "Reviewed in 2026" in alice_reads()  # the edit is live for alice...
    assert "SECRETSALARY" not in alice_reads()  # ...and the piece after it is still secret
    assert any(
        p.labels.filter(name="secret").exists() for p in Paragraph.objects.filter(collection=collection)
    )

    (folder / "memo.md").write_text(reviewed.replace("ninety million", "ninety-one million"))
    record = build()
    assert "SECRETSALARY" not in alice_reads()
    assert any("took the labels" in warning for warning in record["warnings"]), record


def test_a_label_survives_an_edit_next_to_it_through_the_api(
    client, knowledge_folder, django_capture_on_commit_callbacks
):
    label_survives_an_edit_next_to_it(client, knowledge_folder, django_capture_on_commit_callbacks)


@pytest.mark.postgres
def test_a_label_survives_an_edit_next_to_it_through_the_api_on_postgresql(
    client, knowledge_folder, django_capture_on_commit_callbacks
):
    if connection.vendor != "postgresql":
        pytest.skip("runs with DATABASE_URL on PostgreSQL, where requests take row-level security")
    assert installed(connection), "the migrations did not install row-level security"
    label_survives_an_edit_next_to_it(client, knowledge_folder, django_capture_on_commit_callbacks)
