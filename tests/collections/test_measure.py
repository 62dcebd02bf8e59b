"""DESIGN §7 measure: the pure ranking over scratch indexes, the service, and its three adapters."""

import json
from io import StringIO

import jsonschema
import numpy as np
import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.urls import reverse

from collections_app import measure as m
from collections_app.admin.measure import parse_lines
from collections_app.models import CollectionBuilt
from collections_app.schemas.measure import MeasureOut
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.measure import MAX_QUESTIONS, measure_collection, parse_items
from collections_app.services.search import search_collection
from collections_app.text.chunking import AVAILABLE
from ragsite.embedders import build_embedder
from ragsite.errors import RagsiteError
from ragsite.fusion import FUSION_WEIGHT
from ragsite.mcp import registry
from tests.collections.test_mcp import call_tool, tool_error
from tests.conftest import HANDBOOK
from tests.declared import assert_declared, every_key

QUESTIONS = [
    {"question": "how many days of annual leave carry over", "answer": "capped at five days"},
    {"question": "what rate is mileage reimbursed at", "answer": "0.42 per kilometre"},
    {"question": "must laptops be encrypted", "answer": "full-disk encryption"},
]
CONTROLS = ["what is the recipe for sourdough bread"]
DOCUMENTS = [HANDBOOK[name] for name in sorted(HANDBOOK)]


# --- Pure pieces ---------------------------------------------------------------------------


def test_default_grid_is_every_available_method_at_three_sizes_and_two_arounds():
    variants, skipped = m.grid(window=256)
    assert skipped == []
    assert {v.method for v in variants} == set(AVAILABLE)
    assert {v.around for v in variants} == {0, 1}
    assert sorted({v.size for v in variants if v.method == "fixed"}) == [175, 350, 700]
    assert {v.size for v in variants if v.method == "window"} == {128, None}
    structure = next(v for v in variants if v.method == "structure" and v.size == 900)
    assert structure.overlap == 180  # the method's own overlap, resolved as a build would


def test_token_methods_are_skipped_with_a_reason_when_the_embedder_cannot_count():
    variants, skipped = m.grid(can_count_tokens=False)
    assert {v.method for v in variants} == set(AVAILABLE) - {"tokens", "window"}
    assert {s["method"] for s in skipped} == {"tokens", "window"}
    assert all("counts tokens" in s["reason"] for s in skipped)


def test_a_size_the_chunker_refuses_is_skipped_not_raised():
    variants, skipped = m.grid(["fixed"], sizes={"fixed": [0, 100]}, arounds=[0])
    assert [v.size for v in variants] == [100]
    assert skipped[0]["size"] == 0 and "at least 1" in skipped[0]["reason"]


def test_shared_texts_are_embedded_once_across_variants():
    embedder = build_embedder("hash")
    sent: list[str] = []

    def embed(texts):
        sent.extend(texts)
        return embedder.embed(texts)

    cache = m.VectorCache(embed, batch_size=2)
    first = cache.vectors(["a b", "c d", "a b"])
    again = cache.vectors(["c d", "e f"])
    assert sent == ["a b", "c d", "e f"] and cache.embedded == 3
    assert np.array_equal(first[1], again[0])
    assert m.VectorCache(None).vectors(["a"]) is None  # lexical only


def test_a_variant_finds_answers_ranks_them_and_reads_the_floor_range():
    embedder = build_embedder("hash")
    cache = m.VectorCache(embedder.embed)
    questions = [m.Question(q["question"], q["answer"]) for q in QUESTIONS] + [m.Question(CONTROLS[0])]
    row = m.measure_variant(
        DOCUMENTS, m.Variant("fixed", 80, 0, 0), questions, cache=cache, weight=FUSION_WEIGHT, most=5
    )
    assert row["method"] == "fixed" and row["paragraphs"] > len(DOCUMENTS)
    leave = row["questions"][0]
    assert leave["found"] is True and leave["rank"] == 1 and 0 < leave["score"] <= 1
    assert leave["score"] == leave["top_score"]
    assert row["found"] == 3
    control = row["controls"][0]
    assert control["returned"] == 5 and control["top_score"] is not None  # unfloored: something comes back
    floor = row["floor_range"]
    assert floor["lowest_answer"] == min(q["score"] for q in row["questions"])
    assert floor["highest_control"] == control["top_score"]
    assert floor["separates"] is (floor["lowest_answer"] > floor["highest_control"])


