"""Permissions a source carries become reader labels (docs/sources.md, "Permissions"): an S3 object's
`readers` tag on moto's real S3 server, mapped through the identity-provider groups' labels. A change of
the tag alone re-labels the document without downloading or embedding it; a person's own label stays;
and a reader's answer equals the twin collection's holding only what the reader may read."""

import pytest

from collections_app.models import BuildRun, IdpGroup, Label, Paragraph
from collections_app.services import origins, sync
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.origins.readers import UNMAPPED_LABEL
from collections_app.services.search import search_collection
from tests.collections.test_source_s3 import BUCKET, PREFIX, fetches, served  # noqa: F401 (fixtures)
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db


def tag(bucket, name, value):
    bucket.put_object_tagging(
        Bucket=BUCKET, Key=PREFIX + name, Tagging={"TagSet": [{"Key": "readers", "Value": value}]}
    )


def labels_of(collection, name):
    return set(
        Paragraph.labels.through.objects.filter(
            paragraph__collection=collection, paragraph__document__name=name
        ).values_list("label__name", flat=True)
    )


@pytest.fixture
def mapped(db):
    hr, staff = Label.objects.create(name="hr"), Label.objects.create(name="staff")
    IdpGroup.objects.create(name="hr-team").labels.add(hr)
    IdpGroup.objects.create(name="everyone").labels.add(staff)
    return hr, staff


def s3_collection(agent, server, name, prefix=PREFIX):
    collection = create_collection(agent=agent, name=name, method="fixed", size=80, per_reader=True)
    origins.set_source(
        collection=collection,
        kind="s3",
        settings={"endpoint_url": server.url, "bucket": BUCKET, "prefix": prefix},
        credentials={"access_key_id": "AKIDTEST", "secret_access_key": "test-secret"},
    )
    return collection


def test_a_tag_change_alone_relabels_without_a_download_or_an_embedding(
    agent,
    served,  # noqa: F811
    mapped,
    check,
    fetches,  # noqa: F811
):
    server, bucket = served
    hr, _staff = mapped
    tag(bucket, "leave.md", "hr-team")
    tag(bucket, "travel.md", "everyone nobody-mapped")
    handbook = s3_collection(agent, server, "handbook")
    sync.set_sync(collection=handbook, every=5)
    first = check(handbook)
    assert first.build.status == BuildRun.SUCCEEDED
    assert labels_of(handbook, "leave.md") == {"hr"} and labels_of(handbook, "travel.md") == {"staff"}
    assert labels_of(handbook, "security.md") == set()
    assert any("nobody-mapped" in w for w in first.build.warnings)
    # A person's own label on a paragraph the source will stop labelling.
    own = Label.objects.create(name="own")
    kept = Paragraph.objects.filter(collection=handbook, document__name="leave.md").first()
    kept.labels.add(own)
    fetches.clear()
    assert check(handbook).outcome == "unchanged" and fetches == []
    tag(bucket, "leave.md", "everyone")
    tag(bucket, "security.md", "hr-team")
    found = check(handbook)
    assert found.relabelled == ["leave.md", "security.md"] and found.changed == []
    run = found.build
    assert run.status == BuildRun.SUCCEEDED
    assert fetches == [] and run.paragraphs_embedded == 0 and run.documents_read == 0
    assert run.documents_relabelled == 2
    assert labels_of(handbook, "leave.md") == {"staff", "own"}
    assert set(kept.labels.values_list("name", flat=True)) == {"staff", "own"}
    assert labels_of(handbook, "security.md") == {"hr"}
    # The admin's mapping changing re-labels too.
    IdpGroup.objects.get(name="hr-team").labels.set([Label.objects.create(name="people")])
    again = check(handbook)
    assert again.relabelled == ["security.md"] and labels_of(handbook, "security.md") == {"people"}
    assert hr.pk not in Paragraph.labels.through.objects.values_list("label_id", flat=True)


def test_the_twin_rule_holds_for_labels_from_the_source(
    agent,
    served,  # noqa: F811
    mapped,
):
    server, bucket = served
    tag(bucket, "leave.md", "hr-team")
    tag(bucket, "travel.md", "everyone")
    for name, text in HANDBOOK.items():  # the twin: only what a staff reader may read
        if name != "leave.md":
            bucket.put_object(Bucket=BUCKET, Key="twin/" + name, Body=text.encode())
    bucket.put_object_tagging(
        Bucket=BUCKET, Key="twin/travel.md", Tagging={"TagSet": [{"Key": "readers", "Value": "everyone"}]}
    )
    labelled = s3_collection(agent, server, "labelled")
    twin = s3_collection(agent, server, "twin", prefix="twin/")
    assert build_collection(collection=labelled).status == BuildRun.SUCCEEDED
    assert build_collection(collection=twin).status == BuildRun.SUCCEEDED
    create_reader(external_id="sam", labels=["staff"])
    compared = 0
    for reader in ("sam", "ghost"):
        for question in ("annual leave days", "mileage per kilometre", "laptops encryption", "holiday"):
            answers = [  # the whole answer: texts, scores, ids, passages, order, its own fields
                search_collection(
                    agent=agent, collection=c, question=question, reader=reader, min_score=0, around=1
                )
                for c in (labelled, twin)
            ]
            assert answers[0] == answers[1], (reader, question)
            compared += 1
    assert compared == 8


