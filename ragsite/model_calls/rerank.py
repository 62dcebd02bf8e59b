"""The optional reranker: one call to a Cohere-, Jina- or TEI-compatible ``/rerank`` endpoint.

A cross-encoder reads the question and each candidate paragraph together, which a bi-encoder's
cosine and BM25 cannot; it reorders the top fused candidates of a search. The three families
speak nearly the same protocol:

* Cohere (``/v2/rerank``) and Jina (``/v1/rerank``): ``{"model", "query", "documents", "top_n"}``
  → ``{"results": [{"index", "relevance_score"}, ...]}``, with ``usage.total_tokens`` (Jina) or
  ``meta.billed_units`` (Cohere);
* Hugging Face text-embeddings-inference (``/rerank``): ``{"query", "texts"}`` →
  ``[{"index", "score"}, ...]``.

So the request carries the documents under both ``documents`` and ``texts`` and the answer is read
in either shape. ``RERANK_URL`` is the endpoint's full URL. Anything but a clean answer — a
timeout, an error status, an index out of range, a missing score — is `RerankUnavailable`, and the
search keeps its fused order.

`reorder` is the rerank step both apps take (collection search and memory recall): it asks, orders
the candidates by relevance, and says what happened in the one shape both answers carry, `RerankOut`.

Pure: the caller passes the endpoint, model and key (or its lazy settings); no Django models.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from .http import post_once

logger = logging.getLogger("ragsite.rerank")

MAX_DOCUMENT_CHARS = 4000


class RerankUnavailable(Exception):
    """The reranker gave no usable order."""


@dataclass(frozen=True)
class Reranked:
    scores: list[float]  # relevance per candidate, in the order the candidates were sent
    model: str
    tokens: int  # input tokens the endpoint reported (0 when it did not say)


def ask_reranker(
    *, url: str, model: str, api_key: str, timeout: float, question: str, documents: list[str], client=None
) -> Reranked:
    """POST the question and candidates to ``url``; the relevance of every candidate, by position."""
    if not documents:
        return Reranked(scores=[], model=model, tokens=0)
    texts = [text[:MAX_DOCUMENT_CHARS] for text in documents]
    body = {"query": question, "documents": texts, "texts": texts, "top_n": len(texts)}
    if model:
        body["model"] = model
    response = post_once(
        url,
        body,
        api_key=api_key,
        timeout=timeout,
        who="the reranker",
        unavailable=RerankUnavailable,
        client=client,
    )
    try:
        payload = response.json()
        scores = parse_scores(payload, len(texts))
    except (ValueError, KeyError, TypeError) as exc:
        raise RerankUnavailable(
            f"the reranker's answer was not a ranking ({exc.__class__.__name__})"
        ) from None
    tokens = 0
    if isinstance(payload, dict):
        usage = payload.get("usage") or {}
        billed = (payload.get("meta") or {}).get("billed_units") or {}
        tokens = int(
            usage.get("total_tokens") or usage.get("prompt_tokens") or billed.get("input_tokens") or 0
        )
        model = str(payload.get("model") or model)
    return Reranked(scores=scores, model=model, tokens=tokens)


def parse_scores(payload, expected: int) -> list[float]:
    """Relevance per sent document from ``{"results": [...]}`` (Cohere, Jina) or ``[...]`` (TEI).

    Every document must come back exactly once with a finite score: a partial ranking would leave
    the caller guessing where the missing paragraphs belong.
    """
    results = payload["results"] if isinstance(payload, dict) else payload
    if not isinstance(results, list):
        raise ValueError("no list of results")
    scores: list[float | None] = [None] * expected
    for item in results:
        index = item["index"]
        score = item["relevance_score"] if "relevance_score" in item else item["score"]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
            raise ValueError(f"index {index!r} out of range")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise ValueError("a score that is not a number")
        if scores[index] is not None:
            raise ValueError(f"index {index} twice")
        scores[index] = float(score)
    if any(score is None for score in scores):
        raise ValueError("a document came back without a score")
    return scores  # type: ignore[return-value]


class RerankOut(BaseModel):
    """Whether the reranker ordered the candidates; unless "reranked", the fused order stands."""

    # The `rerank` field of a search's answer and of a recall's.

    status: Literal["reranked", "not configured", "unavailable", "over budget", "nothing to rerank"]
    model: str | None = None
    depth: int | None = Field(None, description="How many fused candidates the reranker reordered.")


def rerank_status(status: str, *, model: str | None = None, depth: int | None = None) -> dict:
    """An answer's ``rerank`` field (`RerankOut`), without the details its status does not have."""
    return RerankOut(status=status, model=model, depth=depth).model_dump(exclude_none=True)


@dataclass(frozen=True)
class Reordered:
    """The rerank step's outcome: the candidates' positions best first (None: the fused order
    stands), the answer's ``rerank`` field, and for the caller's ledger the relevance of each
    candidate as sent, the model and the input tokens."""

    order: list[int] | None
    status: dict
    scores: list[float] | None = None
    model: str = ""
    tokens: int = 0


def reorder(question: str, documents: list[str], *, settings, who: str) -> Reordered:
    """Rerank ``documents`` (fused candidates, best first) for ``question``.

    ``settings`` holds RERANK_URL, RERANK_MODEL, RERANK_API_KEY and RERANK_TIMEOUT (the app's lazy
    settings); ``who`` names the caller in the warning a failure logs. Ties keep the fused order (a
    stable sort), and any failure keeps it whole.
    """
    if not settings.RERANK_URL:
        return Reordered(None, rerank_status("not configured"))
    if not documents:
        return Reordered(None, rerank_status("nothing to rerank"))
    try:
        reranked = ask_reranker(
            url=settings.RERANK_URL,
            model=settings.RERANK_MODEL,
            api_key=settings.RERANK_API_KEY,
            timeout=float(settings.RERANK_TIMEOUT),
            question=question,
            documents=documents,
        )
    except RerankUnavailable as exc:
        logger.warning("the reranker was unavailable for %s: %s", who, exc)
        return Reordered(None, rerank_status("unavailable"))
    order = np.argsort(-np.asarray(reranked.scores, dtype=np.float64), kind="stable").tolist()
    status = rerank_status("reranked", model=reranked.model, depth=len(documents))
    return Reordered(order, status, reranked.scores, reranked.model, reranked.tokens)