def test_a_floor_removes_what_scores_below_it():
    cache = m.VectorCache(build_embedder("hash").embed)
    questions = [m.Question(QUESTIONS[0]["question"], "capped at five days"), m.Question(CONTROLS[0])]
    row = m.measure_variant(
        DOCUMENTS,
        m.Variant("fixed", 80, 0, 0),
        questions,
        cache=cache,
        weight=FUSION_WEIGHT,
        most=5,
        floor=0.999,
    )
    assert row["found"] == 0 and row["questions"][0]["rank"] is None
    assert row["controls"][0] == {"question": CONTROLS[0], "top_score": None, "returned": 0}


def test_seed_a_control_below_the_floor_reports_no_score_at_all():
    """Seed 000: under a floor, "a control scoring below it reports no score at all" - null, not 0.0."""
    cache = m.VectorCache(build_embedder("hash").embed)
    questions = [m.Question(QUESTIONS[0]["question"], "capped at five days"), m.Question(CONTROLS[0])]
    variant = m.Variant("fixed", 80, 0, 0)
    unfloored = m.measure_variant(DOCUMENTS, variant, questions, cache=cache, weight=FUSION_WEIGHT, most=5)
    answer, control = unfloored["questions"][0]["score"], unfloored["controls"][0]["top_score"]
    assert answer > control
    floored = m.measure_variant(
        DOCUMENTS, variant, questions, cache=cache, weight=FUSION_WEIGHT, most=5, floor=(answer + control) / 2
    )
    assert floored["found"] == 1 and floored["controls"][0]["top_score"] is None
    assert floored["floor_range"] == {"lowest_answer": answer, "highest_control": None, "separates": True}


def test_around_brings_back_a_neighbour_holding_the_marker():
    text = "# Leave\n\nCarry-over of annual leave is allowed.\n\nThe cap is five days a year in total.\n"
    cache = m.VectorCache(None)  # lexical only
    question = [m.Question("carry-over of annual leave", "five days")]
    alone = m.measure_variant([text], m.Variant("fixed", 40, 0, 0), question, cache=cache, weight=0.5, most=1)
    widened = m.measure_variant(
        [text], m.Variant("fixed", 40, 0, 1), question, cache=cache, weight=0.5, most=1
    )
    assert alone["questions"][0]["found"] is False
    assert widened["questions"][0]["found"] is True and widened["questions"][0]["rank"] == 1


def test_markers_match_case_insensitively_across_whitespace():
    run = m.Stitched(
        first=0, last=1, document=0, section="S", hit=0, text="capped at\nFive   days", score=0.5, passages=2
    )
    assert m.find_answer([run], "Capped at five days") == {"found": True, "rank": 1, "score": 0.5}
    assert m.find_answer([run], "ten days") == {"found": False, "rank": None, "score": None}


@pytest.mark.parametrize(
    ("answers", "controls", "expected"),
    [
        ([0.6, 0.4], [0.3, 0.1], {"lowest_answer": 0.4, "highest_control": 0.3, "separates": True}),
        ([0.6, 0.2], [0.3], {"lowest_answer": 0.2, "highest_control": 0.3, "separates": False}),
        ([0.3], [0.3], {"lowest_answer": 0.3, "highest_control": 0.3, "separates": False}),
        ([], [0.3], {"lowest_answer": None, "highest_control": 0.3, "separates": None}),
        ([0.5], [], {"lowest_answer": 0.5, "highest_control": None, "separates": None}),
        ([0.5], [None, 0.2], {"lowest_answer": 0.5, "highest_control": 0.2, "separates": True}),
        ([0.5], [None], {"lowest_answer": 0.5, "highest_control": None, "separates": True}),
        ([], [None], {"lowest_answer": None, "highest_control": None, "separates": None}),
    ],
)
def test_floor_range(answers, controls, expected):
    assert m.floor_range(answers, controls) == expected


# --- The service -----------------------------------------------------------------------------


def _snapshot(collection):
    counts = {
        model.__name__: model.objects.count() for model in apps.get_app_config("collections_app").get_models()
    }
    built = CollectionBuilt.objects.filter(collection=collection).values().get()
    return counts, built


