// Latency workload: sdkbox against a TLS provider behind a delaying proxy on loopback, so
// that every round trip costs what it costs to a real provider (20-50 ms), measured through
// the official MCP TypeScript client like the workload bench.
//
//   node benches/workload/latency.mjs --sdkbox PATH [--rtt 20,50] [--runs 10]
//
// The provider speaks HTTP/2 and HTTP/1.1 over TLS (a certificate of a CA made for the run,
// which sdkbox trusts through SSL_CERT_FILE). The proxy holds every chunk half the round trip
// in each direction, so a TLS handshake and every request pay real round trips. Workloads:
//   one call       api.zones.retrieve: sdkbox's warm pooled connection, against a fresh
//                  `deno run` per call (new process, new TLS connection)
//   pages, before  ten pages walked one after another (what api.paginate did before)
//   pages, after   api.paginate over the same ten pages (page numbers with a known total:
//                  the remaining pages are asked for a few at a time)
//   cursor         api.paginate over ten Stripe-style cursor pages (sequential by nature)
// Every answer is checked against what the bench computes. Prints a markdown table.

import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");

const opts = { sdkbox: undefined, rtts: [20, 50], runs: 10 };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const value = () => argv[++i] ?? die(`${argv[i - 1]} wants a value`);
    switch (argv[i]) {
      case "--sdkbox": opts.sdkbox = path.resolve(value()); break;
      case "--rtt": opts.rtts = value().split(",").map(Number); break;
      case "--runs": opts.runs = Number(value()); break;
      default: die(`unknown option ${argv[i]}`);
    }
  }
  if (!opts.sdkbox || !existsSync(opts.sdkbox)) die("--sdkbox PATH (an sdkbox binary) is required");
  if (opts.rtts.some((r) => !(r >= 0)) || !(opts.runs >= 1)) die("--rtt wants numbers, --runs at least 1");
}

function die(message) {
  console.error(`bench-latency: ${message}`);
  process.exit(2);
}

const PAGES = 10;
const PER_PAGE = 50;
const TOTAL = PAGES * PER_PAGE;
const zone = (n) => ({ id: `zone_${String(n).padStart(4, "0")}`, name: `example-${n}.com`, status: n % 3 ? "active" : "pending" });

// ---- a CA and a certificate for localhost, made for this run ------------------------------------

const tmp = mkdtempSync(path.join(os.tmpdir(), "sdkbox-latency-"));
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));
const file = (name) => path.join(tmp, name);
const openssl = (...args) => execFileSync("openssl", args, { cwd: tmp, stdio: ["ignore", "ignore", "pipe"] });
openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=sdkbox latency bench CA");
openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=localhost");
writeFileSync(file("leaf.ext"), "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n");
openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "leaf.pem", "-days", "1", "-extfile", "leaf.ext");

// ---- the provider: Cloudflare-style pages and Stripe-style cursors over TLS ---------------------

function answer(url) {
  const u = new URL(url, "https://localhost");
  if (u.pathname === "/zones") {
    const page = Number(u.searchParams.get("page") ?? 1);
    const per = Number(u.searchParams.get("per_page") ?? PER_PAGE);
    const result = [];
    for (let n = (page - 1) * per + 1; n <= Math.min(page * per, TOTAL); n++) result.push(zone(n));
    return { success: true, result, result_info: { page, per_page: per, count: result.length, total_count: TOTAL, total_pages: Math.ceil(TOTAL / per) } };
  }
  const one = /^\/zones\/zone_(\d+)$/.exec(u.pathname);
  if (one) return { success: true, result: zone(Number(one[1])) };
  if (u.pathname === "/customers") {
    const after = u.searchParams.get("starting_after");
    const limit = Number(u.searchParams.get("limit") ?? PER_PAGE);
    const start = after ? Number(after.slice(4)) : 0;
    const data = [];
    for (let n = start + 1; n <= Math.min(start + limit, TOTAL); n++) data.push({ id: `cus_${n}`, object: "customer" });
    return { object: "list", data, has_more: start + limit < TOTAL, url: "/customers" };
  }
  return null;
}

