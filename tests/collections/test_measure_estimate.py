"""Measure says how long it will take before it starts (a newcomer waited 10.5 minutes unannounced)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from collections_app.admin.measure import estimate_sentence, measure_payload
from collections_app.models import BuildRun, MeasureRun, Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.measure import request_measure
from collections_app.services.measure.estimate import estimate_measure

pytestmark = pytest.mark.django_db

NOTES = {
    f"note-{n}.md": f"# Note {n}\n\nThe archive keeps box {n} on shelf {n * 3}.\n\n"
    f"The canteen serves soup number {n} on day {n + 1}.\n"
    for n in range(8)
}


@pytest.fixture
def archive(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="archive", method="fixed", size=80)
    knowledge_folder("archive", NOTES)
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED and run.paragraphs_embedded >= 10
    return collection


def test_the_estimate_is_one_build_per_way_of_cutting_timed_by_the_last_build(archive):
    run = archive.runs.get()
    started = timezone.now() - timedelta(minutes=5)
    BuildRun.objects.filter(pk=run.pk).update(started_at=started, finished_at=started + timedelta(seconds=8))
    estimate = estimate_measure(collection=archive)
    paragraphs = Paragraph.objects.filter(collection=archive).count()
    assert estimate.variants == 2 * estimate.cuttings  # around 0 and 1 share a cut's vectors
    assert estimate.reference_build == run.pk and estimate.reference_embedded == run.paragraphs_embedded
    assert estimate.seconds == round(estimate.cuttings * paragraphs * 8 / run.paragraphs_embedded)
    said = estimate_sentence(estimate)
    assert f"cut {estimate.cuttings} ways" in said and f"Build {run.pk} embedded" in said
    assert "expect roughly" in said and "this page can be left" in said


def test_without_a_build_to_go_by_the_estimate_says_so(agent, knowledge_folder):
    fresh = create_collection(agent=agent, name="fresh")
    estimate = estimate_measure(collection=fresh)
    assert estimate.seconds is None and estimate.variants > 0
    assert "No build of this collection embedded enough" in estimate_sentence(estimate)


def test_the_form_asks_for_the_estimate_and_the_run_page_counts_down(admin_client, archive):
    answer = admin_client.get(
        reverse("admin:collections_app_measure_estimate") + f"?collection={archive.pk}"
    ).json()
    assert answer["estimate"].startswith(f"{estimate_measure(collection=archive).variants} variants")
    run = request_measure(
        collection=archive,
        questions=[{"question": "where is box 3", "answer": "box 3"}],
        enqueue=False,
        estimate_seconds=600,
    )
    assert measure_payload(run)["detail"].startswith("queued")
    MeasureRun.objects.filter(pk=run.pk).update(
        status=MeasureRun.RUNNING, started_at=timezone.now(), variants_total=20
    )
    run.refresh_from_db()
    assert (
        measure_payload(run)["detail"]
        == "0 of 20 variants measured; expected to take roughly 10 minutes in all"
    )
    MeasureRun.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(seconds=40), variants_done=2
    )
    run.refresh_from_db()
    # 40 s for 2 of 20: about 360 s for the other 18.
    assert measure_payload(run)["detail"] == "2 of 20 variants measured; about 6 minutes left"
