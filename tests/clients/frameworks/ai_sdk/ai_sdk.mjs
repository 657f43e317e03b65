// sdkbox through the AI SDK's MCP client (`@ai-sdk/mcp`, pinned by package-lock.json beside
// this file), as an AI SDK agent gets its tools: `createMCPClient(...).tools()`, each tool's
// `execute` called as a model's tool call is (no model involved). The client asks
// `server/discover` first, so it speaks the 2026-07-28 revision. Prints one JSON report line:
// {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.
//
// Environment:
//   TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
import { createMCPClient } from "@ai-sdk/mcp";
import { StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

const transport = process.env.TRANSPORT ?? "stdio";
const checks = {};
async function check(name, body) {
  try {
    await body();
    checks[name] = "ok";
  } catch (error) {
    checks[name] = `FAIL: ${error?.message ?? error}`;
  }
}

function connection() {
  if (transport === "stdio") {
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", SDKBOX_NO_MODEL: "1" };
    if (process.env.SDKBOX_TYPECHECK) env.SDKBOX_TYPECHECK = process.env.SDKBOX_TYPECHECK;
    return new StdioMCPTransport({ command: process.env.SDKBOX_BIN, args: ["serve", "--demo"], env });
  }
  return { type: "http", url: process.env.SDKBOX_URL, headers: { Authorization: `Bearer ${process.env.SDKBOX_TOKEN}` } };
}

const client = await createMCPClient({ transport: connection() });
try {
  const tools = await client.tools();
  const call = (name, args) => tools[name].execute(args, { toolCallId: "call_1", messages: [] });
  const text = (result) => (result.content ?? []).map((part) => part.text ?? "").join("\n");

  await check("two_tools", async () => {
    const names = Object.keys(tools).sort().join(",");
    if (names !== "execute,search_docs") throw new Error(names);
  });
  await check("search", async () => {
    const result = await call("search_docs", { query: "refund an order" });
    if (!text(result).includes("api.refunds.create")) throw new Error(JSON.stringify(result).slice(0, 300));
  });
  await check("execute_gives_text_and_the_structured_outcome", async () => {
    const result = await call("execute", { code: "return (await api.orders.list({ limit: 2 })).data.length" });
    if (!text(result).startsWith("2") || result.structuredContent?.result !== 2) {
      throw new Error(JSON.stringify(result).slice(0, 300));
    }
  });
  await check("an_error_is_a_result_not_an_exception", async () => {
    const result = await call("execute", { code: "throw new Error('boom')" });
    if (result.isError !== true || !text(result).includes("error (runtime): boom")) {
      throw new Error(JSON.stringify(result).slice(0, 300));
    }
  });
} finally {
  await client.close();
}
console.log(JSON.stringify({ client: "ai-sdk", protocol: transport, checks }));
