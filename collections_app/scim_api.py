"""`/scim/v2/Users` and `/scim/v2/Groups`: the identity provider's SCIM 2.0 client provisions readers.

Thin views over `services.scim`: check the bearer token (SCIM_TOKEN, compared in constant time), read
the body with scim2-models in the context RFC 7644 gives the method, call the service, answer
`application/scim+json`. Every failure answers SCIM's own error shape
(`urn:ietf:params:scim:api:messages:2.0:Error`, with `status` and, where RFC 7644 §3.12 names one,
`scimType`), never the API's.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError
from scim2_models import (
    Context,
    Error,
    Group,
    InvalidSyntaxException,
    InvalidValueException,
    ListResponse,
    NotFoundException,
    NotImplementedException,
    PatchOp,
    PayloadTooLargeException,
    ResponseParameters,
    SCIMException,
    SearchRequest,
    UnauthorizedException,
    User,
)

from ragsite.bodies import BadBody, parse_json
from ragsite.security import bearer_matches

from .conf import settings
from .services import scim, scim_discovery

CONTENT_TYPE = "application/scim+json"
MAX_BODY_BYTES = 1 << 20  # a Group with some thousands of members fits; more is refused, 413
DEFAULT_COUNT = 100
MAX_START = 10**9  # far past any directory; bounded so the database's offset cannot overflow
DISCOVERY = ("ServiceProviderConfig", "ResourceTypes", "Schemas")

_OPERATIONS = {
    "Users": {
        "model": User,
        "list": scim.list_users,
        "create": scim.create_user,
        "get": scim.get_user,
        "replace": scim.replace_user,
        "patch": scim.patch_user,
        "delete": scim.delete_user,
        "key": "user",
    },
    "Groups": {
        "model": Group,
        "list": scim.list_groups,
        "create": scim.create_group,
        "get": scim.get_group,
        "replace": scim.replace_group,
        "patch": scim.patch_group,
        "delete": scim.delete_group,
        "key": "group",
    },
}


def _answer(body, status: int = 200, **headers) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=CONTENT_TYPE)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _error(exc: SCIMException | Error) -> HttpResponse:
    error = exc if isinstance(exc, Error) else exc.to_error()
    headers = {"WWW_Authenticate": 'Bearer realm="scim"'} if str(error.status) == "401" else {}
    return _answer(error.model_dump_json(), int(error.status), **headers)


def _authorised(request) -> None:
    expected = str(settings.SCIM_TOKEN or "")
    if not expected:
        raise UnauthorizedException(detail="SCIM provisioning is off here (SCIM_TOKEN is not set)")
    if not bearer_matches(request.headers.get("Authorization", ""), expected):
        raise UnauthorizedException(detail="a valid bearer token is required")


def _body(request, model, context: Context):
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    # Checked before the body is read: past Django's own read limit it would answer an HTML 400.
    if declared > MAX_BODY_BYTES or len(request.body) > MAX_BODY_BYTES:
        raise PayloadTooLargeException(detail=f"the request body is over {MAX_BODY_BYTES} bytes")
    try:
        data = parse_json(request.body)
    except BadBody as exc:
        raise InvalidSyntaxException(detail=exc.message) from None
    if not isinstance(data, dict):
        raise InvalidSyntaxException(detail="the request body must be a JSON object")
    try:
        return model.model_validate(data, scim_ctx=context)
    except ValidationError as exc:
        raise _Invalid(Error.from_validation_errors(exc)[0]) from None


class _Invalid(Exception):
    def __init__(self, error: Error):
        self.error = error


def _page(request) -> tuple[int, int]:
    try:
        start = int(request.GET.get("startIndex", 1))
        count = int(request.GET.get("count", DEFAULT_COUNT))
    except ValueError:
        raise InvalidValueException(detail="startIndex and count must be integers") from None
    return _bounded(start, count)


def _bounded(start: int, count: int) -> tuple[int, int]:
    """startIndex from 1 (RFC 7644 §3.4.2.4: less is 1) to MAX_START; count from 0 to MAX_COUNT."""
    return min(max(start, 1), MAX_START), min(max(count, 0), scim.MAX_COUNT)


def _located(request, resource, kind: str):
    """The resource with its absolute `meta.location`, and its members' `$ref` (a Group's)."""
    resource.meta.location = request.build_absolute_uri(f"/scim/v2/{kind}/{resource.id}")
    for member in getattr(resource, "members", None) or []:
        member.ref = request.build_absolute_uri(f"/scim/v2/Users/{member.value}")
    return resource


def _parameters(request, model) -> ResponseParameters:
    """`attributes` / `excludedAttributes` of the query (RFC 7644 §3.9), checked against `model`."""
    asked = {
        "attributes": request.GET.get("attributes"),
        "excludedAttributes": request.GET.get("excludedAttributes"),
    }
    try:
        return ResponseParameters[model].model_validate({k: v for k, v in asked.items() if v})
    except ValidationError as exc:
        raise _Invalid(Error.from_validation_errors(exc)[0]) from None


def _shown(request, resource, kind: str, model, status: int = 200) -> HttpResponse:
    _located(request, resource, kind)
    context = Context.RESOURCE_CREATION_RESPONSE if status == 201 else Context.RESOURCE_QUERY_RESPONSE
    body = resource.model_dump_json(scim_ctx=context, response_parameters=_parameters(request, model))
    return _answer(body, status, Location=resource.meta.location)


def _listed(request, operations, kind: str, *, filter, start: int, count: int, parameters) -> HttpResponse:
    model = operations["model"]
    total, found = operations["list"](filter=filter, start_index=start, count=count)
    listed = ListResponse[model](
        total_results=total,
        start_index=start,
        items_per_page=len(found),
        resources=[_located(request, resource, kind) for resource in found],
    )
    return _answer(listed.model_dump_json(scim_ctx=Context.SEARCH_RESPONSE, response_parameters=parameters))


def _not_allowed(method: str, allowed: str) -> HttpResponse:
    response = _error(Error(status=405, detail=f"{method} is not allowed here ({allowed})"))
    response["Allow"] = allowed
    return response


def _discovered(request, kind: str, resource_id: str | None) -> HttpResponse:
    """`/ServiceProviderConfig`, `/ResourceTypes[/<id>]`, `/Schemas[/<id>]`: read only."""
    if request.method != "GET":
        return _not_allowed(request.method, "GET")
    if kind == "ServiceProviderConfig":
        if resource_id is not None:
            raise NotFoundException(detail="the service provider's configuration has no sub-resources")
        found = scim_discovery.service_provider_config()
        return _answer(found.model_dump_json(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))
    one, every = {
        "ResourceTypes": (scim_discovery.resource_type, scim_discovery.resource_types),
        "Schemas": (scim_discovery.schema, scim_discovery.schemas),
    }[kind]
    if resource_id is not None:
        return _answer(one(resource_id).model_dump_json(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))
    found = every()
    listed = ListResponse[type(found[0])](
        total_results=len(found), start_index=1, items_per_page=len(found), resources=found
    )
    return _answer(listed.model_dump_json(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))


def _handle(request, kind: str, resource_id: str | None) -> HttpResponse:
    _authorised(request)
    if kind in DISCOVERY:
        return _discovered(request, kind, resource_id)
    if kind == ".search":
        raise NotImplementedException(
            detail="search one resource type at a time: /Users/.search, /Groups/.search"
        )
    operations = _OPERATIONS.get(kind)
    if operations is None:
        raise NotFoundException(detail="SCIM here serves /scim/v2/Users and /scim/v2/Groups")
    model, key = operations["model"], operations["key"]
    method = request.method
    if resource_id is None and method == "GET":
        start, count = _page(request)
        filter, parameters = request.GET.get("filter"), _parameters(request, model)
        return _listed(
            request, operations, kind, filter=filter, start=start, count=count, parameters=parameters
        )
    if resource_id == ".search" and method == "POST":  # a query in a body (RFC 7644 §3.4.3)
        asked = _body(request, SearchRequest[model], Context.SEARCH_REQUEST)
        count = asked.count if asked.count is not None else DEFAULT_COUNT
        start, count = _bounded(asked.start_index or 1, count)
        filter = str(asked.filter) if asked.filter is not None else None
        return _listed(request, operations, kind, filter=filter, start=start, count=count, parameters=asked)
    if resource_id is None and method == "POST":
        created = operations["create"](**{key: _body(request, model, Context.RESOURCE_CREATION_REQUEST)})
        return _shown(request, created, kind, model, 201)
    if resource_id is not None and method == "GET":
        return _shown(request, operations["get"](**{f"{key}_id": resource_id}), kind, model)
    if resource_id is not None and method == "PUT":
        resource = _body(request, model, Context.RESOURCE_REPLACEMENT_REQUEST)
        replaced = operations["replace"](**{f"{key}_id": resource_id, key: resource})
        return _shown(request, replaced, kind, model)
    if resource_id is not None and method == "PATCH":
        patch = _body(request, PatchOp[model], Context.RESOURCE_PATCH_REQUEST)
        patched = operations["patch"](**{f"{key}_id": resource_id, "patch": patch})
        return _shown(request, patched, kind, model)
    if resource_id is not None and method == "DELETE":
        operations["delete"](**{f"{key}_id": resource_id})
        return HttpResponse(status=204)
    return _not_allowed(method, "GET, POST" if resource_id is None else "GET, PUT, PATCH, DELETE")


@csrf_exempt
def resources(request, kind: str, resource_id: str | None = None) -> HttpResponse:
    """Every SCIM request: a protocol error (from the edge or the service) answers SCIM's shape."""
    try:
        return _handle(request, kind, resource_id)
    except SCIMException as exc:
        return _error(exc)
    except _Invalid as exc:
        return _error(exc.error)
    except ValidationError as exc:  # a PATCH whose result is not a valid resource
        return _error(Error.from_validation_errors(exc)[0])


@csrf_exempt
def unknown(request, rest: str = "") -> HttpResponse:
    """Anything else under /scim/: SCIM's 404, after the same token check."""
    return resources(request, kind="", resource_id=None)
