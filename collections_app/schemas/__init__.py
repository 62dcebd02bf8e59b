"""Every request and answer of the collections' API and MCP tools, declared once, by concept.

`search` (a question and its answer), `collections` (a collection, its sync, a cited paragraph, the
MCP list), `builds` (a build queued, its status), `known_answers`, `measure`. The API's routes take and
answer these models (django-ninja validates and publishes them); the MCP tools' input and output
schemas are generated from the same models (`ragsite.schemas.tool_input`, `json_schema_of`); tests
check the services' answers against them and the field lists in docs/api.md and docs/mcp.md.
"""