const versions = {};
const server = http2.createSecureServer({ key: readFileSync(file("leaf.key")), cert: readFileSync(file("leaf.pem")), allowHTTP1: true }, (req, res) => {
  versions[req.httpVersion] = (versions[req.httpVersion] ?? 0) + 1;
  const body = answer(req.url);
  res.writeHead(body ? 200 : 404, { "content-type": "application/json" });
  res.end(JSON.stringify(body ?? { error: "not found" }));
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));

// ---- the delaying proxy: half the round trip each way, order kept ------------------------------

let rtt = 0;
const proxy = net.createServer((client) => {
  const upstream = net.connect(server.address().port, "127.0.0.1");
  // No Nagle on the proxy's own sockets: a small write held for the peer's delayed ACK
  // (40 ms on Linux) would add round trips that a real path does not have.
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  const delayed = (from, to) =>
    from.on("data", (chunk) => setTimeout(() => to.writable && to.write(chunk), rtt / 2));
  delayed(client, upstream);
  delayed(upstream, client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("close", close).on("error", close);
  upstream.on("close", close).on("error", close);
});
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
const baseUrl = `https://localhost:${proxy.address().port}`;

const spec = {
  openapi: "3.0.3",
  info: { title: "Latency bench provider", version: "1" },
  servers: [{ url: baseUrl }],
  paths: {
    "/zones": {
      get: {
        operationId: "GetZones",
        parameters: [
          { name: "page", in: "query", schema: { type: "integer" } },
          { name: "per_page", in: "query", schema: { type: "integer" } },
        ],
        responses: { 200: { description: "a page", content: { "application/json": { schema: { type: "object", properties: { result: { type: "array", items: { type: "object" } } } } } } } },
      },
    },
    "/zones/{zone_id}": {
      get: {
        operationId: "GetZonesZone",
        parameters: [{ name: "zone_id", in: "path", required: true, schema: { type: "string" } }],
        responses: { 200: { description: "a zone", content: { "application/json": { schema: { type: "object" } } } } },
      },
    },
    "/customers": {
      get: {
        operationId: "GetCustomers",
        parameters: [
          { name: "limit", in: "query", schema: { type: "integer" } },
          { name: "starting_after", in: "query", schema: { type: "string" } },
        ],
        responses: { 200: { description: "a page", content: { "application/json": { schema: { type: "object", properties: { data: { type: "array", items: { type: "object" } } } } } } } },
      },
    },
  },
};
writeFileSync(file("spec.json"), JSON.stringify(spec));

// ---- sdkbox through the official client --------------------------------------------------------

const sdkDir = path.join(repo, "tests/clients/ts/node_modules/@modelcontextprotocol/sdk");
if (!existsSync(sdkDir)) die(`no MCP SDK at ${sdkDir}: run scripts/test-deps first`);
const { Client } = await import(pathToFileURL(path.join(sdkDir, "dist/esm/client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(path.join(sdkDir, "dist/esm/client/stdio.js")).href);
const transport = new StdioClientTransport({
  command: opts.sdkbox,
  args: ["serve", "--spec", file("spec.json"), "--base-url", baseUrl, "--secret-env", "SDKBOX_BENCH_SECRET"],
  env: { ...process.env, SDKBOX_BENCH_SECRET: "bench-latency-secret-0000000000", SSL_CERT_FILE: file("ca.pem") },
  stderr: "pipe",
});
let stderrTail = "";
transport.stderr?.on("data", (d) => (stderrTail = (stderrTail + d).slice(-4000)));
const client = new Client({ name: "sdkbox-bench-latency", version: "1.0.0" });
await client.connect(transport);
await client.listTools();

const workloads = {
  one: { code: `return (await api.zones.retrieve({ zone_id: "zone_0007" })).result.name;`, expect: zone(7).name },
  before: {
    code: `let n = 0, page = 1, total = 1;
      do {
        const r = await api.zones.list({ page, per_page: ${PER_PAGE} });
        n += r.result.length; total = r.result_info.total_pages; page++;
      } while (page <= total);
      return n;`,
    expect: TOTAL,
  },
  after: { code: `let n = 0; for await (const z of api.paginate(api.zones.list, { per_page: ${PER_PAGE} })) n++; return n;`, expect: TOTAL },
  cursor: { code: `let n = 0; for await (const c of api.paginate(api.customers.list, { limit: ${PER_PAGE} })) n++; return n;`, expect: TOTAL },
};

async function sdkboxCall(w) {
  const t0 = performance.now();
  const result = await client.callTool({ name: "execute", arguments: { code: w.code } });
  const ms = performance.now() - t0;
  const got = result.structuredContent?.result;
  if (result.isError || got !== w.expect) {
    die(`sdkbox answered ${JSON.stringify(result).slice(0, 600)} (expected ${w.expect}); its stderr ends: ${stderrTail}`);
  }
  return ms;
}

// ---- the fresh-process peer: `deno run` per call, a new TLS connection each time ---------------

const deno = path.join(here, "node_modules/@deno/linux-x64-glibc/deno");
writeFileSync(
  file("one.ts"),
  `const r = await fetch("${baseUrl}/zones/zone_0007"); console.log((await r.json()).result.name);\n`,
);
function denoCall() {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const child = spawn(deno, ["run", `--allow-net=localhost:${proxy.address().port}`, "--cert", file("ca.pem"), "--no-prompt", file("one.ts")], {
      cwd: tmp,
      env: { ...process.env, DENO_DIR: file("deno-dir"), NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("exit", () => {
      if (out.trim() !== zone(7).name) die(`deno answered ${JSON.stringify(out)}`);
      resolve(performance.now() - t0);
    });
  });
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const fmt = (xs) => `${quantile(xs, 0.5).toFixed(0)} / ${quantile(xs, 0.95).toFixed(0)}`;

const rows = [];
for (const r of opts.rtts) {
  rtt = r;
  const times = { one: [], before: [], after: [], cursor: [], deno: [] };
  // Warm: the pool's connection is made at this round-trip time, as after any pause.
  for (const w of Object.values(workloads)) await sdkboxCall(w);
  if (existsSync(deno)) await denoCall();
  for (let i = 0; i < opts.runs; i++) {
    for (const [name, w] of Object.entries(workloads)) times[name].push(await sdkboxCall(w));
    if (existsSync(deno)) times.deno.push(await denoCall());
  }
  rows.push({ rtt: r, times });
}

const version = execFileSync(opts.sdkbox, ["--version"]).toString().trim();
console.log(`sdkbox: ${version}; provider: HTTP/2 over TLS on loopback behind a proxy adding the round-trip time; ${opts.runs} runs per cell after one warm-up; ${PAGES} pages of ${PER_PAGE}; milliseconds p50 / p95 through the official MCP TypeScript client. Requests the provider saw, by HTTP version: ${JSON.stringify(versions)}.\n`);
console.log("| RTT | one call, sdkbox (warm) | one call, fresh `deno run` | 10 pages one by one (before) | 10 pages, `api.paginate` (after) | before / after (p50) | 10 cursor pages, `api.paginate` |");
console.log("|---:|---:|---:|---:|---:|---:|---:|");
for (const { rtt: r, times } of rows) {
  const ratio = quantile(times.before, 0.5) / quantile(times.after, 0.5);
  const denoCell = times.deno.length ? fmt(times.deno) : "(deno not installed)";
  console.log(`| ${r} ms | ${fmt(times.one)} | ${denoCell} | ${fmt(times.before)} | ${fmt(times.after)} | ${ratio.toFixed(2)}x | ${fmt(times.cursor)} |`);
}
await client.close();
proxy.close();
server.close();
process.exit(0);
