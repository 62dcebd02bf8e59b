"""Fixtures the collections tests share."""

import pytest

from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK


@pytest.fixture
def handbook(agent, knowledge_folder):
    """The small handbook, built in fixed pieces of 80 characters (a module may define its own)."""
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    return collection