def test_measuring_writes_nothing_and_reports_every_variant(handbook):
    before = _snapshot(handbook)
    report = measure_collection(collection=handbook, questions=QUESTIONS, controls=CONTROLS)
    assert _snapshot(handbook) == before
    assert (report["model"], report["dimensions"], report["mode"]) == ("hash-64", 64, "hybrid")
    assert report["corpus"]["documents"] == 3 and len(report["corpus"]["digest"]) == 64
    assert report["settings"]["fusion_weight"] == FUSION_WEIGHT and report["settings"]["floor"] == 0.0
    assert (report["questions"], report["controls"], report["skipped"]) == (3, 1, [])
    keys = {(v["method"], v["size"], v["around"]) for v in report["variants"]}
    assert {
        ("fixed", 80, 0),
        ("fixed", 80, 1),
        ("fixed", 350, 1),
        ("tokens", 200, 0),
        ("window", None, 1),
    } <= keys
    assert [v["current"] for v in report["variants"] if v["method"] == "fixed" and v["size"] == 80] == [
        True,
        True,
    ]
    assert all(len(v["questions"]) == 3 and len(v["controls"]) == 1 for v in report["variants"])
    # Paragraphs shared by variants (a whole short document, say) were embedded once.
    assert report["embedded"] < sum(v["paragraphs"] for v in report["variants"])
    json.dumps(report)


def test_the_collections_own_variant_ranks_exactly_as_search_does(handbook):
    question = "badges on site"
    report = measure_collection(
        collection=handbook,
        questions=[{"question": question, "answer": "Badges"}],
        variants=[{"method": "fixed", "size": 80, "around": 1}],
        most=4,
    )
    answer = search_collection(
        agent=handbook.agent, collection=handbook, question=question, most=4, around=1, min_score=0
    )
    row = report["variants"][0]
    first = next(i for i, p in enumerate(answer["paragraphs"], 1) if "badges" in p["text"].lower())
    assert row["questions"][0]["rank"] == first
    assert row["questions"][0]["score"] == answer["paragraphs"][first - 1]["score"]
    assert row["questions"][0]["top_score"] == answer["paragraphs"][0]["score"]
    assert row["paragraphs"] == handbook.paragraphs.count()


def test_two_reports_of_the_same_documents_share_a_digest_and_a_changed_document_changes_it(
    handbook, knowledge_folder
):
    one = {"question": "leave", "answer": "leave"}
    variants = [{"method": "fixed", "size": 80, "around": 0}]
    first = measure_collection(collection=handbook, questions=[one], variants=variants)
    again = measure_collection(collection=handbook, questions=[one], variants=variants)
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in first class.\n"})
    changed = measure_collection(collection=handbook, questions=[one], variants=variants)
    assert first["corpus"]["digest"] == again["corpus"]["digest"] != changed["corpus"]["digest"]


def test_the_lexical_only_embedder_measures_without_vectors_and_skips_token_methods(handbook, settings):
    settings.EMBED_BACKEND = "none"
    report = measure_collection(collection=handbook, questions=QUESTIONS[:1], controls=CONTROLS)
    assert (report["model"], report["dimensions"], report["mode"], report["embedded"]) == (
        "lexical",
        0,
        "lexical",
        0,
    )
    assert {s["method"] for s in report["skipped"]} == {"tokens", "window"}
    assert {v["method"] for v in report["variants"]} == {"fixed", "structure", "parent"}  # every built one


@pytest.mark.parametrize(
    ("questions", "controls", "options", "message"),
    [
        ([], [], {}, "at least one question"),
        ([{"question": "q", "answer": "a"}] * MAX_QUESTIONS, ["c"], {}, f"at most {MAX_QUESTIONS}"),
        ([{"question": "x" * 2001, "answer": "a"}], [], {}, "1 to 2000 characters"),
        ([{"question": "q", "answer": " "}], [], {}, "answer marker"),
        ([{"question": "q", "answer": "a"}], [], {"most": 0}, "most must be"),
        ([{"question": "q", "answer": "a"}], [], {"min_score": 2}, "min_score"),
        ([{"question": "q", "answer": "a"}], [], {"variants": [{"method": "semantic"}]}, "planned"),
        ([{"question": "q", "answer": "a"}], [], {"variants": [{"method": "fixed", "around": 9}]}, "around"),
    ],
)
def test_bad_input_is_refused_before_anything_is_read(handbook, questions, controls, options, message):
    with pytest.raises(RagsiteError, match=message):
        measure_collection(collection=handbook, questions=questions, controls=controls, **options)


def test_items_split_into_questions_and_controls():
    items = [{"question": "a", "answer": "b"}, {"question": "c", "control": True}]
    assert parse_items(items) == ([{"question": "a", "answer": "b"}], ["c"])
    for bad in (
        {"question": "a"},
        {"question": "a", "answer": "b", "control": True},
        {"q": "a"},
        "a",
        {"question": "a", "answer": "b", "extra": 1},
    ):
        with pytest.raises(RagsiteError):
            parse_items([bad])


