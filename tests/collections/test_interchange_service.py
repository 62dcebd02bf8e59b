"""export_index / import_index against the real store: round trips, search equivalence, refusals."""

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from collections_app import interchange as fmt
from collections_app.models import CollectionBuilt, Document, Paragraph
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.interchange import InvalidIndex, export_index, import_index
from collections_app.services.search import search_collection
from ragsite.errors import Conflict, NotFound
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db


@pytest.fixture
def handbook(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="handbook", built_from="the HR share")
    knowledge_folder("handbook", HANDBOOK)
    run = build_collection(collection=collection)
    assert run.status == "succeeded", run.error
    return collection


@pytest.fixture
def other_agent(db):
    return create_agent(agent_id="beta", name="Beta")[0]


def test_export_writes_the_four_files_of_the_current_build(handbook, tmp_path):
    folder = export_index(collection=handbook, directory=tmp_path)
    assert folder == tmp_path / "rag" / "handbook"
    index = fmt.read_index(folder, index_id="handbook")
    built = CollectionBuilt.objects.get(collection=handbook)
    paragraphs = list(Paragraph.objects.filter(collection=handbook).order_by("ordinal"))
    assert index.meta.n_chunks == len(paragraphs) == built.passages
    assert (index.meta.embedding_model, index.meta.dim) == (built.model, built.dimensions) == ("hash-64", 64)
    assert index.meta.chunker == {
        "max_tokens": max(p.token_count for p in paragraphs),
        "overlap": 0,
        "method": "structure",
        "chars": {"size": 1800, "overlap": 180},
    }
    assert [c.chunk_id for c in index.chunks] == [f"{p.document.name}#{p.index}" for p in paragraphs]
    assert [c.text for c in index.chunks] == [p.text for p in paragraphs]
    # One row per paragraph: its first window, widened from the store's float16 and normalised.
    first = np.stack([p.vectors(64)[0] for p in paragraphs])
    assert np.allclose(index.vectors, first / np.linalg.norm(first, axis=1, keepdims=True), atol=1e-7)
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-6)
    # bm25.idx comes from the build's search index, and is byte for byte seed 004's from the texts.
    from_texts = fmt.build_index(meta=index.meta, chunks=index.chunks, vectors=index.vectors)
    assert (folder / "bm25.idx").read_bytes() == fmt.encode_index(from_texts)["bm25.idx"]


def test_an_export_with_documents_held_back_has_the_statistics_of_what_it_holds(handbook, tmp_path):
    Document.objects.filter(collection=handbook, name="leave.md").update(status=Document.NEEDS_REVIEW)
    folder = export_index(collection=handbook, directory=tmp_path)
    index = fmt.read_index(folder, index_id="handbook")
    assert all(c.doc_id != "leave.md" for c in index.chunks)
    from_texts = fmt.build_index(meta=index.meta, chunks=index.chunks, vectors=index.vectors)
    assert (folder / "bm25.idx").read_bytes() == fmt.encode_index(from_texts)["bm25.idx"]


@pytest.fixture
def small_pieces(agent, knowledge_folder):
    """Several overlapping paragraphs per document, so stitching across imported offsets is exercised."""
    collection = create_collection(agent=agent, name="pieces", method="structure", size=80, overlap=30)
    knowledge_folder("pieces", HANDBOOK)
    run = build_collection(collection=collection)
    assert run.status == "succeeded", run.error
    assert Paragraph.objects.filter(collection=collection).count() > 2 * len(HANDBOOK)
    return collection


