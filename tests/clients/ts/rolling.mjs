// Calls through a deployment while it is restarted: CONCURRENCY official TypeScript clients
// (half 1.x in the handshake era, half 2.x in 2026-07-28), through the balancer at
// SDKBOX_URL, each creating customers one after another until the file STOP_FILE exists;
// every write is approved by the client's user, and every fourth one is held by the provider
// (its name starts with `slow-`), so some are in flight whenever a replica is told to stop.
// Prints one JSON report line: {"calls", "asks", "failures": [...], "created": [names]}.
//
// Environment: SDKBOX_URL, SDKBOX_TOKEN, CONCURRENCY (4), STOP_FILE.

import { existsSync } from "node:fs";
import * as v1 from "@modelcontextprotocol/sdk/client/index.js";
import * as v1http from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import * as v1types from "@modelcontextprotocol/sdk/types.js";
import * as v2 from "@modelcontextprotocol/client";

const url = new URL(process.env.SDKBOX_URL);
const headers = { Authorization: `Bearer ${process.env.SDKBOX_TOKEN}` };
const concurrency = Number(process.env.CONCURRENCY ?? 4);
const stopFile = process.env.STOP_FILE;
const started = performance.now();
const now = () => Math.round(performance.now() - started);

let asks = 0;
const approve = async () => {
  asks += 1;
  return { action: "accept", content: { decision: "approve" } };
};

async function connect(n) {
  const legacy = n % 2 === 0;
  if (legacy) {
    const client = new v1.Client({ name: `rolling-${n}`, version: "1" }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(v1types.ElicitRequestSchema, approve);
    await client.connect(new v1http.StreamableHTTPClientTransport(url, { requestInit: { headers } }));
    return { client, call: (args) => client.callTool({ name: "execute", arguments: args }, undefined, { timeout: 60000 }) };
  }
  const client = new v2.Client(
    { name: `rolling-${n}`, version: "1" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  client.setRequestHandler("elicitation/create", approve);
  await client.connect(new v2.StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  return { client, call: (args) => client.callTool({ name: "execute", arguments: args }, { timeout: 60000 }) };
}

const failures = [];
const created = [];
let calls = 0;

async function stream(n) {
  const { call } = await connect(n);
  for (let i = 0; !existsSync(stopFile); i++) {
    const name = `${i % 4 === 3 ? "slow-" : ""}roll-${n}-${i}-${process.pid}`;
    const code = `return (await api.customers.create({ name: ${JSON.stringify(name)}, email: "roll@example.com" })).name;`;
    const sent = now();
    calls += 1;
    try {
      const result = await call({ code });
      const outcome = result.structuredContent ?? {};
      if (outcome.ok === true && outcome.result === name) created.push(name);
      else failures.push({ name, sent, ended: now(), outcome: JSON.stringify(outcome).slice(0, 600) });
    } catch (error) {
      failures.push({ name, sent, ended: now(), error: String(error?.message ?? error) });
    }
  }
}

await Promise.all(Array.from({ length: concurrency }, (_, n) => stream(n)));
console.log(JSON.stringify({ calls, asks, failures, created }));
process.exit(0);
