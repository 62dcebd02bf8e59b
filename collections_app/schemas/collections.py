"""A collection: created, described, kept in sync, its cited paragraphs, and the MCP list of them."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict

from ragsite.analyzers import ANALYZERS
from ragsite.schemas import StrictSchema

from ..services.sync import MAX_EVERY, MIN_EVERY
from .builds import BuildStatusOut

# One of ragsite.analyzers.ANALYZERS, published as an enum.
AnalyzerName = Literal[ANALYZERS]  # type: ignore[valid-type]
ANALYZER_HELP = (
    "How the keyword leg reads words: simple (seed 004's terms, as they are), cjk (Chinese, Japanese and "
    "Korean runs as overlapping character pairs), or a Snowball language (english, french, german, …: "
    "each word stemmed, so 'policies' finds 'policy'); a language's _exact form (english_exact, …) scores "
    "each word's stem and the word as written, so an exact match counts on top of its stem."
)


class CollectionName(StrictSchema):
    """The collection an MCP tool acts on (the API names it in the path)."""

    collection: str = Field(
        ..., min_length=1, max_length=100, description="The name of one of your collections."
    )


class BuildRecord(Schema):
    model: str
    dimensions: int
    method: str
    analyzer: str = Field(
        ..., description="The analyzer this build's index was written with: searches use it."
    )
    built_from: str
    passages: int
    counts_include_restricted: bool = Field(
        ...,
        description="true for a per-reader collection: passages counts every paragraph, those some "
        "readers may not read (wholly hidden documents too); a reader's search sees fewer.",
    )
    built_at: datetime
    refused: list[str] | None  # null: nobody recorded; []: nothing refused; names otherwise


class SyncOut(Schema):
    sync_every: int = Field(..., description="Minutes between checks of the collection's folder.")
    last_checked_at: datetime | None
    last_changed_at: datetime | None = Field(..., description="When a check last found the folder changed.")
    next_check_at: datetime | None
    outcome: str = Field(
        ..., description='What the last check found: "unchanged", "1 new, 2 changed: build 7 queued", …'
    )
    build: int | None = Field(..., description="The last build a check queued.")
    retry_at: datetime | None = Field(
        ...,
        description="When that build failed for a reason that may pass (its worker died, the store was "
        "busy): when the folder's state is built again. null: no retry pending.",
    )
    changed_since_build: bool = Field(
        ..., description="A check saw the folder change after the live build was made; a build follows."
    )


SourceKind = Literal["folder", "s3", "webdav", "git", "web"]
# A setting's value: most are strings; a folder's readers_from_group is true or false; a git or WebDAV
# source's reader_rules is a list of {"path": "hr/**", "readers": ["hr"]} (docs/sources.md, "Permissions").
SourceSetting = str | bool | list[dict[str, str | list[str]]]


class SourceOut(Schema):
    kind: SourceKind = Field(..., description="Where the documents come from (docs/sources.md).")
    settings: dict[str, SourceSetting] = Field(
        ...,
        description="The source's settings as checked (URL, bucket, prefix, branch, path, who may read); "
        "{} for a folder that gives no readers.",
    )
    credentials: bool = Field(..., description="Whether credentials are set; they are never shown.")


class SourceIn(StrictSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "kind": "git",
                "settings": {"url": "https://git.example.org/handbook.git", "branch": "main", "path": "docs"},
            }
        }
    )

    kind: SourceKind = Field(..., description="folder, git, s3, webdav or web (docs/sources.md).")
    # Any JSON value here: each kind's checker (services.origins) says what a setting must be, in one
    # sentence; a union type here answered a wrong type with one error per member of the union.
    settings: dict[str, Any] | None = Field(
        None,
        description="Per kind (docs/sources.md): git url, branch, path, reader_rules; s3 endpoint_url, "
        "bucket, prefix, region, readers_tag; webdav url, path, reader_rules; web start_url, sitemap_url, "
        "include, exclude, max_pages, max_depth; folder readers_from_group. reader_rules: "
        '[{"path": "hr/**", "readers": ["hr"]}], each document\'s readers the groups of every rule its name '
        "matches; readers_tag: the S3 object tag naming its reader groups (default readers). Groups become "
        "labels through the identity-provider groups' labels.",
    )
    credentials: dict[str, str] | None = Field(
        None,
        description="git username and password, or token; s3 access_key_id and secret_access_key. Sealed at "
        "rest and never shown. Left out: those already set for this kind are kept; {}: cleared.",
    )


class CollectionOut(Schema):
    name: str
    built_from: str
    method: str
    analyzer: str = Field(..., description=ANALYZER_HELP + " The next build indexes with it.")
    per_reader: bool
    judge: bool
    folder: str = Field(
        ..., description="The sub-folder of the agent's folder under KNOWLEDGE_ROOT; empty: none."
    )
    built: BuildRecord | None  # null: never built
    sync: SyncOut | None = Field(..., description="null: the collection is built only when asked.")
    source: SourceOut = Field(..., description="Where its documents come from.")


class CollectionIn(StrictSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {"name": "policies", "folder": "policies", "built_from": "the HR share"}
        }
    )

    name: str = Field(..., min_length=1, max_length=100, description="Letters, digits, '-' or '_'.")
    folder: str = Field(
        "", max_length=100, description="A sub-folder of KNOWLEDGE_ROOT/<agent id>/, by name only."
    )
    built_from: str = Field(
        "", max_length=200, description='What the documents are, for people: "the HR share".'
    )
    method: str = Field("structure", max_length=40, description="The chunking method.")
    analyzer: AnalyzerName | None = Field(None, description=ANALYZER_HELP + " Left out: ANALYZER (simple).")
    per_reader: bool = False
    sync_every: int | None = Field(
        None,
        ge=MIN_EVERY,
        le=MAX_EVERY,
        strict=True,
        description="Check the folder every N minutes and build when it changed; null: build only when "
        "asked. Left out: a collection with a folder checks it every SYNC_EVERY minutes (5 by default).",
    )
    source: SourceIn | None = Field(
        None, description="A remote source instead of a folder (docs/sources.md); left out: a folder."
    )


class SyncIn(StrictSchema):
    sync_every: int | None = Field(
        ...,
        ge=MIN_EVERY,
        le=MAX_EVERY,
        strict=True,
        description="Minutes between checks of the folder; null stops syncing.",
    )


class AnalyzerIn(StrictSchema):
    analyzer: AnalyzerName = Field(..., description=ANALYZER_HELP)


class AnalyzerOut(CollectionOut):
    rebuild: int | None = Field(
        ...,
        description="The build queued to index the collection the new way (GET builds/{build}); null: none "
        "was queued (see rebuild_note).",
    )
    rebuild_note: str = Field(
        ...,
        description='Why no build was queued ("" when one was): "unchanged", "never built" (the first '
        "build uses it), or a build already queued or running (it indexes with the analyzer in force when "
        "it commits).",
    )


class CitedIn(Schema):
    chunk_id: str = Field(
        ..., min_length=1, max_length=400, description="<document>#<k>, as a search answer cites it."
    )
    reader: str | None = Field(
        None, max_length=200, description="Required when the collection answers per reader."
    )
    readerToken: str | None = Field(
        None,
        max_length=16384,
        description="Instead of reader: that person's ID token, as for a search. A URL may be kept in "
        "access logs: the Ragsite-Reader-Token header carries it as well and keeps it out of them.",
    )


class CitedOut(Schema):
    chunk_id: str
    document: str
    section: str
    text: str = Field(..., description="The paragraph as a search for the same reader shows it.")


class CollectionSummary(Schema):
    """One collection in the MCP `collections` tool's list."""

    name: str
    built_from: str
    folder: str
    method: str
    analyzer: str
    per_reader: bool
    last_build: BuildStatusOut | None = Field(
        ..., description="Its latest build's outcome; null: never built."
    )


class CollectionsOut(Schema):
    collections: list[CollectionSummary]


class NoArguments(StrictSchema):
    """A tool that takes no arguments."""
