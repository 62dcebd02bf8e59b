"""MCP protocol facts this server speaks: versions, the version header, JSON-RPC error codes."""

SERVER_NAME = "ragsite"
# Oldest first. 2025-03-26 introduced Streamable HTTP; 2025-06-18 removed JSON-RPC batches and
# added structured tool output; 2025-11-25 changes nothing a stateless tools-only server does.
PROTOCOL_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = PROTOCOL_VERSIONS[-1]
# "If the server does not receive an MCP-Protocol-Version header ... it SHOULD assume 2025-03-26."
ASSUMED_VERSION = "2025-03-26"
PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def at_least(version: str, minimum: str) -> bool:
    return PROTOCOL_VERSIONS.index(version) >= PROTOCOL_VERSIONS.index(minimum)

