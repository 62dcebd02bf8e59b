"""Resource links for the paragraphs an MCP search cites, and `resources/read` of them.

Each paragraph of a search answer is linked (a `resource_link` content item, from protocol
2025-06-18) as `ragsite://collections/<collection>/paragraphs/<chunk id>`, with `?reader=<id>` when
the search was for a reader (`?readerToken=<token>` when the search named its reader by a token: the
caller's own token echoed back, good as long as the token is), every part percent-encoded. Reading
the link answers the paragraph's text as that reader's search shows it (`services.citations`), with
the caller's key deciding whose collection it is, exactly as for the search.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, unquote, urlsplit

from ragsite import audit
from ragsite.errors import NotFound
from ragsite.mcp import Caller, ResourceTemplate, register_resource

from .services.citations import read_cited
from .services.readers.tokens import MAX_TOKEN_CHARS, reader_named

SCHEME_PREFIX = "ragsite://collections/"
MIME_TYPE = "text/plain"
# A link's reader and chunk id are the caller's own input echoed back, so they are bounded as the input is.
MAX_URI_CHARS = 2000 + 3 * MAX_TOKEN_CHARS  # a token, percent-encoded at worst


def cited_uri(collection: str, chunk_id: str, reader: str | None, token: str | None = None) -> str:
    uri = f"{SCHEME_PREFIX}{quote(collection, safe='')}/paragraphs/{quote(chunk_id, safe='')}"
    if token:
        return f"{uri}?readerToken={quote(token, safe='')}"
    return f"{uri}?reader={quote(reader, safe='')}" if reader else uri


def search_links(arguments: dict, answer: dict) -> list[dict]:
    """One `resource_link` per paragraph of a search answer, in the answer's order."""
    links = []
    for paragraph in answer["paragraphs"]:
        title = paragraph["document"] + (f" — {paragraph['section']}" if paragraph["section"] else "")
        links.append(
            {
                "type": "resource_link",
                "uri": cited_uri(
                    arguments["collection"],
                    paragraph["chunk_id"],
                    arguments.get("reader"),
                    arguments.get("readerToken"),
                ),
                "name": paragraph["chunk_id"],
                "title": title,
                "mimeType": MIME_TYPE,
            }
        )
    return links


def read_cited_resource(caller: Caller, uri: str) -> dict:
    unknown = NotFound("no paragraph at this uri", code="unknown_paragraph")
    if len(uri) > MAX_URI_CHARS:
        raise unknown
    parts = urlsplit(uri)
    segments = parts.path.split("/")  # "", collection, "paragraphs", chunk id
    query = parse_qs(parts.query, keep_blank_values=True)
    readers, tokens = query.get("reader", [None]), query.get("readerToken", [None])
    if (parts.scheme, parts.netloc) != ("ragsite", "collections") or parts.fragment:
        raise unknown
    if len(readers) != 1 or len(tokens) != 1:
        raise unknown
    if len(segments) != 4 or segments[0] or segments[2] != "paragraphs" or not segments[1] or not segments[3]:
        raise unknown
    collection = unquote(segments[1])
    reader = reader_named(reader=readers[0], token=tokens[0])
    with audit.reading(
        kind=audit.PARAGRAPH, channel=audit.MCP, key=caller.key, target=collection, reader=reader
    ) as read:
        shown = read_cited(
            agent=caller.agent, collection=collection, chunk_id=unquote(segments[3]), reader=reader
        )
        read.answered([shown["chunk_id"]], len(shown["text"]))
    return {
        "uri": uri,
        "mimeType": MIME_TYPE,
        "text": shown["text"],
        "_meta": {"dev.ragsite/citation": {k: shown[k] for k in ("chunk_id", "document", "section")}},
    }


register_resource(
    ResourceTemplate(
        uri_template=SCHEME_PREFIX + "{collection}/paragraphs/{chunk_id}{?reader,readerToken}",
        prefix=SCHEME_PREFIX,
        name="paragraph",
        title="A cited paragraph",
        description=(
            "One paragraph of one of your collections by its chunk id (<document>#<k>), as the search "
            "that cited it showed it; add ?reader= (or ?readerToken=) for a collection that answers per "
            "reader."
        ),
        mime_type=MIME_TYPE,
        read=read_cited_resource,
    )
)
