"""MCP over Streamable HTTP at /mcp: the transport (`transport`, and `modern` for the stateless
2026-07-28 envelope), the tool and resource registry (`registry`) and protocol facts (`protocol`).

Apps register tools with `register(Tool(...))`, and the resources their answers link to with
`register_resource(ResourceTemplate(...))`, from their own `mcp_tools` modules.
"""

from .registry import (
    ERROR_SCHEMA,
    RESOURCES,
    TOOLS,
    Caller,
    InvalidArguments,
    ResourceTemplate,
    Tool,
    authenticated_key,
    check_arguments,
    or_error,
    register,
    register_resource,
    set_authenticator,
)

__all__ = [
    "ERROR_SCHEMA",
    "RESOURCES",
    "TOOLS",
    "Caller",
    "InvalidArguments",
    "ResourceTemplate",
    "Tool",
    "authenticated_key",
    "check_arguments",
    "or_error",
    "register",
    "register_resource",
    "set_authenticator",
]