def test_a_document_whose_groups_are_all_unmapped_is_read_by_no_reader_until_they_are_mapped(
    agent,
    served,  # noqa: F811
    mapped,
    check,
    fetches,  # noqa: F811
):
    server, bucket = served
    hr, staff = mapped
    tag(bucket, "leave.md", "board")  # a group the admin has not mapped
    handbook = s3_collection(agent, server, "handbook")
    sync.set_sync(collection=handbook, every=5)
    first = check(handbook)
    assert first.build.status == BuildRun.SUCCEEDED
    assert labels_of(handbook, "leave.md") == {UNMAPPED_LABEL}
    assert any("board" in w and "held from every reader" in w for w in first.build.warnings)
    create_reader(external_id="sam", labels=["hr", "staff"])
    create_reader(external_id="anyone", labels=[])

    def documents_read_by(reader):
        answer = search_collection(
            agent=agent,
            collection="handbook",
            question="How many leave days carry over?",
            reader=reader,
            most=10,
            min_score=0.0,
        )
        return {paragraph["document"] for paragraph in answer["paragraphs"]}

    assert "leave.md" not in documents_read_by("sam") | documents_read_by("anyone")
    assert "travel.md" in documents_read_by("anyone")  # an untagged document stays open
    # The admin maps the group: the next check re-labels it, with nothing downloaded or embedded.
    IdpGroup.objects.create(name="board").labels.add(hr)
    fetches.clear()
    found = check(handbook)
    assert found.relabelled == ["leave.md"] and fetches == [] and found.build.paragraphs_embedded == 0
    assert labels_of(handbook, "leave.md") == {"hr"}
    assert "leave.md" in documents_read_by("sam") and "leave.md" not in documents_read_by("anyone")


def test_git_path_rules_and_a_folders_posix_group_give_labels(agent, tmp_path, settings, mapped):
    import grp
    import os

    from tests.collections.sources_servers import GitDaemon, Repository

    settings.SOURCE_CACHE_DIR = str(tmp_path / "cache")
    settings.SOURCE_ALLOWED_HOSTS = []
    repository = Repository(tmp_path / "repos")
    repository.commit({f"hr/{n}": t for n, t in HANDBOOK.items()} | {"open/readme.md": "# Open\n\nHello.\n"})
    daemon = GitDaemon(tmp_path / "repos").start()
    try:
        repo = create_collection(agent=agent, name="repo", method="fixed", size=80, per_reader=True)
        origins.set_source(
            collection=repo,
            kind="git",
            settings={"url": daemon.url(), "reader_rules": [{"path": "hr/**", "readers": ["hr-team"]}]},
        )
        assert build_collection(collection=repo).status == BuildRun.SUCCEEDED
        assert labels_of(repo, "hr/leave.md") == {"hr"} and labels_of(repo, "open/readme.md") == set()
    finally:
        daemon.stop()
    with pytest.raises(origins.InvalidSource):
        origins.set_source(collection=repo, kind="git", settings={"url": daemon.url(), "reader_rules": "hr"})
    # A folder whose files' POSIX group names the readers (this test runs as root: chown works).
    if os.geteuid() != 0:
        pytest.skip("changing a file's group needs root")
    folder = tmp_path / "shared"
    folder.mkdir()
    for name, text in HANDBOOK.items():
        (folder / name).write_text(text)
    IdpGroup.objects.create(name=grp.getgrgid(1).gr_name).labels.add(mapped[0])  # "daemon" -> hr
    os.chown(folder / "leave.md", -1, 1)
    os.chmod(folder / "leave.md", 0o640)  # not readable by others: its group names its readers
    settings.KNOWLEDGE_ROOT = str(tmp_path)
    os.environ["KNOWLEDGE_ALPHA__SHARED_FOLDER"] = str(folder)
    try:
        shared = create_collection(agent=agent, name="shared", method="fixed", size=80, per_reader=True)
        origins.set_source(collection=shared, kind="folder", settings={"readers_from_group": True})
        assert build_collection(collection=shared).status == BuildRun.SUCCEEDED
        # travel.md is readable by others (0644): open to every reader, whatever its group.
        assert labels_of(shared, "leave.md") == {"hr"} and labels_of(shared, "travel.md") == set()
        os.chown(folder / "leave.md", -1, 0)  # group root, mapped to nothing: held from every reader
        os.chown(folder / "travel.md", -1, 1)
        os.chmod(folder / "travel.md", 0o640)
        again = build_collection(collection=shared)
        assert again.paragraphs_embedded == 0 and again.documents_relabelled == 2
        assert labels_of(shared, "leave.md") == {UNMAPPED_LABEL} and labels_of(shared, "travel.md") == {"hr"}
        os.chmod(folder / "leave.md", 0o644)  # a chmod alone re-labels: open again
        third = build_collection(collection=shared)
        assert third.documents_relabelled == 1 and labels_of(shared, "leave.md") == set()
    finally:
        del os.environ["KNOWLEDGE_ALPHA__SHARED_FOLDER"]


