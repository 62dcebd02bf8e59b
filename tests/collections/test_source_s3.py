"""An S3-compatible bucket as a collection's source (docs/sources.md): moto's S3 server on loopback,
driven by boto3 exactly as AWS would be; built, kept in sync by ETags, and an outage that leaves the
last build answering. Credentials are sealed at rest and never shown."""

import pytest
from django.db import connection

from collections_app.models import BuildRun, CollectionSource, Document, Paragraph
from collections_app.services import origins, sync, sync_check
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.origins.s3 import S3Origin
from tests.collections.sources_servers import S3Server, texts
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db
BUCKET, PREFIX = "handbook-bucket", "policies/"


@pytest.fixture
def served(settings):
    settings.SOURCE_ALLOWED_HOSTS = []  # loopback only
    settings.SOURCE_TIMEOUT = 5
    server = S3Server().start()
    server.reset()
    bucket = server.client()
    bucket.create_bucket(Bucket=BUCKET)
    for name, text in HANDBOOK.items():
        bucket.put_object(Bucket=BUCKET, Key=PREFIX + name, Body=text.encode())
    bucket.put_object(Bucket=BUCKET, Key="elsewhere/other.md", Body=b"# Outside the prefix\n")
    bucket.put_object(Bucket=BUCKET, Key=PREFIX + "archive/", Body=b"")  # a console's folder marker
    yield server, bucket
    server.stop()


@pytest.fixture
def handbook(agent, served):
    server, _bucket = served
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    origins.set_source(
        collection=collection,
        kind="s3",
        settings={"endpoint_url": server.url, "bucket": BUCKET, "prefix": PREFIX, "region": "us-east-1"},
        credentials={"access_key_id": "AKIDTEST", "secret_access_key": "test-secret"},
    )
    return collection


@pytest.fixture
def fetches(fetches_of):
    """The documents the s3 source downloads."""
    return fetches_of(S3Origin)


def test_a_bucket_builds_the_objects_under_its_prefix(handbook, served):
    _server, bucket = served
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED, run.error
    documents = {d.name: d for d in Document.objects.filter(collection=handbook)}
    assert set(documents) == {"leave.md", "security.md", "travel.md"}
    etag = bucket.head_object(Bucket=BUCKET, Key=PREFIX + "travel.md")["ETag"].strip('"')
    assert documents["travel.md"].source_token == etag
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")


def test_a_sync_picks_up_an_add_a_change_a_delete_and_a_rename(handbook, served, check, fetches):
    _server, bucket = served
    sync.set_sync(collection=handbook, every=5)
    assert check(handbook).build.status == BuildRun.SUCCEEDED
    fetches.clear()
    assert check(handbook).outcome == "unchanged" and fetches == []  # the listing's ETags sufficed
    bucket.put_object(
        Bucket=BUCKET, Key=PREFIX + "canteen.md", Body=b"# Canteen\n\nLunch from noon until two.\n"
    )
    bucket.put_object(
        Bucket=BUCKET, Key=PREFIX + "travel.md", Body=b"# Travel\n\nMileage: 0.55 per kilometre.\n"
    )
    bucket.delete_object(Bucket=BUCKET, Key=PREFIX + "leave.md")
    bucket.copy_object(  # S3 has no rename: a copy under the new key, then the old one deleted
        Bucket=BUCKET,
        Key=PREFIX + "site-security.md",
        CopySource={"Bucket": BUCKET, "Key": PREFIX + "security.md"},
    )
    bucket.delete_object(Bucket=BUCKET, Key=PREFIX + "security.md")
    found = check(handbook)
    assert (found.new, found.changed, found.deleted) == (
        ["canteen.md", "site-security.md"],
        ["travel.md"],
        ["leave.md", "security.md"],
    )
    assert found.build.status == BuildRun.SUCCEEDED
    assert sorted(fetches) == ["canteen.md", "site-security.md", "travel.md"]  # only what changed
    assert "noon until two" in texts(handbook, "when does the canteen serve lunch")
    assert "0.55 per kilometre" in texts(handbook, "mileage per kilometre")
    assert not Paragraph.objects.filter(collection=handbook, document__name="leave.md").exists()
    fresh = Paragraph.objects.filter(collection=handbook, document__name__in=["canteen.md", "travel.md"])
    assert found.build.paragraphs_embedded == fresh.count()  # the renamed text is not embedded again


def test_an_outage_keeps_the_last_build_answering(handbook, served, check):
    server, bucket = served
    sync.set_sync(collection=handbook, every=5)
    check(handbook)
    server.stop()
    away = check(handbook)
    assert away.outcome.startswith(sync_check.UNREADABLE) and "s3 source could not be reached" in away.outcome
    failed = build_collection(collection=handbook)
    assert failed.status == BuildRun.FAILED and "s3 source" in failed.error
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")
    server.start()
    bucket.put_object(
        Bucket=BUCKET, Key=PREFIX + "travel.md", Body=b"# Travel\n\nMileage: 0.60 per kilometre.\n"
    )
    back = check(handbook)
    assert back.build.status == BuildRun.SUCCEEDED and "0.60" in texts(handbook, "mileage per kilometre")


def test_a_missing_bucket_fails_the_build_and_empties_nothing(handbook, served):
    _server, bucket = served
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    for item in bucket.list_objects_v2(Bucket=BUCKET)["Contents"]:
        bucket.delete_object(Bucket=BUCKET, Key=item["Key"])
    emptied = build_collection(collection=handbook)
    assert emptied.status == BuildRun.FAILED and "lists no documents" in emptied.error
    bucket.delete_bucket(Bucket=BUCKET)
    gone = build_collection(collection=handbook)
    assert gone.status == BuildRun.FAILED and "NoSuchBucket" in gone.error
    assert "0.42 per kilometre" in texts(handbook, "mileage per kilometre")


