"""A search request checked and resolved, before any model is called: the `SearchPlan`.

The plan names everything ranking needs (the index, the rows this search may use and the statistics
it scores with, the floor and where it came from) and everything the model steps need (who pays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragsite.analyzers import analyzer
from ragsite.bodies import encodable
from ragsite.errors import Conflict, Forbidden, NotFound, RagsiteError
from ragsite.schemas import bounds

from ... import errors
from ...conf import settings
from ...index.mapped import MappedIndex, View
from ...limits import MAX_MOST
from ...models import Agent, ApiKey, Collection, CollectionBuilt, Paragraph, Reader
from ...schemas.search import SearchIn
from ..agents import get_collection
from ..indexes import mapped_index
from ..ledger import check_runaway
from ..readers import resolve_reader
from .filtering import filter_mask, parse_filters
from .rows import search_state

MODES = ("hybrid", "vector", "lexical")


@dataclass(frozen=True)
class SearchPlan:
    """One search, resolved: what it asks, of which build, for whom, and under which floor."""

    agent: Agent
    collection: Collection
    question: str
    question_terms: list[str] | None  # None: the question is not read lexically (mode "vector")
    most: int
    around: int
    max_chars: int  # characters of text the answer may hold (text.budget)
    floor: float
    floor_source: str  # "request", "measured", "collection" or "default"
    reader: Reader | None  # None: the collection does not answer per reader
    payer: Agent | None  # who model calls are charged to; None: nobody named, nothing recorded
    mode: str | None  # the arm asked for; None: hybrid when the collection holds vectors
    nprobe: int | None  # IVF lists to score; None: the build's measured nprobe
    explain: bool
    built: CollectionBuilt
    index_key: str  # the mapped index's cache key (the build's)
    index: MappedIndex
    held_back: tuple[np.ndarray, np.ndarray]  # documents and paragraphs out of search
    mask: np.ndarray  # the rows this search may rank and stitch
    view: View | None  # the statistics over those rows (per reader, or filtered); None: every row's
    every: bool = False  # every row of the index is in `mask` (False: not known, read the mask)


def _whole(value, low: int, high: int | None = None) -> bool:
    """A whole number (never a bool) within ``low``..``high``."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and low <= value
        and (high is None or value <= high)
    )


def validate_request(
    question: str,
    most: int,
    around: int | None,
    min_score: float | None,
    max_most: int = MAX_MOST,
    max_chars: int | None = None,
) -> str:
    """The question, stripped, once every argument is within the limits the request declares
    (`schemas.search.SearchIn`); else the refusal naming it. `max_most` lets in-process callers (the
    benchmarks) ask for more paragraphs than an agent may."""
    question = (question or "").strip()
    _, longest = bounds(SearchIn, "question")
    if not question:
        raise RagsiteError("question must not be empty", code=errors.INVALID_QUESTION)
    if len(question) > longest:
        raise RagsiteError(f"question is at most {longest} characters", code=errors.INVALID_QUESTION)
    if not encodable(question):  # a lone surrogate: valid JSON, but no tokenizer takes it
        raise RagsiteError("question must not contain lone surrogates", code=errors.INVALID_QUESTION)
    fewest, _ = bounds(SearchIn, "most")
    if not _whole(most, fewest, max_most):
        raise RagsiteError(f"most must be between {fewest} and {max_most}", code=errors.INVALID_MOST)
    low, high = bounds(SearchIn, "around")
    if around is not None and not _whole(around, low, high):
        raise RagsiteError(f"around must be between {low} and {high}", code=errors.INVALID_AROUND)
    low, high = bounds(SearchIn, "max_chars")
    if max_chars is not None and not _whole(max_chars, low, high):
        raise RagsiteError(f"max_chars must be between {low} and {high}", code=errors.INVALID_MAX_CHARS)
    low, high = bounds(SearchIn, "min_score")
    if min_score is not None and (
        isinstance(min_score, bool) or not isinstance(min_score, int | float) or not low <= min_score <= high
    ):
        raise RagsiteError(f"min_score must be between {low} and {high}", code=errors.INVALID_MIN_SCORE)
    return question


