"""Every help text of every admin form reads in the browser exactly as it is written in the source.

A help text is plain text: `KNOWLEDGE_<NAME>_FOLDER` must not lose its `<NAME>` to the HTML parser.
Each page is rendered by the real admin, reduced to the text a browser shows, and every help text its
form declares must be found there, word for word.
"""

from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils.html import strip_tags
from django.utils.safestring import SafeData

from collections_app.models import Reader

APPS = {"collections_app", "memory_app"}


class _Visible(HTMLParser):
    """The text a browser shows: character data outside script and style, entities decoded."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self._hidden = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "template"):
            self._hidden += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style", "template") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _Visible()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def as_written(help_text) -> str:
    """What the reader should see: the string itself, or the words of deliberate markup."""
    text = str(help_text)
    if isinstance(help_text, SafeData):
        text = visible_text(strip_tags(text))
    return " ".join(text.split())


def admin_form_help_texts(context) -> list:
    texts = []
    adminform = context.get("adminform")
    if adminform is not None:
        for fieldset in adminform:
            for line in fieldset:
                for field in line:
                    bound = field.field
                    text = bound.get("help_text") if isinstance(bound, dict) else bound.help_text
                    if text:
                        texts.append(text)
    form = context.get("form")
    if form is not None and adminform is None:
        texts += [field.help_text for field in form if field.help_text]
    return texts


def pages(handbook) -> list[str]:
    urls = []
    for model in admin.site._registry:
        if model._meta.app_label not in APPS:
            continue
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        urls.append(reverse(f"{prefix}_add"))
        obj = model._default_manager.first()
        if obj is not None:
            urls.append(reverse(f"{prefix}_change", args=[obj.pk]))
    query = f"?collection={handbook.pk}"
    urls += [
        reverse("admin:collections_app_collection_playground") + query,
        reverse("admin:collections_app_collection_measure") + query,
        reverse("admin:collections_app_document_upload") + query,
        reverse("admin:collections_app_collection_known_answers", args=[handbook.pk]),
    ]
    return urls


@pytest.mark.django_db
def test_every_admin_help_text_renders_as_written(admin_client, handbook, agent):
    Reader.objects.create(external_id="alice")
    checked, missing = 0, []
    for url in pages(handbook):
        response = admin_client.get(url)
        if response.status_code in (403, 404):  # an add page a model does not offer
            continue
        assert response.status_code == 200, url
        shown = visible_text(response.content.decode())
        for text in admin_form_help_texts(response.context):
            checked += 1
            if as_written(text) not in shown:
                missing.append((url, str(text)))
    assert not missing, missing
    assert checked > 30  # the collection form alone has a dozen


def test_a_placeholder_in_angle_brackets_is_shown(admin_client, handbook):
    """The help text that started this: its placeholders were read as tags and vanished."""
    response = admin_client.get(reverse("admin:collections_app_collection_change", args=[handbook.pk]))
    shown = visible_text(response.content.decode())
    assert "Build from KNOWLEDGE_<NAME>_FOLDER" in shown
    assert "KNOWLEDGE_<AGENT>__<NAME>_FOLDER needs no binding" in shown
