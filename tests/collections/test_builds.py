"""Builds: folder → extract → chunk → embed → one transaction, and everything a build promises."""

import json
import logging
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from collections_app.models import BuildRun, CollectionBuilt, Document, Label, Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import EmptyBuild, build_collection, fail_stale_builds, request_build
from collections_app.services.builds.status import build_phase
from ragsite import embedding
from ragsite.errors import Conflict

pytestmark = pytest.mark.django_db

LEAVE = (
    "# Leave\n\nCarry-over is capped at five days a year.\n\n"
    "# Expenses\n\nReceipts are needed above 25 euros.\n"
)
SECURITY = "# Security\n\nLaptops use full-disk encryption.\n\nBadges are worn at all times on site.\n"


class CountingEmbedder:
    """Wraps the configured embedder and counts what it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.calls, self.texts = inner, 0, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_with_usage(self, texts):
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed_with_usage(texts)


@pytest.fixture
def counting(monkeypatch):
    embedder = CountingEmbedder(embedding.get_embedder())
    monkeypatch.setattr(embedding, "get_embedder", lambda backend=None: embedder)
    return embedder


@pytest.fixture
def handbook(agent):
    return create_collection(agent=agent, name="handbook", built_from="the HR share", method="structure")


def test_a_folder_builds_into_paragraphs_named_relative_to_it(handbook, knowledge_folder):
    knowledge_folder("handbook", {"leave.md": LEAVE, "policies/security.md": SECURITY})
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert sorted(handbook.documents.values_list("name", flat=True)) == ["leave.md", "policies/security.md"]
    built = CollectionBuilt.objects.get(collection=handbook)
    assert (built.agent_id, built.method, built.built_from, built.refused) == (
        "alpha",
        "structure",
        "the HR share",
        [],
    )
    assert built.model == "hash-64" and built.dimensions == 64
    assert built.passages == Paragraph.objects.filter(collection=handbook).count() == run.passages > 0
    paragraph = Paragraph.objects.filter(collection=handbook, text__contains="five days").get()
    assert paragraph.agent_id == "alpha" and paragraph.section == "Leave"
    assert paragraph.vectors(64).shape == (1, 64) and paragraph.token_count > 0
    ordinals = list(Paragraph.objects.filter(collection=handbook).values_list("ordinal", flat=True))
    assert ordinals == list(range(len(ordinals)))


def test_the_sample_documents_of_every_type_build(handbook, knowledge_folder):
    knowledge_folder("handbook", samples=True)
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert run.refused == []
    names = set(handbook.documents.values_list("name", flat=True))
    assert {"handbook.md", "onboarding.txt", "travel-policy.html", "benefits.docx", "safety.pdf"} <= names
    assert Paragraph.objects.filter(collection=handbook, document__name="safety.pdf").exists()


def test_unreadable_documents_are_refused_by_name_and_do_not_stop_the_build(
    handbook, knowledge_folder, caplog
):
    folder = knowledge_folder(
        "handbook",
        {
            "leave.md": LEAVE,
            "broken.pdf": b"%PDF-1.4 not really",
            "notes.xyz": "unsupported",
            "latin.txt": "caf\xe9".encode("latin-1"),
        },
    )
    with caplog.at_level(logging.INFO):
        run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED
    assert sorted(run.refused) == ["broken.pdf", "latin.txt", "notes.xyz"]
    assert sorted(CollectionBuilt.objects.get(collection=handbook).refused) == [
        "broken.pdf",
        "latin.txt",
        "notes.xyz",
    ]
    assert handbook.documents.get(name="broken.pdf").status == Document.REFUSED
    # The reason is logged, with the name and never the folder.
    assert "broken.pdf" in caplog.text and str(folder) not in caplog.text


def test_no_deployment_path_is_stored_answered_or_logged(
    handbook, knowledge_folder, caplog, client, agent_key
):
    folder = knowledge_folder("handbook", {"leave.md": LEAVE, "broken.pdf": b"garbage"})
    with caplog.at_level(logging.INFO):
        run = build_collection(collection=handbook)
        call_command("build_collection", "alpha", "handbook", "--sync", "--json", stdout=StringIO())
    secret = str(folder)
    stored = [
        json.dumps(list(BuildRun.objects.values()), default=str),
        json.dumps(list(CollectionBuilt.objects.values()), default=str),
        json.dumps(list(Document.objects.values()), default=str),
        json.dumps(list(Paragraph.objects.values("text", "section", "document__name")), default=str),
    ]
    assert run.status == BuildRun.SUCCEEDED
    for text in stored + [caplog.text]:
        assert secret not in text and "deployment-secret" not in text


def test_a_rebuild_of_an_unchanged_folder_embeds_nothing_and_keeps_every_row(
    handbook, knowledge_folder, counting
):
    knowledge_folder("handbook", {"leave.md": LEAVE, "security.md": SECURITY})
    build_collection(collection=handbook)
    assert counting.texts > 0
    before = list(Paragraph.objects.filter(collection=handbook).values_list("pk", "ordinal", "text"))
    counting.calls = counting.texts = 0
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED
    assert counting.calls == 0 and run.paragraphs_embedded == 0
    assert (run.documents_reused, run.documents_read) == (2, 0)
    assert list(Paragraph.objects.filter(collection=handbook).values_list("pk", "ordinal", "text")) == before


def test_an_edited_document_reembeds_only_its_changed_paragraphs(handbook, knowledge_folder, counting):
    folder = knowledge_folder("handbook", {"leave.md": LEAVE, "security.md": SECURITY})
    build_collection(collection=handbook)
    (folder / "leave.md").write_text(LEAVE + "\n# Parking\n\nParking is free for staff.\n")
    counting.texts = 0
    run = build_collection(collection=handbook)
    assert (run.documents_read, run.documents_reused) == (1, 1)
    assert run.paragraphs_embedded == counting.texts >= 1
    assert run.paragraphs_embedded < run.passages


def test_labels_survive_a_rebuild_and_documents_pass_on_default_labels(handbook, knowledge_folder):
    folder = knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    hr, everyone = Label.objects.create(name="hr"), Label.objects.create(name="everyone")
    kept = Paragraph.objects.get(collection=handbook, text__contains="five days")
    kept.labels.add(hr)
    handbook.documents.get(name="leave.md").default_labels.add(everyone)
    (folder / "leave.md").write_text(LEAVE + "\n# Parking\n\nParking is free for staff.\n")
    build_collection(collection=handbook)
    again = Paragraph.objects.get(collection=handbook, text__contains="five days")
    new = Paragraph.objects.get(collection=handbook, text__contains="Parking is free")
    assert set(again.labels.values_list("name", flat=True)) == {"hr", "everyone"}
    assert set(new.labels.values_list("name", flat=True)) == {"everyone"}


def test_a_build_that_would_leave_no_paragraphs_is_refused_and_the_old_ones_keep_answering(
    handbook, knowledge_folder
):
    folder = knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    before = Paragraph.objects.filter(collection=handbook).count()
    (folder / "leave.md").unlink()
    (folder / "broken.pdf").write_bytes(b"garbage")
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.REFUSED and "no paragraphs" in run.error
    assert Paragraph.objects.filter(collection=handbook).count() == before
    assert handbook.documents.filter(name="leave.md").exists()


def test_the_store_itself_refuses_an_empty_collection(handbook):
    with pytest.raises(EmptyBuild):
        Paragraph.objects.guard_not_empty(handbook)


def test_a_collection_with_no_source_is_refused_before_a_build_is_recorded(handbook):
    with pytest.raises(Conflict, match='collection "handbook" has no documents') as refused:
        build_collection(collection=handbook)
    assert refused.value.status == 409 and "KNOWLEDGE_ALPHA__HANDBOOK_FOLDER" in refused.value.message
    assert not BuildRun.objects.filter(collection=handbook).exists()


def test_a_model_change_is_recorded_as_a_problem_naming_both_models(handbook, knowledge_folder, settings):
    knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    settings.EMBED_BACKEND = "none"
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED
    assert run.previous_model == "hash-64" and run.model == "lexical"
    assert any("hash-64" in p and "lexical" in p for p in run.problems)
    assert CollectionBuilt.objects.get(collection=handbook).dimensions == 0


def test_only_one_build_runs_at_a_time_and_a_dead_one_is_swept(handbook, knowledge_folder):
    knowledge_folder("handbook", {"leave.md": LEAVE})
    first = request_build(collection=handbook, enqueue=False)
    with pytest.raises(Conflict, match="already queued"):
        request_build(collection=handbook, enqueue=False)
    BuildRun.objects.filter(pk=first.pk).update(
        status=BuildRun.RUNNING, heartbeat_at=timezone.now() - timezone.timedelta(hours=1)
    )
    assert fail_stale_builds() == 1
    assert BuildRun.objects.get(pk=first.pk).status == BuildRun.FAILED
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED


def test_duplicates_and_numeric_conflicts_put_documents_in_review(handbook, knowledge_folder):
    changed = LEAVE.replace("five days", "5 days")
    knowledge_folder(
        "handbook",
        {
            "a.md": LEAVE,
            "copy-of-a.md": LEAVE,
            "old.md": "# Old\n\nStaff may carry over 5 days of leave into the next year.\n",
            "new.md": "# New\n\nStaff may carry over 10 days of leave into the next year.\n",
            "fine.md": changed.replace("Receipts", "Invoices"),
        },
    )
    run = build_collection(collection=handbook)
    status = dict(handbook.documents.values_list("name", "status"))
    assert status["a.md"] == status["copy-of-a.md"] == Document.NEEDS_REVIEW
    # A conflict in numbers holds the conflicting paragraphs only, here both sides' (neither was live).
    assert status["old.md"] == status["new.md"] == Document.ACTIVE
    held = Paragraph.objects.filter(collection=handbook, in_review=True)
    assert sorted(held.values_list("document__name", flat=True)) == ["new.md", "old.md"]
    assert run.status == "succeeded_with_review" and run.documents_in_review == 4
    assert status["fine.md"] == Document.ACTIVE
    assert "exact duplicate of copy-of-a.md" in handbook.documents.get(name="a.md").conflicts
    assert any("needs review" in w for w in run.warnings)


def test_an_approved_document_stays_active_until_its_file_changes(handbook, knowledge_folder):
    # security.md keeps the collection searchable while a.md goes back to review.
    folder = knowledge_folder("handbook", {"a.md": LEAVE, "b.md": LEAVE, "security.md": SECURITY})
    build_collection(collection=handbook)
    document = handbook.documents.get(name="a.md")
    Document.objects.filter(pk=document.pk).update(
        status=Document.ACTIVE, approved_fingerprint=document.fingerprint
    )
    build_collection(collection=handbook)
    assert handbook.documents.get(name="a.md").status == Document.ACTIVE
    (folder / "a.md").write_text(LEAVE + "\nNew line with 3 numbers 4 and 5 here for the review.\n")
    (folder / "b.md").write_text(LEAVE + "\nNew line with 3 numbers 4 and 5 here for the review.\n")
    build_collection(collection=handbook)
    assert handbook.documents.get(name="a.md").status == Document.NEEDS_REVIEW


def test_a_per_reader_build_warns_about_unlabelled_paragraphs(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="secret", per_reader=True)
    knowledge_folder("secret", {"leave.md": LEAVE})
    run = build_collection(collection=collection)
    count = Paragraph.objects.filter(collection=collection).count()
    assert f"{count} paragraphs have no label" in " ".join(run.warnings)


def test_progress_is_recorded_and_reaches_the_end(handbook, knowledge_folder):
    knowledge_folder("handbook", {"leave.md": LEAVE, "security.md": SECURITY})
    seen = []
    run = build_collection(
        collection=handbook, report=lambda r: seen.append((r.documents_done, r.paragraphs_done))
    )
    assert run.percent == 100 and run.documents_done == run.documents_total == 2
    assert seen and seen[-1][0] == 2


def test_embedding_progress_moves_batch_by_batch_with_the_phase_named(handbook, knowledge_folder):
    """A 186-paragraph build once showed "0 of 186 paragraphs embedded" for a minute, then 100 %."""
    topics = ["harbour", "orchard", "glacier", "library", "foundry", "vineyard", "observatory", "bakery"]
    text = "\n\n".join(
        f"# Part {n}\n\nThe {topics[n % 8]} report number {n} describes shift {n * 7} in detail."
        for n in range(48)
    )
    knowledge_folder("handbook", {"reports.md": text, "leave.md": LEAVE})
    seen = []
    run = build_collection(
        collection=handbook,
        report=lambda r: seen.append((build_phase(r), r.documents_done, r.paragraphs_done, r.percent)),
    )
    assert run.status == BuildRun.SUCCEEDED and run.paragraphs_total >= 40
    embedding = [done for phase, _docs, done, _pct in seen if phase == "embedding paragraphs"]
    # Several saves strictly between none and all: the bar moves while the model works.
    assert len({done for done in embedding if 0 < done < run.paragraphs_total}) >= 3
    phases = [phase for phase, *_ in seen]
    order = ["reading documents", "embedding paragraphs", "saving"]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == order
    percents = [pct for *_, pct in seen]
    assert percents == sorted(percents) and max(percents) < 100 and run.percent == 100
    assert sorted({docs for phase, docs, *_ in seen if phase == "reading documents"}) == [
        0,
        1,
    ]  # per document
    assert build_phase(run) == "finished"


def test_the_command_builds_and_answers_one_json_line(handbook, knowledge_folder):
    knowledge_folder("handbook", {"leave.md": LEAVE, "bad.pdf": b"nope"})
    out = StringIO()
    call_command("build_collection", "alpha", "handbook", "--sync", "--json", stdout=out)
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["refused"] == ["bad.pdf"]
    assert result["documents_read"] == 1 and result["paragraphs_embedded"] == result["passages"] > 0
    assert result["model"] == "hash-64"


def test_the_command_refuses_an_unknown_collection():
    with pytest.raises(CommandError, match='no agent "nobody"'):
        call_command("build_collection", "nobody", "handbook", "--sync")


def test_a_rebuild_of_an_unchanged_folder_writes_nothing_but_the_build_record(handbook, knowledge_folder):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    knowledge_folder("handbook", {f"doc{i}.md": f"# Doc {i}\n\nParagraph {i} text." for i in range(30)})
    build_collection(collection=handbook)
    with CaptureQueriesContext(connection) as queries:
        run = build_collection(collection=handbook)
    assert run.documents_reused == 30
    writes = [q["sql"] for q in queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    touched = {
        table for sql in writes for table in ("agents_chunks", "collections_app_document") if table in sql
    }
    assert touched == set(), writes
    # Not a query per document (30 here): a constant number, one of them asking which webhooks to tell,
    # six storing the new build's index files beside it (services.indexes.store: the old ones' go), and
    # two checking, at the request and in the run, that the folder variable names this collection alone
    # (with one more on PostgreSQL bounding the request's lock wait), and two asking, at the request and
    # in the run, whether the collection's source is a remote one (services.origins), and one reading the
    # vectors ahead of the texts when the index is written (services.indexes.vectors, decision 0094).
    assert len(queries) < 52, len(queries)


def test_the_command_prints_one_line_per_phase_when_not_on_a_terminal(handbook, knowledge_folder):
    knowledge_folder("handbook", {"leave.md": LEAVE, "security.md": SECURITY})
    out, err = StringIO(), StringIO()
    call_command("build_collection", "alpha", "handbook", "--sync", stdout=out, stderr=err)
    lines = err.getvalue().splitlines()
    assert lines[0].endswith("handbook: reading 2 documents")
    assert lines[1].startswith("build ") and "embedding" in lines[1] and "paragraphs" in lines[1]
    assert len(lines) == 2 and "\x1b[" not in err.getvalue()
    assert out.getvalue().startswith("Built handbook:")
