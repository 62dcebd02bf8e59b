"""A paragraph's text fingerprint: 32 bytes in the row, seed 004's hex everywhere else, and the migration
that converts a store written before (collections_app.fields, migration 0015); and no index of the
collections app that another index or unique constraint of its table already leads with."""

import hashlib
import json

import pytest
from django.apps import apps
from django.core import serializers
from django.core.exceptions import ValidationError
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor

from collections_app.fields import digest_bytes
from collections_app.models import Label, Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite import embedding

HEX_STATE = [("collections_app", "0014_search_held_back_index")]
LEAVE = (
    "# Leave\n\nCarry-over is capped at five days a year.\n\n"
    "# Expenses\n\nReceipts are needed above 25 euros.\n"
)
SECURITY = "# Security\n\nLaptops use full-disk encryption.\n\nBadges are worn at all times on site.\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored(column: str = "fingerprint") -> dict[int, object]:
    """What the row itself holds, read past the model field."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, {column} FROM agents_chunks")
        return {
            pk: bytes(value) if isinstance(value, memoryview) else value for pk, value in cursor.fetchall()
        }


class Counting:
    def __init__(self, inner):
        self.inner, self.texts = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_with_usage(self, texts):
        self.texts += len(texts)
        return self.inner.embed_with_usage(texts)


@pytest.fixture
def leave_and_security(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="handbook", method="structure")
    folder = knowledge_folder("handbook", {"leave.md": LEAVE, "security.md": SECURITY})
    assert build_collection(collection=collection).status == "succeeded"
    return collection, folder


@pytest.mark.django_db
def test_the_row_holds_the_digests_32_bytes_and_the_code_reads_and_finds_it_by_its_hex(leave_and_security):
    collection, _folder = leave_and_security
    paragraphs = list(Paragraph.objects.filter(collection=collection))
    assert paragraphs
    raw = stored()
    for paragraph in paragraphs:
        assert paragraph.fingerprint == sha256(paragraph.text)
        assert raw[paragraph.pk] == bytes.fromhex(paragraph.fingerprint) and len(raw[paragraph.pk]) == 32
    first = paragraphs[0]
    assert list(Paragraph.objects.filter(fingerprint=first.fingerprint).values_list("pk", flat=True)) == [
        first.pk
    ]
    assert Paragraph.objects.filter(fingerprint__in=[p.fingerprint for p in paragraphs]).count() == len(
        paragraphs
    )
    first.labels.add(Label.objects.create(name="hr"))  # read through a join, it is hex as well
    assert list(Paragraph.labels.through.objects.values_list("paragraph__fingerprint", flat=True)) == [
        first.fingerprint
    ]
    (dumped,) = json.loads(serializers.serialize("json", [first]))  # dumpdata spells it as hex too
    assert dumped["fields"]["fingerprint"] == first.fingerprint


@pytest.mark.django_db
def test_a_fingerprint_that_is_not_a_sha256_in_lowercase_hex_is_refused_by_name(leave_and_security):
    paragraph = Paragraph.objects.filter(collection=leave_and_security[0]).first()
    for wrong in ("f", "F" * 64, "g" * 64, sha256("x") + "0"):
        paragraph.fingerprint = wrong
        with pytest.raises(ValidationError, match="a fingerprint is a SHA-256 digest as 64 lowercase hex"):
            paragraph.save()
    with pytest.raises(ValidationError, match="32 bytes, not 31"):
        Paragraph.objects.filter(fingerprint=b"x" * 31).exists()
    assert digest_bytes("0" * 64) == bytes(32)


@pytest.mark.django_db(transaction=True)
def test_the_migration_converts_a_built_store_both_ways_and_builds_still_reuse_carry_labels_and_answer(
    agent, leave_and_security, monkeypatch
):
    collection, folder = leave_and_security
    Paragraph.objects.get(collection=collection, text__contains="five days").labels.add(
        Label.objects.create(name="hr")
    )
    Paragraph.objects.filter(collection=collection, text__contains="Badges").update(enabled=False)
    before = {
        p.pk: (p.text, p.fingerprint, bytes(p.embedding))
        for p in Paragraph.objects.filter(collection=collection)
    }

    # Back to the store as it was: every fingerprint spelled as hex in the row again.
    executor = MigrationExecutor(connection)
    executor.migrate(HEX_STATE)
    assert stored() == {pk: fingerprint for pk, (_text, fingerprint, _vector) in before.items()}
    Old = executor.loader.project_state(HEX_STATE).apps.get_model("collections_app", "Paragraph")
    odd = Old.objects.create(
        agent_id=agent.agent_id,
        collection_id=collection.pk,
        document_id=Old.objects.get(pk=next(iter(before))).document_id,
        ordinal=99,
        index=99,
        text="an odd row",
        start_char=0,
        end_char=10,
        fingerprint="f",
    )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    raw = stored()
    assert {pk: raw[pk] for pk in before} == {
        pk: bytes.fromhex(fp) for pk, (_text, fp, _vector) in before.items()
    }
    # A value no build writes is what the fingerprint is: the text's SHA-256.
    assert Paragraph.objects.get(pk=odd.pk).fingerprint == sha256("an odd row")
    Paragraph.objects.filter(pk=odd.pk).delete()
    after = {
        p.pk: (p.text, p.fingerprint, bytes(p.embedding))
        for p in Paragraph.objects.filter(collection=collection)
    }
    assert after == before

    # The converted rows still do their work: an edited document re-embeds only its new paragraph,
    # and the kept texts keep their label and their switched-off mark.
    counting = Counting(embedding.get_embedder())
    monkeypatch.setattr(embedding, "get_embedder", lambda backend=None: counting)
    (folder / "leave.md").write_text(LEAVE + "\n# Parking\n\nParking is free for staff.\n")
    run = build_collection(collection=collection)
    assert run.status == "succeeded" and (run.documents_read, run.documents_reused) == (1, 1)
    assert run.paragraphs_embedded == counting.texts == 1
    kept = Paragraph.objects.get(collection=collection, text__contains="five days")
    assert kept.fingerprint == before_fingerprint(before, "five days")
    assert list(kept.labels.values_list("name", flat=True)) == ["hr"]
    assert not Paragraph.objects.get(collection=collection, text__contains="Badges").enabled
    found = search_collection(
        agent=agent,
        collection=collection,
        question="how many days of leave carry over",
        mode="lexical",
        min_score=0,
    )
    assert "five days" in found["paragraphs"][0]["text"]


def before_fingerprint(rows: dict, words: str) -> str:
    (fingerprint,) = [fp for text, fp, _vector in rows.values() if words in text]
    return fingerprint


def _indexes(model) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(plain indexes, unique ones) of a model's own table, by column, conditional ones left out."""
    plain, unique = [], []
    for field in model._meta.local_fields:
        if field.primary_key:
            continue
        if field.unique:
            unique.append((field.column,))
        elif field.db_index:
            plain.append((field.column,))
    columns = lambda names: tuple(model._meta.get_field(n).column for n in names)  # noqa: E731
    for index in model._meta.indexes:
        if index.condition is None:
            plain.append(columns(index.fields))
    for constraint in model._meta.constraints:
        if (
            isinstance(constraint, models.UniqueConstraint)
            and constraint.condition is None
            and constraint.fields
        ):
            unique.append(columns(constraint.fields))
    return plain, unique