# --- The command -----------------------------------------------------------------------------


def _jsonl(tmp_path, items):
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n\n")
    return str(path)


def test_the_command_prints_the_report_as_json(handbook, tmp_path):
    path = _jsonl(tmp_path, [*QUESTIONS, {"question": CONTROLS[0], "control": True}])
    out = StringIO()
    call_command(
        "measure",
        "alpha",
        "handbook",
        path,
        "--json",
        "--method",
        "fixed",
        "--size",
        "80",
        "--around",
        "1",
        stdout=out,
    )
    report = json.loads(out.getvalue())
    assert [(v["method"], v["size"], v["around"]) for v in report["variants"]] == [("fixed", 80, 1)]
    assert report["variants"][0]["found"] == 3 and report["controls"] == 1


def test_the_command_prints_a_table_and_refuses_bad_files(handbook, tmp_path):
    out = StringIO()
    call_command(
        "measure", "alpha", "handbook", _jsonl(tmp_path, QUESTIONS[:1]), "--method", "fixed", stdout=out
    )
    assert "hash-64" in out.getvalue() and "fixed" in out.getvalue() and "1/1" in out.getvalue()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a", "answer": "b"}\nnot json\n')
    with pytest.raises(CommandError, match="line 2"):
        call_command("measure", "alpha", "handbook", str(bad))
    with pytest.raises(CommandError, match="no collection"):
        call_command("measure", "alpha", "nope", _jsonl(tmp_path, QUESTIONS[:1]))


# --- The MCP tool ----------------------------------------------------------------------------


@pytest.fixture
def keyed_handbook(db, knowledge_folder):
    agent, raw = create_agent(agent_id="beta", name="Beta")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent="beta")
    assert build_collection(collection=collection).status == "succeeded"
    return collection, raw


def test_the_mcp_tool_measures_and_matches_its_output_schema(client, keyed_handbook):
    collection, raw = keyed_handbook
    before = _snapshot(collection)
    items = [*QUESTIONS, {"question": CONTROLS[0], "control": True}]
    result = call_tool(client, raw, "measure", {"collection": "handbook", "questions": items, "most": 3})
    assert result["isError"] is False
    report = result["structuredContent"]
    jsonschema.validate(report, registry.TOOLS["measure"].output_schema)
    assert_declared(report, MeasureOut)
    assert set(report) == every_key(MeasureOut)
    assert report["questions"] == 3 and report["settings"]["most"] == 3 and report["variants"]
    assert _snapshot(collection) == before


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ([], "at least 1 item"),
        ([{"question": "q", "answer": "a"}] * 51, "at most 50 items"),
        (["just a string"], "'questions[0]' must be object"),
        ([{"question": "x" * 2001, "answer": "a"}], "at most 2000"),
        ([{"question": "", "answer": "a"}], "at least 1"),
        ([{"question": "q", "answer": "a", "extra": 1}], "unknown argument"),
        ([{"question": "q"}], "either"),
    ],
)
def test_the_mcp_tool_enforces_its_limits(client, keyed_handbook, questions, message):
    _collection, raw = keyed_handbook
    error = tool_error(call_tool(client, raw, "measure", {"collection": "handbook", "questions": questions}))
    assert message in error["message"]


def test_the_mcp_tool_refuses_a_per_reader_collection(client, keyed_handbook, knowledge_folder):
    collection, raw = keyed_handbook
    collection.per_reader = True
    collection.save()
    error = tool_error(call_tool(client, raw, "measure", {"collection": "handbook", "questions": QUESTIONS}))
    assert error["code"] == "per_reader"


# --- The admin page --------------------------------------------------------------------------


def test_lines_are_questions_with_markers_or_controls():
    assert parse_lines("how many days | five days\n\n! sourdough recipe\n") == (
        [{"question": "how many days", "answer": "five days"}],
        ["sourdough recipe"],
    )
    with pytest.raises(Exception, match="line 1"):
        parse_lines("no marker here")


