"""A WebDAV share as a collection's source (docs/sources.md): wsgidav on loopback serving a temporary
folder with HTTP Basic; built through nested folders, kept in sync by ETags (add, change, delete,
rename), refused credentials and an outage leave the last build answering."""

import os

import pytest

from collections_app.models import BuildRun, Document, Paragraph
from collections_app.services import origins, sync, sync_check
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.origins.webdav import WebDavOrigin
from tests.collections.sources_servers import WebDavServer, texts
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(tmp_path, settings):
    settings.SOURCE_ALLOWED_HOSTS = []
    settings.SOURCE_TIMEOUT = 10
    share = tmp_path / "share"
    (share / "handbook" / "travel").mkdir(parents=True)
    for name, text in HANDBOOK.items():
        target = share / "handbook" / ("travel/" + name if name == "travel.md" else name)
        target.write_text(text)
    (share / "elsewhere.md").write_text("# Outside the path\n")
    server = WebDavServer(share).start()
    yield server, share / "handbook"
    server.stop()


@pytest.fixture
def handbook(agent, served):
    server, _folder = served
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    origins.set_source(
        collection=collection,
        kind="webdav",
        settings={"url": server.url, "path": "handbook"},
        credentials={"username": "reader", "password": "pw"},
    )
    return collection


@pytest.fixture
def fetches(fetches_of):
    """The documents the webdav source downloads."""
    return fetches_of(WebDavOrigin)


def test_a_share_builds_its_folder_and_sub_folders(handbook):
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED, run.error
    names = set(Document.objects.filter(collection=handbook).values_list("name", flat=True))
    assert names == {"leave.md", "security.md", "travel/travel.md"}
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")


def test_a_sync_picks_up_an_add_a_change_a_delete_and_a_rename(handbook, served, check, fetches):
    _server, folder = served
    sync.set_sync(collection=handbook, every=5)
    assert check(handbook).build.status == BuildRun.SUCCEEDED
    fetches.clear()
    assert check(handbook).outcome == "unchanged" and fetches == []
    (folder / "canteen.md").write_text("# Canteen\n\nLunch from noon until two.\n")
    travel = folder / "travel" / "travel.md"
    travel.write_text("# Travel\n\nMileage: 0.55 per kilometre.\n")
    os.utime(travel, (travel.stat().st_atime + 10, travel.stat().st_mtime + 10))  # a new ETag for sure
    (folder / "leave.md").unlink()
    (folder / "security.md").rename(folder / "site-security.md")
    found = check(handbook)
    assert (found.new, found.changed, found.deleted) == (
        ["canteen.md", "site-security.md"],
        ["travel/travel.md"],
        ["leave.md", "security.md"],
    )
    assert found.build.status == BuildRun.SUCCEEDED
    assert sorted(fetches) == ["canteen.md", "site-security.md", "travel/travel.md"]
    assert "0.55 per kilometre" in texts(handbook, "mileage per kilometre")
    assert not Paragraph.objects.filter(collection=handbook, document__name="leave.md").exists()


def test_refused_credentials_and_an_outage_keep_the_last_build_answering(handbook, served, check):
    server, _folder = served
    sync.set_sync(collection=handbook, every=5)
    check(handbook)
    origins.set_source(
        collection=handbook,
        kind="webdav",
        settings={"url": server.url, "path": "handbook"},
        credentials={"username": "reader", "password": "wrong"},
    )
    refused = check(handbook)
    assert (
        refused.outcome.startswith(sync_check.UNREADABLE)
        and "refused the credentials (401)" in refused.outcome
    )
    failed = build_collection(collection=handbook)
    assert (
        failed.status == BuildRun.FAILED
        and "refused the credentials" in failed.error
        and "wrong" not in failed.error
    )
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")
    origins.set_source(
        collection=handbook,
        kind="webdav",
        settings={"url": server.url, "path": "handbook"},
        credentials={"username": "reader", "password": "pw"},
    )
    server.stop()
    away = check(handbook)
    assert away.outcome.startswith(sync_check.UNREADABLE) and "could not be reached" in away.outcome
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")
    server.start()
    assert check(handbook).outcome == "unchanged"


def test_a_missing_folder_fails_and_empties_nothing(handbook, served):
    server, _folder = served
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    origins.set_source(collection=handbook, kind="webdav", settings={"url": server.url, "path": "nowhere"})
    gone = build_collection(collection=handbook)
    assert gone.status == BuildRun.FAILED and "webdav source" in gone.error
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")


def test_the_admin_page_names_the_source_and_its_last_check_never_its_credentials(
    handbook, served, check, admin_client
):
    server, _folder = served
    sync.set_sync(collection=handbook, every=5)
    check(handbook)
    server.stop()
    check(handbook)
    page = admin_client.get(f"/admin/collections_app/collection/{handbook.pk}/change/").content.decode()
    assert "the WebDAV share: url " in page and "path handbook (credentials set)" in page
    assert "the source cannot be read: the webdav source could not be reached" in page
    assert "reader" not in page.split("the WebDAV share")[1][:200] and ":pw" not in page


def test_a_document_over_the_size_limit_is_refused_by_name_without_a_download(
    handbook, served, check, fetches
):
    from collections_app.services.sources import MAX_DOCUMENT_BYTES

    _server, folder = served
    with (folder / "huge.txt").open("wb") as handle:
        handle.truncate(MAX_DOCUMENT_BYTES + 1)  # sparse: the listing says its size
    sync.set_sync(collection=handbook, every=5)
    first = check(handbook)
    assert first.build.status == BuildRun.SUCCEEDED and "huge.txt" in first.build.refused
    assert "huge.txt" not in fetches
    assert check(handbook).outcome == "unchanged"  # refused, and not seen as changed at every check


def test_a_server_that_never_answers_is_given_up_after_source_timeout(agent, settings):
    import socket
    import time

    settings.SOURCE_TIMEOUT = 1
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers a request
        port = silent.getsockname()[1]
        collection = create_collection(agent=agent, name="silent")
        origins.set_source(
            collection=collection, kind="webdav", settings={"url": f"http://127.0.0.1:{port}/"}
        )
        started = time.monotonic()
        failed = build_collection(collection=collection)
    assert failed.status == BuildRun.FAILED and "could not be reached (ReadTimeout)" in failed.error
    assert time.monotonic() - started < 10
