"""Collections in the JSON API: thin adapters over the services."""

from datetime import datetime

from ninja import Router, Schema

from .models import Collection
from .services.agents import get_collection

router = Router(tags=["collections"])


class BuildRecord(Schema):
    model: str
    dimensions: int
    method: str
    built_from: str
    passages: int
    built_at: datetime
    refused: list[str] | None  # null: nobody recorded; []: nothing refused; names otherwise


class CollectionOut(Schema):
    name: str
    built_from: str
    method: str
    per_reader: bool
    judge: bool
    built: BuildRecord | None  # null: never built


def collection_out(collection: Collection) -> dict:
    built = getattr(collection, "built", None)
    return {
        "name": collection.name,
        "built_from": collection.built_from,
        "method": collection.method,
        "per_reader": collection.per_reader,
        "judge": collection.judge,
        "built": None
        if built is None
        else {
            "model": built.model,
            "dimensions": built.dimensions,
            "method": built.method,
            "built_from": built.built_from,
            "passages": built.passages,
            "built_at": built.built_at,
            "refused": built.refused,
        },
    }


@router.get("/", response=list[CollectionOut], summary="The calling agent's collections")
def list_collections(request):
    agent = request.auth.agent
    return [collection_out(c) for c in agent.collections.select_related("built").order_by("name")]


@router.get("/{name}", response=CollectionOut, summary="One collection and what built it")
def read_collection(request, name: str):
    return collection_out(get_collection(agent=request.auth.agent, name=name))
