"""Uploads judged one file at a time: every good file stored, each refused one named with its reason."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from collections_app.models import Document
from collections_app.services.agents import create_collection
from collections_app.services.uploads import upload_documents

pytestmark = pytest.mark.django_db


@pytest.fixture
def drafts(agent, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.MAX_UPLOAD_BYTES = 1000
    return create_collection(agent=agent, name="drafts")


def test_an_empty_file_is_refused_alone_and_the_rest_are_stored(drafts):
    files = [
        SimpleUploadedFile("a.md", b"# A\n\nalpha\n"),
        SimpleUploadedFile("empty.md", b""),
        SimpleUploadedFile("b.txt", b"beta"),
        SimpleUploadedFile(".hidden.md", b"x"),
        SimpleUploadedFile("big.md", b"x" * 1001),
        SimpleUploadedFile("tool.exe", b"MZ"),
    ]
    outcome = upload_documents(collection=drafts, files=files)
    assert outcome.stored == ["a.md", "b.txt"]
    refused = dict(outcome.refused)
    assert list(refused) == ["empty.md", ".hidden.md", "big.md", "tool.exe"]
    # Each reason names its file and says why in the refusal vocabulary's words.
    assert refused["empty.md"].startswith('"empty.md": empty')
    assert refused[".hidden.md"].startswith('".hidden.md" is hidden')
    assert refused["big.md"].startswith('"big.md": too large')
    assert refused["tool.exe"].startswith('"tool.exe": unsupported type')
    assert sorted(Document.objects.filter(collection=drafts).values_list("name", flat=True)) == [
        "a.md",
        "b.txt",
    ]
    drafts.refresh_from_db()
    assert "rebuild to include it" in drafts.rebuild_needed


def test_a_refused_name_is_shown_without_its_directories(drafts):
    outcome = upload_documents(collection=drafts, files=[SimpleUploadedFile("x/y/.env", b"SECRET=1")])
    assert outcome.refused[0][0] == ".env" and "x/y" not in outcome.refused[0][1]
