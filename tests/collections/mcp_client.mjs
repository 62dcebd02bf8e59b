// An official TypeScript MCP client against a running ragsite: connect over Streamable HTTP with an
// agent key, list the tools, call `search` (and once with a collection that does not exist), read
// the first paragraph the search links to when it links any, and print everything as one JSON
// object on stdout for tests/collections/test_mcp_transport.py and test_mcp_modern.py.
//
//   MCP_URL=http://127.0.0.1:8000/mcp MCP_KEY=<agent key> \
//   MCP_ARGUMENTS='{"collection": "handbook", "question": "..."}' node tests/collections/mcp_client.mjs
//
// MCP_SDK=v1 (the default) is `@modelcontextprotocol/sdk` 1.x, which speaks the handshake era;
// MCP_SDK=v2 is `@modelcontextprotocol/client` 2.x, with MCP_VERSION=2026-07-28 pinning the
// stateless revision (server/discover, `_meta` on every request) and MCP_VERSION=legacy the handshake.
// The key travels in the environment rather than on the command line, where `ps` would show it.
const url = process.env.MCP_URL;
const key = process.env.MCP_KEY;
const args = JSON.parse(process.env.MCP_ARGUMENTS ?? "{}");
const sdk = process.env.MCP_SDK ?? "v1";
const wanted = process.env.MCP_VERSION ?? "legacy";
if (!url || !key) {
  console.error("set MCP_URL and MCP_KEY");
  process.exit(2);
}

let Client, StreamableHTTPClientTransport;
if (sdk === "v2") {
  ({ Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client"));
} else {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const options = sdk === "v2" && wanted !== "legacy" ? { versionNegotiation: { mode: { pin: wanted } } } : {};
const client = new Client({ name: "ragsite-ts-test", version: "1.0.0" }, options);

try {
  await client.connect(transport);
  const tools = await client.listTools();
  const search = await client.callTool({ name: "search", arguments: args });
  const missing = await client.callTool({
    name: "search",
    arguments: { ...args, collection: "no-such-collection" },
  });
  const link = (search.content ?? []).find((item) => item.type === "resource_link");
  const cited = link ? await client.readResource({ uri: link.uri }) : null;
  console.log(
    JSON.stringify({
      protocolVersion: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null,
      era: client.getProtocolEra?.() ?? "legacy",
      sessionId: transport.sessionId ?? null,
      server: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      tools: tools.tools,
      search,
      missing,
      cited,
    }),
  );
} finally {
  await client.close();
}
