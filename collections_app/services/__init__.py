"""Service functions: everything an adapter (API, admin, command, MCP tool, task) does goes through here."""
