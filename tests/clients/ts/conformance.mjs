// Drives the real sdkbox binary with an official MCP TypeScript client and prints one JSON
// report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}. Run by
// tests/it/clients.rs, which asserts every check ran and passed. The setup it shares with
// approvals.mjs (environment, transport, checks, validation, the report) is in harness.mjs.
//
// Environment (read by harness.mjs):
//   SDK        v1 (@modelcontextprotocol/sdk, handshake era only) or v2 (@modelcontextprotocol/client)
//   ERA        legacy (initialize), auto (server/discover, then fallback) or 2026-07-28 (pinned)
//   TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)

import {
  assert,
  callTool as call,
  check,
  era,
  modules,
  negotiation,
  register,
  report,
  sdk,
  text,
  transport,
  transportKind,
} from "./harness.mjs";

const client = new modules.client.Client({ name: `sdkbox-conformance-${sdk}`, version: "1.0.0" }, { ...negotiation });
await client.connect(transport());

const callTool = (name, args, requestOptions) => call(client, name, args, requestOptions);

await check("tools", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert(JSON.stringify(names) === '["execute","search_docs"]', `tools: ${names}`);
  for (const tool of tools) register(tool);
  const tokens = Math.round(JSON.stringify(tools).length / 4);
  assert(tokens < 1000, `tools/list is about ${tokens} tokens`);
});

await check("search_hits", async () => {
  const result = await callTool("search_docs", { query: "refund an order" });
  assert(result.structuredContent.hits[0]?.id === "api.refunds.create", JSON.stringify(result.structuredContent));
  assert(text(result).includes("POST /refunds"), text(result));
});

await check("search_no_hits", async () => {
  const result = await callTool("search_docs", { query: "zzqx wvvy" });
  assert(result.structuredContent.hits.length === 0, JSON.stringify(result.structuredContent));
  assert(typeof result.structuredContent.hint === "string", JSON.stringify(result.structuredContent));
});

await check("search_hint", async () => {
  const result = await callTool("search_docs", { query: "list", group: "ordrs" });
  assert(result.structuredContent.hint.includes("did you mean `orders`"), JSON.stringify(result.structuredContent));
});

// As the OpenAI Agents SDK's strict schemas make a model send them: every optional property
// present, the filters it did not mean empty.
await check("search_empty_filters", async () => {
  const args = { query: "refund an order", limit: 5, detail: "compact", method: "", group: "" };
  const result = await callTool("search_docs", args);
  assert(result.structuredContent.hits[0].id === "api.refunds.create", JSON.stringify(result.structuredContent));
});

await check("execute_ok", async () => {
  const code =
    "const paid = [];\nfor await (const o of api.paginate(api.orders.list, { status: 'paid', limit: 4 })) paid.push(o.id);\nreturn { count: paid.length, first: paid[0] };";
  const result = await callTool("execute", { code });
  assert(result.isError !== true, text(result));
  const outcome = result.structuredContent;
  assert(outcome.ok === true && outcome.result.count === 10 && outcome.result.first === "ord_001", JSON.stringify(outcome));
  assert(outcome.http.length === 3, `pages of 4: ${JSON.stringify(outcome.http)}`);
});

await check("execute_script_error", async () => {
  const result = await callTool("execute", { code: "const a = 1;\nreturn a.b.c;" });
  assert(result.isError === true, "a script error is a tool error");
  assert(result.structuredContent.error.kind === "runtime", JSON.stringify(result.structuredContent));
  assert(text(result).includes("error (runtime)") && text(result).includes("2 | return a.b.c;"), text(result));
});

await check("execute_syntax_error", async () => {
  const result = await callTool("execute", { code: "return (1 +;" });
  assert(result.isError === true && result.structuredContent.error.kind === "syntax", JSON.stringify(result.structuredContent));
});

await check("execute_truncated", async () => {
  const code = "return Array.from({ length: 5000 }, (_, i) => ({ i, s: 'x'.repeat(20) }));";
  const result = await callTool("execute", { code });
  const outcome = result.structuredContent;
  assert(outcome.ok === true && outcome.truncated?.original_chars > outcome.truncated?.limit_chars, JSON.stringify(outcome.truncated));
  assert(Array.isArray(outcome.result) && outcome.result.length < 5000, "the result is cut structurally");
});

