"""The admin's paragraph and label screens with Django's test client, and the pages every model
shows: labels in bulk, filters, counts, the change and add pages."""

import json

import pytest

from collections_app.models import (
    Collection,
    CollectionBuilt,
    Document,
    Label,
    Paragraph,
)
from collections_app.services.agents import create_reader
from collections_app.services.readers.labels import add_labels, labels_named, remove_labels
from collections_app.services.uploads import upload_document
from ragsite.errors import RagsiteError

from .conftest import HANDBOOK, make_built, url

pytestmark = pytest.mark.django_db


# --- Paragraphs and labels ---------------------------------------------------------------


def test_the_labels_services_add_and_remove(handbook):
    paragraphs = list(Paragraph.objects.filter(collection=handbook)[:3])
    hr, finance = labels_named(["hr", "finance"], create=True)
    assert add_labels(paragraphs, [hr, finance]) == 6
    assert add_labels(paragraphs, [hr]) == 0  # already there
    assert remove_labels(paragraphs[:1], [hr, finance]) == 2
    assert set(paragraphs[0].labels.all()) == set() and set(paragraphs[1].labels.all()) == {hr, finance}
    with pytest.raises(RagsiteError, match="no such label"):
        labels_named(["nobody"])
    with pytest.raises(RagsiteError, match="a label is"):
        labels_named(["has space"], create=True)


def test_bulk_labels_go_through_an_intermediate_page(admin_client, handbook):
    hr = Label.objects.create(name="hr")
    chosen = list(
        Paragraph.objects.filter(collection=handbook, document__name="leave.md").values_list("pk", flat=True)
    )
    changelist = url("paragraph_changelist", query=f"collection__id__exact={handbook.pk}")
    action = {"action": "add_labels_action", "_selected_action": chosen, "index": 0, "select_across": 0}
    page = admin_client.post(changelist, action)
    assert page.status_code == 200 and "admin/collections_app/paragraph/label_action.html" in [
        t.name for t in page.templates
    ]
    body = page.content.decode()
    assert f"<strong>{len(chosen)}</strong> paragraphs" in body and 'name="apply"' in body
    assert f'action="{changelist}"' in body.replace("&amp;", "&")
    for pk in chosen:
        assert f'name="_selected_action" value="{pk}"' in body
    assert not Paragraph.objects.filter(labels__isnull=False).exists()  # nothing changed yet

    done = admin_client.post(
        changelist, {**action, "apply": "1", "labels": [hr.pk], "new_labels": "finance, leave-team"}
    )
    assert done.status_code == 302
    for paragraph in Paragraph.objects.filter(pk__in=chosen):
        assert set(paragraph.labels.values_list("name", flat=True)) == {"hr", "finance", "leave-team"}
    assert not Paragraph.objects.filter(labels__isnull=False).exclude(pk__in=chosen).exists()

    bad = admin_client.post(changelist, {**action, "apply": "1", "new_labels": "not a label!"})
    assert bad.status_code == 200 and "a label is 1-100" in bad.content.decode()
    empty = admin_client.post(changelist, {**action, "apply": "1"})
    assert empty.status_code == 200 and "Choose at least one label." in empty.content.decode()

    remove = {
        "action": "remove_labels_action",
        "_selected_action": chosen[:1],
        "index": 0,
        "select_across": 0,
    }
    body = admin_client.post(changelist, remove).content.decode()
    assert f'value="{hr.pk}"' in body
    admin_client.post(changelist, {**remove, "apply": "1", "labels": [hr.pk]})
    assert set(Paragraph.objects.get(pk=chosen[0]).labels.values_list("name", flat=True)) == {
        "finance",
        "leave-team",
    }


def test_bulk_labels_across_every_page_of_a_filtered_list(admin_client, handbook):
    filtered = url("paragraph_changelist", query=f"collection__id__exact={handbook.pk}&q=badges")
    action = {
        "action": "add_labels_action",
        "select_across": 1,
        "index": 0,
        "_selected_action": [Paragraph.objects.filter(collection=handbook).first().pk],
    }
    body = admin_client.post(filtered, action).content.decode()
    # The page re-posts the row ids it came with, as the changelist needs, and select_across widens them.
    assert 'name="select_across" value="1"' in body and 'name="_selected_action"' in body
    admin_client.post(filtered, {**action, "apply": "1", "new_labels": "security"})
    labelled = set(Paragraph.objects.filter(labels__name="security").values_list("pk", flat=True))
    assert labelled == set(
        Paragraph.objects.filter(collection=handbook, text__icontains="badges").values_list("pk", flat=True)
    )


def test_the_paragraph_page_shows_its_neighbours_and_edits_labels(admin_client, handbook):
    rows = list(Paragraph.objects.filter(collection=handbook, document__name="leave.md").order_by("index"))
    assert len(rows) >= 3
    middle = rows[1]
    body = admin_client.get(url("paragraph_change", middle.pk)).content.decode()
    assert middle.text in body and rows[0].text in body and rows[2].text in body
    assert url("paragraph_change", rows[0].pk) in body and url("paragraph_change", rows[2].pk) in body
    assert "rs-text rs-current" in body
    first = admin_client.get(url("paragraph_change", rows[0].pk)).content.decode()
    assert "the start of the document" in first
    hr = Label.objects.create(name="hr")
    assert admin_client.post(url("paragraph_change", middle.pk), {"labels": [hr.pk]}).status_code == 302
    assert list(middle.labels.values_list("name", flat=True)) == ["hr"]
    admin_client.post(url("paragraph_change", middle.pk), {"labels": []})
    assert not middle.labels.exists()
    before = middle.text
    admin_client.post(url("paragraph_change", middle.pk), {"labels": [], "text": "tampered"})
    middle.refresh_from_db()
    assert middle.text == before


