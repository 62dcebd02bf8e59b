"""Known answers in the admin (issue 17), with Django's test client: the edit page, the collection page's
panel, the build history's warning and the measure page started from the stored set."""

import json

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from collections_app.admin.known_answers import sparkline
from collections_app.models import Collection, KnownAnswer, KnownAnswersReport
from collections_app.services import known_answers as k
from collections_app.services.builds import build_collection

pytestmark = pytest.mark.django_db

LINES = (
    "how much annual leave carries over | capped at five days\n"
    "what is mileage reimbursed at per kilometre | 0.42 per kilometre\n"
    "must laptops use disk encryption | full-disk encryption\n"
    "! what is the recipe for sourdough bread\n"
)


def url(name, *args, query=""):
    return reverse(f"admin:collections_app_{name}", args=args) + (f"?{query}" if query else "")


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def measured(handbook, admin_client, django_capture_on_commit_callbacks):
    """The handbook with a set saved through the admin page; its live build measured on commit."""
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(url("collection_known_answers", handbook.pk), {"lines": LINES})
    assert response.status_code == 302
    return handbook


def test_the_page_saves_lines_and_the_live_build_is_measured(measured, admin_client):
    assert [q.text for q in k.known_answers(measured)][:1] == ["how much annual leave carries over"]
    assert KnownAnswersReport.objects.get(build=measured.runs.get()).answers == 3
    page = admin_client.get(url("collection_known_answers", measured.pk)).content.decode()
    assert "how much annual leave carries over | capped at five days" in page  # the textarea holds the set
    assert 'id="known-answers-results"' in page and (
        "nothing comes back" in page or "paragraphs come back" in page
    )


def test_bad_lines_are_a_form_error_and_nothing_is_saved(measured, admin_client):
    response = admin_client.post(
        url("collection_known_answers", measured.pk), {"lines": "a question without a marker"}
    )
    assert response.status_code == 200
    assert "line 1: write" in response.content.decode()
    assert len(k.known_answers(measured)) == 4


def test_a_json_lines_upload_replaces_the_set(measured, admin_client):
    upload = SimpleUploadedFile(
        "known.jsonl",
        json.dumps({"question": "are trains standard class", "answer": "standard class"}).encode(),
    )
    response = admin_client.post(
        url("collection_known_answers", measured.pk), {"lines": LINES, "upload": upload}
    )
    assert response.status_code == 302
    assert [q.text for q in k.known_answers(measured)] == ["are trains standard class"]
    bad = SimpleUploadedFile("known.jsonl", b'{"question": "q"}\n')
    response = admin_client.post(url("collection_known_answers", measured.pk), {"upload": bad})
    assert "item 1 needs either" in response.content.decode()


def test_an_empty_set_clears_it(measured, admin_client):
    admin_client.post(url("collection_known_answers", measured.pk), {"lines": ""})
    assert not KnownAnswer.objects.filter(collection=measured).exists()


def test_staff_without_change_permission_may_read_but_not_save(measured, staff_user, django_user_model):
    from django.contrib.auth.models import Permission

    staff_user.user_permissions.add(Permission.objects.get(codename="view_collection"))
    client = Client()
    client.force_login(staff_user)
    page = client.get(url("collection_known_answers", measured.pk))
    assert page.status_code == 200 and 'id="known-answers-form"' not in page.content.decode()
    assert client.post(url("collection_known_answers", measured.pk), {"lines": ""}).status_code == 403
    assert len(k.known_answers(measured)) == 4


def test_the_collection_page_shows_found_at_5_the_floor_and_a_sparkline(
    measured, admin_client, django_capture_on_commit_callbacks, knowledge_folder
):
    Collection.objects.filter(pk=measured.pk).update(floor_measured=True)
    with django_capture_on_commit_callbacks(execute=True):
        build_collection(collection=measured)
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    with django_capture_on_commit_callbacks(execute=True):
        lost = build_collection(collection=measured)
    report = KnownAnswersReport.objects.get(build=lost)
    page = admin_client.get(url("collection_change", measured.pk)).content.decode()
    assert 'id="known-answers"' in page and 'id="known-answers-sparkline"' in page
    assert f'<strong data-role="found-at-5">{report.found_at_5} of 3</strong>' in page
    assert (
        f'<span data-role="floor">{report.floor}</span> (<span data-role="floor-source">measured</span>)'
        in page
    )
    assert page.count("<circle") == 3  # one point per measured build
    assert 'data-role="axes"' in page and ">100 %</text>" in page and ">#1</text>" in page
    # The lost question is named on the panel and in the build history.
    assert (
        page.count("1 of 3 known answers no longer found: “what is mileage reimbursed at per kilometre”") == 2
    )
    listing = admin_client.get(url("collection_changelist")).content.decode()
    assert "1 of 3 known answers no longer found" in listing


def test_a_collection_without_known_answers_invites_some(handbook, admin_client):
    page = admin_client.get(url("collection_change", handbook.pk)).content.decode()
    assert "No known answers yet" in page and url("collection_known_answers", handbook.pk) in page


def test_the_measure_page_starts_from_the_stored_set(measured, admin_client):
    page = admin_client.get(
        url("collection_measure", query=f"collection={measured.pk}&known=1")
    ).content.decode()
    assert "how much annual leave carries over | capped at five days" in page
    assert "! what is the recipe for sourdough bread" in page


def test_a_set_larger_than_measure_takes_is_cut_with_a_warning(handbook, admin_client):
    k.set_known_answers(
        collection=handbook, items=[{"question": f"question {i}", "answer": "a"} for i in range(60)]
    )
    response = admin_client.get(url("collection_measure", query=f"collection={handbook.pk}&known=1"))
    assert "so 10 were left out" in " ".join(texts(response))
    assert (
        "question 49 | a" in response.content.decode() and "question 50 | a" not in response.content.decode()
    )


def test_the_sparkline_rises_with_found_answers():
    reports = [
        KnownAnswersReport(build_id=n, answers=4, found_at_5=found) for n, found in enumerate([2, 4, 3], 1)
    ]
    line = sparkline(reports)
    ys = [p["y"] for p in line["points"]]
    assert ys[1] < ys[2] < ys[0]  # SVG y grows downwards: more found is higher
    assert line["points"][0]["x"] < line["points"][-1]["x"] <= line["width"]
    assert sparkline([]) is None


def test_the_chart_has_axes_labelled_in_percent_and_build_numbers():
    reports = [
        KnownAnswersReport(build_id=n, answers=4, found_at_5=found) for n, found in enumerate([2, 4, 3], 1)
    ]
    chart = sparkline(reports)
    assert chart["left"] < min(p["x"] for p in chart["points"]) + 1
    assert max(p["y"] for p in chart["points"]) <= chart["bottom"]
    assert [p["label"] for p in chart["labelled"]] == ["#1", "#2", "#3"]
    many = [KnownAnswersReport(build_id=n, answers=2, found_at_5=1) for n in range(1, 31)]
    labels = [p["label"] for p in sparkline(many)["labelled"]]
    assert labels[0] == "#1" and labels[-1] == "#30" and len(labels) <= 9
