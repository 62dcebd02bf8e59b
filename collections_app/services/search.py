"""Searching a collection: rank, floor, filter by reader, stitch, judge, and charge the asking agent.

The ranking itself is pure (`lexical`, `fusion`, `stitch`); this module loads a
collection's index once per build and per process, decides who may read what,
and records model calls in the ledger. The question and the paragraphs never
reach the ledger or a log line.
"""

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from django.db.models import Q

from ragsite import embedding
from ragsite.bodies import encodable
from ragsite.embedders import EmbeddingError
from ragsite.errors import Conflict, Forbidden, NotFound, RagsiteError
from ragsite.fusion import hybrid_scores, normalise_bm25, normalise_cosine
from ragsite.lexical import BM25Index, terms

from ..conf import settings
from ..context import lexical_with_context
from ..ivf import IVFLists, build_lists
from ..judge import JudgeUnavailable, ask_judge
from ..models import Agent, ApiKey, Collection, CollectionBuilt, Document, ModelCall, Paragraph, Reader
from ..rerank import RerankUnavailable, ask_reranker
from ..stitch import Row, cut_hidden_overlap, stitch
from .agents import get_collection
from .ledger import check_runaway, record_call, spent_today

logger = logging.getLogger("ragsite.search")

MAX_QUESTION_CHARS = 2000
MAX_MOST = 50
MAX_AROUND = Collection.MAX_AROUND
# Weight of the cosine in the convex fusion: the best of 0.0-1.0 (then 0.42-0.58) on the
# SciFact train split; see docs/benchmarks.md.
FUSION_WEIGHT = 0.52


@dataclass
class CollectionIndex:
    """Everything a search needs from one build of one collection, held in memory."""

    built_at: object
    passages: int  # the build record's count when loaded: a deleted document lowers it (see _current)
    model: str
    dimensions: int
    ids: np.ndarray  # paragraph id per row
    documents: np.ndarray  # document id per row
    rows: list[Row]  # stitch rows, in ordinal order
    matrix: np.ndarray | None  # (n, d) float32, unit rows; None when nothing was embedded
    has_vector: np.ndarray  # bool per row
    bm25: BM25Index
    document_names: dict[int, str]
    position: dict[int, int]  # ordinal -> row
    # The approximate path for large collections: built on first use, once per build (see _ivf_for).
    ivf: IVFLists | None = None
    ivf_rows: np.ndarray | None = None  # index row of each IVF row (the rows that hold a vector)
    ivf_vectors: np.ndarray | None = None  # the rows the IVF lists name (the matrix itself when all hold one)
    # BM25 over each row's "title › section" (context.py); None when no row has a context.
    context_bm25: BM25Index | None = None

    @property
    def size(self) -> int:
        return len(self.rows)


class ReadableRows(Mapping):
    """The rows a search may use, by ordinal, without building a dict of them on every search.

    A row comes back without the text it shares with an earlier row of its document that this
    search may not read: the structure strategy's overlap copies the end of a piece into the
    next, and labels are per paragraph (and change after a build), so that copy is cut here,
    for this reader, rather than trusted to match at build time. See docs/security.md.
    """

    def __init__(self, index: CollectionIndex, mask: np.ndarray):
        self.index, self.mask = index, mask

    def __getitem__(self, ordinal: int) -> Row:
        position = self.index.position.get(ordinal)
        if position is None or not self.mask[position]:
            raise KeyError(ordinal)
        return cut_hidden_overlap(self.index.rows, position, self.mask)

    def __iter__(self):
        return (self.index.rows[i].ordinal for i in np.flatnonzero(self.mask))

    def __len__(self) -> int:
        return int(self.mask.sum())


_cache: dict[int, CollectionIndex] = {}
_cache_lock = threading.Lock()
_ivf_lock = threading.Lock()


def collection_index(collection: Collection, built: CollectionBuilt) -> CollectionIndex:
    """The in-memory index of `collection`'s current build, loaded once per build per process."""
    cached = _cache.get(collection.pk)
    if _current(cached, built):
        return cached
    with _cache_lock:
        cached = _cache.get(collection.pk)
        if _current(cached, built):
            return cached
        index = _load_index(collection, built)
        _cache[collection.pk] = index
        return index


def _current(cached: CollectionIndex | None, built: CollectionBuilt) -> bool:
    # A new build changes built_at; deleting a document between builds lowers `passages`
    # (services.documents), which every process sees at its next search.
    return cached is not None and (cached.built_at, cached.passages) == (built.built_at, built.passages)