await check("execute_cancelled", async () => {
  // The script would create a customer after 4 s; cancelled at 0.3 s, it must not (the margin
  // is for a loaded machine).
  const marker = `cancelled-${sdk}-${era}-${transportKind}-${Date.now()}@example.com`;
  const code = `await new Promise((r) => setTimeout(r, 4000)); await api.customers.create({ email: ${JSON.stringify(marker)} }); return "not cancelled";`;
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 300);
  let outcome = "resolved";
  try {
    await callTool("execute", { code }, { signal: controller.signal });
  } catch (error) {
    outcome = String(error?.name ?? error);
  }
  assert(outcome !== "resolved", "the call resolved although it was cancelled");
  await new Promise((r) => setTimeout(r, 5000));
  const find = `const all = []; for await (const c of api.paginate(api.customers.list, { limit: 100 })) all.push(c.email); return all.includes(${JSON.stringify(marker)});`;
  const after = await callTool("execute", { code: find });
  assert(after.structuredContent.result === false, "the cancelled script went on and created the customer");
});

await check("argument_error", async () => {
  const result = await callTool("execute", { code: 42 });
  assert(result.isError === true, "a wrong argument is a tool error");
  assert(text(result).includes("`code`: invalid type: integer `42`, expected a string"), text(result));
  const unknown = await callTool("search_docs", { query: "orders", limt: 3 });
  assert(unknown.isError === true && text(unknown).includes("unknown field `limt`"), text(unknown));
});

await check("unknown_tool", async () => {
  let message = "";
  try {
    const result = await client.callTool({ name: "delete_everything", arguments: {} });
    message = result.isError ? text(result) : "";
  } catch (error) {
    message = String(error?.message ?? error);
  }
  assert(message.includes("delete_everything"), `the error should name the tool: ${message}`);
});

await check("malformed_request", async () => {
  let message = "";
  try {
    // `arguments` must be an object; a raw request gets past the client's own typing.
    const request = { method: "tools/call", params: { name: "execute", arguments: "return 1" } };
    await (sdk === "v1" ? client.request(request, modules.types.CallToolResultSchema) : client.request(request));
  } catch (error) {
    message = String(error?.message ?? error);
  }
  assert(message.length > 0, "a malformed tools/call must be refused");
});

// Files returned to the client: the demo's PNG as image content, a CSV as an embedded
// resource, and a file too large to go inline as a resource link read back byte for byte.
const FILES_CODE = [
  'const picture = await api.products.getImage({ product_id: "prod_001" });',
  'const csv = sdkbox.file("id,total\\nord_001,4999\\n", { name: "orders.csv", type: "text/csv" });',
  'const big = sdkbox.file(new Uint8Array(300000).map((_, i) => i % 251), { name: "big.bin" });',
  'return { picture: sdkbox.file(picture, { name: "anvil.png" }), csv, big };',
].join("\n");

await check("execute_files", async () => {
  const result = await callTool("execute", { code: FILES_CODE });
  assert(result.isError !== true, text(result));
  const kinds = JSON.stringify(result.content.map((c) => c.type));
  const image = result.content.find((c) => c.type === "image");
  assert(image?.mimeType === "image/png", kinds);
  assert(Buffer.from(image.data, "base64").subarray(1, 4).toString() === "PNG", "the image is a PNG");
  const embedded = result.content.find((c) => c.type === "resource");
  assert(embedded?.resource.mimeType === "text/csv" && embedded.resource.text === "id,total\nord_001,4999\n", kinds);
  const link = result.content.find((c) => c.type === "resource_link");
  assert(link?.name === "big.bin" && link.size === 300000, kinds);
  const read = await client.readResource({ uri: link.uri });
  const bytes = Buffer.from(read.contents[0].blob, "base64");
  assert(bytes.length === 300000 && bytes.every((b, i) => b === i % 251), `read back ${bytes.length} bytes`);
  const names = result.structuredContent.files.map((f) => f.name);
  assert(JSON.stringify(names) === '["anvil.png","orders.csv","big.bin"]', JSON.stringify(names));
  assert(result.structuredContent.result.csv.sdkbox_file === "orders.csv", JSON.stringify(result.structuredContent.result));
});

await check("still_serving", async () => {
  const result = await callTool("execute", { code: "return 'still serving'" });
  assert(result.structuredContent.result === "still serving", JSON.stringify(result.structuredContent));
});

await report(client);
