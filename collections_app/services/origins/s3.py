"""An S3-compatible bucket (AWS S3, MinIO, Ceph, ...) as a collection's source, through boto3.

A listing is `ListObjectsV2` under the prefix, paged, bounded by SOURCE_MAX_DOCUMENTS: each object's
token is its ETag, so a check downloads nothing and a build reads only objects whose ETag moved. A
fetch is one ranged `GetObject` of at most the document limit. Keys ending in `/` (the consoles' folder
markers) are not documents. Credentials are an access key id and secret (and a session token); none
given, boto3 signs nothing (a public bucket). boto3 is given SOURCE_TIMEOUT for connecting and reading,
and no retries: the sync check is the retry.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from . import readers
from .base import (
    Entry,
    InvalidSource,
    SourceUnavailable,
    checked_url,
    max_documents,
    timeout_seconds,
    too_many,
)

SETTINGS = ("endpoint_url", "bucket", "prefix", "region", "readers_tag")
TAG_READS = 8  # GetObjectTagging requests in flight at once
CREDENTIALS = ("access_key_id", "secret_access_key", "session_token")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
REGION = re.compile(r"^[a-z0-9-]{1,40}$")
# Error codes that mean the credentials were refused rather than the source being away.
REFUSED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "AllAccessDisabled"}


def checked_settings(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise InvalidSource(f"an s3 source takes {', '.join(SETTINGS)}; not {', '.join(unknown[:5])}")
    region = raw.get("region") or "us-east-1"
    if not isinstance(region, str) or not REGION.match(region):
        raise InvalidSource("an s3 source's region is a region name such as eu-west-1")
    bucket = raw.get("bucket")
    if not isinstance(bucket, str) or not BUCKET.match(bucket):
        raise InvalidSource(
            "an s3 source's bucket is a bucket name (3-63 lower-case letters, digits, . and -)"
        )
    endpoint = raw.get("endpoint_url") or f"https://s3.{region}.amazonaws.com"
    checked_url(endpoint, schemes=("https", "http"), what="an s3 source's endpoint_url")
    prefix = raw.get("prefix") or ""
    if not isinstance(prefix, str) or len(prefix) > 500:
        raise InvalidSource("an s3 source's prefix is at most 500 characters")
    return {
        "endpoint_url": endpoint,
        "bucket": bucket,
        "prefix": prefix,
        "region": region,
        "readers_tag": readers.checked_tag(raw.get("readers_tag")),
    }


def checked_credentials(raw: dict) -> dict:
    unknown = sorted(set(raw) - set(CREDENTIALS))
    if unknown or not all(isinstance(v, str) and len(v) <= 2000 for v in raw.values()):
        raise InvalidSource(f"an s3 source's credentials are {', '.join(CREDENTIALS)}, strings")
    if bool(raw.get("access_key_id")) != bool(raw.get("secret_access_key")):
        raise InvalidSource("an s3 source's credentials need both access_key_id and secret_access_key")
    return dict(raw)


class S3Origin:
    kind = "s3"

    def __init__(self, *, collection_id: int, settings: dict, credentials: dict):
        self.settings, self.credentials = settings, credentials

    def _client(self):
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        checked_url(
            self.settings["endpoint_url"], schemes=("https", "http"), what="the s3 source's endpoint_url"
        )
        signed = bool(self.credentials.get("access_key_id"))
        config = Config(
            connect_timeout=timeout_seconds(),
            read_timeout=timeout_seconds(),
            retries={"max_attempts": 1, "mode": "standard"},
            signature_version=None if signed else UNSIGNED,
        )
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.settings["endpoint_url"],
            region_name=self.settings["region"],
            aws_access_key_id=self.credentials.get("access_key_id") or None,
            aws_secret_access_key=self.credentials.get("secret_access_key") or None,
            aws_session_token=self.credentials.get("session_token") or None,
            config=config,
        )

    def entries(self) -> list[Entry]:
        prefix = self.settings["prefix"]
        entries = []
        with _translated():
            pages = (
                self._client()
                .get_paginator("list_objects_v2")
                .paginate(Bucket=self.settings["bucket"], Prefix=prefix)
            )
            for page in pages:
                for item in page.get("Contents", []):
                    key = item["Key"]
                    name = key[len(prefix) :].lstrip("/")
                    if not name or key.endswith("/"):
                        continue
                    entries.append(
                        Entry(name=name, size=int(item["Size"]), token=item["ETag"].strip('"'), key=key)
                    )
                    if len(entries) > max_documents():
                        raise too_many(self.kind)
            entries = self._with_readers(entries)
        return sorted(entries, key=lambda e: e.name)

    def _with_readers(self, entries: list[Entry]) -> list[Entry]:
        """Each entry with the groups its `readers_tag` names (`GetObjectTagging`, a few at a time: S3's
        listing carries no tags, and a tag changes no ETag). An empty `readers_tag` asks nothing."""
        key = self.settings.get("readers_tag", readers.DEFAULT_TAG)
        if not key or not entries:
            return entries
        client, bucket = self._client(), self.settings["bucket"]

        def tagged(entry: Entry) -> Entry:
            with _translated():
                tags = client.get_object_tagging(Bucket=bucket, Key=entry.key).get("TagSet", [])
            value = " ".join(tag.get("Value", "") for tag in tags if tag.get("Key") == key)
            return replace(entry, readers=readers.split_groups(value))

        with ThreadPoolExecutor(max_workers=TAG_READS) as pool:
            return list(pool.map(tagged, entries))

    def fetch(self, entry: Entry, limit: int) -> bytes:
        if limit <= 0:
            return b""
        with _translated():
            answer = self._client().get_object(
                Bucket=self.settings["bucket"], Key=entry.key, Range=f"bytes=0-{limit - 1}"
            )
            body = answer["Body"]
            try:
                return body.read(limit)
            finally:
                body.close()


class _translated:
    """boto3's failures as `SourceUnavailable`: refused credentials, a missing bucket, an endpoint away.
    The message carries S3's error code, never a key or a signature."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, SourceUnavailable):
            return False
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", "error"))[:60]
            if code in REFUSED:
                raise SourceUnavailable(
                    f"the s3 source refused the credentials ({code})", code="source_refused"
                ) from None
            if code in ("NoSuchBucket", "NoSuchKey", "404"):
                raise SourceUnavailable(
                    f"the s3 source has no such bucket or object ({code})", code="source_missing"
                ) from None
            raise SourceUnavailable(f"the s3 source answered {code}") from None
        if isinstance(exc, BotoCoreError):
            raise SourceUnavailable(f"the s3 source could not be reached ({type(exc).__name__})") from None
        return False
