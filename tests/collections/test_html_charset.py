"""An HTML page whose <meta charset> names a codec that is not a text encoding (rot13, zlib_codec, base64)
is read as UTF-8 with a note on the build, not refused as corrupt and not sent to review."""

import pytest

from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.text.extract import extract


@pytest.mark.parametrize("label", ["rot13", "zlib_codec", "base64", "hex"])
def test_a_non_text_charset_is_read_as_utf8_with_a_note(label):
    page = f'<html><head><meta charset="{label}"></head><body><p>Café opens at eight.</p></body></html>'
    extracted = extract("page.html", page.encode())
    assert "Café opens at eight." in extracted.text
    assert extracted.warnings == [] and any(label in note and "UTF-8" in note for note in extracted.notes)


def test_a_real_charset_is_still_honoured_without_a_note():
    page = '<meta charset="iso-8859-15"><p>Price: 5 \u20ac</p>'.encode("iso-8859-15")
    extracted = extract("page.html", page)
    assert "5 \u20ac" in extracted.text and extracted.notes == []


@pytest.mark.django_db
def test_the_build_reads_the_page_and_says_why(agent, knowledge_folder):
    knowledge_folder("site", {"odd.html": '<meta charset="rot13"><p>The canteen opens at eight.</p>'})
    collection = create_collection(agent=agent, name="site", method="fixed", size=80)
    run = build_collection(collection=collection)
    assert run.status == "succeeded" and run.refused == []
    assert any("odd.html" in w and "rot13" in w for w in run.warnings), run.warnings
