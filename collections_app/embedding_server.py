"""ragsite as an embedding server: OpenAI-compatible endpoints over this installation's own model.

`POST /v1/embeddings`, `POST /v1/tokenize` and `POST /count_tokens`, speaking the
protocol the `http` backend of `embedders.py` documents, so one ragsite can embed
for others (point their `EMBED_URL` here). Agent keys authenticate; the tokens
embedded are charged to the key's agent in the ledger (purpose `embed`).
"""

import json

import numpy as np
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ragsite import embedding
from ragsite.embedders import EmbeddingError
from ragsite.errors import RagsiteError, error_body

from .models import ModelCall
from .services.agents import key_from_request
from .services.ledger import record_call

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_INPUTS = 512
MAX_TEXT_CHARS = 100_000


def _error(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse(error_body(code, message), status=status)
    if status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def _endpoint(view):
    """Bearer auth, a bounded JSON body, and the one error shape, around each endpoint."""

    @csrf_exempt
    @require_POST
    def wrapped(request):
        key = key_from_request(request)
        if key is None:
            return _error(401, "unauthorized", "a valid API key is required: Authorization: Bearer <key>")
        if len(request.body) > MAX_BODY_BYTES:
            return _error(413, "too_large", f"the request body is larger than {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(request.body or b"null")
        except ValueError:
            return _error(400, "malformed_json", "the request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "invalid_request", "the request body must be a JSON object")
        embedder = embedding.get_embedder()
        if embedder.backend == "none":
            return _error(503, "no_model", "this server has no embedding model (EMBED_BACKEND is none)")
        try:
            return view(request, body, embedder, key)
        except RagsiteError as exc:
            return _error(exc.status, exc.code, exc.message)
        except EmbeddingError as exc:
            return _error(503, "embedder_unavailable", str(exc))

    return wrapped


def _text(body: dict, field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str):
        raise RagsiteError(f'"{field}" must be a string', code="invalid_request")
    if len(value) > MAX_TEXT_CHARS:
        raise RagsiteError(f'"{field}" is longer than {MAX_TEXT_CHARS} characters', code="invalid_request")
    return value


@_endpoint
def embeddings(request, body, embedder, key):
    inputs = body.get("input")
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
        raise RagsiteError('"input" must be a string or a non-empty list of strings', code="invalid_request")
    if len(inputs) > MAX_INPUTS:
        raise RagsiteError(f'"input" holds at most {MAX_INPUTS} texts', code="invalid_request")
    if any(len(t) > MAX_TEXT_CHARS for t in inputs):
        raise RagsiteError(f"each text is at most {MAX_TEXT_CHARS} characters", code="invalid_request")
    asked = body.get("model")
    if asked not in (None, "", embedder.model):
        raise RagsiteError(f'this server embeds with "{embedder.model}", not "{asked}"', code="unknown_model",
                           status=404)
    embedded = embedder.embed_with_usage(inputs)
    vectors = np.asarray(embedded.vectors, dtype=np.float32)
    tokens = int(embedded.tokens or 0)
    record_call(agent=key.agent, collection=None, purpose=ModelCall.EMBED, model=embedder.model, tokens_in=tokens)
    return JsonResponse({
        "object": "list",
        "model": embedder.model,
        "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })


@_endpoint
def tokenize(request, body, embedder, key):
    text = _text(body, "input")
    ids = embedder.token_ids(text)
    spans = embedder.token_spans(text)
    if ids is None or spans is None:
        raise RagsiteError("this server's model cannot count tokens", code="cannot_count", status=501)
    # token_spans leaves out the special tokens, which cover no text: [CLS] first, [SEP] last.
    specials = len(ids) - len(spans)
    offsets = [[0, 0]] * min(1, specials) + [list(s) for s in spans] + [[len(text), len(text)]] * max(0, specials - 1)
    return JsonResponse({"model": embedder.model, "tokens": ids, "offsets": offsets})


@_endpoint
def count_tokens(request, body, embedder, key):
    text = _text(body, "text")
    window = body.get("window")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 2):
        raise RagsiteError('"window" must be a whole number of at least 2', code="invalid_request")
    tokens = embedder.count_tokens(text)
    if tokens is None:
        raise RagsiteError("this server's model cannot count tokens", code="cannot_count", status=501)
    return JsonResponse({
        "tokens": tokens,
        "window": embedder.window,
        "window_end_char": embedder.window_end_char(text, window) if window is not None else None,
    })