@pytest.mark.parametrize("which", ["handbook", "small_pieces"])
def test_import_under_another_name_for_another_agent_searches_the_same(which, request, other_agent, tmp_path):
    original_collection = request.getfixturevalue(which)
    export_index(collection=original_collection, directory=tmp_path)
    copy = import_index(agent=other_agent, directory=tmp_path, index_id=original_collection.name, name="copy")
    assert (copy.agent, copy.name, copy.method) == (other_agent, "copy", original_collection.method)
    assert (copy.size, copy.overlap) == original_collection.chunk_sizes()
    assert set(Paragraph.objects.filter(collection=copy).values_list("agent_id", flat=True)) == {"beta"}
    # The format has no field for a paragraph's title and section (collections_app/text/context.py): the
    # vectors, embedded with them, travel as they are, but an imported copy ranks lexically on its
    # text alone. So the vector arm answers identically, and hybrid search finds the same answers.
    assert set(Paragraph.objects.filter(collection=copy).values_list("context", flat=True)) == {""}
    for question in ("How many days of leave carry over?", "laptop encryption", "mileage per kilometre"):
        for around in (0, 1, 2):
            asked = dict(question=question, around=around, min_score=0.0, most=10)
            original = search_collection(
                agent=original_collection.agent, collection=original_collection, mode="vector", **asked
            )
            imported = search_collection(agent=other_agent, collection="copy", mode="vector", **asked)
            # Words, not whitespace: the format carries no whitespace between chunks, so an imported
            # collection joins its pieces with a space where the document had a paragraph break.
            shown = [
                (p["document"], p["text"].split(), round(p["score"], 9), p["passages"])
                for p in original["paragraphs"]
            ]
            assert shown
            assert shown == [
                (p["document"], p["text"].split(), round(p["score"], 9), p["passages"])
                for p in imported["paragraphs"]
            ]
            hybrid = search_collection(agent=other_agent, collection="copy", **asked)
            first = search_collection(
                agent=original_collection.agent, collection=original_collection, **asked
            )
            assert hybrid["mode"] == first["mode"] == "hybrid"
            assert hybrid["paragraphs"][0]["text"].split() == first["paragraphs"][0]["text"].split()


def test_export_import_export_gives_identical_bytes(handbook, other_agent, tmp_path):
    first = export_index(collection=handbook, directory=tmp_path / "one")
    copy = import_index(agent=other_agent, directory=tmp_path / "one", index_id="handbook")
    second = export_index(collection=copy, directory=tmp_path / "two")
    for name in fmt.FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_reimport_replaces_paragraphs_keeps_labels_and_invalidates_the_cache(handbook, tmp_path):
    from collections_app.models import Label

    folder = export_index(collection=handbook, directory=tmp_path)
    label = Label.objects.create(name="staff")
    paragraph = Paragraph.objects.get(collection=handbook, text__contains="full-disk")
    paragraph.labels.add(label)
    before = CollectionBuilt.objects.get(collection=handbook).built_at
    search_collection(agent=handbook.agent, collection="handbook", question="badges")  # warms the cache
    # Drop the travel document from the index: re-import must remove it.
    kept = fmt.read_index(folder)
    chunks = [c for c in kept.chunks if c.doc_id != "travel.md"]
    vectors = kept.vectors[[i for i, c in enumerate(kept.chunks) if c.doc_id != "travel.md"]]
    meta = fmt.Meta(**{**kept.meta.__dict__, "n_chunks": len(chunks)})
    fmt.write_index(tmp_path, fmt.build_index(meta=meta, chunks=chunks, vectors=vectors))
    import_index(agent=handbook.agent, directory=tmp_path, index_id="handbook")
    assert sorted(handbook.documents.values_list("name", flat=True)) == ["leave.md", "security.md"]
    assert Paragraph.objects.get(collection=handbook, text__contains="full-disk").labels.get() == label
    built = CollectionBuilt.objects.get(collection=handbook)
    assert built.built_at != before and built.passages == len(chunks)
    answer = search_collection(agent=handbook.agent, collection="handbook", question="mileage per kilometre")
    assert all(p["document"] != "travel.md" for p in answer["paragraphs"])


def test_a_never_built_collection_is_not_exported(agent, tmp_path):
    collection = create_collection(agent=agent, name="empty")
    with pytest.raises(Conflict) as caught:
        export_index(collection=collection, directory=tmp_path)
    assert caught.value.code == "never_built"
    assert not (tmp_path / "rag").exists()


def test_an_invalid_index_writes_nothing(handbook, other_agent, tmp_path):
    folder = export_index(collection=handbook, directory=tmp_path)
    data = (folder / "vectors.f32").read_bytes()
    (folder / "vectors.f32").write_bytes(data[:-4])
    with pytest.raises(InvalidIndex) as caught:
        import_index(agent=other_agent, directory=tmp_path, index_id="handbook")
    assert "vectors.f32" in caught.value.message and "size" in caught.value.message
    assert not other_agent.collections.exists()