def test_the_admin_page_queues_a_measure_and_its_page_shows_the_stored_report(
    admin_client, handbook, django_capture_on_commit_callbacks
):
    from collections_app.models import MeasureRun

    url = reverse("admin:collections_app_collection_measure")
    page = admin_client.get(url + f"?collection={handbook.pk}")
    assert page.status_code == 200 and f'value="{handbook.pk}" selected' in page.content.decode()
    before = _snapshot(handbook)[1]
    lines = "\n".join(f"{q['question']} | {q['answer']}" for q in QUESTIONS) + f"\n! {CONTROLS[0]}"
    with django_capture_on_commit_callbacks(execute=True):  # the task runs as the request commits
        response = admin_client.post(url, {"collection": handbook.pk, "questions": lines, "most": 5})
    run = MeasureRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:collections_app_measurerun", args=[run.pk])
    page = admin_client.get(response["Location"])
    report = page.context["report"]
    assert report is not None and report["questions"] == 3 and report["controls"] == 1
    body = page.content.decode()
    assert '<svg id="measure-chart"' in body and body.count('class="rs-measure-bar') == len(
        report["variants"]
    )
    assert body.count('<tr class="rs-variant') == len(report["variants"]) and "hash-64" in body
    assert "capped at five days" in body and "control" in body
    assert (
        f"measure {run.pk}" in admin_client.get(url + f"?collection={handbook.pk}").content.decode()
    )  # listed
    progress = admin_client.get(reverse("admin:collections_app_measurerun_progress", args=[run.pk])).json()
    assert (progress["status"], progress["percent"], progress["active"]) == ("succeeded", 100, False)
    assert _snapshot(handbook)[1] == before


def test_the_admin_page_reports_bad_lines_as_form_errors(admin_client, handbook):
    url = reverse("admin:collections_app_collection_measure")
    response = admin_client.post(
        url, {"collection": handbook.pk, "questions": "a question without marker", "most": 5}
    )
    assert response.status_code == 200 and "questions" in response.context["form"].errors
    from collections_app.models import MeasureRun

    assert not MeasureRun.objects.exists()


def test_the_admin_page_needs_view_permission(client, handbook, django_user_model):
    user = django_user_model.objects.create_user("clerk", password="pw-clerk-123", is_staff=True)
    client.force_login(user)
    assert client.get(reverse("admin:collections_app_collection_measure")).status_code == 403


def test_a_scratch_index_with_windows_pools_each_paragraphs_windows_as_search_does():
    """As search does (mapped_index, windows.pool_windows): a long paragraph's windows are rows of the
    matrix."""
    from collections_app.text.stitch import Row
    from collections_app.text.windows import LATER_WINDOW_SHARE
    from ragsite.lexical import BM25Index

    texts = ["alpha beta", "gamma delta", "epsilon"]
    rows = [Row(ordinal=i, document=i, start=0, end=len(t), text=t, section="") for i, t in enumerate(texts)]
    e = np.eye(3, dtype=np.float32)
    index = m.ScratchIndex(
        rows=rows,
        bm25=BM25Index.from_texts(texts),
        matrix=np.stack([e[0], e[1], e[2]]),
        window_row=np.asarray([0, 0, 1]),
    )  # paragraph 2 has no vector
    question = np.asarray([0.1, 0.9, 0.2], dtype=np.float32)
    ranked = m.rank(index, "nothing matches", question, weight=1.0, most=3, around=0)
    first_then_better = 0.1 + LATER_WINDOW_SHARE * (0.9 - 0.1)
    assert [(run.first, round(run.score, 3)) for run in ranked] == [
        (0, round(first_then_better, 3)),
        (1, 0.2),
        (2, 0.0),
    ]


def test_a_scratch_index_embeds_a_long_paragraph_as_its_windows_as_a_build_stores_it():
    """A variant's paragraph longer than the model's window has one matrix row per window, the windows
    model_windows cuts (as windows.embed_in_windows does for a build), so measure ranks it as search would."""
    from collections_app.text.windows import model_windows
    from ragsite.embedders.simple import HashEmbedder

    embedder = HashEmbedder(dimensions=16, window=12)
    long_text = " ".join(f"word{i}" for i in range(40))
    cache = m.VectorCache(embedder.embed)
    variant = m.Variant("fixed", 4000, 0, 0)
    index = m.scratch_index(["short text here", long_text], variant, cache=cache, tokens=embedder)
    assert len(index.rows) == 2
    pieces = model_windows(index.rows[1].text, embedder)
    assert len(pieces) > 1
    assert index.window_row.tolist() == [0] + [1] * len(pieces)
    assert index.matrix.shape == (1 + len(pieces), 16)
    # Without a token counter a paragraph is one vector, as before.
    assert m.scratch_index(["short text here", long_text], variant, cache=cache).window_row is None
