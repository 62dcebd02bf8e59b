"""Backup and restore of everything: a collection's and an agent's archives, restored under new names and
into another store, answer as the originals did (a search, a known-answers run, a recall)."""

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from collections_app.models import (
    BuildRun,
    Collection,
    KnownAnswersReport,
    Paragraph,
    Reader,
    Webhook,
)
from collections_app.samples import pdf_bytes
from collections_app.services import known_answers, sync
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.backup import VERSION, back_up, restore
from collections_app.services.backup.archive import read_archive
from collections_app.services.builds import build_collection
from collections_app.services.documents import set_paragraphs_enabled
from collections_app.services.readers.labels import add_labels, labels_named, set_per_reader
from collections_app.services.review import approve_documents
from collections_app.services.search import search_collection
from collections_app.services.uploads import upload_document
from memory_app import services as memory
from memory_app.models import Memory, NodePassages, RecordNode
from ragsite.errors import RagsiteError

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "leave.md": "# Leave\n\nStaff carry over up to five days of annual leave into the next year.\n\n"
    "# Sick leave\n\nA doctor's note is needed from the fourth day of sickness onwards.\n",
    "travel.md": "# Travel\n\nMileage is paid back at 0.42 per kilometre for private cars.\n\n"
    "# Trains\n\nTrains are booked in standard class unless the trip is longer than four hours.\n",
    "policy.md": "# Travel\n\nMileage is paid back at 0.55 per kilometre for private cars.\n",
    "leave-2025.md": "# Leave\n\nStaff carry over up to ten days of annual leave into the next year.\n",
    # Pages: each paragraph of a PDF knows the pages it is on.
    "rooms.pdf": pdf_bytes(
        [
            [("h", "Rooms"), ("p", "The Oak room seats fourteen people and has a projector.")],
            [("h", "Parking"), ("p", "Visitors park in the yellow bays behind the north gate.")],
        ]
    ),
}
QUESTIONS = (
    "how many days of leave carry over",
    "mileage per kilometre",
    "train class",
    "doctor's note",
    "where do visitors park",
)
LONG = (
    " ".join(
        f"On day {n} the team moved the {w} crates to the north dock and logged them in the ledger."
        for n, w in enumerate(["red", "blue", "green", "amber", "violet", "grey"] * 25)
    )
    + " The albatross key opens the third locker."
)


@pytest.fixture
def world(agent, knowledge_folder, settings):
    """A collection a librarian has worked on, and an agent with memories and a hook."""
    settings.WEBHOOK_ALLOW_PRIVATE = True
    folder = knowledge_folder("hr", FILES)
    (folder / "travel.md.meta.json").write_text(json.dumps({"team": "finance", "year": 2024}))
    collection = create_collection(agent=agent, name="hr", method="structure", built_from="the HR share")
    upload_document(collection=collection, name="canteen.md", content=b"# Canteen\n\nLunch at noon.\n")
    known_answers.set_known_answers(
        collection=collection,
        items=[
            {"question": "how many days of leave carry over", "answer": "five days"},
            {"question": "what colour is the sky on mars", "control": True},
        ],
    )
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW  # policy.md contradicts travel.md: it waits
    # A librarian's decision: policy.md approved; leave-2025.md (contradicting leave.md) still waits.
    approve_documents(collection.documents.filter(name="policy.md"), by="librarian")
    known_answers.measure_build(build_id=run.pk)
    [hr] = labels_named(["hr-only"], create=True)
    create_reader(external_id="alice@example.com", labels=["hr-only"])
    sick = Paragraph.objects.get(collection=collection, text__contains="doctor's note")
    add_labels([sick], [hr])
    set_paragraphs_enabled(
        paragraphs=Paragraph.objects.filter(collection=collection, text__contains="Trains"), enabled=False
    )
    sync.set_sync(collection=collection, every=30)
    Webhook.objects.create(agent=agent, url="http://127.0.0.1:9/hook", events=["build.succeeded"])
    memory.store_memory(agent=agent, text="The spare key of the server room is in the blue envelope.")
    long, _nodes = memory.store_memory(agent=agent, text=LONG)
    assert memory.build_nodes("mem", long.pk).status == "built"
    collection.refresh_from_db()
    return collection


def answers(agent, collection, reader=None) -> list:
    out = []
    for question in QUESTIONS:
        found = search_collection(
            agent=agent, collection=collection, question=question, min_score=0, reader=reader
        )
        out.append([(p["chunk_id"], p["text"], p["score"], p["pages"]) for p in found["paragraphs"]])
    return out


