"""Found at 1 is what an answer of one paragraph holds (issue 28, item 4): a lower hit merged into the
first paragraph of a deeper answer puts the marker at rank 1 without the best hit holding it."""

import pytest

from collections_app import measure as m
from collections_app.models import BuildRun, KnownAnswersReport
from collections_app.services import known_answers as k
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection

# Each line one piece (structure, 70 characters). The best hit is the quota line; the second is two pieces on,
# and with around 1 their runs overlap, so the deeper answer's first paragraph also holds the marker line.
LINES = [
    "Filler about the canteen opening hours on weekdays.",
    "The zebra quota rules apply to every zebra quota request.",
    "Unrelated sentence about the parking bays by the gate.",
    "One zebra appears: the marker MARKERXYZ lives in this one.",
    "Another filler line about the library and its books.",
]
TEXT = "\n\n".join(LINES) + "\n"
QUESTION = "zebra quota request rules"


def test_a_marker_merged_in_from_a_lower_hit_is_rank_1_but_not_found_at_1():
    outcome = m.measure_variant(
        [TEXT],
        m.Variant("structure", 70, 0, 1),
        [m.Question(QUESTION, "MARKERXYZ")],
        cache=m.VectorCache(None),
        weight=0.5,
        most=5,
    )["questions"][0]
    assert outcome["found"] is True and outcome["rank"] == 1  # inside the merged first paragraph
    assert outcome["found_at_1"] is False  # the answer of one paragraph does not hold it


def test_a_marker_in_the_best_hits_own_run_is_found_at_1():
    outcome = m.measure_variant(
        [TEXT],
        m.Variant("structure", 70, 0, 1),
        [m.Question(QUESTION, "parking bays")],  # the best hit's neighbour: in the one-paragraph answer
        cache=m.VectorCache(None),
        weight=0.5,
        most=5,
    )["questions"][0]
    assert outcome["rank"] == 1 and outcome["found_at_1"] is True


@pytest.mark.django_db
def test_the_known_answers_report_counts_found_at_1_at_most_1(
    agent, knowledge_folder, settings, django_capture_on_commit_callbacks
):
    settings.EMBED_BACKEND = "none"  # lexical: the ranking above, exactly
    settings.AROUND, settings.MIN_SCORE = 1, 0
    collection = create_collection(agent=agent, name="zebra", method="structure", size=70, overlap=0)
    knowledge_folder("zebra", {"notes.md": TEXT})
    k.set_known_answers(
        collection=collection,
        items=[
            {"question": QUESTION, "answer": "MARKERXYZ"},
            {"question": "rules of a zebra quota request", "answer": "parking bays"},
        ],
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = build_collection(collection=collection)
    run.refresh_from_db()
    assert run.status == BuildRun.SUCCEEDED
    report = KnownAnswersReport.objects.get(build=run)
    assert [r["rank"] for r in report.results] == [1, 1]
    assert [r["found_at_1"] for r in report.results] == [False, True]
    assert (report.found_at_1, report.found_at_5) == (1, 2)
