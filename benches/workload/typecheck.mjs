// The type check's cost, end to end through the official TypeScript client over stdio: a
// trivial execute with the check on and off (`return 1;`, which names no SDK and is not
// checked, and one that names the SDK without sending anything, which is), a check-bound
// script (one SDK call that is refused), four at once with the check on and off, and the
// compiler's memory; for the demo and the three real specs. Prints a Markdown table. Run: node typecheck.mjs (env SDKBOX_BIN, TSC,
// SPECS_DIR; N calls each, default 100).

import { execFileSync } from "node:child_process";
import { Client } from "../../tests/clients/ts/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StdioClientTransport } from "../../tests/clients/ts/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";

const bin = process.env.SDKBOX_BIN;
const tsc = process.env.TSC;
const specs = process.env.SPECS_DIR ?? "../../../shared/specs";
const n = Number(process.env.N ?? 100);

const providers = [
  ["demo", ["--demo"], "return api.customers.lst();"],
  ["stripe", ["--spec", `${specs}/stripe-spec3.json`, "--base-url", "http://127.0.0.1:9"], "return api.customers.lst();"],
  ["github", ["--spec", `${specs}/github-api.github.com.json`, "--base-url", "http://127.0.0.1:9"], "return api.issues.lst();"],
  ["cloudflare", ["--spec", `${specs}/cloudflare-openapi.json`, "--base-url", "http://127.0.0.1:9"], "return api.zones.lst();"],
];

const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function session(args) {
  const transport = new StdioClientTransport({ command: bin, args: ["serve", ...args], stderr: "ignore", env: { ...process.env, SDKBOX_NO_MODEL: "1" } });
  const client = new Client({ name: "bench", version: "1" });
  const started = performance.now();
  await client.connect(transport);
  return { client, transport, startMs: performance.now() - started };
}

// Each call's code differs (a counter in a comment): no check is answered from a cache.
let calls = 0;
async function timed(client, code, count) {
  const times = [];
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await client.callTool({ name: "execute", arguments: { code: `${code} // ${calls++}` } });
    times.push(performance.now() - t);
  }
  return times;
}

function rssOfCompiler(pid) {
  const children = execFileSync("ps", ["-o", "pid=,rss=,args=", "--ppid", String(pid)]).toString();
  const line = children.split("\n").find((l) => l.includes("--lsp"));
  return line ? Math.round(Number(line.trim().split(/\s+/)[1]) / 1024) : null;
}

async function throughput(client) {
  const t = performance.now();
  await Promise.all(Array.from({ length: 4 }, () => timed(client, "return 1;", n / 4)));
  return Math.round(n / ((performance.now() - t) / 1000));
}

console.log("| provider | start, check on / off (ms) | trivial execute, off p50/p95 | on p50/p95 | naming the SDK, off p50/p95 | on p50/p95 | refused by the check p50/p95 | 4 at once: calls/s on / off | compiler RSS |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const [name, args, wrong] of providers) {
  const off = await session([...args, "--typecheck", "off"]);
  await timed(off.client, "return 1;", 5);
  const offTimes = await timed(off.client, "return 1;", n);
  const naming = wrong.replace(/\.lst\(\);$/, ".list;").replace("return ", "return typeof ");
  const offNaming = await timed(off.client, naming, n);
  const offThroughput = await throughput(off.client);
  await off.client.close();
  const on = await session([...args, "--tsc", tsc]);
  await timed(on.client, "return 1;", 5);
  const onTimes = await timed(on.client, "return 1;", n);
  const onNaming = await timed(on.client, naming, n);
  const refusedTimes = await timed(on.client, wrong, n);
  const onThroughput = await throughput(on.client);
  const rss = rssOfCompiler(on.transport.pid);
  await on.client.close();
  const f = (xs) => `${pct(xs, 0.5).toFixed(1)} / ${pct(xs, 0.95).toFixed(1)}`;
  const ratio = Math.round((100 * onThroughput) / offThroughput);
  console.log(`| ${name} | ${on.startMs.toFixed(0)} / ${off.startMs.toFixed(0)} | ${f(offTimes)} | ${f(onTimes)} | ${f(offNaming)} | ${f(onNaming)} | ${f(refusedTimes)} | ${onThroughput} / ${offThroughput} (${ratio}%) | ${rss} MiB |`);
}
