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

Pure: the caller passes the endpoint, model and key; no Django models, no settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .http import post_once

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