def test_a_broken_index_leaves_an_existing_collection_as_it_was(handbook, tmp_path):
    folder = export_index(collection=handbook, directory=tmp_path)
    count = Paragraph.objects.filter(collection=handbook).count()
    (folder / "bm25.idx").write_bytes(b"NOPE" + (folder / "bm25.idx").read_bytes()[4:])
    with pytest.raises(InvalidIndex, match="bm25.idx, magic"):
        import_index(agent=handbook.agent, directory=tmp_path, index_id="handbook")
    assert Paragraph.objects.filter(collection=handbook).count() == count


def test_absolute_document_paths_are_refused(handbook, other_agent, tmp_path):
    kept = fmt.read_index(export_index(collection=handbook, directory=tmp_path))
    chunks = [
        fmt.Chunk(doc_id="/home/someone/" + c.doc_id, k=c.k, text=c.text, n_tokens=c.n_tokens)
        for c in kept.chunks
    ]
    fmt.write_index(tmp_path, fmt.build_index(meta=kept.meta, chunks=chunks, vectors=kept.vectors))
    with pytest.raises(InvalidIndex, match="doc_id"):
        import_index(agent=other_agent, directory=tmp_path, index_id="handbook")
    assert not Document.objects.filter(name__startswith="/").exists()


def test_a_missing_index_is_not_found(agent, tmp_path):
    with pytest.raises(NotFound):
        import_index(agent=agent, directory=tmp_path, index_id="nothing")


def test_a_foreign_index_without_ragsite_keys_imports_as_tokens(agent, tmp_path, settings):
    meta = fmt.Meta(
        index_id="docs",
        created_at="2026-10-09T12:00:00Z",
        n_chunks=2,
        dim=64,
        embedding_model="hash-64",
        tokenizer="smol-135m",
        chunker={"max_tokens": 256, "overlap": 32},
    )
    import numpy as np

    vectors = np.zeros((2, 64), dtype=np.float32)
    vectors[0, 0] = vectors[1, 1] = 1.0
    chunks = [
        fmt.Chunk(doc_id="a.md", k=0, text="Carry-over is capped at five days.", n_tokens=8),
        fmt.Chunk(doc_id="a.md", k=1, text="Badges are worn at all times.", n_tokens=7),
    ]
    fmt.write_index(tmp_path, fmt.build_index(meta=meta, chunks=chunks, vectors=vectors))
    collection = import_index(agent=agent, directory=tmp_path, index_id="docs")
    assert (collection.method, collection.size, collection.overlap) == ("tokens", 256, 32)
    built = collection.built
    assert built.built_at.strftime("%Y-%m-%dT%H:%M:%S") == "2026-10-09T12:00:00"


