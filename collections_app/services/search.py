"""Searching a collection: rank, floor, filter by reader, stitch, judge, and charge the asking agent.

The ranking itself is pure (`lexical`, `fusion`, `stitch`); this module loads a
collection's index once per build and per process, decides who may read what,
and records model calls in the ledger. The question and the paragraphs never
reach the ledger or a log line.
"""

import logging
import threading

import numpy as np

from ragsite import embedding, fusion
from ragsite.bodies import encodable
from ragsite.embedders import EmbeddingError
from ragsite.errors import Conflict, Forbidden, NotFound, RagsiteError
from ragsite.fusion import LEXICAL, hybrid_scores, normalise_bm25, normalise_cosine
from ragsite.lexical import terms
from ragsite.model_calls.judge import JudgeUnavailable, ask_judge
from ragsite.model_calls.rerank import RerankUnavailable, ask_reranker
from ragsite.top import top_rows

from ..conf import settings
from ..index.bm25_top import best_rows
from ..index.ivf import IVFLists, build_lists
from ..index.mapped import MappedIndex
from ..models import Agent, ApiKey, Collection, CollectionBuilt, ModelCall, Paragraph, Reader
from ..text.context import lexical_with_context
from ..text.stitch import Row, stitch
from .agents import get_collection
from .candidates import scored_candidates
from .indexes import forget, mapped_index
from .ledger import check_runaway, over_budget, record_call
from .readers import cut_hidden_copies, resolve_reader
from .rows import search_state, stored_rows

logger = logging.getLogger("ragsite.search")

MAX_QUESTION_CHARS = 2000
MAX_MOST = 50
MAX_AROUND = Collection.MAX_AROUND


_ivf_cache: dict[int, tuple[str, IVFLists]] = {}
_ivf_lock = threading.Lock()


def collection_index(collection: Collection, built: CollectionBuilt) -> MappedIndex:
    """The memory-mapped index of `collection`'s current build (see services.indexes)."""
    return mapped_index(collection, built)[1]


def forget_index(collection_id: int) -> None:
    """Drop this process's mapping and IVF of a collection; the next search maps it again."""
    forget(collection_id)
    _ivf_cache.pop(collection_id, None)


# --- Who may read, who pays ---------------------------------------------------