def recalled(agent) -> list:
    found = memory.recall(agent=agent, query="which key opens the third locker", most=3)
    return [(e["kind"], e["text"], e["score"]) for e in found["excerpts"]]


def test_a_collection_and_its_agent_come_back_under_new_names_answering_the_same(world, agent):
    collection_archive = back_up(collection=world)
    agent_archive = back_up(agent=agent)
    copy_agent = restore(agent_archive, name="alpha-copy")
    copy = restore(collection_archive, agent=copy_agent, name="hr-copy")

    assert answers(copy_agent, copy) == answers(agent, world)
    set_per_reader(collection=world, per_reader=True)
    set_per_reader(collection=copy, per_reader=True)
    assert answers(copy_agent, copy, "alice@example.com") == answers(agent, world, "alice@example.com")
    assert answers(copy_agent, copy, "bob@example.com") == answers(agent, world, "bob@example.com")
    # Documents with their review states, decisions, attributes, uploads and labels.
    fields = (
        "name",
        "status",
        "review_paragraphs",
        "fingerprint",
        "attributes",
        "source",
        "conflicts",
        "approved_fingerprint",
        "approved_by",
        "approved_at",
        "enabled",
    )
    assert list(copy.documents.order_by("name").values_list(*fields)) == list(
        world.documents.order_by("name").values_list(*fields)
    )
    assert copy.documents.get(name="policy.md").approved_by == "librarian"
    waiting = Paragraph.objects.filter(in_review=True).values_list("document__name", "text")
    assert set(waiting.filter(collection=copy)) == set(waiting.filter(collection=world)) != set()
    assert copy.documents.get(name="canteen.md").upload.read() == b"# Canteen\n\nLunch at noon.\n"
    para = (
        "document__name",
        "index",
        "text",
        "section",
        "page_first",
        "page_last",
        "enabled",
        "in_review",
        "fingerprint",
        "embedding",
    )
    assert list(Paragraph.objects.filter(collection=copy).order_by("ordinal").values_list(*para)) == list(
        Paragraph.objects.filter(collection=world).order_by("ordinal").values_list(*para)
    )
    assert Paragraph.objects.filter(collection=copy, document__name="rooms.pdf", page_first=2).exists()
    assert list(
        Paragraph.objects.filter(collection=copy, labels__name="hr-only").values_list("text", flat=True)
    ) == [Paragraph.objects.get(collection=world, labels__name="hr-only").text]
    # Known answers, their history, and a run now measures the same.
    assert known_answers.as_items(known_answers.known_answers(copy)) == known_answers.as_items(
        known_answers.known_answers(world)
    )
    assert KnownAnswersReport.objects.filter(collection=copy).count() == 1
    rerun = known_answers.measure_build(build_id=known_answers.live_build_id(copy))
    original = known_answers.measure_build(build_id=known_answers.live_build_id(world))
    assert (rerun.found_at_1, rerun.found_at_5, rerun.results) == (
        original.found_at_1,
        original.found_at_5,
        original.results,
    )
    assert copy.sync.enabled and copy.sync.every == 30
    # The agent: its memories with their nodes, its hook without the old secret.
    assert recalled(copy_agent) == recalled(agent)
    assert Memory.objects.filter(agent=copy_agent).count() == 2
    copied_long = Memory.objects.get(agent=copy_agent, text=LONG)
    original_long = Memory.objects.get(agent=agent, text=LONG)
    assert RecordNode.objects.filter(parent_id=copied_long.pk, parent_kind="mem").count() == (
        RecordNode.objects.filter(parent_id=original_long.pk, parent_kind="mem").count()
    )
    assert NodePassages.objects.filter(parent_id=copied_long.pk, parent_kind="mem").exists()
    [hook] = Webhook.objects.filter(agent=copy_agent)
    assert hook.url == "http://127.0.0.1:9/hook" and hook.secret != Webhook.objects.get(agent=agent).secret
    assert Webhook.objects.get(agent=agent).secret.encode() not in agent_archive


def test_a_withdrawn_reader_comes_back_withdrawn_and_reads_nothing(world, agent):
    """A person de-provisioned before the backup does not regain the labels by a restore elsewhere."""
    set_per_reader(collection=world, per_reader=True)
    alice = Reader.objects.get(external_id="alice@example.com")
    alice.withdrawn_at = timezone.now()
    alice.save(update_fields=["withdrawn_at"])
    withdrawn_answers = answers(agent, world, "alice@example.com")
    archive = back_up(collection=world)
    alice.delete()  # the store the archive goes to has never heard of her
    copy = restore(archive, agent=agent, name="hr-copy")

    alice = Reader.objects.get(external_id="alice@example.com")
    assert alice.withdrawn_at is not None and list(alice.labels.values_list("name", flat=True)) == ["hr-only"]
    assert answers(agent, copy, "alice@example.com") == withdrawn_answers
    assert answers(agent, copy, "alice@example.com") == answers(agent, copy, "bob@example.com")


