// One execute call by an official TypeScript client (2.x, 2026-07-28) that declares no
// elicitation, so writes needing approval go to the approval page: prints the call's
// structured result as one JSON line. Each run is a new client, and the same caller (the
// 2026-07-28 era has no session).
//
// Environment: SDKBOX_URL, SDKBOX_TOKEN, CODE.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const client = new Client({ name: "sdkbox-once", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
await client.connect(
  new StreamableHTTPClientTransport(new URL(process.env.SDKBOX_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.SDKBOX_TOKEN}` } },
  }),
);
const result = await client.callTool({ name: "execute", arguments: { code: process.env.CODE } }, { timeout: 60000 });
console.log(JSON.stringify(result.structuredContent ?? { text: result.content }));
await client.close();
process.exit(0);
