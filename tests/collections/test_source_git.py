"""A git repository as a collection's source (docs/sources.md): a bare repository made here, served by a
real `git daemon` on loopback, built, kept in sync (add, change, delete, rename), and an outage that
leaves the last build answering."""

import pytest

from collections_app.models import BuildRun, Document, Paragraph, Webhook
from collections_app.services import origins, sync, sync_check, webhooks
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.origins.git import GitOrigin
from tests.collections.sources_servers import GitDaemon, Repository, texts
from tests.conftest import HANDBOOK
from tests.servers import WebhookReceiver, serving

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(tmp_path, settings):
    settings.SOURCE_CACHE_DIR = str(tmp_path / "cache")
    settings.SOURCE_ALLOWED_HOSTS = []  # loopback only
    settings.SOURCE_TIMEOUT = 15
    repository = Repository(tmp_path / "repos")
    repository.commit(
        {**{f"handbook/{n}": t for n, t in HANDBOOK.items()}, "README.md": "# Not a document here\n"}
    )
    daemon = GitDaemon(tmp_path / "repos").start()
    yield repository, daemon
    daemon.stop()


@pytest.fixture
def handbook(agent, served):
    _repository, daemon = served
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    origins.set_source(
        collection=collection,
        kind="git",
        settings={"url": daemon.url(), "branch": "main", "path": "handbook"},
    )
    return collection


@pytest.fixture
def fetches(fetches_of):
    """The documents the git source downloads."""
    return fetches_of(GitOrigin)


def test_a_git_source_builds_the_branch_under_its_path(handbook, served):
    repository, _daemon = served
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED, run.error
    documents = {d.name: d for d in Document.objects.filter(collection=handbook)}
    assert set(documents) == {"leave.md", "security.md", "travel.md"}  # README.md is outside handbook/
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")
    assert documents["travel.md"].source_token == _blob_id(repository, "handbook/travel.md")


def test_a_sync_picks_up_an_add_a_change_a_delete_and_a_rename_in_one_build(handbook, served, check):
    repository, _daemon = served
    sync.set_sync(collection=handbook, every=5)
    first = check(handbook)
    assert first.never_built and first.build.status == BuildRun.SUCCEEDED
    repository.commit(
        {
            "handbook/canteen.md": "# Canteen\n\nThe canteen serves lunch from noon until two.\n",
            "handbook/travel.md": "# Travel\n\nMileage is reimbursed at 0.55 per kilometre.\n",
            "handbook/leave.md": None,
        }
    )
    repository.move("handbook/security.md", "handbook/site-security.md")
    found = check(handbook)
    assert (found.new, found.changed, found.deleted) == (
        ["canteen.md", "site-security.md"],
        ["travel.md"],
        ["leave.md", "security.md"],
    )
    assert found.build.status == BuildRun.SUCCEEDED and found.build.requested_by == "sync"
    assert "noon until two" in texts(handbook, "when does the canteen serve lunch")
    mileage = texts(handbook, "mileage per kilometre")
    assert "0.55 per kilometre" in mileage and "0.42" not in mileage
    assert not Paragraph.objects.filter(collection=handbook, document__name="leave.md").exists()
    # The renamed document is the same text: its paragraphs are not embedded again.
    fresh = Paragraph.objects.filter(collection=handbook, document__name__in=["canteen.md", "travel.md"])
    assert found.build.paragraphs_embedded == fresh.count()
    assert "encryption" in texts(handbook, "laptops full-disk encryption")
    assert check(handbook).outcome == "unchanged"


