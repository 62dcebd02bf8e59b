"""Fixtures for memory tests: a small-window deterministic embedder, agents, and text makers.

Unless a test is marked `model`, the embedder is the "hash" testing backend with a 40-token
window (38 words), so a few hundred words make a record of several nodes.
"""

import random

import pytest

from ragsite.embedders import HashEmbedder

WINDOW = 40
DIMENSIONS = 256

WORDS = (
    "river stone lantern harbor meadow copper signal orchard glacier timber compass ember "
    "falcon quartz willow beacon canyon violet thunder marble saddle pepper cobalt walnut "
    "anchor prism tundra velvet osprey cinder maple harvest nebula juniper summit lagoon"
).split()


@pytest.fixture(autouse=True)
def embedder(request, monkeypatch, settings):
    """The hash embedder with a small window, patched where every service looks it up."""
    if request.node.get_closest_marker("model"):
        yield None
        return
    settings.EMBED_BACKEND = "hash"
    small = HashEmbedder(dimensions=DIMENSIONS, window=WINDOW)
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: small)
    yield small


@pytest.fixture
def other_agent(db):
    from collections_app.services.agents import create_agent

    agent, _raw = create_agent(agent_id="beta", name="Beta")
    return agent


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Call `run_on_commit(fn, **kwargs)`: fn runs, then its on-commit callbacks (the queued tasks)."""

    def run(function, /, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return function(**kwargs)

    return run


def prose(words: int, seed: int = 0, vocabulary=WORDS) -> str:
    """Deterministic prose of about `words` words: sentences of 5-12 words, paragraphs of 3-5 sentences."""
    rng = random.Random(seed)
    paragraphs, sentences, count = [], [], 0
    while count < words:
        length = rng.randint(5, 12)
        sentence = " ".join(rng.choice(vocabulary) for _ in range(length))
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        count += length
        if len(sentences) >= rng.randint(3, 5):
            paragraphs.append(" ".join(sentences))
            sentences = []
    if sentences:
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)
