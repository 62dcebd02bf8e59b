"""What SCIM clients discover about this server (RFC 7644 §4): `/ServiceProviderConfig`, `/ResourceTypes`
and `/Schemas`, saying exactly what `services.scim` keeps and answers, so a client (or a compliance
checker) that reads them sends only what is kept: of a User its userName, displayName, active and
(read only) groups, with the common id, externalId and meta; of a Group its displayName and members.
"""

from __future__ import annotations

from scim2_models import Group, NotFoundException, ResourceType, Schema, ServiceProviderConfig, User
from scim2_models.resources.service_provider_config import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    ETag,
    Filter,
    Patch,
    Sort,
)

from .scim import MAX_COUNT

KEPT = {User: {"userName", "displayName", "active", "groups"}, Group: {"displayName", "members"}}


def service_provider_config() -> ServiceProviderConfig:
    return ServiceProviderConfig(
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_COUNT),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=False),
        authentication_schemes=[
            AuthenticationScheme(
                type="oauthbearertoken",
                name="Bearer token",
                description="The SCIM_TOKEN setting, as Authorization: Bearer <token>",
                primary=True,
            )
        ],
    )


def resource_types() -> list[ResourceType]:
    return [ResourceType.from_resource(model) for model in KEPT]


def resource_type(type_id: str) -> ResourceType:
    for found in resource_types():
        if found.id == type_id:
            return found
    raise NotFoundException(detail=f"no resource type {type_id}")


def schemas() -> list[Schema]:
    """The core User and Group schemas, each less the attributes this server does not keep."""
    described = []
    for model, kept in KEPT.items():
        schema = model.to_schema()
        schema.attributes = [attribute for attribute in schema.attributes if attribute.name in kept]
        described.append(schema)
    return described


def schema(schema_id: str) -> Schema:
    for found in schemas():
        if found.id == schema_id:
            return found
    raise NotFoundException(detail=f"no schema {schema_id}")