def forget_index(collection_id: int) -> None:
    _cache.pop(collection_id, None)


def _load_index(collection: Collection, built: CollectionBuilt) -> CollectionIndex:
    records = list(
        Paragraph.objects.filter(collection=collection)
        .order_by("ordinal")
        .values_list("id", "ordinal", "document_id", "start_char", "end_char", "text", "section", "index", "embedding")
    )
    contexts = list(Paragraph.objects.filter(collection=collection).order_by("ordinal").values_list("context", flat=True))
    rows = [
        Row(ordinal=o, document=d, start=s, end=e, text=t, section=sec, index=k)
        for _i, o, d, s, e, t, sec, k, _v in records
    ]
    widths = {len(v) // 4 for *_rest, v in records if v is not None}
    if len(widths) > 1:
        raise Conflict(
            f'collection "{collection.name}" holds vectors of several widths ({sorted(widths)}); rebuild it',
            code="width_mismatch",
        )
    has_vector = np.array([v is not None for *_rest, v in records], dtype=bool)
    matrix = None
    if widths:
        width = widths.pop()
        matrix = np.zeros((len(records), width), dtype=np.float32)
        for i, (*_rest, vector) in enumerate(records):
            if vector is not None:
                matrix[i] = np.frombuffer(bytes(vector), dtype="<f4")
    names = dict(Document.objects.filter(collection=collection).values_list("id", "name"))
    return CollectionIndex(
        built_at=built.built_at,
        passages=built.passages,
        model=built.model,
        dimensions=built.dimensions,
        ids=np.array([r[0] for r in records], dtype=np.int64),
        documents=np.array([r[2] for r in records], dtype=np.int64),
        rows=rows,
        matrix=matrix,
        has_vector=has_vector,
        bm25=BM25Index.from_texts(r.text for r in rows),
        document_names=names,
        position={row.ordinal: i for i, row in enumerate(rows)},
        context_bm25=BM25Index.from_texts(contexts) if any(contexts) else None,
    )


# --- Who may read, who pays ---------------------------------------------------


def _readable_mask(collection: Collection, index: CollectionIndex, reader: Reader | None) -> np.ndarray:
    """Rows this search may rank and stitch: enabled paragraphs of active, enabled documents, and for a
    per-reader collection the reader's labels."""
    # Documents out of search (in review, refused, disabled) are few; list those rather than the active ones.
    held_back = list(
        collection.documents.filter(~Q(status=Document.ACTIVE) | Q(enabled=False)).values_list("id", flat=True)
    )
    mask = ~np.isin(index.documents, np.asarray(held_back, dtype=np.int64))
    # Disabled paragraphs are read per search (a partial index holds only them), so a switch takes
    # effect at the next question without waiting for a new build.
    disabled = list(Paragraph.objects.filter(collection=collection, enabled=False).values_list("id", flat=True))
    if disabled:
        mask &= ~np.isin(index.ids, np.asarray(disabled, dtype=np.int64))
    if collection.per_reader and reader is not None:
        through = Paragraph.labels.through
        labelled = set(through.objects.filter(paragraph__collection=collection).values_list("paragraph_id", flat=True))
        allowed = set(
            through.objects.filter(
                paragraph__collection=collection, label__in=reader.labels.all() if reader.pk else []
            ).values_list("paragraph_id", flat=True)
        )
        # A paragraph with no labels is readable by anybody (seed 000's decision);
        # a labelled one needs at least one label the reader holds.
        forbidden = labelled - allowed
        if forbidden:
            mask &= ~np.isin(index.ids, np.fromiter(forbidden, dtype=np.int64, count=len(forbidden)))
    return mask


NO_LABELS = Reader(external_id="")  # an unsaved reader holding nothing: reads unlabelled paragraphs only


def _resolve_reader(collection: Collection, reader: str | None) -> Reader | None:
    """The reader a per-reader search answers for. An unknown id reads as a reader holding no
    labels (unlabelled paragraphs only), exactly like a known reader holding none, so the
    answer never says whether an id exists; a collection that is not per-reader ignores it."""
    if not collection.per_reader:
        return None
    if reader is None or reader == "":
        raise RagsiteError(
            f'collection "{collection.name}" answers per reader: say which reader with "reader"',
            code="reader_required",
        )
    if "\x00" in reader or len(reader) > 200:  # cannot be stored, so cannot be known; never queried
        return NO_LABELS
    return Reader.objects.filter(external_id=reader).first() or NO_LABELS


def resolve_payer(key: ApiKey | None, on_behalf_of: str | None) -> Agent | None:
    """The agent model calls are charged to; None when nobody was named (then nothing is recorded)."""
    if not on_behalf_of:
        return None
    if key is not None and not key.may_act_for_others and on_behalf_of != key.agent.agent_id:
        # Decided before any lookup: another installation's agent and a name nobody holds get
        # one status and one message, so ids cannot be probed (D13).
        raise Forbidden("this key may only charge its own agent", code="not_allowed_for_agent")
    payer = None if "\x00" in on_behalf_of else Agent.objects.filter(agent_id=on_behalf_of).first()
    if payer is None:
        raise RagsiteError(f'onBehalfOf names no known agent ("{on_behalf_of[:100]}")', code="unknown_agent")
    return payer


def _over_budget(payer: Agent | None) -> bool:
    return payer is not None and payer.daily_budget is not None and spent_today(payer) >= float(payer.daily_budget)


# --- The search ---------------------------------------------------------------


MODES = ("hybrid", "vector", "lexical")


def validate_request(
    question: str, most: int, around: int | None, min_score: float | None, max_most: int = MAX_MOST
) -> str:
    question = (question or "").strip()
    if not question:
        raise RagsiteError("question must not be empty", code="invalid_question")
    if len(question) > MAX_QUESTION_CHARS:
        raise RagsiteError(f"question is at most {MAX_QUESTION_CHARS} characters", code="invalid_question")
    if not encodable(question):  # a lone surrogate: valid JSON, but no tokenizer takes it
        raise RagsiteError("question must not contain lone surrogates", code="invalid_question")
    if not isinstance(most, int) or isinstance(most, bool) or not 1 <= most <= max_most:
        raise RagsiteError(f"most must be between 1 and {max_most}", code="invalid_most")
    if around is not None and (not isinstance(around, int) or isinstance(around, bool) or not 0 <= around <= MAX_AROUND):
        raise RagsiteError(f"around must be between 0 and {MAX_AROUND}", code="invalid_around")
    if min_score is not None and (
        isinstance(min_score, bool) or not isinstance(min_score, int | float) or not 0 <= min_score <= 1
    ):
        raise RagsiteError("min_score must be between 0 and 1", code="invalid_min_score")
    return question


def search_collection(
    *,
    agent: Agent,
    collection: str | Collection,
    question: str,
    reader: str | None = None,
    on_behalf_of: str | None = None,
    most: int = 5,
    around: int | None = None,
    min_score: float | None = None,
    key: ApiKey | None = None,
    mode: str | None = None,
    max_most: int = MAX_MOST,
    nprobe: int | None = None,
    explain: bool = False,
) -> dict:
    """Search one of `agent`'s collections; returns the answer as a JSON-ready dict.

    `mode` narrows the ranking to one arm ("vector" or "lexical"); by default a
    collection with vectors is searched "hybrid". `max_most` lets in-process
    callers such as the benchmarks ask for more than an agent may, and `nprobe`
    overrides the IVF lists scored (default: the nprobe the build measured). `explain` (the admin's
    playground, never the API) adds ``explain``: each answer's pieces with their lexical and semantic
    parts, and how many paragraphs at or above the floor this reader's labels hid (a count only).
    """
    question = validate_request(question, most, around, min_score, max_most)
    if mode is not None and mode not in MODES:
        raise RagsiteError(f"mode must be one of {', '.join(MODES)}", code="invalid_mode")
    if nprobe is not None and (isinstance(nprobe, bool) or not isinstance(nprobe, int) or nprobe < 1):
        raise RagsiteError("nprobe must be a whole number of at least 1", code="invalid_nprobe")
    if not isinstance(collection, Collection):
        collection = get_collection(agent=agent, name=collection)
    elif collection.agent_id != agent.pk:
        raise NotFound(f'no collection "{collection.name}"', code="unknown_collection")
    reader_obj = _resolve_reader(collection, reader)
    payer = resolve_payer(key, on_behalf_of)
    check_runaway(payer)

    floor, floor_source = resolve_floor(collection, min_score)
    around = int(_first_set(around, collection.around, settings.AROUND))
    built = CollectionBuilt.objects.filter(collection=collection).first()
    if built is None:
        raise Conflict(f'collection "{collection.name}" has never been built', code="not_built")
    index = collection_index(collection, built)

    cosine, model = (
        (None, index.model) if mode == "lexical" else _cosine(collection, built, index, question, payer, nprobe)
    )
    if mode == "vector" and cosine is None:
        raise Conflict(f'collection "{collection.name}" holds no vectors to search', code="no_vectors")
    question_terms = terms(question)
    bm25, bound = _lexical(index, question_terms) if mode != "vector" else (None, 0.0)
    scores, mode = hybrid_scores(cosine, bm25, bound, weight=FUSION_WEIGHT)

    mask = _readable_mask(collection, index, reader_obj)
    eligible = np.flatnonzero(mask & (scores >= floor)) if index.size else np.zeros(0, dtype=np.int64)
    top = eligible[np.argsort(-scores[eligible], kind="stable")[:most]]
    readable = ReadableRows(index, mask)
    top, relevance, rerank, fused_rank = _rerank(collection, index, question, scores, mask, floor, most, payer, top)
    order_by = scores if relevance is None else relevance
    runs = stitch([(index.rows[i].ordinal, float(order_by[i])) for i in top], readable, around)
    runs = [run for run in runs if run.text.strip()]  # a hit wholly inside a hidden neighbour's copy
    paragraphs = [_paragraph(run, index.document_names.get(run.document, ""), readable) for run in runs]
    if relevance is not None:
        _mark_reranked(paragraphs, runs, index, top, scores, fused_rank)
    answer = {
        "paragraphs": paragraphs,
        "floor": floor,
        "floor_source": floor_source,
        "around": around,
        "mode": mode,
        "model": model,
        "refused": None,
        "rerank": rerank,
    }
    if explain:
        answer["explain"] = _explain(collection, index, runs, top, mask, scores, floor, cosine, bm25, bound,
                                     reader_obj)
    _judge(answer, collection, question, payer)
    logger.info(
        "search %s/%s: mode %s, %d paragraphs, refused %s",
        agent.agent_id, collection.name, mode, len(answer["paragraphs"]), answer["refused"],
    )
    return answer


def _rerank(collection, index: CollectionIndex, question: str, scores: np.ndarray, mask: np.ndarray, floor: float,
            most: int, payer: Agent | None, top: np.ndarray):
    """Reorder the top ``RERANK_DEPTH`` readable candidates by the reranker, before the floor.

    Returns the rows to stitch, their relevance by row (None when the fused order stands), the
    answer's ``rerank`` field, and each candidate's position in the fused order. The floor still
    applies to the fused score, whose scale it was calibrated on; the reranker only decides the
    order. Any failure keeps the fused order.
    """
    if not settings.RERANK_URL:
        return top, None, {"status": "not configured"}, {}
    if _over_budget(payer):
        return top, None, {"status": "over budget"}, {}
    readable = np.flatnonzero(mask)
    depth = max(int(settings.RERANK_DEPTH), most)
    candidates = readable[np.argsort(-scores[readable], kind="stable")[:depth]]
    if candidates.size == 0:
        return top, None, {"status": "nothing to rerank"}, {}
    try:
        reranked = ask_reranker(
            url=settings.RERANK_URL, model=settings.RERANK_MODEL, api_key=settings.RERANK_API_KEY,
            timeout=float(settings.RERANK_TIMEOUT), question=question,
            documents=[index.rows[i].text for i in candidates],
        )
    except RerankUnavailable as exc:
        logger.warning("reranker unavailable for %s/%s: %s", collection.agent.agent_id, collection.name, exc)
        return top, None, {"status": "unavailable"}, {}
    if payer is not None:
        record_call(agent=payer, collection=collection, purpose=ModelCall.RERANK, model=reranked.model,
                    tokens_in=reranked.tokens)
    relevance = np.full(index.size, -np.inf)
    relevance[candidates] = reranked.scores
    order = candidates[np.argsort(-relevance[candidates], kind="stable")]
    fused_rank = {index.rows[i].ordinal: position for position, i in enumerate(candidates.tolist(), start=1)}
    status = {"status": "reranked", "model": reranked.model, "depth": int(candidates.size)}
    return order[scores[order] >= floor][:most], relevance, status, fused_rank


def _mark_reranked(paragraphs: list[dict], runs, index: CollectionIndex, top: np.ndarray, scores: np.ndarray,
                   fused_rank: dict[int, int]) -> None:
    """Each stitched paragraph's fused score and fused position beside the reranker's score that ordered it."""
    fused = {index.rows[i].ordinal: float(scores[i]) for i in top}
    for paragraph, run in zip(paragraphs, runs, strict=True):
        hits = [o for o in range(run.first, run.last + 1) if o in fused]
        paragraph["rerank_score"] = paragraph["score"]
        paragraph["score"] = round(max(fused[o] for o in hits), 6)
        paragraph["fused_rank"] = min(fused_rank[o] for o in hits)


def _lexical(index: CollectionIndex, question_terms: list[str]) -> tuple[np.ndarray, float]:
    """The seed-004 BM25 of each row's text with its context's share added (context.py), and the bound."""
    context = index.context_bm25
    return lexical_with_context(
        index.bm25.scores(question_terms), index.bm25.upper_bound(question_terms),
        context.scores(question_terms) if context is not None else None,
        context.upper_bound(question_terms) if context is not None else 0.0,
    )


def _explain(collection, index, runs, top, mask, scores, floor, cosine, bm25, upper_bound, reader) -> dict:
    """Why each answer scored what it did, piece by piece, for a person testing the collection."""
    hits = {int(index.rows[i].ordinal) for i in top}
    semantic = normalise_cosine(cosine) if cosine is not None else None
    lexical = normalise_bm25(bm25, upper_bound) if bm25 is not None else None
    pieces = []
    for run in runs:
        parts = []
        for ordinal in range(run.first, run.last + 1):
            position = index.position.get(ordinal)
            if position is None or not mask[position]:
                continue
            parts.append({
                "paragraph": int(index.ids[position]),
                "ordinal": ordinal,
                "text": index.rows[position].text,
                "hit": ordinal in hits,
                "score": round(float(scores[position]), 6),
                "lexical": None if lexical is None else round(float(lexical[position]), 6),
                "semantic": None if semantic is None else round(float(semantic[position]), 6),
            })
        pieces.append(parts)
    hidden = 0
    if reader is not None and collection.per_reader and index.size:
        everyone = _readable_mask(collection, index, None)
        hidden = int(np.count_nonzero(everyone & ~mask & (scores >= floor)))
    return {"pieces": pieces, "hidden_by_labels": hidden}


def resolve_floor(collection: Collection, requested: float | None) -> tuple[float, str]:
    """The floor in force and its source: the request's, else the collection's (`Collection.floor_in_force`):
    measured off its known answers, its own override, or MIN_SCORE."""
    if requested is not None:
        return requested, "request"
    measured = collection.known_answer_reports.measured_floor() if collection.floor_measured else None
    return collection.floor_in_force(measured=measured, default=float(settings.MIN_SCORE))


def _paragraph(run, document: str, readable: ReadableRows) -> dict:
    """One paragraph of the answer, citable by seed 004's chunk id.

    `chunk_id` is `<document>#<k>` of the paragraph the question matched, k its position within
    its document: the id `export_index` writes in docs.jsonl, unchanged by rebuilds of other
    documents. `chunk_ids` names every stored paragraph the text stitches, in document order.
    `first`/`last` are positions across the whole collection, not ids: they shift whenever an
    earlier document changes.
    """
    return {
        "text": run.text,
        "score": round(run.score, 6),
        "document": document,
        "section": run.section,
        "passages": run.passages,
        "chunk_id": f"{document}#{readable[run.hit].index}",
        "chunk_ids": [f"{document}#{readable[o].index}" for o in range(run.first, run.last + 1)],
        "first": run.first,
        "last": run.last,
    }


def _first_set(*values):
    return next(v for v in values if v is not None)


def _cosine(collection, built, index: CollectionIndex, question: str, payer: Agent | None, nprobe: int | None):
    """Cosine of the question against every row, or None when the collection holds no vectors."""
    if index.matrix is None or not index.has_vector.any():
        return None, index.model  # lexical: the question is not embedded at all
    embedder = embedding.get_embedder()
    if embedder.model != index.model:
        raise Conflict(
            f'collection "{collection.name}" was built with {index.model} but this server embeds with '
            f"{embedder.model}; rebuild the collection or restore the embedder",
            code="model_mismatch",
        )
    try:
        embedded = embedder.embed_with_usage([question])
    except EmbeddingError as exc:
        raise RagsiteError(f"the embedder failed: {exc}", code="embedder_unavailable", status=503) from None
    vector = np.asarray(embedded.vectors[0], dtype=np.float32)
    if vector.shape[0] != index.matrix.shape[1]:
        raise Conflict(
            f"the question was embedded with {vector.shape[0]} dimensions but the collection's rows have "
            f"{index.matrix.shape[1]}; rebuild the collection",
            code="width_mismatch",
        )
    if payer is not None and embedder.backend == "http":
        record_call(agent=payer, collection=collection, purpose=ModelCall.EMBED, model=embedder.model,
                    tokens_in=embedded.tokens or 0)
    threshold = int(settings.IVF_MIN_PARAGRAPHS)
    if threshold > 0 and index.size >= threshold:
        return _ivf_cosine(collection, built, index, vector, nprobe), index.model
    logger.debug("search %s: exact cosine over %d rows", collection.name, index.size)
    cosine = index.matrix @ vector
    cosine[~index.has_vector] = 0.0
    return cosine, index.model


def _ivf_for(collection: Collection, built: CollectionBuilt, index: CollectionIndex) -> IVFLists:
    """The IVF lists over `index`'s rows that hold a vector, built once per build: k-means++ seeded
    from the build's interchange index_id, and the nprobe that reached IVF_RECALL on its own rows."""
    if index.ivf is None:
        with _ivf_lock:
            if index.ivf is None:
                rows = np.flatnonzero(index.has_vector)
                # All rows embedded (the usual case): the matrix itself, not a copy of it.
                vectors = index.matrix if rows.size == index.size else index.matrix[rows]
                lists = build_lists(vectors, index_id=built.ivf_index_id, target_recall=float(settings.IVF_RECALL))
                index.ivf_rows, index.ivf_vectors, index.ivf = rows, vectors, lists
                logger.debug(
                    "search %s: built IVF, %d lists over %d rows, nprobe %d for recall@10 %.3f",
                    collection.name, lists.nlist, rows.size, lists.nprobe, lists.recall,
                )
    return index.ivf


def _ivf_cosine(
    collection: Collection, built: CollectionBuilt, index: CollectionIndex, vector: np.ndarray, nprobe: int | None
) -> np.ndarray:
    """Cosine for the rows in the lists nearest the question; every other row gets 0,
    so it can still rank on BM25 in hybrid mode.

    The lists scored: the request's `nprobe`, else IVF_NPROBE when set, else the build's measured one.
    """
    lists = _ivf_for(collection, built, index)
    if nprobe is None:
        nprobe = int(settings.IVF_NPROBE) or lists.nprobe
    nprobe = max(1, min(int(nprobe), lists.nlist))
    members = lists.probe(vector, nprobe)
    cosine = np.zeros(index.size, dtype=np.float32)
    cosine[index.ivf_rows[members]] = index.ivf_vectors[members] @ vector
    logger.debug(
        "search %s: IVF cosine, nprobe %d of %d lists, %d of %d rows scored",
        collection.name, nprobe, lists.nlist, members.size, index.size,
    )
    return cosine


def _judge(answer: dict, collection: Collection, question: str, payer: Agent | None) -> None:
    """Ask the judge, when this collection has one; `refused` stays null unless a verdict came back."""
    if not collection.judge or not settings.JUDGE_URL:
        answer["judge"] = {"status": "not configured"}
        return
    if not answer["paragraphs"]:
        answer["judge"] = {"status": "nothing to judge"}
        return
    if _over_budget(payer):
        answer["judge"] = {"status": "over budget"}
        return
    try:
        verdict = ask_judge(
            url=settings.JUDGE_URL,
            model=settings.JUDGE_MODEL,
            api_key=settings.JUDGE_API_KEY,
            timeout=float(settings.JUDGE_TIMEOUT),
            question=question,
            paragraphs=[p["text"] for p in answer["paragraphs"]],
        )
    except JudgeUnavailable as exc:
        logger.warning("judge unavailable for %s/%s: %s", collection.agent.agent_id, collection.name, exc)
        answer["judge"] = {"status": "unavailable"}
        return
    if payer is not None:
        record_call(agent=payer, collection=collection, purpose=ModelCall.JUDGE, model=verdict.model,
                    tokens_in=verdict.tokens_in, tokens_out=verdict.tokens_out)
    answer["refused"] = not verdict.answers
    answer["judge"] = {"status": "answered", "model": verdict.model}
    if answer["refused"]:
        answer["paragraphs"] = []  # withheld: the answering call never sees them