def test_credentials_are_sealed_at_rest_and_never_shown(handbook):
    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials, settings FROM collections_app_collectionsource")
        [(stored, settings)] = cursor.fetchall()
    assert stored.startswith("fernet:") and "test-secret" not in stored and "AKIDTEST" not in stored
    assert "test-secret" not in str(settings)
    shown = origins.describe(handbook)
    assert shown["kind"] == "s3" and shown["credentials"] is True and "test-secret" not in str(shown)
    # Setting the kind again without credentials keeps them; {} clears them.
    origins.set_source(collection=handbook, kind="s3", settings=shown["settings"])
    assert CollectionSource.objects.get(collection=handbook).credentials
    origins.set_source(collection=handbook, kind="s3", settings=shown["settings"], credentials={})
    assert origins.describe(handbook)["credentials"] is False


@pytest.mark.parametrize(
    "given, why",
    [
        ({"bucket": BUCKET, "endpoint_url": "file:///tmp"}, "not file"),
        ({"bucket": "No_Such"}, "bucket name"),
        ({"bucket": BUCKET, "endpoint_url": "http://192.0.2.1:9000"}, "SOURCE_ALLOWED_HOSTS"),
        ({"bucket": BUCKET, "acl": "public"}, "takes endpoint_url"),
    ],
)
def test_bad_settings_are_refused_saying_what(agent, given, why):
    collection = create_collection(agent=agent, name="bucket")
    with pytest.raises(origins.InvalidSource) as refused:
        origins.set_source(collection=collection, kind="s3", settings=given)
    assert why in refused.value.message


def test_an_unknown_kind_is_refused_naming_the_kinds(agent):
    collection = create_collection(agent=agent, name="share")
    with pytest.raises(origins.InvalidSource) as refused:
        origins.set_source(collection=collection, kind="ftp", settings={"url": "ftp://127.0.0.1/"})
    assert "folder, git, s3, webdav, web" in refused.value.message


def test_rotating_the_keys_reseals_credentials_and_builds_nothing(handbook, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.WEBHOOK_SECRET_KEYS = old
    origins.set_source(
        collection=handbook,
        kind="s3",
        settings=origins.describe(handbook)["settings"],
        credentials={"access_key_id": "AKIDTEST", "secret_access_key": "test-secret"},
    )
    sealed_before = _raw_credentials()
    settings.WEBHOOK_SECRET_KEYS = f"{new},{old}"
    call_command("reseal_webhook_secrets")
    assert _raw_credentials() != sealed_before
    settings.WEBHOOK_SECRET_KEYS = new  # the old key dropped: the credentials still open
    assert origins.origin_of(handbook).credentials["secret_access_key"] == "test-secret"
    assert not BuildRun.objects.filter(collection=handbook).exists()
    settings.WEBHOOK_SECRET_KEYS = Fernet.generate_key().decode()  # a key that opens nothing
    assert origins.reseal_credentials() == (0, 1)


def _raw_credentials() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials FROM collections_app_collectionsource")
        return cursor.fetchone()[0]


def test_refused_credentials_keep_the_last_build_answering_and_say_so(agent, served, check):
    """moto's server checking signatures and IAM policies (its own `/moto-api/reset-auth`, what
    INITIAL_NO_AUTH_ACTION_COUNT sets): an IAM user's key builds; a wrong secret and an unknown key are
    refused, the sync check and the build say so, and the collection keeps answering."""
    import boto3
    import httpx

    server, _bucket = served

    iam = boto3.client(
        "iam", endpoint_url=server.url, region_name="us-east-1",
        aws_access_key_id="AKIDTEST", aws_secret_access_key="test-secret",
    )  # fmt: skip
    iam.create_user(UserName="reader")
    iam.put_user_policy(
        UserName="reader",
        PolicyName="read-the-bucket",
        PolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", '
        '"Resource": "*"}]}',
    )
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    where = {"endpoint_url": server.url, "bucket": BUCKET, "prefix": PREFIX}
    collection = create_collection(agent=agent, name="private", method="fixed", size=80)
    httpx.post(f"{server.url}/moto-api/reset-auth", content=b"0", timeout=10).raise_for_status()
    try:
        origins.set_source(
            collection=collection,
            kind="s3",
            settings=where,
            credentials={"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]},
        )
        sync.set_sync(collection=collection, every=5)
        assert check(collection).build.status == BuildRun.SUCCEEDED
        for given, code in [
            (
                {"access_key_id": key["AccessKeyId"], "secret_access_key": "wrong-secret"},
                "SignatureDoesNotMatch",
            ),
            ({"access_key_id": "AKIDNOBODY0000000000", "secret_access_key": "x"}, "InvalidAccessKeyId"),
        ]:
            origins.set_source(collection=collection, kind="s3", settings=where, credentials=given)
            refused = check(collection)
            assert refused.outcome.startswith(sync_check.UNREADABLE) and refused.build is None
            assert f"the s3 source refused the credentials ({code})" in refused.outcome
            with pytest.raises(origins.SourceUnavailable) as said:
                origins.origin_of(collection).entries()
            assert said.value.code == "source_refused"
            failed = build_collection(collection=collection)
            assert failed.status == BuildRun.FAILED and "refused the credentials" in failed.error
            assert key["SecretAccessKey"] not in failed.error and "wrong-secret" not in failed.error
            assert "0.42 per kilometre" in texts(collection, "mileage per kilometre")
    finally:
        httpx.post(f"{server.url}/moto-api/reset-auth", content=b"inf", timeout=10).raise_for_status()
