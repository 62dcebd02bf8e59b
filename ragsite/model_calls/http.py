"""What every remote model call shares: the endpoint's base URL, the bearer header, and one POST whose
transport failures and error statuses become the caller's own "unavailable" exception.

Pure: no settings. The embedding backend (`ragsite.embedders.http`) retries on its own client and
shares the URL and header rules; the judge and the reranker make one attempt within the search's
time, because a search waits for them.
"""

from __future__ import annotations

from typing import Any

import httpx


def api_base(url: str) -> str:
    """The base URL of an OpenAI-compatible endpoint as a setting gives it: a trailing ``/v1`` (and
    slash) is accepted and dropped, so ``http://host:8000`` and ``http://host:8000/v1/`` mean the same."""
    return url.strip().rstrip("/").removesuffix("/v1")


def bearer(api_key: str) -> dict[str, str]:
    """The ``Authorization`` header for a configured key; none without one."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def post_once(
    url: str,
    body: dict[str, Any],
    *,
    api_key: str,
    timeout: float,
    who: str,
    unavailable: type[Exception],
    client=None,
) -> httpx.Response:
    """POST ``body`` as JSON once; a 200 answer, or ``unavailable`` naming ``who`` and what went wrong.

    A transport failure names only its type (never the URL, which may hold a deployment's host), and
    any status but 200 its number; the caller reads the body and maps a malformed one itself.
    """
    post = client.post if client is not None else httpx.post
    try:
        response = post(url, json=body, headers=bearer(api_key), timeout=timeout)
    except httpx.HTTPError as exc:
        raise unavailable(f"{who} did not answer ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise unavailable(f"{who} answered HTTP {response.status_code}")
    return response
