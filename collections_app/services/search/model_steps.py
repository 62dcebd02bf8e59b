"""The model calls a search makes: embedding the question, reranking the fused candidates, judging the
answer. Each is charged to the payer in the ledger (counts and costs, never the question or a
paragraph) and each returns a small record, never a tuple to be read by position.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from ragsite import embedding
from ragsite.embedders import EmbeddingError
from ragsite.errors import Conflict, RagsiteError
from ragsite.instruments import EMBED_SECONDS, EMBEDDED
from ragsite.model_calls.judge import JudgeUnavailable, ask_judge
from ragsite.model_calls.rerank import reorder, rerank_status
from ragsite.top import top_rows

from ... import errors
from ...conf import settings
from ...models import ModelCall
from ...ranking import Ranking, clears_floor
from ..ledger import over_budget, record_call
from .plan import SearchPlan
from .stitched import shown_texts

logger = logging.getLogger("ragsite.search")


@dataclass(frozen=True)
class QuestionVector:
    """The question's vector (None: the collection holds none, or the search is lexical) and the model
    of the build it is compared with."""

    vector: np.ndarray | None
    model: str


def question_vector(plan: SearchPlan) -> QuestionVector:
    """Embed the question when the collection holds vectors and the search is not lexical."""
    built, index, collection = plan.built, plan.index, plan.collection
    if plan.mode == "lexical" or index.vectors.shape[0] == 0:
        found = QuestionVector(None, built.model)  # lexical: the question is not embedded at all
    else:
        found = QuestionVector(_embedded(plan), built.model)
    if plan.mode == "vector" and found.vector is None:
        raise Conflict(f'collection "{collection.name}" holds no vectors to search', code=errors.NO_VECTORS)
    return found


@functools.cache
def _question_counters():
    """The embedding counters' series for questions, looked up once a process."""
    return EMBED_SECONDS.labels(purpose="question"), EMBEDDED.labels(purpose="question")


def _embedded(plan: SearchPlan) -> np.ndarray:
    collection, built = plan.collection, plan.built
    embedder = embedding.get_embedder()
    if embedder.model != built.model:
        raise Conflict(
            f'collection "{collection.name}" was built with {built.model} but this server embeds with '
            f"{embedder.model}; rebuild the collection or restore the embedder",
            code=errors.MODEL_MISMATCH,
        )
    started = time.perf_counter()
    try:
        embedded = embedder.embed_with_usage([plan.question])
    except EmbeddingError as exc:
        raise RagsiteError(
            f"the embedder failed: {exc}", code=errors.EMBEDDER_UNAVAILABLE, status=503
        ) from None
    seconds, embedded_texts = _question_counters()
    seconds.inc(time.perf_counter() - started)
    embedded_texts.inc()
    vector = np.asarray(embedded.vectors[0], dtype=np.float32)
    if vector.shape[0] != plan.index.dimensions:
        raise Conflict(
            f"the question was embedded with {vector.shape[0]} dimensions but the collection's rows have "
            f"{plan.index.dimensions}; rebuild the collection",
            code=errors.WIDTH_MISMATCH,
        )
    if plan.payer is not None and embedder.backend == "http":
        record_call(
            agent=plan.payer,
            collection=collection,
            purpose=ModelCall.EMBED,
            model=embedder.model,
            tokens_in=embedded.tokens or 0,
        )
    return vector


# The answer's ``rerank`` field without a reranker (each answer gets its own copy): validating it through
# `RerankOut` at every search cost ~20 us.
_NOT_CONFIGURED = rerank_status("not configured")


@dataclass(frozen=True)
class RerankStep:
    """The rows to stitch, and what the reranker said about them.

    ``relevance`` is each reranked row's score (None: the fused order stands); ``status`` is the
    answer's ``rerank`` field; ``fused_rank`` each candidate's position in the fused order.
    """

    top: np.ndarray
    status: dict
    relevance: dict[int, float] | None = None
    fused_rank: dict[int, int] = field(default_factory=dict)


def rerank(plan: SearchPlan, ranking: Ranking) -> RerankStep:
    """Reorder the top ``RERANK_DEPTH`` readable candidates by the reranker, before the floor.

    The floor still applies to the fused score, whose scale it was calibrated on; the reranker only
    decides the order. Any failure keeps the fused order.
    """
    if not settings.RERANK_URL:
        return RerankStep(ranking.top, dict(_NOT_CONFIGURED))
    if over_budget(plan.payer):
        return RerankStep(ranking.top, rerank_status("over budget"))
    depth = max(int(settings.RERANK_DEPTH), plan.most)
    if ranking.rows is None:
        candidates = top_rows(ranking.scores, plan.mask, depth)
        candidate_scores = ranking.scores[candidates]
    else:
        best = top_rows(ranking.scores, None, depth)
        candidates, candidate_scores = ranking.rows[best], ranking.scores[best]
    collection = plan.collection
    step = reorder(
        plan.question,
        shown_texts(plan.index, candidates, plan.mask),
        settings=settings,
        who=f"a search of {collection.agent.agent_id}/{collection.name}",
    )
    if step.order is None:
        return RerankStep(ranking.top, step.status)
    if plan.payer is not None:
        record_call(
            agent=plan.payer,
            collection=collection,
            purpose=ModelCall.RERANK,
            model=step.model,
            tokens_in=step.tokens,
        )
    relevance = {int(row): float(value) for row, value in zip(candidates.tolist(), step.scores, strict=True)}
    passing = clears_floor(candidate_scores, plan.floor)
    kept = [int(candidates[i]) for i in step.order if passing[i]][: plan.most]
    fused_rank = {int(row): position for position, row in enumerate(candidates.tolist(), start=1)}
    return RerankStep(np.asarray(kept, dtype=np.int64), step.status, relevance, fused_rank)


@dataclass(frozen=True)
class JudgeStep:
    """The answer's ``judge`` field and its ``refused``: null unless a verdict came back."""

    status: dict
    refused: bool | None = None


def judge(plan: SearchPlan, paragraphs: list[dict]) -> JudgeStep:
    """Ask the judge, when this collection has one, whether the paragraphs answer the question."""
    collection = plan.collection
    if not collection.judge or not settings.JUDGE_URL:
        return JudgeStep({"status": "not configured"})
    if not paragraphs:
        return JudgeStep({"status": "nothing to judge"})
    if over_budget(plan.payer):
        return JudgeStep({"status": "over budget"})
    try:
        verdict = ask_judge(
            url=settings.JUDGE_URL,
            model=settings.JUDGE_MODEL,
            api_key=settings.JUDGE_API_KEY,
            timeout=float(settings.JUDGE_TIMEOUT),
            question=plan.question,
            paragraphs=[p["text"] for p in paragraphs],
        )
    except JudgeUnavailable as exc:
        logger.warning("judge unavailable for %s/%s: %s", collection.agent.agent_id, collection.name, exc)
        return JudgeStep({"status": "unavailable"})
    if plan.payer is not None:
        record_call(
            agent=plan.payer,
            collection=collection,
            purpose=ModelCall.JUDGE,
            model=verdict.model,
            tokens_in=verdict.tokens_in,
            tokens_out=verdict.tokens_out,
        )
    return JudgeStep({"status": "answered", "model": verdict.model}, refused=not verdict.answers)
