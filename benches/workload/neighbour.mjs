// The noisy-neighbour benchmark (issue 33): a quiet caller's trivial `execute` and
// `search_docs` through the official TypeScript client over HTTP (from 127.0.0.1), quiet and
// then while another caller (from 127.0.0.2, raw HTTP, as an attacker would) runs each
// pattern the issue names. Prints a Markdown table: the quiet caller's p50/p99 and refusals,
// and how many of the noisy caller's requests were refused.
// Run: node neighbour.mjs (env SDKBOX_BIN, TSC; N calls each, default 60).

import { spawn } from "node:child_process";
import http from "node:http";
import { Client } from "../../tests/clients/ts/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StreamableHTTPClientTransport } from "../../tests/clients/ts/node_modules/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";

const bin = process.env.SDKBOX_BIN;
const tsc = process.env.TSC;
const n = Number(process.env.N ?? 60);
const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

function start() {
  const args = ["serve", "--demo", "--http", "127.0.0.1:0", "--writes", "approve"];
  if (tsc) args.push("--tsc", tsc, "--typecheck", "block");
  const child = spawn(bin, args, { env: { ...process.env, SDKBOX_NO_MODEL: "1" }, stdio: ["ignore", "ignore", "pipe"] });
  return new Promise((resolve) => {
    let seen = "";
    child.stderr.on("data", (chunk) => {
      seen += chunk;
      const found = seen.match(/MCP endpoint (http:\/\/\S+)\s/);
      if (found) resolve({ child, url: found[1] });
    });
  });
}

// One raw JSON-RPC POST from the noisy address; resolves with the status and body.
function post(url, body, session) {
  const target = new URL(url);
  return new Promise((resolve) => {
    const request = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method: "POST", localAddress: "127.0.0.2",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18", ...(session ? { "mcp-session-id": session } : {}) } },
      (response) => {
        let text = "";
        response.on("data", (c) => (text += c));
        response.on("end", () => resolve({ status: response.statusCode, text, session: response.headers["mcp-session-id"] }));
      },
    );
    request.on("error", () => resolve({ status: 0, text: "" }));
    request.end(JSON.stringify(body));
  });
}

async function noisySession(url) {
  const opened = await post(url, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "noisy", version: "1" } } });
  await post(url, { jsonrpc: "2.0", method: "notifications/initialized" }, opened.session);
  return opened.session;
}

const call = (name, args) => ({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name, arguments: args } });
const refusedText = (r) => r.status !== 200 || /"kind":"busy"|busy:|in progress, the most one caller/.test(r.text);

const slowScript = Array.from({ length: 1500 }, (_, i) => `const v${i} = [${i}, 2, 3].map((a) => a * 2).filter((b) => b > 1);`).join("\n") + "\nreturn 1;";
const patterns = {
  "slow type checks, 12 at once": { sessions: 12, body: () => call("execute", { code: slowScript }) },
  "SDK names of 1 MB, 3 at once": { sessions: 3, body: () => call("execute", { code: 'return await api["zone".repeat(250000)].list();' }) },
  "search group filters of 2 MB, 3 at once": { sessions: 3, body: () => call("search_docs", { query: "list zones", group: "zone".repeat(500000) }) },
  "writes for the approval page from 20 sessions": { sessions: 20, body: (i) => call("execute", { code: `return await api.customers.create({ name: "n${i}", email: "n${i}@example.com" });` }) },
};

async function runPattern(url, pattern, stop, tally) {
  const sessions = await Promise.all(Array.from({ length: pattern.sessions }, () => noisySession(url)));
  let i = 0;
  await Promise.all(sessions.map(async (session) => {
    while (!stop.done) {
      const answer = await post(url, pattern.body(i++), session);
      tally.sent++;
      if (refusedText(answer)) tally.refused++;
    }
  }));
}

async function holdStreams(url, count, stop, tally) {
  const sessions = await Promise.all(Array.from({ length: count }, () => noisySession(url)));
  const target = new URL(url);
  const held = sessions.map((session) => new Promise((resolve) => {
    const request = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: "GET", localAddress: "127.0.0.2",
      headers: { accept: "text/event-stream", "mcp-protocol-version": "2025-06-18", "mcp-session-id": session } }, (response) => {
      tally.sent++;
      if (response.statusCode !== 200) tally.refused++;
      response.resume();
      response.on("end", resolve);
      response.on("error", resolve);
    });
    request.on("error", resolve);
    request.end();
    stop.streams.push(request);
  }));
  return held;
}

async function measure(url) {
  const client = new Client({ name: "quiet", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const runs = [], searches = [];
  let refused = 0;
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    const ran = await client.callTool({ name: "execute", arguments: { code: "return 6 * 7" } });
    runs.push(performance.now() - t);
    if (ran.structuredContent?.result !== 42) refused++;
    t = performance.now();
    const found = await client.callTool({ name: "search_docs", arguments: { query: "refund an order" } });
    searches.push(performance.now() - t);
    if (!found.structuredContent?.hits?.length) refused++;
  }
  await client.close();
  return { runs, searches, refused };
}

const row = (name, m, tally) =>
  console.log(`| ${name} | ${pct(m.runs, 0.5).toFixed(1)} / ${pct(m.runs, 0.99).toFixed(1)} | ${pct(m.searches, 0.5).toFixed(1)} / ${pct(m.searches, 0.99).toFixed(1)} | ${m.refused} of ${2 * n} | ${tally ? `${tally.refused} of ${tally.sent}` : "-"} |`);

console.log("| the noisy caller runs | quiet execute p50 / p99 (ms) | quiet search p50 / p99 (ms) | quiet refused | noisy refused |");
console.log("|---|---:|---:|---:|---:|");
{
  const { child, url } = await start();
  await measure(url);
  row("nothing", await measure(url));
  child.kill();
}
for (const [name, pattern] of Object.entries(patterns)) {
  const { child, url } = await start();
  await measure(url);
  const stop = { done: false, streams: [] };
  const tally = { sent: 0, refused: 0 };
  const noisy = runPattern(url, pattern, stop, tally);
  await new Promise((r) => setTimeout(r, 1000));
  const m = await measure(url);
  stop.done = true;
  child.kill();
  await noisy.catch(() => {});
  row(name, m, tally);
}
{
  const { child, url } = await start();
  await measure(url);
  const stop = { done: false, streams: [] };
  const tally = { sent: 0, refused: 0 };
  await holdStreams(url, 64, stop, tally);
  await new Promise((r) => setTimeout(r, 1000));
  const m = await measure(url);
  stop.streams.forEach((s) => s.destroy());
  child.kill();
  row("64 idle event streams", m, tally);
}
process.exit(0);