def test_changing_a_webdav_sources_reader_rules_relabels_without_a_download(
    agent,
    tmp_path,
    settings,
    mapped,
    check,
    fetches_of,
):
    from collections_app.services.origins.webdav import WebDavOrigin
    from tests.collections.sources_servers import WebDavServer

    settings.SOURCE_ALLOWED_HOSTS = []
    share = tmp_path / "share"
    (share / "hr").mkdir(parents=True)
    for name, text in HANDBOOK.items():
        (share / "hr" / name).write_text(text)
    server = WebDavServer(share).start()
    fetched = fetches_of(WebDavOrigin)
    try:
        dav = create_collection(agent=agent, name="dav", method="fixed", size=80, per_reader=True)
        rules = {"url": server.url, "reader_rules": [{"path": "hr/leave.md", "readers": ["hr-team"]}]}
        origins.set_source(
            collection=dav,
            kind="webdav",
            settings=rules,
            credentials={"username": "reader", "password": "pw"},
        )
        sync.set_sync(collection=dav, every=5)
        assert check(dav).build.status == BuildRun.SUCCEEDED and len(fetched) == 3
        assert labels_of(dav, "hr/leave.md") == {"hr"} and labels_of(dav, "hr/travel.md") == set()
        fetched.clear()
        rules["reader_rules"] = [{"path": "hr/*", "readers": ["everyone"]}]
        origins.set_source(collection=dav, kind="webdav", settings=rules)
        found = check(dav)
        assert found.relabelled == ["hr/leave.md", "hr/security.md", "hr/travel.md"] and fetched == []
        assert found.build.paragraphs_embedded == 0 and found.build.documents_relabelled == 3
        assert labels_of(dav, "hr/leave.md") == {"staff"} and labels_of(dav, "hr/travel.md") == {"staff"}
    finally:
        server.stop()


def test_a_documents_admin_page_shows_its_sources_readers_and_their_labels(
    agent,
    served,  # noqa: F811
    mapped,
    admin_client,
):
    from collections_app.models import Document

    server, bucket = served
    tag(bucket, "leave.md", "hr-team")
    tag(bucket, "travel.md", "nobody-mapped")
    handbook = s3_collection(agent, server, "handbook")
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    shown = {}
    for document in Document.objects.filter(collection=handbook):
        page = admin_client.get(f"/admin/collections_app/document/{document.pk}/change/")
        assert page.status_code == 200
        text = page.content.decode()
        assert "Readers from its source" in text
        shown[document.name] = text
    assert 'data-role="source-readers">groups hr-team &rarr; labels hr</span>' in shown["leave.md"]
    assert (
        "groups nobody-mapped &rarr; no group is mapped to a label: held from every reader "
        f"(label {UNMAPPED_LABEL}) until one is" in shown["travel.md"]
    )
    assert "none: its source names no readers" in shown["security.md"]
    # Where it came from is the collection's origin, not "folder"; no sidecar is asked for beside a file.
    assert '<div class="readonly">S3 bucket</div>' in shown["leave.md"]
    assert "sidecars are not read" in shown["leave.md"] and ".meta.json beside" not in shown["leave.md"]
    listing = admin_client.get("/admin/collections_app/document/").content.decode()
    assert '<td class="field-origin_shown">S3 bucket</td>' in listing


def test_changing_a_git_sources_reader_rules_relabels_without_a_download(
    agent, mapped, check, fetches_of, remote_handbook
):
    from collections_app.services.origins.git import GitOrigin

    fetched = fetches_of(GitOrigin)
    where, _credentials = remote_handbook("git")
    repo = create_collection(agent=agent, name="repo", method="fixed", size=80, per_reader=True)
    rules = {**where, "reader_rules": [{"path": "leave.md", "readers": ["hr-team"]}]}
    origins.set_source(collection=repo, kind="git", settings=rules)
    sync.set_sync(collection=repo, every=5)
    assert check(repo).build.status == BuildRun.SUCCEEDED and len(fetched) == 3
    assert labels_of(repo, "leave.md") == {"hr"} and labels_of(repo, "travel.md") == set()
    fetched.clear()
    rules["reader_rules"] = [{"path": "*.md", "readers": ["everyone"]}]
    origins.set_source(collection=repo, kind="git", settings=rules)
    found = check(repo)
    assert found.relabelled == ["leave.md", "security.md", "travel.md"] and found.changed == []
    assert fetched == [] and found.build.paragraphs_embedded == 0 and found.build.documents_relabelled == 3
    assert labels_of(repo, "leave.md") == {"staff"} and labels_of(repo, "travel.md") == {"staff"}