def test_an_unchanged_source_downloads_nothing_and_a_change_downloads_only_itself(
    handbook, served, check, fetches
):
    repository, _daemon = served
    sync.set_sync(collection=handbook, every=5)
    check(handbook)
    assert sorted(fetches) == ["leave.md", "security.md", "travel.md"]
    fetches.clear()
    assert check(handbook).outcome == "unchanged" and fetches == []
    rebuilt = build_collection(collection=handbook)  # a build asked by a person: nothing changed
    assert rebuilt.status == BuildRun.SUCCEEDED and fetches == [] and rebuilt.documents_reused == 3
    repository.commit({"handbook/travel.md": "# Travel\n\nTrains are booked in first class.\n"})
    changed = check(handbook)
    assert changed.changed == ["travel.md"] and fetches == ["travel.md"]
    assert changed.build.documents_reused == 2 and changed.build.documents_read == 1


def test_an_outage_keeps_the_last_build_answering_and_says_so(agent, handbook, served, check, settings):
    repository, daemon = served
    settings.WEBHOOK_ALLOW_PRIVATE = True
    sync.set_sync(collection=handbook, every=5)
    check(handbook)
    with serving(WebhookReceiver()) as receiver:
        Webhook.objects.create(
            agent=agent, url=webhooks.validate_url(receiver.url), events=[Webhook.SYNC_FAILED]
        )
        daemon.stop()
        away = check(handbook)
        assert away.outcome.startswith(sync_check.UNREADABLE) and "git source" in away.outcome
        assert away.build is None
        assert [r for r in receiver.requests if b"sync.failed" in r["body"]]
        # A build asked meanwhile fails, says why, and the collection keeps answering.
        failed = build_collection(collection=handbook)
        assert failed.status == BuildRun.FAILED and "git source" in failed.error
        assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")
        assert Document.objects.filter(collection=handbook).count() == 3
        daemon.start()
        repository.commit(
            {"handbook/travel.md": "# Travel\n\nMileage is reimbursed at 0.60 per kilometre.\n"}
        )
        back = check(handbook)
    assert back.build is not None and back.build.status == BuildRun.SUCCEEDED
    assert "0.60 per kilometre" in texts(handbook, "mileage per kilometre")


def test_a_source_over_the_document_cap_fails_its_build_and_keeps_the_collection(handbook, settings):
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    settings.SOURCE_MAX_DOCUMENTS = 2
    over = build_collection(collection=handbook)
    assert over.status == BuildRun.FAILED and "SOURCE_MAX_DOCUMENTS" in over.error
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")


@pytest.mark.parametrize(
    "url, why",
    [
        ("file:///srv/repos/docs.git", "not file"),
        ("ssh://127.0.0.1/docs.git", "not ssh"),
        ("ext::sh -c touch% pwned", "not ext"),
        ("https://user:secret@127.0.0.1/docs.git", "without a user name or password"),
        ("https://192.0.2.10/docs.git", "SOURCE_ALLOWED_HOSTS is empty"),
    ],
)
def test_only_network_urls_to_allowed_hosts_are_taken(agent, settings, url, why):
    settings.SOURCE_ALLOWED_HOSTS = []
    collection = create_collection(agent=agent, name="repo")
    with pytest.raises(origins.InvalidSource) as refused:
        origins.set_source(collection=collection, kind="git", settings={"url": url})
    assert why in refused.value.message and "secret" not in refused.value.message


def test_an_allow_list_admits_its_hosts_and_networks(agent, settings):
    collection = create_collection(agent=agent, name="repo")
    settings.SOURCE_ALLOWED_HOSTS = ["192.0.2.0/24"]
    origins.set_source(collection=collection, kind="git", settings={"url": "https://192.0.2.10/docs.git"})
    settings.SOURCE_ALLOWED_HOSTS = ["*"]  # any public host, not a private one
    with pytest.raises(origins.InvalidSource):
        origins.set_source(collection=collection, kind="git", settings={"url": "https://10.0.0.7/docs.git"})


def test_a_branch_that_reads_as_an_option_is_refused(agent):
    collection = create_collection(agent=agent, name="repo")
    with pytest.raises(origins.InvalidSource):
        origins.set_source(
            collection=collection,
            kind="git",
            settings={"url": "git://127.0.0.1/docs.git", "branch": "--upload-pack=touch"},
        )


