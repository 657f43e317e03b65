// Scale-out, proven on one machine: INSTANCES `sdkbox serve --demo --stateless --http` behind
// haproxy, CONCURRENCY official TS clients (v1 SDK, streamable HTTP) each sending execute calls
// back to back for DURATION_MS. With KILL_AT_MS, one instance is killed (SIGKILL) that long
// after the stream starts. Prints one JSON report line: calls, calls/s, latencies, and every
// failure with its time, so the caller can check that only calls in flight at the kill failed.
//
// Environment: SDKBOX_BIN, HAPROXY (default haproxy), INSTANCES (3), CONCURRENCY (4),
// DURATION_MS (6000), KILL_AT_MS (none), CALL_TIMEOUT_MS (15000).

import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const env = (name, fallback) => process.env[name] ?? fallback;
const instances = Number(env("INSTANCES", 3));
const concurrency = Number(env("CONCURRENCY", 4));
const durationMs = Number(env("DURATION_MS", 6000));
const killAtMs = process.env.KILL_AT_MS === undefined ? undefined : Number(process.env.KILL_AT_MS);
const callTimeoutMs = Number(env("CALL_TIMEOUT_MS", 15000));
const token = `scaleout-${process.pid}`;
// One request to the instance's demo provider and a little work on it: a realistic small call.
const code = "const page = await api.orders.list({ limit: 10 }); return page.data.length;";

const children = [];
function cleanup() {
  for (const child of children) child.kill("SIGKILL");
}
process.on("exit", cleanup);

// Starts one sdkbox instance on a free loopback port and resolves to its port once it listens.
async function instance() {
  const child = spawn(
    process.env.SDKBOX_BIN,
    ["serve", "--demo", "--stateless", "--http", "127.0.0.1:0", "--token-env", "SDKBOX_TOKEN"],
    { env: { ...process.env, SDKBOX_TOKEN: token, SDKBOX_NO_MODEL: "1" }, stdio: ["ignore", "ignore", "pipe"] },
  );
  children.push(child);
  let seen = "";
  const port = await new Promise((resolve, reject) => {
    child.stderr.on("data", (chunk) => {
      seen += chunk;
      const found = /MCP endpoint http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(seen);
      if (found) resolve(Number(found[1]));
    });
    child.on("exit", (status) => reject(new Error(`sdkbox exited (${status}) before it listened:\n${seen}`)));
  });
  child.stderr.resume();
  return { child, port };
}

async function freePort() {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  return port;
}

// haproxy in HTTP mode, balancing each request (the server is stateless, so any instance
// serves any request). Health checks on /healthz take a dead instance out within ~0.5 s;
// until then a connection refused by it is retried on another one (`redispatch`): only
// connection failures are retried, never a request an instance received, so no call runs twice.
// No reuse of idle server connections: a request haproxy puts on a pooled connection to an
// instance that just died is lost with it, where a new connection is refused and retried.
async function balancer(backends) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "sdkbox-haproxy-"));
  const config = [
    "global",
    "  maxconn 1000",
    "defaults",
    "  mode http",
    "  timeout connect 1s",
    "  timeout client 30s",
    "  timeout server 30s",
    "  retries 3",
    "  option redispatch 1",
    "  option httpchk GET /readyz",
    "  http-reuse never",
    "  default-server check inter 250ms fall 1 rise 2",
    "frontend mcp",
    `  bind 127.0.0.1:${port}`,
    "  default_backend sdkbox",
    "backend sdkbox",
    "  balance roundrobin",
    ...backends.map((backend, i) => `  server s${i} 127.0.0.1:${backend.port}`),
    "",
  ].join("\n");
  writeFileSync(join(dir, "haproxy.cfg"), config);
  const child = spawn(env("HAPROXY", "haproxy"), ["-db", "-f", join(dir, "haproxy.cfg")], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  children.push(child);
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (response.ok) break;
    } catch (error) {
      if (attempt > 100) throw new Error(`haproxy did not come up: ${error.message}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return port;
}

async function connect(port) {
  const client = new Client({ name: "sdkbox-scaleout", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

const backends = await Promise.all(Array.from({ length: instances }, instance));
const port = await balancer(backends);
const clients = await Promise.all(Array.from({ length: concurrency }, () => connect(port)));

const calls = [];
const start = performance.now();
let killedAt;
if (killAtMs !== undefined) {
  setTimeout(() => {
    killedAt = performance.now() - start;
    backends[backends.length - 1].child.kill("SIGKILL");
  }, killAtMs);
}

async function stream(client) {
  while (performance.now() - start < durationMs) {
    const sent = performance.now() - start;
    let failure;
    try {
      const result = await client.callTool({ name: "execute", arguments: { code } }, undefined, {
        timeout: callTimeoutMs,
      });
      if (result.isError || result.structuredContent?.result !== 10) {
        failure = `unexpected result: ${JSON.stringify(result).slice(0, 300)}`;
      }
    } catch (error) {
      failure = String(error?.message ?? error);
    }
    calls.push({ sent, ended: performance.now() - start, failure });
  }
}
await Promise.all(clients.map(stream));
const elapsed = performance.now() - start;

const durations = calls.map((c) => c.ended - c.sent).sort((a, b) => a - b);
const at = (q) => durations[Math.min(durations.length - 1, Math.floor(q * durations.length))];
const failures = calls.filter((c) => c.failure);
console.log(
  JSON.stringify({
    instances,
    concurrency,
    calls: calls.length,
    ok: calls.length - failures.length,
    calls_per_s: Number(((calls.length - failures.length) / (elapsed / 1000)).toFixed(1)),
    p50_ms: Number(at(0.5).toFixed(2)),
    p95_ms: Number(at(0.95).toFixed(2)),
    max_ms: Number(durations[durations.length - 1].toFixed(2)),
    killed_at_ms: killedAt === undefined ? null : Number(killedAt.toFixed(1)),
    ok_sent_after_kill: killedAt === undefined ? 0 : calls.filter((c) => !c.failure && c.sent > killedAt).length,
    failures: failures.map((c) => ({ sent_ms: Math.round(c.sent), ended_ms: Math.round(c.ended), failure: c.failure })),
  }),
);
await Promise.allSettled(clients.map((client) => client.close()));
process.exit(0);
