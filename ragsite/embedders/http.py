"""The `http` backend: an OpenAI-compatible embedding endpoint.

HTTP protocol
-------------
All requests are ``POST`` with a JSON body to paths under the configured base URL (a trailing ``/v1``
on that URL is accepted and dropped, so both ``http://host:8000`` and ``http://host:8000/v1`` work).
``Authorization: Bearer <api_key>`` is sent when a key is configured. A 404, 405 or 501 from one of
the token endpoints means "not offered"; the embedder remembers it and answers ``None`` from then on.

``POST /v1/embeddings`` (required)::

    request:  {"model": "<model>", "input": ["text", ...]}
    response: {"data": [{"embedding": [float, ...], "index": 0}, ...],
               "model": "<model>", "usage": {"prompt_tokens": int}}

    One item per input, ``index`` its position in ``input`` (items may come in any order). ``usage``
    is optional; without it the token count is unknown (``Embedded.tokens`` is None).

``POST /v1/tokenize`` (optional)::

    request:  {"model": "<model>", "input": "text"}
    response: {"tokens": [int, ...], "offsets": [[start, end], ...]}

    ``tokens`` are the ids the model sees for the whole text, special tokens included, untruncated.
    ``offsets`` (optional) has one ``[start, end)`` pair of character offsets into ``input`` per
    token; special tokens, which cover no text, have ``start == end``.

``POST /count_tokens`` (optional)::

    request:  {"text": "text", "window": int}          ("window" optional)
    response: {"tokens": int, "window": int | null, "window_end_char": int | null}

    ``tokens`` as for ``/v1/tokenize`` (special tokens included, untruncated). ``window`` in the
    response is the model's own token window (null when the server does not know it).
    ``window_end_char`` answers the request's ``window`` with the same meaning as
    ``Embedder.window_end_char``; it is null when no window was asked for.

Concurrency: a text list longer than one batch is sent as ``concurrency`` (``EMBED_CONCURRENCY``)
requests at once, answers put back in input order, so a GPU server always has the next batch waiting.

Retries: a connection failure, HTTP 429 or any 5xx is retried (3 tries in all, waiting 0.2 s, then
0.4 s; a ``Retry-After`` of a few seconds is honoured). A read timeout is not retried: the server is
busy with the request already, and sending it again would only add load. Every other failure (a
4xx, malformed JSON, missing fields, too few or too many vectors, a width that differs from earlier
answers, a non-finite or all-zero vector) raises `EmbeddingError` and no partial result is returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ragsite.model_calls.http import api_base, bearer

from .base import Embedded, Embedder, EmbeddingError, check_texts, check_window, normalise_rows

# Statuses with which an optional endpoint says it does not exist here.
_NOT_OFFERED = frozenset({404, 405, 501})


class _NotOffered(Exception):
    """The server does not offer an optional endpoint."""


class HttpEmbedder(Embedder):
    """An OpenAI-compatible embedding endpoint (protocol in the module docstring).

    `dimensions` is learned from the first answer; asked for before any text was embedded, it costs
    one probe request embedding the text "dimension probe". `window` is the model window the server
    reports from `/count_tokens`, or None when it reports none.
    """

    backend = "http"

    def __init__(
        self,
        url: str,
        *,
        model: str,
        api_key: str = "",
        timeout: float = 30.0,
        batch_size: int = 64,
        tries: int = 3,
        backoff: float = 0.2,
        concurrency: int = 1,
    ) -> None:
        self._base = api_base(url)
        self.model = model
        self._api_key = api_key
        self._timeout = timeout
        self._batch_size = batch_size
        self._concurrency = max(1, concurrency)
        self._tries = max(1, tries)
        self._backoff = backoff
        self._lock = threading.Lock()
        self._client: Any = None
        self._dimensions: int | None = None
        self._window: int | None = None
        self._window_known = False
        # None: not tried yet; True: answered; False: the server does not offer it.
        self._offered: dict[str, bool | None] = {"/count_tokens": None, "/v1/tokenize": None}

    # -- transport -----------------------------------------------------------------------------

    def _get_client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import httpx

                    headers = bearer(self._api_key)
                    # Certificates are verified for https; a plain-http URL has no TLS to verify, and
                    # skipping the CA bundle saves ~40 ms per client.
                    secure = self._base.lower().startswith("https://")
                    self._client = httpx.Client(
                        base_url=self._base, headers=headers, timeout=self._timeout, verify=secure
                    )
        return self._client

    def _retry_delay(self, attempt: int, response: Any) -> float:
        delay = self._backoff * (2**attempt)
        if response is not None:
            try:
                # Honour a short Retry-After; a long one is the server asking for more than we wait.
                delay = max(delay, min(float(response.headers.get("retry-after", 0)), 5.0))
            except ValueError:
                pass
        return delay

    def _post(self, path: str, payload: dict[str, Any], *, optional: bool = False) -> Any:
        """POST JSON and return the decoded JSON answer, retrying what is worth retrying.

        With `optional`, a 404/405/501 raises `_NotOffered` instead of an error.
        """
        import httpx

        client = self._get_client()
        what = f"the embedding endpoint ({path})"
        for attempt in range(self._tries):
            last = attempt == self._tries - 1
            response = None
            try:
                response = client.post(path, json=payload)
            except httpx.ConnectTimeout:
                failure = f"{what} could not be reached within {self._timeout:g} s"
            except httpx.TimeoutException:
                raise EmbeddingError(f"{what} did not answer within {self._timeout:g} s") from None
            except httpx.TransportError as exc:
                failure = f"{what} could not be reached ({type(exc).__name__})"
            else:
                status = response.status_code
                if status < 300:
                    try:
                        return response.json()
                    except ValueError:
                        raise EmbeddingError(f"{what} answered with malformed JSON") from None
                if optional and status in _NOT_OFFERED:
                    raise _NotOffered(path)
                if status != 429 and status < 500:
                    raise EmbeddingError(f"{what} refused the request with HTTP {status}")
                failure = f"{what} answered HTTP {status}"
            if last:
                raise EmbeddingError(f"{failure} (after {self._tries} tries)")
            time.sleep(self._retry_delay(attempt, response))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- embedding -----------------------------------------------------------------------------

    def _parse_embeddings(self, answer: Any, expected: int) -> tuple[np.ndarray, int | None]:
        """Vectors in input order from one /v1/embeddings answer, checked; raises EmbeddingError."""
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise EmbeddingError("the embedding endpoint's answer has no 'data' list")
        items = answer["data"]
        if len(items) != expected:
            raise EmbeddingError(f"the embedding endpoint returned {len(items)} vectors for {expected} texts")
        rows: list[Any] = [None] * expected
        for position, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise EmbeddingError("an item of the embedding endpoint's answer has no 'embedding' list")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
                raise EmbeddingError("an item of the embedding endpoint's answer has an invalid 'index'")
            if rows[index] is not None:
                raise EmbeddingError("the embedding endpoint's answer repeats an 'index'")
            rows[index] = item["embedding"]
        widths = {len(row) for row in rows}
        if len(widths) != 1 or 0 in widths:
            raise EmbeddingError("the embedding endpoint returned vectors of different or zero widths")
        try:
            vectors = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise EmbeddingError("the embedding endpoint returned a vector with non-numeric values") from None
        if not np.all(np.isfinite(vectors)):
            raise EmbeddingError("the embedding endpoint returned a vector with non-finite values")
        usage = answer.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            tokens = None
        return vectors.astype(np.float32), tokens

    def _embed_batch(self, batch: list[str]) -> tuple[np.ndarray, int | None]:
        return self._parse_embeddings(
            self._post("/v1/embeddings", {"model": self.model, "input": batch}), len(batch)
        )

    def _embed_batches(self, batches: list[list[str]]) -> list[tuple[np.ndarray, int | None]]:
        """Every batch's answer, in order, with up to `concurrency` requests in flight at once.

        A GPU server is only kept busy when the next batch is already waiting; one request at a time
        leaves it idle for every round trip. The first failure cancels the batches not yet sent and
        is raised: no partial result.
        """
        if self._concurrency == 1 or len(batches) == 1:
            return [self._embed_batch(batch) for batch in batches]
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(batches))) as pool:
            futures = [pool.submit(self._embed_batch, batch) for batch in batches]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Embed in batches of `batch_size`, `concurrency` at a time; every vector comes back or
        EmbeddingError."""
        check_texts(texts)
        if not texts:
            return Embedded(np.zeros((0, self.dimensions), dtype=np.float32), 0)
        texts = list(texts)
        parts: list[np.ndarray] = []
        total: int | None = 0
        width = self._dimensions
        batches = [
            texts[start : start + self._batch_size] for start in range(0, len(texts), self._batch_size)
        ]
        for vectors, tokens in self._embed_batches(batches):
            if width is not None and vectors.shape[1] != width:
                raise EmbeddingError(
                    f"the embedding endpoint returned {vectors.shape[1]}-dimensional vectors "
                    f"where {width} were expected"
                )
            width = vectors.shape[1]
            parts.append(vectors)
            total = None if total is None or tokens is None else total + tokens
        result = normalise_rows(np.concatenate(parts))
        with self._lock:
            if self._dimensions is None:
                self._dimensions = width
        return Embedded(result, total)

    @property  # type: ignore[override]
    def dimensions(self) -> int:
        """The vector width: learned from the first answer, probing the endpoint if none came yet."""
        if self._dimensions is None:
            self.embed_with_usage(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    # -- token counting ------------------------------------------------------------------------

    def _optional(self, path: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The answer of an optional endpoint, or None when the server does not offer it."""
        if self._offered[path] is False:
            return None
        try:
            answer = self._post(path, payload, optional=True)
        except _NotOffered:
            self._offered[path] = False
            return None
        if not isinstance(answer, dict):
            raise EmbeddingError(f"the embedding endpoint's {path} answer is not a JSON object")
        self._offered[path] = True
        return answer

    def _tokenize(self, text: str) -> dict[str, Any] | None:
        return self._optional("/v1/tokenize", {"model": self.model, "input": text})

    def count_tokens(self, text: str) -> int | None:
        """Tokens from /count_tokens, else from /v1/tokenize; None when the server offers neither."""
        answer = self._optional("/count_tokens", {"text": text})
        if answer is not None:
            tokens = answer.get("tokens")
            if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
                raise EmbeddingError("the embedding endpoint's /count_tokens answer has no valid 'tokens'")
            self._remember_window(answer)
            return tokens
        answer = self._tokenize(text)
        if answer is None:
            return None
        if not isinstance(answer.get("tokens"), list):
            raise EmbeddingError("the embedding endpoint's /v1/tokenize answer has no 'tokens' list")
        return len(answer["tokens"])

    def token_ids(self, text: str) -> list[int] | None:
        """The ids from /v1/tokenize; None when the server does not offer it."""
        answer = self._tokenize(text)
        if answer is None:
            return None
        tokens = answer.get("tokens")
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens
        ):
            raise EmbeddingError(
                "the embedding endpoint's /v1/tokenize answer has no list of integer 'tokens'"
            )
        return tokens

    def token_spans(self, text: str) -> list[tuple[int, int]] | None:
        """Spans from /v1/tokenize offsets (empty spans are special tokens); None without offsets."""
        answer = self._tokenize(text)
        if answer is None or answer.get("offsets") is None:
            return None
        offsets = answer["offsets"]
        tokens = answer.get("tokens")
        if not isinstance(offsets, list) or (isinstance(tokens, list) and len(tokens) != len(offsets)):
            raise EmbeddingError("the embedding endpoint's /v1/tokenize offsets do not match its tokens")
        spans = []
        for pair in offsets:
            if (
                not isinstance(pair, list | tuple)
                or len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
                or not 0 <= pair[0] <= pair[1] <= len(text)
            ):
                raise EmbeddingError("the embedding endpoint's /v1/tokenize answer has an invalid offset")
            if pair[1] > pair[0]:
                spans.append((pair[0], pair[1]))
        return spans

    def window_end_char(self, text: str, window: int) -> int | None:
        """The server's `window_end_char` from /count_tokens; None when it does not offer one."""
        check_window(window)
        answer = self._optional("/count_tokens", {"text": text, "window": window})
        if answer is None:
            return None
        self._remember_window(answer)
        end = answer.get("window_end_char")
        if end is None:
            return None
        if not isinstance(end, int) or isinstance(end, bool) or not 0 <= end <= len(text):
            raise EmbeddingError(
                "the embedding endpoint's /count_tokens answer has an invalid 'window_end_char'"
            )
        return end

    def _remember_window(self, answer: dict[str, Any]) -> None:
        window = answer.get("window")
        if isinstance(window, int) and not isinstance(window, bool) and window > 2:
            self._window = window
        self._window_known = True

    @property  # type: ignore[override]
    def window(self) -> int | None:
        """The model's token window as the server's /count_tokens reports it; None if it does not.

        Asked once (counting an empty text); a server that cannot be reached is asked again later
        rather than remembered as having no window.
        """
        if not self._window_known:
            try:
                answer = self._optional("/count_tokens", {"text": ""})
            except EmbeddingError:
                return None
            if answer is None:
                self._window_known = True
            else:
                self._remember_window(answer)
        return self._window

    def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None