def test_an_archive_holds_no_secret_and_the_rag_files_of_what_search_reads(world, agent):
    archive = read_archive(back_up(collection=world))
    assert {"rag/hr/meta.json", "rag/hr/docs.jsonl", "rag/hr/vectors.f32", "rag/hr/bm25.idx"} <= set(
        archive.files
    )
    assert archive.manifest["version"] == VERSION and archive.manifest["kind"] == "collection"
    agent_rows = read_archive(back_up(agent=agent)).rows
    assert all("secret" not in row for row in agent_rows["webhooks.jsonl"])


def test_a_restore_never_overwrites(world, agent):
    data = back_up(collection=world)
    with pytest.raises(RagsiteError) as refused:
        restore(data, agent=agent)
    assert refused.value.code == "duplicate_collection"
    with pytest.raises(RagsiteError) as refused:
        restore(back_up(agent=agent))
    assert refused.value.code == "duplicate_agent"


def test_an_archive_newer_than_the_code_is_refused_before_anything_is_written(world, agent):
    data = back_up(collection=world)
    members = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            members[member.name] = tar.extractfile(member).read()
    manifest = json.loads(members["manifest.json"])
    manifest["version"] = VERSION + 1
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    before = Collection.objects.count()
    with pytest.raises(RagsiteError) as refused:
        restore(buffer.getvalue(), agent=agent, name="newer")
    assert refused.value.code == "invalid_backup"
    assert f"format version {VERSION + 1}, newer than this code reads ({VERSION})" in refused.value.message
    assert Collection.objects.count() == before
    with pytest.raises(RagsiteError):
        restore(b"not an archive", agent=agent)


def test_the_commands_write_and_restore_an_archive(world, agent, tmp_path):
    call_command("backup", "alpha", "hr", "--out", str(tmp_path / "hr.tar.gz"))
    call_command("restore", str(tmp_path / "hr.tar.gz"), "--agent", "alpha", "--name", "hr-2")
    copy = Collection.objects.get(agent=agent, name="hr-2")
    assert answers(agent, copy) == answers(agent, world)


@pytest.mark.slow
def test_a_round_trip_from_sqlite_to_postgresql_answers_the_same(world, agent, tmp_path, settings):
    """The archives of a SQLite store restored into an empty PostgreSQL one (a migrated database of its
    own)."""
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(
            "postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True, connect_timeout=5
        )
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    name = f"ragsite_backup_{os.getpid()}"
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    (tmp_path / "agent.tar.gz").write_bytes(back_up(agent=agent))
    (tmp_path / "hr.tar.gz").write_bytes(back_up(collection=world))
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
        "DEBUG": "true",
        "EMBED_BACKEND": "hash",
        "DATA_DIR": str(tmp_path / "pg-data"),
        "INDEX_DIR": str(tmp_path / "pg-indexes"),
        "MEDIA_ROOT": str(tmp_path / "pg-media"),
        "KNOWLEDGE_ROOT": str(tmp_path / "pg-knowledge"),
    }
    script = f"""
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from collections_app.services.backup import restore
from collections_app.services.review import approve_documents
from collections_app.services.search import search_collection
from collections_app.services import known_answers
from memory_app.services import recall
agent = restore(open({str(tmp_path / "agent.tar.gz")!r}, "rb").read())
copy = restore(open({str(tmp_path / "hr.tar.gz")!r}, "rb").read(), agent=agent)
out = {{"search": [], "recall": None}}
for question in {list(QUESTIONS)!r}:
    found = search_collection(agent=agent, collection=copy, question=question, min_score=0)
    out["search"].append([(p["chunk_id"], p["text"], p["score"], p["pages"]) for p in found["paragraphs"]])
report = known_answers.measure_build(build_id=known_answers.live_build_id(copy))
out["known"] = [report.found_at_1, report.found_at_5, report.results]
found = recall(agent=agent, query="which key opens the third locker", most=3)
out["recall"] = [(e["kind"], e["text"], e["score"]) for e in found["excerpts"]]
print("RESULT " + json.dumps(out))
"""
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        there = json.loads(line[len("RESULT ") :])
    finally:
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    here = [[list(p) for p in paragraphs] for paragraphs in answers(agent, world)]
    assert there["search"] == here
    original = known_answers.measure_build(build_id=known_answers.live_build_id(world))
    assert there["known"] == json.loads(
        json.dumps([original.found_at_1, original.found_at_5, original.results])
    )
    assert there["recall"] == [list(e) for e in recalled(agent)]


