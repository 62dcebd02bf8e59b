"""`make run`'s demo step: an agent with a working key and the sample handbook built once."""

from io import StringIO

import pytest
from django.core.management import call_command

from collections_app.models import CollectionBuilt
from collections_app.services.agents import authenticate
from tests.conftest import SAMPLE_DOCS

pytestmark = pytest.mark.django_db


def test_demo_builds_the_sample_handbook_and_prints_a_key(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_HANDBOOK_FOLDER", str(SAMPLE_DOCS))
    out = StringIO()
    call_command("demo", stdout=out, stderr=StringIO())
    key = out.getvalue().strip().splitlines()[-1]
    assert authenticate(key).agent.agent_id == "demo"
    built = CollectionBuilt.objects.get(collection__name="handbook")
    assert built.passages > 0 and built.refused == []
    # Run again: a new key, no second build.
    again = StringIO()
    call_command("demo", stdout=again, stderr=StringIO())
    assert again.getvalue().strip() != key
    assert CollectionBuilt.objects.get(collection__name="handbook").built_at == built.built_at
