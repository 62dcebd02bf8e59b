"""An agent's collections as OpenAI vector stores, and a search answered as a vector-store results page.

The search itself is `search.search_collection`, unchanged: this module names collections as
vector stores (`vector_store`), pages through them (`list_vector_stores`), and turns a search
answer into `vector_store.search_results.page` (`results_page`). What the OpenAI shape has no
field for (the floor, the judge's verdict, stitching) travels in a `ragsite` extension object, on
the page and on each result. Both sides are declared in `schemas/vector_stores.py`; the request is
read in `collections_app/openai_api.py`.
"""

from __future__ import annotations

from django.db.models import Count, Q

from ragsite.errors import NotFound

from ..models import Agent, BuildRun, Collection, Document
from ..schemas.vector_stores import VectorStoresQuery
from .agents import get_collection
from .indexes import collection_root


def _timestamp(moment) -> int | None:
    return None if moment is None else int(moment.timestamp())


def _index_bytes(collection: Collection) -> int:
    """Bytes of the collection's search index on disk: what it uses, in the vector-store sense."""
    root = collection_root(collection.pk)
    if not root.is_dir():
        return 0
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def vector_store(collection: Collection) -> dict:
    """One collection as an OpenAI `vector_store` object; its id is the collection's name."""
    counts = collection.documents.aggregate(
        total=Count("id"),
        completed=Count("id", filter=Q(status=Document.ACTIVE, enabled=True)),
        failed=Count("id", filter=Q(status=Document.REFUSED)),
    )
    built = collection.built if hasattr(collection, "built") else None  # a missing one raises AttributeError
    building = collection.runs.filter(status__in=(BuildRun.QUEUED, BuildRun.RUNNING)).exists()
    return {
        "id": collection.name,
        "object": "vector_store",
        "name": collection.name,
        "created_at": _timestamp(collection.created_at),
        "last_active_at": _timestamp(built.built_at) if built is not None else None,
        "status": _status(built, building),
        "usage_bytes": _index_bytes(collection),
        "file_counts": {
            "in_progress": 0,
            "completed": counts["completed"],
            "failed": counts["failed"],
            "cancelled": 0,
            "total": counts["total"],
        },
        # The counts and bytes are the collection's, whatever a reader may read: a per-reader store says
        # that they include documents some readers cannot see (wholly hidden ones too).
        "metadata": {
            "per_reader": "true" if collection.per_reader else "false",
            "counts_include_restricted": "true" if collection.per_reader else "false",
            "built": "true" if built is not None else "false",
        },
        "expires_after": None,
        "expires_at": None,
    }


def _status(built, building: bool) -> str:
    """OpenAI's status, truthfully: `completed` once a build is live; `in_progress` while the first is on its
    way; never built with none coming, `expired`, the status whose store cannot be searched (a search
    answers 409 `not_built`, and `metadata.built` is "false")."""
    if built is not None:
        return "completed"
    return "in_progress" if building else "expired"


def get_vector_store(*, agent: Agent, store_id: str) -> dict:
    return vector_store(get_collection(agent=agent, name=store_id))


def list_vector_stores(*, agent: Agent, request: VectorStoresQuery) -> dict:
    """A cursor page of the agent's collections, newest first by default (OpenAI's `list` shape); the
    query's limits are its declaration's (`schemas.vector_stores`), checked by the adapter."""
    ordering = ("created_at", "pk") if request.order == "asc" else ("-created_at", "-pk")
    collections = list(Collection.objects.filter(agent=agent).select_related("built").order_by(*ordering))
    names = [c.name for c in collections]
    start, end = 0, len(collections)
    for cursor, is_after in ((request.after, True), (request.before, False)):
        if cursor is None:
            continue
        if cursor not in names:
            raise NotFound(f'no vector store "{cursor[:100]}" to page from', code="unknown_collection")
        if is_after:
            start = max(start, names.index(cursor) + 1)
        else:
            end = min(end, names.index(cursor))
    window = collections[start:end]
    page = (
        window[-request.limit :]
        if request.before is not None and request.after is None
        else window[: request.limit]
    )
    data = [vector_store(c) for c in page]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(window) > len(page),
    }


def document_attributes(*, agent: Agent, store_id: str, names: set[str]) -> dict[str, dict]:
    """The attributes of the named documents of one of the agent's collections, by name."""
    return dict(
        Document.objects.filter(
            collection__agent=agent, collection__name=store_id, name__in=names
        ).values_list("name", "attributes")
    )


def page_span(pages: list[int]) -> str:
    """[8, 11] as "8-11", [8, 8] as "8"."""
    first, last = pages[0], pages[-1]
    return str(first) if first == last else f"{first}-{last}"


def results_page(answer: dict, *, query: str, attributes: dict[str, dict] | None = None) -> dict:
    """A search answer as `vector_store.search_results.page`: one result per answer paragraph, in order.

    `attributes` maps a document's name to its own attributes; each result's
    `attributes` holds those with `document`, `section` and `chunk_id` beside them.
    """
    attributes = attributes or {}
    data = []
    for paragraph in answer["paragraphs"]:
        extension = {k: paragraph[k] for k in ("chunk_id", "chunk_ids", "passages", "first", "last")}
        for optional in ("pages", "rerank_score", "fused_rank"):
            if paragraph.get(optional) is not None:
                extension[optional] = paragraph[optional]
        # OpenAI's attribute values are strings, numbers or booleans (typed clients decode nothing else),
        # so the pages travel as text there, "8-11" or "8", and as the answer's [first, last] above.
        pages = paragraph.get("pages")
        shown_pages = {"pages": page_span(pages)} if pages else {}
        data.append(
            {
                "file_id": paragraph["document"],
                "filename": paragraph["document"],
                "score": paragraph["score"],
                "attributes": {
                    **attributes.get(paragraph["document"], {}),
                    "document": paragraph["document"],
                    "section": paragraph["section"],
                    "chunk_id": paragraph["chunk_id"],
                    **shown_pages,
                },
                "content": [{"type": "text", "text": paragraph["text"]}],
                "ragsite": extension,
            }
        )
    page_extension = {k: answer[k] for k in ("floor", "floor_source", "refused", "around", "mode", "model")}
    for optional in ("judge", "rerank"):
        if answer.get(optional) is not None:
            page_extension[optional] = answer[optional]
    return {
        "object": "vector_store.search_results.page",
        "search_query": [query],
        "data": data,
        "has_more": False,
        "next_page": None,
        "ragsite": page_extension,
    }