def test_the_admin_action_downloads_one_archive_that_restores(world, agent, admin_client):
    from django.urls import reverse

    response = admin_client.post(
        reverse("admin:collections_app_collection_changelist"),
        {"action": "download_backup", "_selected_action": [world.pk]},
    )
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert 'filename="ragsite-collection-alpha-hr.tar.gz"' in response["Content-Disposition"]
    copy = restore(response.content, agent=agent, name="from-admin")
    assert answers(agent, copy) == answers(agent, world)
    agent_archive = admin_client.post(
        reverse("admin:collections_app_agent_changelist"),
        {"action": "download_backup", "_selected_action": [agent.pk]},
    )
    assert read_archive(agent_archive.content).manifest["kind"] == "agent"


def test_measure_runs_come_back_with_their_reports(world, agent, django_capture_on_commit_callbacks):
    from collections_app.models import MeasureRun
    from collections_app.services.measure import request_measure

    with django_capture_on_commit_callbacks(execute=True):
        measured = request_measure(
            collection=world,
            questions=[{"question": "how many days of leave carry over", "answer": "five days"}],
            controls=["what colour is the sky on mars"],
            requested_by="librarian",
        )
    measured.refresh_from_db()
    assert measured.status == MeasureRun.SUCCEEDED, measured.error
    copy = restore(back_up(collection=world), agent=agent, name="hr-measured")
    fields = ("status", "requested_by", "request", "report", "variants_total", "variants_done", "created_at")
    assert list(MeasureRun.objects.filter(collection=copy).values_list(*fields)) == list(
        MeasureRun.objects.filter(collection=world).values_list(*fields)
    )


def _members(data: bytes) -> bytes:
    """Every member of an archive, uncompressed, end to end: what a reader of the file could see."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return b"".join(tar.extractfile(m).read() for m in tar)


def test_webhook_secrets_travel_only_when_asked_and_only_sealed_with_the_operators_key(world, agent):
    from cryptography.fernet import Fernet

    secret = Webhook.objects.get(agent=agent).secret
    assert secret.startswith("whsec_")
    key = Fernet.generate_key().decode()
    sealed = back_up(agent=agent, credentials_key=key)
    assert secret.encode() not in _members(sealed)  # never in plain text
    assert read_archive(sealed).manifest["credentials"] == "fernet"
    assert secret.encode() not in _members(back_up(collection=world))

    # The operator's key brings the same secret back: receivers keep verifying.
    kept = restore(sealed, name="alpha-kept", credentials_key=key)
    assert Webhook.objects.get(agent=kept).secret == secret
    # Without the key the hooks get new secrets; with another key nothing is written.
    fresh = restore(sealed, name="alpha-fresh")
    assert Webhook.objects.get(agent=fresh).secret not in ("", secret)
    for wrong in (Fernet.generate_key().decode(), "not a key"):
        with pytest.raises(RagsiteError) as refused:
            restore(sealed, name="alpha-wrong", credentials_key=wrong)
        assert refused.value.code == "invalid_backup" and "key" in refused.value.message
    assert not Webhook.objects.filter(agent__agent_id="alpha-wrong").exists()
    with pytest.raises(RagsiteError) as refused:
        back_up(agent=agent, credentials_key="not a key")
    assert refused.value.code == "invalid_backup" and "Fernet key" in refused.value.message


def test_the_commands_carry_credentials_with_a_key_file(world, agent, tmp_path):
    from cryptography.fernet import Fernet

    key_file = tmp_path / "backup.key"
    key_file.write_text(Fernet.generate_key().decode() + "\n")
    archive = tmp_path / "alpha.tar.gz"
    call_command("backup", "alpha", "--out", str(archive), "--with-credentials", str(key_file))
    call_command("restore", str(archive), "--name", "alpha-2", "--credentials-key", str(key_file))
    secret = Webhook.objects.get(agent=agent).secret
    assert Webhook.objects.get(agent__agent_id="alpha-2").secret == secret
    assert secret.encode() not in _members(archive.read_bytes())


def test_an_archive_of_the_first_version_is_still_read(world, agent):
    data = back_up(collection=world)
    members = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            members[member.name] = tar.extractfile(member).read()
    manifest = json.loads(members["manifest.json"])
    manifest["version"] = 1
    members["manifest.json"] = json.dumps(manifest).encode()
    del members["measure_runs.jsonl"]  # version 1 had none
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    copy = restore(buffer.getvalue(), agent=agent, name="hr-v1")
    assert answers(agent, copy) == answers(agent, world)
