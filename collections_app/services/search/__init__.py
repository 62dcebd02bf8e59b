"""Searching a collection: plan, rank, rerank, stitch, judge, answer, and charge the asking agent.

The ranking itself is pure (`collections_app.ranking`, over the mapped index); this package decides
who may read what (`plan`), which ranking path a question takes (lexical top-k, approximate, exact),
and records model calls in the ledger (`model_steps`). The question and the paragraphs never reach
the ledger or a log line. The answer's shape is declared once, in `answer`.
"""

import functools
import logging

import numpy as np

from ragsite import fusion, tracing
from ragsite.fusion import LEXICAL, hybrid_scores
from ragsite.instruments import SEARCHES

from ...conf import settings
from ...index.bm25_top import best_rows
from ...index.mapped import MappedIndex
from ...limits import DEFAULT_MOST, MAX_MOST
from ...models import Agent, ApiKey, Collection, CollectionBuilt
from ...ranking import Ranking, lexical, rank, top_at_floor
from ...text.chunking import returns_sections
from ..indexes import forget, mapped_index
from .approximate import approximate_ranking, forget_ivf, uses_ivf
from .explain import explain as explained
from .model_steps import judge, question_vector, rerank
from .plan import (
    MODES,
    SearchPlan,
    citing_mask,
    plan_search,
    resolve_floor,
    resolve_payer,
    validate_request,
)
from .stitched import mark_reranked, stitched

logger = logging.getLogger("ragsite.search")


def collection_index(collection: Collection, built: CollectionBuilt) -> MappedIndex:
    """The memory-mapped index of `collection`'s current build (see services.indexes)."""
    return mapped_index(collection, built)[1]


def forget_index(collection_id: int) -> None:
    """Drop this process's mapping and IVF of a collection; the next search maps it again."""
    forget(collection_id)
    forget_ivf(collection_id)


def search_collection(
    *,
    agent: Agent,
    collection: str | Collection,
    question: str,
    reader: str | None = None,
    on_behalf_of: str | None = None,
    most: int = DEFAULT_MOST,
    around: int | None = None,
    min_score: float | None = None,
    key: ApiKey | None = None,
    mode: str | None = None,
    max_most: int = MAX_MOST,
    nprobe: int | None = None,
    explain: bool = False,
    max_chars: int | None = None,
    filters: dict | None = None,
) -> dict:
    """Search one of `agent`'s collections; returns the answer (`answer.SearchOut`) as a JSON-ready dict.

    `mode` narrows the ranking to one arm ("vector" or "lexical"); by default a
    collection with vectors is searched "hybrid". `max_most` lets in-process
    callers such as the benchmarks ask for more than an agent may, and `nprobe`
    overrides the IVF lists scored (default: the nprobe the build measured). `explain` (the admin's
    playground, never the API) adds ``explain``: each answer's pieces with their lexical and semantic
    parts, and how many paragraphs at or above the floor this reader's labels hid (a count only).
    `max_chars` bounds the characters of text in the answer (default ANSWER_MAX_CHARS; `text.budget`).
    `filters` (OpenAI's vector-store shape, search.filtering) keeps only the rows it describes, before
    ranking, exactly as a reader's labels do.
    """
    with tracing.span("search") as root:
        with tracing.span("plan"):
            plan = plan_search(
                agent=agent,
                collection=collection,
                question=question,
                reader=reader,
                on_behalf_of=on_behalf_of,
                most=most,
                around=around,
                min_score=min_score,
                key=key,
                mode=mode,
                max_most=max_most,
                nprobe=nprobe,
                explain=explain,
                max_chars=max_chars,
                filters=filters,
            )
        with tracing.span("embed"):
            asked = question_vector(plan)
        with tracing.span("rank", mode=plan.mode or "default"):
            ranking = _ranking(plan, asked.vector)
        with tracing.span("rerank"):
            reranked = rerank(plan, ranking)
        relevance = reranked.relevance
        if relevance is None:
            hits = list(zip(np.asarray(reranked.top).tolist(), ranking.scores_of(reranked.top), strict=True))
        else:
            hits = [(int(row), relevance[int(row)]) for row in reranked.top]
        with tracing.span("stitch"):
            paragraphs, runs, readable, cut = stitched(
                plan.index,
                plan.mask,
                hits,
                plan.around,
                plan.max_chars,
                per_reader=plan.reader is not None,
                sections=returns_sections(plan.built.method),
                every=plan.every,
                citing=None
                if plan.reader is not None
                else citing_mask(plan.collection, plan.index, plan.held_back),
                question=plan.question,
                focus=ranking.focus(),
            )
        if relevance is not None:
            mark_reranked(
                paragraphs,
                runs,
                {int(row): ranking.score_of(row) for row in reranked.top},
                reranked.fused_rank,
            )
        answer = {
            "paragraphs": paragraphs,
            "floor": plan.floor,
            "floor_source": plan.floor_source,
            "around": plan.around,
            "max_chars": plan.max_chars,
            "chars": sum(len(paragraph["text"]) for paragraph in paragraphs),
            "cut": cut,
            "mode": ranking.mode,
            "model": asked.model,
            "refused": None,
            "rerank": reranked.status,
        }
        if explain:
            answer["explain"] = explained(plan, ranking, asked.vector, reranked.top, runs, readable)
        with tracing.span("judge"):
            verdict = judge(plan, paragraphs)
        answer["judge"] = verdict.status
        if verdict.refused is not None:
            answer["refused"] = verdict.refused
        if verdict.refused:
            answer["paragraphs"], answer["chars"] = [], 0  # withheld: the answering call never sees them
        logger.info(
            "search %s/%s: mode %s, %d paragraphs, refused %s",
            agent.agent_id,
            plan.collection.name,
            ranking.mode,
            len(answer["paragraphs"]),
            answer["refused"],
        )
        _searches(ranking.mode).inc()
        root.set_attribute("ragsite.mode", ranking.mode)
        root.set_attribute("ragsite.paragraphs", len(answer["paragraphs"]))
        return answer