def test_an_index_from_another_model_imports_and_vector_search_refuses(handbook, other_agent, tmp_path):
    folder = export_index(collection=handbook, directory=tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    meta["embedding_model"] = "smol-135m"
    (folder / "meta.json").write_text(json.dumps(meta))
    import_index(agent=other_agent, directory=tmp_path, index_id="handbook")
    with pytest.raises(Conflict) as caught:
        search_collection(agent=other_agent, collection="handbook", question="leave")
    assert caught.value.code == "model_mismatch"


def test_commands_export_and_import(handbook, other_agent, tmp_path):
    out = StringIO()
    call_command("export_index", "alpha", "handbook", str(tmp_path), stdout=out)
    assert "Exported handbook" in out.getvalue()
    out = StringIO()
    call_command("import_index", "beta", str(tmp_path), "handbook", "--name", "copy", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["collection"] == "copy" and result["paragraphs"] == handbook.built.passages


def test_commands_fail_clearly(agent, tmp_path):
    create_collection(agent=agent, name="empty")
    with pytest.raises(CommandError, match="never been built") as caught:
        call_command("export_index", "alpha", "empty", str(tmp_path))
    assert caught.value.returncode == 2
    with pytest.raises(CommandError, match="no index"):
        call_command("import_index", "alpha", str(tmp_path), "missing")
    with pytest.raises(CommandError, match="no agent"):
        call_command("import_index", "nobody", str(tmp_path), "missing")


def test_seed_000_refused_is_never_invented_an_import_records_nobody_recorded(
    handbook, other_agent, tmp_path
):
    """Seed 000: null ("nobody recorded") is never collapsed into [] ("nothing refused"); the format
    carries no refusals, so an imported build cannot say nothing was refused."""
    export_index(collection=handbook, directory=tmp_path)
    copy = import_index(agent=other_agent, directory=tmp_path, index_id="handbook", name="copy")
    assert CollectionBuilt.objects.get(collection=copy).refused is None
    import_index(agent=handbook.agent, directory=tmp_path, index_id="handbook")  # over a built collection
    assert CollectionBuilt.objects.get(collection=handbook).refused is None


def test_seed_004_every_search_chunk_id_resolves_in_docs_jsonl_of_the_same_build(small_pieces, tmp_path):
    """Seed 004: the agent's citations name chunk_ids that must resolve in docs.jsonl."""
    index = fmt.read_index(export_index(collection=small_pieces, directory=tmp_path), index_id="pieces")
    texts = {chunk.chunk_id: chunk.text for chunk in index.chunks}
    cited = 0
    for question in (
        "How many days of leave carry over?",
        "laptop encryption",
        "mileage per kilometre",
        "badges",
    ):
        for around in (0, 1, 2):
            answer = search_collection(
                agent=small_pieces.agent,
                collection=small_pieces,
                question=question,
                around=around,
                min_score=0.0,
                most=10,
            )
            for paragraph in answer["paragraphs"]:
                assert paragraph["chunk_id"] in texts
                assert paragraph["chunk_id"] in paragraph["chunk_ids"]
                assert paragraph["chunk_id"].startswith(paragraph["document"] + "#")
                assert all(chunk_id in texts for chunk_id in paragraph["chunk_ids"])
                assert len(paragraph["chunk_ids"]) == paragraph["passages"]
                # The cited chunks are the ones stitched into the text.
                assert all(texts[c].split()[-1] in paragraph["text"] for c in paragraph["chunk_ids"])
                cited += 1
    assert cited > 20


def test_seed_004_reimporting_an_identical_index_writes_nothing(handbook, other_agent, tmp_path):
    """Seed 004 (ag.06): re-ingesting what is unchanged writes nothing: same paragraph ids, same record."""
    export_index(collection=handbook, directory=tmp_path)
    copy = import_index(agent=other_agent, directory=tmp_path, index_id="handbook")
    ids = list(Paragraph.objects.filter(collection=copy).order_by("ordinal").values_list("pk", flat=True))
    built_at = CollectionBuilt.objects.get(collection=copy).built_at
    documents = list(copy.documents.order_by("name").values_list("pk", "updated_at"))
    import_index(agent=other_agent, directory=tmp_path, index_id="handbook")
    assert (
        list(Paragraph.objects.filter(collection=copy).order_by("ordinal").values_list("pk", flat=True))
        == ids
    )
    assert CollectionBuilt.objects.get(collection=copy).built_at == built_at
    assert list(copy.documents.order_by("name").values_list("pk", "updated_at")) == documents


def test_a_reimport_keeps_the_rows_of_documents_whose_chunks_are_unchanged(handbook, tmp_path):
    folder = export_index(collection=handbook, directory=tmp_path)
    import_index(agent=handbook.agent, directory=tmp_path, index_id="handbook")
    before = dict(Paragraph.objects.filter(collection=handbook).values_list("pk", "document__name"))
    kept = fmt.read_index(folder)
    # The first document ("leave.md") loses its last chunk: every later ordinal moves down by one.
    drop = max(i for i, c in enumerate(kept.chunks) if c.doc_id == "leave.md")
    chunks = [c for i, c in enumerate(kept.chunks) if i != drop]
    meta = fmt.Meta(**{**kept.meta.__dict__, "n_chunks": len(chunks)})
    fmt.write_index(
        tmp_path, fmt.build_index(meta=meta, chunks=chunks, vectors=np.delete(kept.vectors, drop, 0))
    )
    import_index(agent=handbook.agent, directory=tmp_path, index_id="handbook")
    after = dict(Paragraph.objects.filter(collection=handbook).values_list("pk", "document__name"))
    unchanged = {pk for pk, name in before.items() if name != "leave.md"}
    assert unchanged <= set(after)
    assert not {pk for pk, name in before.items() if name == "leave.md"} & set(after)
    ordinals = list(
        Paragraph.objects.filter(collection=handbook).order_by("ordinal").values_list("ordinal", flat=True)
    )
    assert ordinals == list(range(len(chunks)))
    again = fmt.read_index(export_index(collection=handbook, directory=tmp_path / "again"))
    assert [c.chunk_id for c in again.chunks] == [c.chunk_id for c in chunks]


def test_seed_004_reexporting_an_unchanged_build_rewrites_no_file(handbook, tmp_path):
    """Seed 004 (ag.06): writing an unchanged index writes nothing."""
    import os

    folder = export_index(collection=handbook, directory=tmp_path)
    for name in fmt.FILES:
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))
    export_index(collection=handbook, directory=tmp_path)
    assert {(folder / name).stat().st_mtime for name in fmt.FILES} == {1_000_000_000}