def plan_search(
    *,
    agent: Agent,
    collection: str | Collection,
    question: str,
    reader: str | None,
    on_behalf_of: str | None,
    most: int,
    around: int | None,
    min_score: float | None,
    key: ApiKey | None,
    mode: str | None,
    max_most: int,
    nprobe: int | None,
    explain: bool,
    max_chars: int | None = None,
    filters: dict | None = None,
) -> SearchPlan:
    """Check the request and resolve it against the collection's current build (see `search_collection`)."""
    question = validate_request(question, most, around, min_score, max_most, max_chars)
    parsed_filters = parse_filters(filters)
    if mode is not None and mode not in MODES:
        raise RagsiteError(f"mode must be one of {', '.join(MODES)}", code=errors.INVALID_MODE)
    if nprobe is not None and not _whole(nprobe, 1):
        raise RagsiteError("nprobe must be a whole number of at least 1", code=errors.INVALID_NPROBE)
    if not isinstance(collection, Collection):
        collection = get_collection(agent=agent, name=collection)
    elif collection.agent_id != agent.pk:
        raise NotFound(f'no collection "{collection.name}"', code=errors.UNKNOWN_COLLECTION)
    reader_obj = resolve_reader(collection, reader)
    payer = resolve_payer(key, on_behalf_of)
    check_runaway(payer)

    floor, floor_source = resolve_floor(collection, min_score)
    around = int(_first_set(around, collection.around, settings.AROUND))
    built, *held_back = search_state(collection)
    if built is None:
        raise Conflict(f'collection "{collection.name}" has never been built', code=errors.NOT_BUILT)
    index_key, index = mapped_index(collection, built)
    mask = readable_mask(collection, index, reader_obj, tuple(held_back))
    if parsed_filters is not None:
        mask = mask & filter_mask(collection, index, parsed_filters, readable=mask)
    # Nothing held back, no reader's labels, no filter (the usual case): the mask is the index's every
    # row (`readable_mask`), known without reading it; otherwise it is read once here, not once a step.
    every = mask is index.every_row or bool(mask.all())
    # A per-reader collection's BM25 statistics are those of the rows this reader may see, each row
    # less the opening it shares with a row the reader may not see, so no score depends on a paragraph
    # it cannot read (docs/security.md); a filtered search's are those of the rows its filter keeps,
    # the same as a collection holding only them; other searches keep seed 004's
    # collection-wide statistics, which the interchange export reproduces.
    view = index.view(mask, cut_carried=True) if collection.per_reader or parsed_filters is not None else None
    return SearchPlan(
        agent=agent,
        collection=collection,
        question=question,
        # In the terms of the mapped index's analyzer (its build's; services.indexes refuses another).
        question_terms=None if mode == "vector" else analyzer(index.analyzer).terms(question),
        most=most,
        around=around,
        max_chars=int(max_chars if max_chars is not None else settings.ANSWER_MAX_CHARS),
        floor=floor,
        floor_source=floor_source,
        reader=reader_obj,
        payer=payer,
        mode=mode,
        nprobe=nprobe,
        explain=explain,
        built=built,
        index_key=index_key,
        index=index,
        held_back=tuple(held_back),
        mask=mask,
        view=view,
        every=every,
    )


def readable_mask(
    collection: Collection,
    index: MappedIndex,
    reader: Reader | None,
    held_back: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """Rows this search may rank and stitch: active documents less the held-back documents and paragraphs
    (`rows.search_state`), and for a per-reader collection the reader's labels.

    Any further per-row filter is one more `&` here: ranking, statistics, stitching and positions all
    follow this mask, which nobody changes (when nothing narrows it, it is the index's `every_row`).
    """
    documents, paragraphs = held_back
    if not documents.size and not paragraphs.size and not (collection.per_reader and reader is not None):
        return index.every_row  # nothing narrows it (the usual case): the index's own, read only
    mask = np.ones(index.size, dtype=bool)
    if documents.size:
        mask &= ~np.isin(index.row_document, documents)
    if paragraphs.size:
        mask &= ~np.isin(index.row_paragraph, paragraphs)
    if collection.per_reader and reader is not None:
        through = Paragraph.labels.through
        in_collection = through.objects.filter(paragraph__collection=collection)
        labelled = set(in_collection.values_list("paragraph_id", flat=True))
        allowed = set(
            in_collection.filter(label__in=reader.labels.all() if reader.pk else []).values_list(
                "paragraph_id", flat=True
            )
        )
        # A paragraph with no labels is readable by anybody (seed 000's decision);
        # a labelled one needs at least one label the reader holds.
        forbidden = labelled - allowed
        if forbidden:
            hidden = np.fromiter(forbidden, dtype=np.int64, count=len(forbidden))
            mask &= ~np.isin(index.row_paragraph, hidden)
    return mask


def citing_mask(collection: Collection, index: MappedIndex, held_back: tuple[np.ndarray, np.ndarray]):
    """The rows chunk ids are numbered over (`stitched.stitched`'s ``citing``): None while no paragraph
    inside a document is switched off, so k is the stored index; else the rows in search before any
    reader or filter, whose positions within each document are the k export_index writes."""
    if not held_back[1].size:
        return None
    return readable_mask(collection, index, None, held_back)


def resolve_payer(key: ApiKey | None, on_behalf_of: str | None) -> Agent | None:
    """The agent model calls are charged to; None when nobody was named (then nothing is recorded)."""
    if not on_behalf_of:
        return None
    if key is not None and not key.may_act_for_others and on_behalf_of != key.agent.agent_id:
        # Decided before any lookup: another installation's agent and a name nobody holds get
        # one status and one message, so ids cannot be probed (docs/decisions/0018).
        raise Forbidden("this key may only charge its own agent", code=errors.NOT_ALLOWED_FOR_AGENT)
    payer = None if "\x00" in on_behalf_of else Agent.objects.filter(agent_id=on_behalf_of).first()
    if payer is None:
        raise RagsiteError(
            f'onBehalfOf names no known agent ("{on_behalf_of[:100]}")', code=errors.UNKNOWN_AGENT
        )
    return payer


def resolve_floor(collection: Collection, requested: float | None) -> tuple[float, str]:
    """The floor in force and its source: the request's, else the collection's (`Collection.floor_in_force`):
    measured off its known answers, its own override, or MIN_SCORE."""
    if requested is not None:
        return requested, "request"
    measured = collection.known_answer_reports.measured_floor() if collection.floor_measured else None
    return collection.floor_in_force(measured=measured, default=float(settings.MIN_SCORE))


def _first_set(*values):
    return next(v for v in values if v is not None)