def test_no_index_of_the_collections_app_is_led_by_another_on_its_table():
    """An index whose columns begin another index or unique constraint of the same table serves no look-up
    that one does not, and costs its pages (13 bytes a document at 100,000 paragraphs, issue 16)."""
    redundant = []
    for model in apps.get_app_config("collections_app").get_models():
        plain, unique = _indexes(model)
        for index in plain:
            longer = [other for other in plain + unique if other != index and other[: len(index)] == index]
            if longer or plain.count(index) > 1:
                redundant.append((model._meta.db_table, index, longer))
    assert redundant == []


@pytest.mark.django_db
def test_the_look_ups_those_indexes_served_still_search_an_index_and_never_scan_a_table(
    leave_and_security, agent
):
    """The unique constraints and indexes left take over the dropped indexes' look-ups (SQLite's plans)."""
    if connection.vendor != "sqlite":
        pytest.skip("reads SQLite's query plans")
    collection, _folder = leave_and_security
    document = collection.documents.first()
    queries = {
        "the reuse look-up": Paragraph.objects.filter(collection=collection, document__built_model="m")
        .order_by("ordinal")
        .values_list("fingerprint", "context", "embedding"),
        "labels by fingerprint": Paragraph.labels.through.objects.filter(
            paragraph__document=document
        ).values_list("paragraph__fingerprint", "label_id"),
        "a collection's documents": collection.documents.all(),
        "its refused documents": collection.documents.filter(status="refused"),
        "an agent's collections": agent.collections.all(),
        "known answers": collection.known_answers.order_by("position"),
        "known-answer reports": collection.known_answer_reports.filter(status="measured"),
    }
    for name, query in queries.items():
        steps = [line for line in query.explain().splitlines() if " SCAN " in f" {line} " or "SEARCH" in line]
        assert steps and not any(" SCAN " in f" {step} " for step in steps), (name, steps)