def test_seed_004_n_tokens_of_paragraphs_stored_uncounted_are_counted_on_export(handbook, tmp_path):
    """Seed 004: n_tokens is the tokenizer's count; a paragraph the build could not count is counted by
    the same model on export rather than written as 0."""
    from ragsite import embedding

    Paragraph.objects.filter(collection=handbook).update(token_count=None)
    index = fmt.read_index(export_index(collection=handbook, directory=tmp_path))
    embedder = embedding.get_embedder()
    assert index.meta.tokenizer == "hash-64"
    assert [c.n_tokens for c in index.chunks] == [embedder.count_tokens(c.text) for c in index.chunks]
    assert all(c.n_tokens > 0 for c in index.chunks)


def test_an_index_whose_tokens_nobody_could_count_names_no_tokenizer(
    handbook, other_agent, tmp_path, settings
):
    """When the model's tokens cannot be counted (the embedder now in use is another model), meta.json
    names no tokenizer and n_tokens is 0, and an import reads those 0s back as "not counted"."""
    Paragraph.objects.filter(collection=handbook).update(token_count=None)
    settings.EMBED_BACKEND = "none"
    index = fmt.read_index(export_index(collection=handbook, directory=tmp_path))
    assert index.meta.tokenizer == "" and {c.n_tokens for c in index.chunks} == {0}
    copy = import_index(agent=other_agent, directory=tmp_path, index_id="handbook")
    assert set(Paragraph.objects.filter(collection=copy).values_list("token_count", flat=True)) == {None}
    second = export_index(collection=copy, directory=tmp_path / "two")
    assert (second / "docs.jsonl").read_bytes() == (tmp_path / "rag" / "handbook" / "docs.jsonl").read_bytes()


def test_export_leaves_out_disabled_paragraphs_and_documents(handbook, tmp_path):
    Paragraph.objects.filter(collection=handbook, document__name="security.md").update(enabled=False)
    Document.objects.filter(collection=handbook, name="travel.md").update(enabled=False)
    index = fmt.read_index(export_index(collection=handbook, directory=tmp_path), index_id="handbook")
    assert {c.doc_id for c in index.chunks} == {"leave.md"}


def test_export_leaves_out_one_disabled_paragraph_inside_a_document_and_renumbers_the_rest(
    agent, knowledge_folder, tmp_path
):
    """The seed audit's R53: disabling one paragraph in the middle of a document made the whole
    collection not_exportable. It is left out; the document's later chunks are numbered on."""
    handbook = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder(
        "handbook",
        {
            "leave.md": " ".join(
                f"Leave rule {w} applies to all staff in the office."
                for w in ("one", "two", "three", "four", "five")
            )
        },
    )
    build_collection(collection=handbook)
    leave = list(Paragraph.objects.filter(collection=handbook, document__name="leave.md").order_by("index"))
    assert len(leave) >= 3
    Paragraph.objects.filter(pk=leave[1].pk).update(enabled=False)
    index = fmt.read_index(export_index(collection=handbook, directory=tmp_path), index_id="handbook")
    exported = [c for c in index.chunks if c.doc_id == "leave.md"]
    assert [c.k for c in exported] == list(range(len(leave) - 1))
    assert [c.text for c in exported] == [p.text for p in leave if p.pk != leave[1].pk]
