"""ragsite as an embedding server: OpenAI-compatible endpoints over this installation's own model.

`POST /v1/embeddings`, `POST /v1/tokenize` and `POST /count_tokens`, speaking the
protocol the `http` backend of `embedders.py` documents, so one ragsite can embed
for others (point their `EMBED_URL` here). Agent keys authenticate; the tokens
embedded are charged to the key's agent in the ledger (purpose `embed`).
"""

import numpy as np
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ragsite import embedding
from ragsite.bodies import parse_json
from ragsite.embedders import EmbeddingError
from ragsite.errors import RagsiteError, error_body

from .conf import settings
from .models import ModelCall
from .services.agents import key_from_request
from .services.ledger import check_runaway, record_call

MAX_BODY_BYTES = 4 * 1024 * 1024


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
        too_large = _error(413, "too_large", f"the request body is larger than {MAX_BODY_BYTES} bytes")
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > MAX_BODY_BYTES:
            return too_large
        # Read past Django's own body limit (DATA_UPLOAD_MAX_MEMORY_SIZE, an HTML 400 once) up to ours.
        raw = request.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            return too_large
        try:
            body = parse_json(raw or b"null")
            if not isinstance(body, dict):
                raise RagsiteError("the request body must be a JSON object", code="invalid_request")
            embedder = embedding.get_embedder()
            if embedder.backend == "none":
                return _error(503, "no_model", "this server has no embedding model (EMBED_BACKEND is none)")
            return view(request, body, embedder, key)
        except RagsiteError as exc:
            response = _error(exc.status, exc.code, exc.message)
            for name, value in exc.headers.items():  # Retry-After on the runaway limit's 429
                response[name] = value
            return response
        except EmbeddingError as exc:
            return _error(503, "embedder_unavailable", str(exc))

    return wrapped


def _text(body: dict, field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str):
        raise RagsiteError(f'"{field}" must be a string', code="invalid_request")
    limit = int(settings.EMBED_SERVER_MAX_CHARS)
    if len(value) > limit:
        raise RagsiteError(f'"{field}" is longer than {limit} characters', code="invalid_request")
    return value


@_endpoint
def embeddings(request, body, embedder, key):
    inputs = body.get("input")
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
        raise RagsiteError('"input" must be a string or a non-empty list of strings', code="invalid_request")
    most_inputs, most_chars = int(settings.EMBED_SERVER_MAX_INPUTS), int(settings.EMBED_SERVER_MAX_CHARS)
    if len(inputs) > most_inputs:
        raise RagsiteError(f'"input" holds at most {most_inputs} texts', code="invalid_request")
    if any(len(t) > most_chars for t in inputs):
        raise RagsiteError(f"each text is at most {most_chars} characters", code="invalid_request")
    asked = body.get("model")
    if asked is not None and not isinstance(asked, str):
        raise RagsiteError('"model" must be a string', code="invalid_request")
    if asked not in (None, "", embedder.model):
        raise RagsiteError(
            f'this server embeds with "{embedder.model[:200]}", not "{asked[:200]}"',
            code="unknown_model",
            status=404,
        )
    # Embedding is the expensive call: the caller's runaway limit applies, as for searches.
    check_runaway(key.agent)
    embedded = embedder.embed_with_usage(inputs)
    vectors = np.asarray(embedded.vectors, dtype=np.float32)
    tokens = int(embedded.tokens or 0)
    record_call(
        agent=key.agent, collection=None, purpose=ModelCall.EMBED, model=embedder.model, tokens_in=tokens
    )
    return JsonResponse(
        {
            "object": "list",
            "model": embedder.model,
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


@_endpoint
def tokenize(request, body, embedder, key):
    text = _text(body, "input")
    ids = embedder.token_ids(text)
    spans = embedder.token_spans(text)
    if ids is None or spans is None:
        raise RagsiteError("this server's model cannot count tokens", code="cannot_count", status=501)
    # token_spans leaves out the special tokens, which cover no text: [CLS] first, [SEP] last.
    specials = len(ids) - len(spans)
    offsets = (
        [[0, 0]] * min(1, specials)
        + [list(s) for s in spans]
        + [[len(text), len(text)]] * max(0, specials - 1)
    )
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
    return JsonResponse(
        {
            "tokens": tokens,
            "window": embedder.window,
            "window_end_char": embedder.window_end_char(text, window) if window is not None else None,
        }
    )
