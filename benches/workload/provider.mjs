// A tiny loopback API provider for the workload bench, on 127.0.0.1 and a free port.
//
//   GET /items?page=N&limit=L  {data: [L items], has_more, page}; PAGES pages in all
//   GET /items/{id}            one item, 404 if there is none
//   GET /big                   one JSON array of BIG_COUNT items, about 2 MB
//
// Run alone (`node provider.mjs`) it prints {"port": N} on one line of stdout and serves until
// its stdin closes, so it never outlives the bench that spawned it. The bench imports the
// same generator to compute the values every call must return: the checks do not trust the
// code under test.

import http from "node:http";
import { fileURLToPath } from "node:url";

export const PAGES = 10;
export const PAGE_LIMIT = 100;
export const BIG_COUNT = 11_500;
const STATUSES = ["paid", "pending", "refunded", "failed"];

// Item n (1-based), a pure function of n so every process agrees on the data.
export function item(n) {
  return {
    id: `item_${String(n).padStart(6, "0")}`,
    status: STATUSES[(n * 7) % STATUSES.length],
    amount: ((n * 7919) % 10_000) + 1,
    customer: `cus_${String((n * 31) % 53).padStart(3, "0")}`,
  };
}

// The /big rows carry some filler so that the body reaches ~2 MB with a realistic row count.
function bigItem(n) {
  return { ...item(n), currency: "usd", created: 1_767_225_600 + n * 61, description: `Order ${n} of the big export, shipped by ground` };
}

export function page(p, limit) {
  const start = (p - 1) * limit;
  const total = PAGES * PAGE_LIMIT;
  const data = [];
  for (let n = start + 1; n <= Math.min(start + limit, total); n++) data.push(item(n));
  return { data, has_more: start + limit < total, page: p };
}

export const bigRows = () => Array.from({ length: BIG_COUNT }, (_, i) => bigItem(i + 1));

export function start() {
  // Serialised once: the bench measures the callers, not JSON.stringify in the provider.
  const big = Buffer.from(JSON.stringify(bigRows()));
  const send = (res, status, body) => {
    const buf = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    res.writeHead(status, { "content-type": "application/json", "content-length": buf.length });
    res.end(buf);
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (req.method !== "GET") return send(res, 405, { error: "method not allowed" });
    if (url.pathname === "/items") {
      const p = Number(url.searchParams.get("page") ?? 1);
      const limit = Number(url.searchParams.get("limit") ?? PAGE_LIMIT);
      if (!Number.isInteger(p) || p < 1 || !Number.isInteger(limit) || limit < 1 || limit > 1000) {
        return send(res, 400, { error: "page must be >= 1 and limit 1..1000" });
      }
      return send(res, 200, page(p, limit));
    }
    const m = /^\/items\/item_(\d{6})$/.exec(url.pathname);
    if (m) {
      const n = Number(m[1]);
      return n >= 1 && n <= PAGES * PAGE_LIMIT ? send(res, 200, item(n)) : send(res, 404, { error: "no such item" });
    }
    if (url.pathname === "/big") return send(res, 200, big);
    send(res, 404, { error: "not found" });
  });
  // Many short-lived clients (one deno process per call) each open a connection: keep the
  // default backlog and let idle keep-alive sockets go quickly.
  server.keepAliveTimeout = 5_000;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, port: server.address().port, bigBytes: big.length })));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { server, port, bigBytes } = await start();
  console.log(JSON.stringify({ port, bigBytes }));
  process.stdin.on("end", () => server.close(() => process.exit(0)));
  process.stdin.on("close", () => process.exit(0));
  process.stdin.resume();
}
