"""The JSON API under /api/v1/: one NinjaAPI, agent keys as bearer tokens, one error shape.

Every failure answers `{"error": {"code": ..., "message": ...}}` with the right
status, whatever raised it: a service's RagsiteError, request validation,
authentication, a missing route, or an unexpected exception (500, logged
without the request's contents).
"""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from collections_app import dify_api, openai_api
from collections_app.services.agents import request_key
from ragsite.bodies import parse_json
from ragsite.errors import RagsiteError, error_body, store_busy

logger = logging.getLogger("ragsite.api")


class AgentKey(HttpBearer):
    """`Authorization: Bearer <key>`; the request's `auth` becomes the ApiKey (with its agent)."""

    def authenticate(self, request, token):
        # Verified once per request: AgentScope may have checked the same token already.
        return request_key(request, token)


class StrictJSON(Parser):
    """Bodies are parsed by ragsite.bodies: deep nesting, NaN and lone surrogates are 400s."""

    def parse_body(self, request):
        return parse_json(request.body)


class RagsiteAPI(NinjaAPI):
    def get_openapi_schema(self, **kwargs):
        """ninja's document, with the OpenAI-compatible vector stores' routes and Dify's retrieval (plain
        Django views) added from their declarations (`collections_app.schemas.vector_stores`, `.dify`)."""
        schema = super().get_openapi_schema(**kwargs)
        paths, models = openai_api.openapi_routes()
        dify_paths, dify_models = dify_api.openapi_routes()
        paths, models = {**paths, **dify_paths}, [*models, *dify_models]
        schema["paths"].update(paths)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in models:
            published = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in published.pop("$defs", {}).items():
                components.setdefault(name, definition)
            components.setdefault(model.__name__, published)
        security = [{name: []} for name in schema["components"].get("securitySchemes", {})]
        for operations in paths.values():
            for operation in operations.values():
                operation["security"] = security
        return schema

    def get_openapi_operation_id(self, operation) -> str:
        # Readable ids for generated clients: the view's own name (`search_collection`),
        # not ninja's module-qualified default (`collections_app_api_search`).
        return operation.view_func.__name__


api = RagsiteAPI(
    parser=StrictJSON(),
    title="ragsite",
    version="1",
    description="Knowledge collections and long memories for AI agents.",
    auth=AgentKey(),
    urls_namespace="api-v1",
)


def _error(request, status: int, code: str, message: str, headers=None):
    response = api.create_response(request, error_body(code, message), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


@api.exception_handler(RagsiteError)
def on_service_error(request, exc: RagsiteError):
    return _error(request, exc.status, exc.code, exc.message, exc.headers)


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request, exc):
    response = _error(
        request, 401, "unauthorized", "a valid API key is required: Authorization: Bearer <key>"
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(ValidationError)
def on_invalid(request, exc: ValidationError):
    unknown = unknown_fields(exc.errors)
    if unknown:
        return _error(
            request,
            422,
            "unknown_fields",
            f"unknown field(s) {', '.join(repr(f) for f in unknown)}; see /api/v1/docs for what this takes",
        )
    return _error(request, 400, "invalid_request", describe_validation(exc.errors))


def unknown_fields(errors: list[dict]) -> list[str]:
    """The body fields pydantic refused as undeclared (StrictSchema), in the order sent."""
    return [str(e["loc"][-1]) for e in errors if e.get("type") == "extra_forbidden" and e.get("loc")]


@api.exception_handler(RequestDataTooBig)
def on_too_large(request, exc):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(request, 413, "too_large", f"a request body is at most {limit} bytes")


@api.exception_handler(HttpError)
def on_http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, RagsiteError):  # the body parser's own verdict
        return on_service_error(request, exc.__cause__)
    code = "malformed_json" if exc.status_code == 400 else "http_error"
    message = "the request body is not valid JSON" if code == "malformed_json" else str(exc)
    return _error(request, exc.status_code, code, message)


@api.exception_handler(Http404)
def on_not_found(request, exc):
    return _error(request, 404, "not_found", "not found")


@api.exception_handler(Exception)
def on_unexpected(request, exc):
    busy = store_busy(exc)
    if busy is not None:
        logger.warning("store busy: %r answered 503", request.path)
        return on_service_error(request, busy)
    # The exception's text may quote input; log its type and where, not its arguments.
    logger.error("unexpected %s in %r", type(exc).__name__, request.path, exc_info=exc)
    return _error(request, 500, "internal_error", "the server failed to answer this request")


def describe_validation(errors: list[dict]) -> str:
    """One readable sentence from pydantic's error list:
    `question: String should have at most 2000 characters`."""
    parts = []
    for err in errors[:5]:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "payload")]
        where = ".".join(loc) or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def register_routers() -> None:
    """Each app's routers join the API here, once."""
    from collections_app.api import router as collections_router
    from memory_app.api import router as memory_router

    api.add_router("/collections", collections_router)
    api.add_router("/memory", memory_router)


register_routers()
