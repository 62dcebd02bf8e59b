"""Fixtures shared by the whole suite."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _tasks_run_synchronously():
    # Tests run django-q tasks in-process, at the moment they are enqueued;
    # one test (test_qcluster) starts a real cluster instead.
    from django_q.conf import Conf

    previous, Conf.SYNC = Conf.SYNC, True
    yield
    Conf.SYNC = previous


@pytest.fixture
def agent(db):
    from collections_app.services.agents import create_agent

    agent, _raw = create_agent(agent_id="alpha", name="Alpha")
    return agent


@pytest.fixture
def agent_key(db):
    """An agent and its raw API key."""
    from collections_app.services.agents import create_agent

    return create_agent(agent_id="keyed", name="Keyed")