def test_the_paragraph_list_filters_by_label_unlabelled_document_section_and_text(admin_client, handbook):
    hr = Label.objects.create(name="hr")
    leave = Paragraph.objects.filter(collection=handbook, document__name="leave.md")
    add_labels(leave, [hr])
    base = f"collection__id__exact={handbook.pk}"

    def listed(query):
        response = admin_client.get(url("paragraph_changelist", query=f"{base}&{query}"))
        return {p.pk for p in response.context["cl"].result_list}

    assert listed(f"labels__id__exact={hr.pk}") == set(leave.values_list("pk", flat=True))
    assert listed("unlabelled=yes") == set(
        Paragraph.objects.filter(collection=handbook)
        .exclude(pk__in=leave.values("pk"))
        .values_list("pk", flat=True)
    )
    security = handbook.documents.get(name="security.md")
    assert listed(f"document={security.pk}") == set(security.paragraphs.values_list("pk", flat=True))
    assert listed("section=Travel") == set(
        Paragraph.objects.filter(section="Travel").values_list("pk", flat=True)
    )
    assert listed("q=mileage") == set(
        Paragraph.objects.filter(text__icontains="mileage").values_list("pk", flat=True)
    )
    body = admin_client.get(url("paragraph_changelist", query=base)).content.decode()
    assert "leave.md#0" in body and "unlabelled</span>" in body


def test_labels_show_how_many_paragraphs_and_readers_hold_them(admin_client, handbook):
    create_reader(external_id="alice@example.com", labels=["hr", "finance"])
    create_reader(external_id="bob@example.com", labels=["hr"])
    hr = Label.objects.get(name="hr")
    add_labels(Paragraph.objects.filter(collection=handbook)[:4], [hr])
    response = admin_client.get(url("label_changelist"))
    rows = {label.name: (label.n_paragraphs, label.n_readers) for label in response.context["cl"].result_list}
    assert rows == {"finance": (0, 1), "hr": (4, 2)}
    body = admin_client.get(url("reader_changelist")).content.decode()
    assert "alice@example.com" in body and "finance, hr" in body
    readers = (
        admin_client.get(url("reader_changelist", query=f"labels__id__exact={hr.pk}"))
        .context["cl"]
        .result_list
    )
    assert {r.external_id for r in readers} == {"alice@example.com", "bob@example.com"}


def test_every_admin_changelist_and_add_page_renders(admin_client, handbook, conflicting):
    for model in [
        "agent",
        "apikey",
        "label",
        "reader",
        "collection",
        "document",
        "paragraph",
        "collectionbuilt",
        "buildrun",
        "modelcall",
        "storemeta",
    ]:
        assert admin_client.get(url(f"{model}_changelist")).status_code == 200, model
    for model in ["agent", "label", "reader", "collection"]:
        assert admin_client.get(url(f"{model}_add")).status_code == 200, model
    assert (
        admin_client.get(
            url("collection_change", Collection.objects.create(agent=handbook.agent, name="x").pk)
        ).status_code
        == 200
    )
    label = Label.objects.create(name="hr")
    assert admin_client.get(url("label_change", label.pk)).status_code == 200
    assert (
        json.loads(admin_client.get(url("collection_progress", handbook.pk)).content)["status"] == "succeeded"
    )


def test_deleting_an_uploaded_document_removes_its_file_once_committed(handbook, run_on_commit):
    document = upload_document(collection=handbook, name="gone.md", content=b"# Gone\n\nSoon deleted.\n")
    storage, name = document.upload.storage, document.upload.name
    assert storage.exists(name)
    with run_on_commit(execute=True):
        document.delete()
    assert not storage.exists(name)


def test_the_document_filter_offers_every_document_to_find_not_the_first_200(admin_client, handbook):
    Document.objects.bulk_create([Document(collection=handbook, name=f"memo-{n:03}.md") for n in range(250)])
    body = admin_client.get(
        url("paragraph_changelist", query=f"collection__id__exact={handbook.pk}")
    ).content.decode()
    listed = body.split('id="rs-filter-document"')[1].split("</datalist>")[0]
    assert listed.count("<option") == 253 and "memo-249.md" in listed


def test_the_build_page_shows_each_refused_name_with_its_reason(admin_client, agent, knowledge_folder):
    mixed = make_built(
        agent, knowledge_folder, "mixed", {"ok.md": HANDBOOK["leave.md"], "broken.pdf": b"%PDF-1 junk"}
    )
    body = admin_client.get(url("buildrun_change", mixed.runs.first().pk)).content.decode()
    assert "broken.pdf" in body and "(corrupt)" in body and "not a readable PDF" not in body


def test_a_collection_built_with_another_model_says_it_cannot_answer(admin_client, handbook):
    CollectionBuilt.objects.filter(collection=handbook).update(model="all-MiniLM-L6-v2")
    body = admin_client.get(url("collection_changelist")).content.decode()
    assert 'data-role="not-searchable"' in body
    assert "built with all-MiniLM-L6-v2 but this server embeds with hash-64" in body