@functools.cache
def _searches(mode: str):
    """The search counter's series for ``mode``, looked up once a process (`labels` takes a lock and
    builds its key at each call)."""
    return SEARCHES.labels(mode=mode)


def _ranking(plan: SearchPlan, vector: np.ndarray | None) -> Ranking:
    """The ranking path this question takes; every path ends in the one floor and top k
    (`ranking.top_at_floor`)."""
    index, weight = plan.index, fusion.FUSION_WEIGHT
    if (
        vector is None
        and plan.view is None
        and not plan.explain
        and not settings.RERANK_URL
        and getattr(index, "entries", None) is None  # entries are scored beside every row (`rank`)
    ):
        # Lexical alone over every row's statistics, and nothing asks for every row's score (explain,
        # the reranker): the best rows are found without scoring every row, and only they are fused.
        found = best_rows(
            index, plan.question_terms, plan.most, None if plan.every else plan.mask, lexical_score
        )
        if found is not None:
            rows, scores = found  # the top rows by fused score, best first, and those scores
            top = top_at_floor(scores, plan.floor, plan.most, rows=rows)
            return Ranking(top=top, rows=rows, scores=scores, mode=LEXICAL)
    if vector is not None and uses_ivf(index):
        lexical_arm = lexical(index, plan.question_terms, plan.view)
        return approximate_ranking(plan, vector, lexical_arm, weight=weight)
    return rank(
        index,
        plan.question_terms,
        vector,
        weight=weight,
        most=plan.most,
        floor=plan.floor,
        readable=plan.mask,
        view=plan.view,
    )


def lexical_score(bm25: np.ndarray, bound: float) -> np.ndarray:
    """The fused score of BM25 alone (a lexical search's, and a hybrid one's for a row without a cosine):
    never decreasing in BM25, so the best rows by one are the best by the other (bm25_top.best_rows)."""
    return hybrid_scores(None, bm25, bound, weight=fusion.FUSION_WEIGHT)[0]


__all__ = [
    "MODES",
    "collection_index",
    "forget_index",
    "lexical_score",
    "resolve_floor",
    "resolve_payer",
    "search_collection",
    "validate_request",
]
