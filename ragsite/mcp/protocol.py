"""MCP protocol facts this server speaks: versions, eras, headers, `_meta` keys, JSON-RPC error codes."""

SERVER_NAME = "ragsite"
# The handshake ("legacy") era, oldest first. 2025-03-26 introduced Streamable HTTP; 2025-06-18
# removed JSON-RPC batches and added structured tool output and resource links; 2025-11-25 changes
# nothing a stateless tools-only server does.
LEGACY_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
# The stateless ("modern") era: no initialize, every request names its version and the client's
# capabilities in `_meta`, and `server/discover` says what the server speaks.
MODERN_VERSIONS = ("2026-07-28",)
PROTOCOL_VERSIONS = LEGACY_VERSIONS + MODERN_VERSIONS
LATEST_VERSION = PROTOCOL_VERSIONS[-1]
LATEST_LEGACY = LEGACY_VERSIONS[-1]
# "If the server does not receive an MCP-Protocol-Version header ... it SHOULD assume 2025-03-26."
ASSUMED_VERSION = "2025-03-26"

PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
META_SERVER = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# A resource that is not there, up to 2025-11-25; 2026-07-28 answers -32602 instead.
RESOURCE_NOT_FOUND = -32002
# 2026-07-28 reserves -32020..-32099 for the specification's own codes.
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


def at_least(version: str, minimum: str) -> bool:
    return PROTOCOL_VERSIONS.index(version) >= PROTOCOL_VERSIONS.index(minimum)


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS
