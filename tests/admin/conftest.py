"""Fixtures for the admin tests: built collections, users of each kind, uploads kept in a temporary folder."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from collections_app.models import BuildRun, Collection
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK

from .browser import page  # noqa: F401  (the chromium page fixture for the browser tests)

# Two documents whose paragraphs differ only in their numbers: the build puts both in review.
CONFLICTING = {
    "policy-2023.md": "# Leave\n\nCarry-over of annual leave is capped at 5 days in every calendar year.\n",
    "policy-2024.md": "# Leave\n\nCarry-over of annual leave is capped at 10 days in every calendar year.\n",
}


def url(name, *args, query=""):
    return reverse(f"admin:collections_app_{name}", args=args) + (f"?{query}" if query else "")


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Builds are enqueued on commit; these tests run inside a transaction that never commits."""
    return django_capture_on_commit_callbacks


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture(autouse=True)
def _uploads_in_a_temporary_folder(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media-root"


def make_built(
    agent, knowledge_folder, name: str, files: dict, *, outcome: str = BuildRun.SUCCEEDED, **options
) -> Collection:
    collection = create_collection(agent=agent, name=name, **{"method": "fixed", "size": 80, **options})
    knowledge_folder(name, files, agent=agent.agent_id)
    run = build_collection(collection=collection)
    assert run.status == outcome, run.error
    return collection


@pytest.fixture
def handbook(agent, knowledge_folder):
    return make_built(agent, knowledge_folder, "handbook", HANDBOOK, built_from="the HR share")


@pytest.fixture
def conflicting(agent, knowledge_folder):
    """Both documents in review: the first build is refused (nothing to answer from), its documents kept."""
    return make_built(agent, knowledge_folder, "policies", CONFLICTING, outcome=BuildRun.REFUSED)


@pytest.fixture
def staff_user(django_user_model):
    """Staff, but holding no permission at all."""
    return django_user_model.objects.create_user("clerk", password="pw-clerk-123", is_staff=True)


@pytest.fixture
def plain_user(django_user_model):
    return django_user_model.objects.create_user("visitor", password="pw-visitor-123")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, so a fixture can tell at teardown whether the test
    failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
