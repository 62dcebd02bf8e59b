"""The memory admin: staff only, records read-only, a record's nodes shown on its page."""

import pytest
from django.contrib.auth import get_user_model

from memory_app import services

from .conftest import prose

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw-for-tests")
    client.force_login(user)
    return client


def test_a_records_page_lists_its_nodes(staff_client, agent, run_on_commit):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200))
    listing = staff_client.get("/admin/memory_app/memory/")
    assert listing.status_code == 200 and b"alpha" in listing.content
    page = staff_client.get(f"/admin/memory_app/memory/{memory.pk}/change/")
    assert page.status_code == 200
    assert b"#0: characters 0" in page.content


def test_the_memory_admin_is_closed_to_anonymous_visitors(client, agent):
    services.archive_episode(agent=agent, text="an episode")
    response = client.get("/admin/memory_app/episode/")
    assert response.status_code == 302 and "/login/" in response["Location"]
