// The official TypeScript MCP client against a running ragsite: connect over Streamable HTTP
// with an agent key, list the tools, call `search` (and once with a collection that does not
// exist), and print everything as one JSON object on stdout for tests/collections/test_mcp.py.
//
//   MCP_URL=http://127.0.0.1:8000/mcp MCP_KEY=<agent key> \
//   MCP_ARGUMENTS='{"collection": "handbook", "question": "..."}' node tests/collections/mcp_client.mjs
//
// The key travels in the environment rather than on the command line, where `ps` would show it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.env.MCP_URL;
const key = process.env.MCP_KEY;
const args = JSON.parse(process.env.MCP_ARGUMENTS ?? "{}");
if (!url || !key) {
  console.error("set MCP_URL and MCP_KEY");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "ragsite-ts-test", version: "1.0.0" });

try {
  await client.connect(transport);
  const tools = await client.listTools();
  const search = await client.callTool({ name: "search", arguments: args });
  const missing = await client.callTool({
    name: "search",
    arguments: { ...args, collection: "no-such-collection" },
  });
  console.log(
    JSON.stringify({
      protocolVersion: transport.protocolVersion ?? null,
      sessionId: transport.sessionId ?? null,
      server: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      tools: tools.tools,
      search,
      missing,
    }),
  );
} finally {
  await client.close();
}
