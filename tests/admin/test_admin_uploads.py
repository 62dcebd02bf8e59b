"""The admin's upload page and the upload service behind it."""
# ruff: noqa: F811  (fixtures imported from test_admin are requested by name)

import pytest

from collections_app.models import (
    BuildRun,
    Document,
    Paragraph,
)
from collections_app.services.builds import build_collection
from collections_app.services.uploads import UploadRefused, upload_document
from ragsite.errors import Conflict

from .conftest import texts, url

pytestmark = pytest.mark.django_db


def test_upload_document_keeps_the_base_name_and_the_next_build_reads_it(handbook):
    document = upload_document(
        collection=handbook,
        name="../../etc/C:\\temp\\parking.md",
        content=b"# Parking\n\nVisitors park on level two.\n",
    )
    assert (document.name, document.source, document.fingerprint) == ("parking.md", Document.UPLOAD, "")
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED
    document.refresh_from_db()
    assert document.fingerprint and document.paragraph_count >= 1
    assert Paragraph.objects.filter(document=document, text__contains="level two").exists()


def test_upload_limits_size_and_suffix(handbook, settings):
    settings.MAX_UPLOAD_BYTES = 100
    with pytest.raises(UploadRefused, match="at most 100 bytes") as too_big:
        upload_document(collection=handbook, name="big.md", content=b"x" * 101)
    assert too_big.value.code == "too_large"
    upload_document(collection=handbook, name="small.md", content=b"x" * 100)
    for name, code in [
        ("tool.exe", "unsupported_type"),
        (".hidden.md", "invalid_name"),
        ("", "invalid_name"),
        ("dir/..", "invalid_name"),
        ("a\x00b.md", "invalid_name"),
    ]:
        with pytest.raises(UploadRefused) as refused:
            upload_document(collection=handbook, name=name, content=b"text")
        assert refused.value.code == code, name
    # A name without a suffix is read as text when it is text (issue 30): judged by its bytes.
    with pytest.raises(UploadRefused) as binary:
        upload_document(collection=handbook, name="noext", content=b"\x7fELF\x02\x01\x00\x00")
    assert binary.value.code == "unsupported_type"
    upload_document(collection=handbook, name="README", content=b"Read me first.\n")
    with pytest.raises(UploadRefused, match="empty"):
        upload_document(collection=handbook, name="empty.md", content=b"")
    assert set(handbook.documents.filter(source=Document.UPLOAD).values_list("name", flat=True)) == {
        "small.md",
        "README",
    }


def test_an_upload_replaces_an_earlier_upload_but_never_a_folder_document(handbook):
    first = upload_document(
        collection=handbook, name="notes.md", content=b"# Notes\n\nFirst version of the notes.\n"
    )
    old_file = first.upload.name
    build_collection(collection=handbook)
    second = upload_document(
        collection=handbook, name="notes.md", content=b"# Notes\n\nSecond version of the notes.\n"
    )
    assert second.pk == first.pk and not first.upload.storage.exists(old_file)
    build_collection(collection=handbook)
    assert Paragraph.objects.filter(document=second, text__contains="Second version").exists()
    assert not Paragraph.objects.filter(document=second, text__contains="First version").exists()
    with pytest.raises(Conflict, match="folder"):
        upload_document(collection=handbook, name="leave.md", content=b"shadow")


def test_the_upload_page_stores_each_file_or_says_why_not(admin_client, handbook, settings, run_on_commit):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MAX_UPLOAD_BYTES = 200
    page = admin_client.get(url("document_upload", query=f"collection={handbook.pk}")).content.decode()
    assert 'enctype="multipart/form-data"' in page and f'value="{handbook.pk}" selected' in page
    with run_on_commit(execute=True):
        response = admin_client.post(
            url("document_upload"),
            {
                "collection": handbook.pk,
                "files": [
                    SimpleUploadedFile("parking.md", b"# Parking\n\nVisitors park on level two.\n"),
                    SimpleUploadedFile("virus.exe", b"MZ"),
                    SimpleUploadedFile("huge.txt", b"y" * 500),
                ],
                "rebuild": "on",
            },
        )
    assert response.status_code == 302 and response["Location"] == url("collection_change", handbook.pk)
    messages_ = texts(response)
    assert any("Uploaded to handbook: parking.md" in m for m in messages_)
    assert any('"virus.exe": unsupported type' in m for m in messages_)
    assert any('"huge.txt": too large, 500 bytes; uploads are at most 200 bytes' in m for m in messages_)
    assert list(handbook.documents.filter(source=Document.UPLOAD).values_list("name", flat=True)) == [
        "parking.md"
    ]
    assert handbook.runs.first().status == BuildRun.SUCCEEDED and handbook.runs.count() == 2
    assert Paragraph.objects.filter(collection=handbook, text__contains="level two").exists()
