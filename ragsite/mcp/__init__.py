"""MCP over Streamable HTTP at /mcp: the transport (`transport`), the tool registry (`registry`) and protocol facts.

Apps register tools with `register(Tool(...))` from their own `mcp_tools` modules.
"""

from .registry import (
    ERROR_SCHEMA,
    TOOLS,
    Caller,
    InvalidArguments,
    Tool,
    authenticated_key,
    check_arguments,
    or_error,
    register,
    set_authenticator,
)

__all__ = [
    "ERROR_SCHEMA", "TOOLS", "Caller", "InvalidArguments", "Tool", "authenticated_key", "check_arguments",
    "or_error", "register", "set_authenticator",
]