def _readable_mask(collection: Collection, index: MappedIndex, reader: Reader | None,
                   held_back: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Rows this search may rank and stitch: active documents less the held-back documents and paragraphs
    (`rows.search_state`), and for a per-reader collection the reader's labels.

    Any further per-row filter is one more `&=` here: ranking, statistics, stitching and positions all
    follow this mask.
    """
    documents, paragraphs = held_back
    mask = np.ones(index.size, dtype=bool)
    if documents.size:
        mask &= ~np.isin(index.row_document, documents)
    if paragraphs.size:
        mask &= ~np.isin(index.row_paragraph, paragraphs)
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
            mask &= ~np.isin(index.row_paragraph, np.fromiter(forbidden, dtype=np.int64, count=len(forbidden)))
    return mask


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
    reader_obj = resolve_reader(collection, reader)
    payer = resolve_payer(key, on_behalf_of)
    check_runaway(payer)

    floor, floor_source = resolve_floor(collection, min_score)
    around = int(_first_set(around, collection.around, settings.AROUND))
    built, *held_back = search_state(collection)
    if built is None:
        raise Conflict(f'collection "{collection.name}" has never been built', code="not_built")
    key, index = mapped_index(collection, built)
    mask = _readable_mask(collection, index, reader_obj, held_back)
    # A per-reader collection's BM25 statistics are those of the rows this reader may see, each row
    # less the opening it shares with a row the reader may not see, so no score depends on a paragraph
    # it cannot read (issue 15); other collections keep seed 004's collection-wide statistics, which
    # the interchange export reproduces.
    view = index.view(mask, cut_carried=True) if collection.per_reader else None

    vector, model = (None, built.model) if mode == "lexical" else _question_vector(collection, built, index, question,
                                                                                  payer)
    if mode == "vector" and vector is None:
        raise Conflict(f'collection "{collection.name}" holds no vectors to search', code="no_vectors")
    bm25 = upper = None
    question_terms = None if mode == "vector" else terms(question)
    # Lexical alone over every row's statistics, and nothing asks for every row's score (explain, the
    # reranker): the best rows are found without scoring every row, and only they are normalised.
    quick = (best_rows(index, question_terms, most, None if mask.all() else mask,
                       lexical_score)
             if vector is None and view is None and not explain and not settings.RERANK_URL else None)
    if quick is not None:
        rows, row_scores = quick  # the top rows by fused score, best first, and those scores
        top, mode = rows[row_scores >= floor], LEXICAL  # the floor cuts the order's tail (fusion is monotone)
    else:
        if question_terms is not None:
            bm25, upper = _lexical(index, question_terms, view)
        candidates = None
        if vector is not None and _approximate(index):
            candidates, scores, mode = scored_candidates(
                collection.name, ivf_of(collection, built, key, index), index, vector, bm25, upper, mask, nprobe,
                floor, most, lambda rows: _fused_scores(index, vector, bm25, upper, view, rows), weight=fusion.FUSION_WEIGHT)
        else:
            scores, mode = _fused_scores(index, vector, bm25, upper, view, None)
        if candidates is None:
            rows, row_scores = None, scores
            everyone = bool(mask.all())
            # Unfloored over an unfiltered collection every row is eligible: no mask to build or apply.
            eligible = None if everyone and floor <= 0 else (mask if floor <= 0 else mask & (scores >= floor))
            top = top_rows(scores, eligible, most)
        else:
            rows, row_scores = candidates, scores  # candidates are readable and ascending: ties to the lower row
            top = candidates[top_rows(scores, scores >= floor, most)]
    fused = _fused_of(rows, row_scores)
    top, relevance, rerank, fused_rank = _rerank(collection, index, question, rows, row_scores, mask, floor, most,
                                                 payer, top)
    hits = [(int(row), float(fused(row) if relevance is None else relevance[int(row)])) for row in top]
    paragraphs, runs, readable = _stitched(index, mask, hits, around)
    if relevance is not None:
        _mark_reranked(paragraphs, runs, top, fused, fused_rank)
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
        answer["explain"] = _explain(collection, index, runs, readable, top, mask, view, vector, bm25, upper, floor,
                                     reader_obj, rows, row_scores, held_back)
    _judge(answer, collection, question, payer)
    logger.info(
        "search %s/%s: mode %s, %d paragraphs, refused %s",
        agent.agent_id, collection.name, mode, len(answer["paragraphs"]), answer["refused"],
    )
    return answer


def lexical_score(bm25: np.ndarray, bound: float) -> np.ndarray:
    """The fused score of BM25 alone (a lexical search's, and a hybrid one's for a row without a cosine):
    never decreasing in BM25, so the best rows by one are the best by the other (bm25_top.best_rows)."""
    return hybrid_scores(None, bm25, bound, weight=fusion.FUSION_WEIGHT)[0]


def _lexical(index: MappedIndex, question_terms: list[str], view) -> tuple[np.ndarray, float]:
    """The seed-004 BM25 of each row's text with its context's share added (context.py), and the bound;
    both over the same view of the rows."""
    text, bound = index.bm25(question_terms, view)
    if index.context is None:
        return text, bound
    context_view = None if view is None else index.context.view(view.mask)
    context, context_bound = index.context.bm25(question_terms, context_view)
    return lexical_with_context(text, bound, context, context_bound)


def _fused_scores(index: MappedIndex, vector, bm25, upper, view, rows: np.ndarray | None) -> tuple[np.ndarray, str]:
    """The exact fused score of each of `rows` (None: every row), and the mode: its pooled cosine (0 for
    a row without a vector, or with a stale one) and its BM25."""
    if vector is None:
        cosine = None
    else:
        cosine = index.cosine(vector) if rows is None else index.cosine_of_rows(vector, rows)
        cosine[np.isneginf(cosine)] = 0.0  # a row without a vector has no cosine to offer
        _without_stale_cosine(index, view, cosine, rows)
    lexical = None if bm25 is None else (bm25 if rows is None else bm25[rows])
    return hybrid_scores(cosine, lexical, upper or 0.0, weight=fusion.FUSION_WEIGHT)


def _without_stale_cosine(index: MappedIndex, view, cosine: np.ndarray, candidates: np.ndarray | None) -> None:
    """No cosine for a cut row whose vector may have been embedded with its carried opening.

    Builds embed a row from the end of its carried opening (builds.py), so its vector holds no text of
    the rows it shares text with. An index over older vectors (or imported ones) says so in its meta;
    there a row that shares text with a row this reader may not read is ranked on its text alone
    until the collection is rebuilt (which re-embeds it once).
    """
    if view is None or view.cut is None or index.meta.get("fresh_vectors"):
        return
    if candidates is None:
        cosine[view.cut] = 0.0
    else:
        cosine[view.cut[candidates]] = 0.0


def _fused_of(rows: np.ndarray | None, scores: np.ndarray):
    """A row's fused score, whether `scores` covers every row (rows None) or the candidates `rows`."""
    if rows is None:
        return lambda row: float(scores[row])
    at = {int(row): i for i, row in enumerate(rows.tolist())}
    return lambda row: float(scores[at[int(row)]])


def _texts(index: MappedIndex, rows, mask: np.ndarray) -> list[str]:
    """The texts of some rows as this search may show them (less what they share with rows it may not
    read, readers.cut_hidden_copies), in their order: what the reranker reads, so it orders on
    nothing the reader could not be shown."""
    ids = [int(index.row_paragraph[r]) for r in rows]
    found = {pk: (start, end, text) for pk, start, end, text, *_ in stored_rows(ids)}
    shown = {int(r): Row(ordinal=int(r), document=int(index.row_document[r]), start=found[pk][0], end=found[pk][1],
                         text=found[pk][2], section="") for r, pk in zip(rows, ids, strict=True) if pk in found}
    cut_hidden_copies(index, mask, shown)
    return [shown[int(r)].text if int(r) in shown else "" for r in rows]


def _rerank(collection, index: MappedIndex, question: str, rows, scores: np.ndarray, mask: np.ndarray,
            floor: float, most: int, payer: Agent | None, top: np.ndarray):
    """Reorder the top ``RERANK_DEPTH`` readable candidates by the reranker, before the floor.

    Returns the rows to stitch, their relevance by row (None when the fused order stands), the
    answer's ``rerank`` field, and each candidate's position in the fused order. The floor still
    applies to the fused score, whose scale it was calibrated on; the reranker only decides the
    order. Any failure keeps the fused order.
    """
    if not settings.RERANK_URL:
        return top, None, {"status": "not configured"}, {}
    if over_budget(payer):
        return top, None, {"status": "over budget"}, {}
    depth = max(int(settings.RERANK_DEPTH), most)
    if rows is None:
        candidates = top_rows(scores, mask, depth)
        candidate_scores = scores[candidates]
    else:
        best = top_rows(scores, None, depth)
        candidates, candidate_scores = rows[best], scores[best]
    if candidates.size == 0:
        return top, None, {"status": "nothing to rerank"}, {}
    try:
        reranked = ask_reranker(
            url=settings.RERANK_URL, model=settings.RERANK_MODEL, api_key=settings.RERANK_API_KEY,
            timeout=float(settings.RERANK_TIMEOUT), question=question, documents=_texts(index, candidates, mask),
        )
    except RerankUnavailable as exc:
        logger.warning("reranker unavailable for %s/%s: %s", collection.agent.agent_id, collection.name, exc)
        return top, None, {"status": "unavailable"}, {}
    if payer is not None:
        record_call(agent=payer, collection=collection, purpose=ModelCall.RERANK, model=reranked.model,
                    tokens_in=reranked.tokens)
    relevance = {int(row): float(value) for row, value in zip(candidates.tolist(), reranked.scores, strict=True)}
    order = np.argsort(-np.asarray(reranked.scores, dtype=np.float64), kind="stable")
    kept = [int(candidates[i]) for i in order if candidate_scores[i] >= floor][:most]
    fused_rank = {int(row): position for position, row in enumerate(candidates.tolist(), start=1)}
    status = {"status": "reranked", "model": reranked.model, "depth": int(candidates.size)}
    return np.asarray(kept, dtype=np.int64), relevance, status, fused_rank


def _mark_reranked(paragraphs: list[dict], runs, top: np.ndarray, fused, fused_rank: dict[int, int]) -> None:
    """Each stitched paragraph's fused score and fused position beside the reranker's score that ordered it."""
    hits_fused = {int(row): fused(row) for row in top}
    for paragraph, run in zip(paragraphs, runs, strict=True):
        hits = [row for row in range(run.first, run.last + 1) if row in hits_fused]
        paragraph["rerank_score"] = paragraph["score"]
        paragraph["score"] = round(max(hits_fused[row] for row in hits), 6)
        paragraph["fused_rank"] = min(fused_rank[row] for row in hits)


def _explain(collection, index: MappedIndex, runs, readable, top, mask, view, vector, bm25, upper, floor, reader,
             rows, row_scores, held_back) -> dict:
    """Why each answer scored what it did, piece by piece, for a person testing the collection.

    Each piece's parts are scored exactly (its cosine from the index, its BM25 from this search's).
    ``hidden_by_labels`` counts readable-to-everyone rows at or above the floor this reader cannot see;
    on the approximate path it counts among the candidates only.
    """
    hits = {int(row) for row in top}
    # Positions among the rows this search may use, as `first`/`last` give them.
    positions = None if mask.all() else np.cumsum(mask)
    pieces = []
    for run in runs:
        parts_rows = [row for row in range(run.first, run.last + 1) if row in readable]
        cosine = index.cosine_of_rows(vector, np.asarray(parts_rows)) if vector is not None else None
        if cosine is not None:
            cosine[np.isneginf(cosine)] = 0.0
            _without_stale_cosine(index, view, cosine, np.asarray(parts_rows, dtype=np.int64))
        lexical = None if bm25 is None else bm25[np.asarray(parts_rows, dtype=np.int64)]
        fused, _mode = hybrid_scores(cosine, lexical, upper or 0.0, weight=fusion.FUSION_WEIGHT)
        semantic = normalise_cosine(cosine) if cosine is not None else None
        lexical01 = normalise_bm25(lexical, upper or 0.0) if lexical is not None else None
        pieces.append([
            {
                "paragraph": int(index.row_paragraph[row]),
                "ordinal": row + 1 if positions is None else int(positions[row]),
                "text": readable[row].text,
                "hit": row in hits,
                "score": round(float(fused[i]), 6),
                "lexical": None if lexical01 is None else round(float(lexical01[i]), 6),
                "semantic": None if semantic is None else round(float(semantic[i]), 6),
            }
            for i, row in enumerate(parts_rows)
        ])
    hidden = 0
    if reader is not None and collection.per_reader and index.size:
        everyone = _readable_mask(collection, index, None, held_back)
        if rows is None:
            hidden = int(np.count_nonzero(everyone & ~mask & (row_scores >= floor)))
    return {"pieces": pieces, "hidden_by_labels": hidden}


def resolve_floor(collection: Collection, requested: float | None) -> tuple[float, str]:
    """The floor in force and its source: the request's, else the collection's (`Collection.floor_in_force`):
    measured off its known answers, its own override, or MIN_SCORE."""
    if requested is not None:
        return requested, "request"
    measured = collection.known_answer_reports.measured_floor() if collection.floor_measured else None
    return collection.floor_in_force(measured=measured, default=float(settings.MIN_SCORE))


def _first_set(*values):
    return next(v for v in values if v is not None)


def _question_vector(collection, built: CollectionBuilt, index: MappedIndex, question: str, payer: Agent | None):
    """The question's vector, or None when the collection holds no vectors (then it is not embedded)."""
    if index.vectors.shape[0] == 0:
        return None, built.model  # lexical: the question is not embedded at all
    embedder = embedding.get_embedder()
    if embedder.model != built.model:
        raise Conflict(
            f'collection "{collection.name}" was built with {built.model} but this server embeds with '
            f"{embedder.model}; rebuild the collection or restore the embedder",
            code="model_mismatch",
        )
    try:
        embedded = embedder.embed_with_usage([question])
    except EmbeddingError as exc:
        raise RagsiteError(f"the embedder failed: {exc}", code="embedder_unavailable", status=503) from None
    vector = np.asarray(embedded.vectors[0], dtype=np.float32)
    if vector.shape[0] != index.dimensions:
        raise Conflict(
            f"the question was embedded with {vector.shape[0]} dimensions but the collection's rows have "
            f"{index.dimensions}; rebuild the collection",
            code="width_mismatch",
        )
    if payer is not None and embedder.backend == "http":
        record_call(agent=payer, collection=collection, purpose=ModelCall.EMBED, model=embedder.model,
                    tokens_in=embedded.tokens or 0)
    return vector, built.model


def _approximate(index: MappedIndex) -> bool:
    threshold = int(settings.IVF_MIN_PARAGRAPHS)
    return threshold > 0 and index.size >= threshold


def ivf_of(collection: Collection, built: CollectionBuilt, key: str, index: MappedIndex) -> IVFLists:
    """The IVF lists over the build's vectors (a paragraph's windows are rows of their own), once per
    build and process: k-means++ seeded from the build's interchange index_id, and the nprobe that
    reached IVF_RECALL on its own rows (ivf.build_lists)."""
    stored = index.ivf
    if (stored is not None and stored.index_id == built.ivf_index_id
            and stored.target_recall == float(settings.IVF_RECALL)):
        _ivf_cache.pop(collection.pk, None)  # an earlier build's lists, built here, are done with
        return stored  # written with the build: mapped, shared, nothing to build here
    cached = _ivf_cache.get(collection.pk)
    if cached is not None and cached[0] == key:
        return cached[1]
    with _ivf_lock:
        cached = _ivf_cache.get(collection.pk)
        if cached is None or cached[0] != key:
            lists = build_lists(index.vector_matrix(), index_id=built.ivf_index_id,
                                target_recall=float(settings.IVF_RECALL))
            logger.debug("search %s: built IVF, %d lists over %d vectors, nprobe %d for recall@10 %.3f",
                         collection.name, lists.nlist, index.vectors.shape[0], lists.nprobe, lists.recall)
            cached = _ivf_cache[collection.pk] = (key, lists)
    return cached[1]


def _stitched(index: MappedIndex, mask: np.ndarray, hits: list[tuple[int, float]], around: int) -> list[dict]:
    """Hits widened by their readable neighbours, with texts read from the store for those rows only.

    `first` and `last` are positions among the rows this search may use (1 = the first readable
    paragraph), never the collection-wide ordinals, whose gaps would show where hidden paragraphs sit.
    """
    if not hits:
        return [], [], {}
    documents = index.row_document
    wanted: set[int] = set()
    for row, _score in hits:
        wanted.add(row)
        for step in (-1, 1):
            at = row
            for _ in range(around):
                at += step
                if not 0 <= at < index.size or not mask[at] or documents[at] != documents[row]:
                    break
                wanted.add(at)
    rows_sorted = sorted(wanted)
    ids = [int(index.row_paragraph[r]) for r in rows_sorted]
    names: dict[int, str] = {}
    stored = {}
    for pk, start, end, text, section, k, document, name in stored_rows(ids):
        stored[pk] = (start, end, text, section, k)
        names[document] = name
    readable = {}
    for row, pk in zip(rows_sorted, ids, strict=True):
        if pk not in stored:
            continue  # deleted since the index was written; the next search maps a new one
        start, end, text, section, k = stored[pk]
        readable[row] = Row(ordinal=row, document=int(documents[row]), start=start, end=end, text=text,
                            section=section, index=k)
    cut_hidden_copies(index, mask, readable)
    runs = stitch([(row, score) for row, score in hits if row in readable], readable, around)
    runs = [run for run in runs if run.text.strip()]  # a hit wholly inside a hidden neighbour's copy
    # Every row readable (the usual case): a row's position is its number; otherwise count the
    # readable rows before it, once for all runs.
    position = None if mask.all() else np.cumsum(mask)

    def at(row: int) -> int:
        return row + 1 if position is None else int(position[row])

    return [_paragraph(run, names.get(run.document, ""), readable, at) for run in runs], runs, readable


def _paragraph(run, document: str, readable: dict[int, Row], at) -> dict:
    """One paragraph of the answer, citable by seed 004's chunk id.

    `chunk_id` is `<document>#<k>` of the paragraph the question matched, k its position within
    its document: the id `export_index` writes in docs.jsonl, unchanged by rebuilds of other
    documents. `chunk_ids` names every stored paragraph the text stitches, in document order.
    `first`/`last` are positions among the paragraphs this search may use (see `_stitched`).
    """
    return {
        "text": run.text,
        "score": round(run.score, 6),
        "document": document,
        "section": run.section,
        "passages": run.passages,
        "chunk_id": f"{document}#{readable[run.hit].index}",
        "chunk_ids": [f"{document}#{readable[o].index}" for o in range(run.first, run.last + 1)],
        "first": at(run.first),
        "last": at(run.last),
    }


def _judge(answer: dict, collection: Collection, question: str, payer: Agent | None) -> None:
    """Ask the judge, when this collection has one; `refused` stays null unless a verdict came back."""
    if not collection.judge or not settings.JUDGE_URL:
        answer["judge"] = {"status": "not configured"}
        return
    if not answer["paragraphs"]:
        answer["judge"] = {"status": "nothing to judge"}
        return
    if over_budget(payer):
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
