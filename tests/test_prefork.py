"""What the web master does before forking (ragsite/prefork.py), in this process."""

import gc
import os

import pytest
from django.db import connection

from ragsite import embedding, lexical, prefork


def test_warm_builds_the_urlconf_and_term_tables_and_leaves_an_http_embedder_alone(settings, monkeypatch):
    settings.EMBED_BACKEND = "http"
    monkeypatch.setattr(embedding, "get_embedder", lambda *a: pytest.fail("an http embedder was built"))
    lexical._tables.cache_clear()
    assert prefork.warm() == ["urlconf", "lexical tables"]
    assert lexical._tables.cache_info().currsize == 1


@pytest.mark.model
def test_warm_embeds_with_the_local_model_and_leaves_tokenizers_parallelism_as_it_was(settings, monkeypatch):
    settings.EMBED_BACKEND = "local"
    monkeypatch.delenv(prefork.TOKENIZERS_PARALLELISM, raising=False)
    assert prefork.warm()[-1] == "local embedder"
    assert prefork.TOKENIZERS_PARALLELISM not in os.environ
    monkeypatch.setenv(prefork.TOKENIZERS_PARALLELISM, "true")
    prefork.warm()
    assert os.environ[prefork.TOKENIZERS_PARALLELISM] == "true"


@pytest.mark.django_db(transaction=True)
def test_before_fork_closes_the_database_connection_and_freezes_the_heap():
    connection.ensure_connection()
    try:
        prefork.before_fork()
        assert connection.connection is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