def _blob_id(repository, path: str) -> str:
    from tests.collections.sources_servers import git

    return git("rev-parse", f"HEAD:{path}", cwd=repository.work)


def test_refused_credentials_keep_the_last_build_answering_and_say_so(
    agent, tmp_path, served, check, settings
):
    """git http-backend behind HTTP Basic: the right password builds; a wrong one is refused, the
    sync check says so (and the agent's hook hears `source_refused`), a build fails naming it, and the
    collection keeps answering."""
    import json

    from tests.collections.sources_servers import GitHttp

    settings.WEBHOOK_ALLOW_PRIVATE = True
    server = GitHttp(tmp_path / "repos").start()
    receiver = WebhookReceiver()
    try:
        Webhook.objects.create(
            agent=agent, url=webhooks.validate_url(receiver.url), events=[Webhook.SYNC_FAILED]
        )
        collection = create_collection(agent=agent, name="private", method="fixed", size=80)
        where = {"url": server.url(), "branch": "main", "path": "handbook"}
        origins.set_source(
            collection=collection,
            kind="git",
            settings=where,
            credentials={"username": "reader", "password": "pw"},
        )
        sync.set_sync(collection=collection, every=5)
        assert check(collection).build.status == BuildRun.SUCCEEDED
        origins.set_source(
            collection=collection,
            kind="git",
            settings=where,
            credentials={"username": "reader", "password": "no"},
        )
        with serving(receiver):
            refused = check(collection)
        assert refused.outcome.startswith(sync_check.UNREADABLE) and refused.build is None
        assert "git source refused the credentials" in refused.outcome
        [told] = [json.loads(r["body"]) for r in receiver.requests]
        assert told["event"] == "sync.failed" and told["data"]["sync"]["reason"] == "source_refused"
        assert "could not read Username" in refused.outcome  # git was refused, and may not ask
        with pytest.raises(origins.SourceUnavailable) as said:
            origins.origin_of(collection).entries()
        assert said.value.code == "source_refused"  # as S3 and WebDAV say it
        failed = build_collection(collection=collection)
        assert failed.status == BuildRun.FAILED and "git source" in failed.error and "pw" not in failed.error
        assert "0.42 per kilometre" in texts(collection, "mileage per kilometre")
        assert Document.objects.filter(collection=collection).count() == 3
    finally:
        server.stop()


def test_the_repositorys_copy_goes_with_its_source_and_with_the_collection(
    agent, handbook, served, settings, django_capture_on_commit_callbacks
):
    """A node's copy holds every file the repository had: it must not outlive what it was fetched for."""
    from pathlib import Path

    from collections_app.services.documents import delete_collection
    from collections_app.tasks import sweep_sync

    _repository, daemon = served
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    copy = Path(settings.SOURCE_CACHE_DIR) / f"collection-{handbook.pk}.git"
    assert copy.is_dir()

    # Another branch of the same repository keeps the copy; another repository drops it.
    with django_capture_on_commit_callbacks(execute=True):
        origins.set_source(collection=handbook, kind="git", settings={"url": daemon.url(), "branch": "x"})
    assert copy.is_dir()
    with django_capture_on_commit_callbacks(execute=True):
        origins.set_source(collection=handbook, kind="git", settings={"url": daemon.url("other.git")})
    assert not copy.is_dir()

    # A copy a deletion elsewhere left behind goes at the next sync sweep; a live collection's stays.
    origins.set_source(collection=handbook, kind="git", settings={"url": daemon.url(), "branch": "main"})
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    stray = Path(settings.SOURCE_CACHE_DIR) / "collection-987654.git"
    stray.mkdir()
    sweep_sync()
    assert not stray.exists() and copy.is_dir()

    delete_collection(collection=handbook)
    assert not copy.exists()
