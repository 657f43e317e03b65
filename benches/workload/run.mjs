// Workload bench: sdkbox's `execute` end to end (the official MCP TypeScript client ->
// `sdkbox serve` over stdio -> the sandbox) against the local "code mode" peer design, a fresh
// `deno run` subprocess per call, on the same loopback provider and the same six workloads.
//
//   node benches/workload/run.mjs --sdkbox PATH [--runs 30] [--warmup 3] [--gap-ms 20]
//        [--soak 10000] [--throughput-s 10] [--concurrency 4] [--label TEXT] [--only a,b]
//
// Prints markdown ready to paste into docs. Every call's answer is checked against a value the
// bench computes itself from provider.mjs's generator; a call that fails or answers wrong is
// an error, is listed, and is not in the timings. The exit code is 1 if any call erred.
//
// Scripts/bench-workload is the wrapper (release build, npm ci, then this).

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import { BIG_COUNT, PAGES, PAGE_LIMIT, bigRows, item, page } from "./provider.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const started = performance.now();

// ---------------------------------------------------------------------------------------------
// Options

const opts = { sdkbox: undefined, runs: 30, warmup: 3, gapMs: 20, soak: 10_000, throughputS: 10, concurrency: 4, label: undefined, only: undefined };
{
  const argv = process.argv.slice(2);
  const num = (flag, v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) die(`${flag} wants a number, got ${v}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : die(`${flag} wants a value`));
    switch (flag) {
      case "--sdkbox": opts.sdkbox = value(); break;
      case "--runs": opts.runs = num(flag, value()); break;
      case "--warmup": opts.warmup = num(flag, value()); break;
      case "--gap-ms": opts.gapMs = num(flag, value()); break;
      case "--soak": opts.soak = num(flag, value()); break;
      case "--throughput-s": opts.throughputS = num(flag, value()); break;
      case "--concurrency": opts.concurrency = Math.max(1, num(flag, value())); break;
      case "--label": opts.label = value(); break;
      case "--only": opts.only = value().split(","); break;
      case "-h":
      case "--help":
        console.log(readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").slice(0, 12).join("\n"));
        process.exit(0);
      default: die(`unknown option ${flag} (see --help)`);
    }
  }
  if (!opts.sdkbox) die("--sdkbox PATH is required (the sdkbox binary to measure)");
  opts.sdkbox = path.resolve(opts.sdkbox);
  if (!existsSync(opts.sdkbox)) die(`no sdkbox binary at ${opts.sdkbox}`);
  if (opts.runs < 1) die("--runs must be at least 1");
}

function die(message) {
  console.error(`bench-workload: ${message}`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Dependencies: the MCP SDK the conformance tests pin (not a second copy), and deno from this
// folder's package-lock.json.

const sdkDir = path.join(repo, "tests/clients/ts/node_modules/@modelcontextprotocol/sdk");
if (!existsSync(sdkDir)) die(`no MCP SDK at ${sdkDir}: run scripts/test-deps first`);
const sdkVersion = JSON.parse(readFileSync(path.join(sdkDir, "package.json"), "utf8")).version;
const { Client } = await import(pathToFileURL(path.join(sdkDir, "dist/esm/client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(path.join(sdkDir, "dist/esm/client/stdio.js")).href);
const { ListToolsResultSchema } = await import(pathToFileURL(path.join(sdkDir, "dist/esm/types.js")).href);

// The platform package's executable itself, not `npx deno` or node_modules/.bin/deno: the
// latter may be deno's bin.cjs, a node process that spawns deno, and would bill the peer a
// second process start per call.
function denoBinary() {
  const require = createRequire(path.join(here, "package.json"));
  const arch = { x64: "x64", arm64: "arm64" }[os.arch()];
  const target = os.platform() === "linux" ? `linux-${arch}-glibc` : `${os.platform()}-${arch}`;
  try {
    return path.join(path.dirname(require.resolve(`@deno/${target}/package.json`)), "deno");
  } catch {
    die(`no @deno/${target} in ${here}/node_modules: run npm ci --prefix benches/workload`);
  }
}
const deno = denoBinary();

// ---------------------------------------------------------------------------------------------
// Workloads: the same program twice, once on the SDK sdkbox generates from spec.json, once on
// plain fetch as a deno script. `expected` is computed here, independently of both.

// xorshift32: deterministic on every engine (32-bit integer ops only), so V8, QuickJS and this
// process agree on the 100k keys.
const XORSHIFT = "let s = 2463534242; const next = () => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return s >>> 0; };";
const SORT_N = 100_000;
const BIG_MIN_AMOUNT = 5_000;
const ITEM_ID = "item_000042";

// The summary workloads 3 and 4 return: paid items grouped by customer, the top three.
const SUMMARIZE = `
  const byCustomer: Record<string, { count: number; amount: number }> = {};
  for (const it of items) {
    if (it.status !== "paid") continue;
    const c = (byCustomer[it.customer] ??= { count: 0, amount: 0 });
    c.count += 1;
    c.amount += it.amount;
  }
  const ranked = Object.entries(byCustomer).sort((a, b) => b[1].amount - a[1].amount || (a[0] < b[0] ? -1 : 1));
  return {
    items: items.length,
    paid: ranked.reduce((n, [, c]) => n + c.count, 0),
    customers: ranked.length,
    top: ranked.slice(0, 3).map(([customer, c]) => ({ customer, count: c.count, amount: c.amount })),
  };`;

function expectedSummary() {
  const items = [];
  for (let p = 1; p <= PAGES; p++) items.push(...page(p, PAGE_LIMIT).data);
  const by = new Map();
  for (const it of items.filter((i) => i.status === "paid")) {
    const c = by.get(it.customer) ?? { count: 0, amount: 0 };
    c.count += 1;
    c.amount += it.amount;
    by.set(it.customer, c);
  }
  const ranked = [...by].sort((a, b) => b[1].amount - a[1].amount || (a[0] < b[0] ? -1 : 1));
  return {
    items: items.length,
    paid: ranked.reduce((n, [, c]) => n + c.count, 0),
    customers: ranked.length,
    top: ranked.slice(0, 3).map(([customer, c]) => ({ customer, count: c.count, amount: c.amount })),
  };
}

function expectedSortFirst() {
  const next = new Function(`${XORSHIFT} return next;`)();
  let best = { id: -1, key: Infinity };
  for (let i = 0; i < SORT_N; i++) {
    const key = next();
    if (key < best.key) best = { id: i, key };
  }
  return best;
}

const workloads = [
  {
    id: "trivial",
    name: "trivial (no I/O)",
    sdkbox: "interface P { a: number }; const p: P = { a: 1 }; return p.a + 1;",
    deno: "interface P { a: number }; const p: P = { a: 1 }; return p.a + 1;",
    expected: () => 2,
  },
  {
    id: "one-call",
    name: "one API call (GET one item)",
    sdkbox: `return await api.items.get({ item_id: "${ITEM_ID}" });`,
    deno: `return await get("/items/${ITEM_ID}");`,
    expected: () => item(42),
  },
  {
    id: "paginate",
    name: `paginate: ${PAGES} pages x ${PAGE_LIMIT}, sequential`,
    sdkbox: `
  const items = [];
  let page = 1;
  for (;;) {
    const r = await api.items.list({ page, limit: ${PAGE_LIMIT} });
    items.push(...r.data);
    if (!r.has_more) break;
    page += 1;
  }${SUMMARIZE}`,
    deno: `
  const items = [];
  let page = 1;
  for (;;) {
    const r = await get(\`/items?page=\${page}&limit=${PAGE_LIMIT}\`);
    items.push(...r.data);
    if (!r.has_more) break;
    page += 1;
  }${SUMMARIZE}`,
    expected: expectedSummary,
  },
  {
    id: "parallel",
    name: `the same ${PAGES} pages, Promise.all`,
    sdkbox: `
  const pages = await Promise.all(Array.from({ length: ${PAGES} }, (_, i) => api.items.list({ page: i + 1, limit: ${PAGE_LIMIT} })));
  const items = pages.flatMap((r) => r.data);${SUMMARIZE}`,
    deno: `
  const pages = await Promise.all(Array.from({ length: ${PAGES} }, (_, i) => get(\`/items?page=\${i + 1}&limit=${PAGE_LIMIT}\`)));
  const items = pages.flatMap((r) => r.data);${SUMMARIZE}`,
    expected: expectedSummary,
  },
  {
    id: "big",
    name: "one ~2 MB response, filter, count",
    sdkbox: `const rows = await api.big.get({}); return rows.filter((r) => r.status === "paid" && r.amount >= ${BIG_MIN_AMOUNT}).length;`,
    deno: `const rows = await get("/big"); return rows.filter((r) => r.status === "paid" && r.amount >= ${BIG_MIN_AMOUNT}).length;`,
    expected: () => bigRows().filter((r) => r.status === "paid" && r.amount >= BIG_MIN_AMOUNT).length,
  },
  {
    id: "sort",
    name: `pure compute: sort ${SORT_N / 1000}k objects`,
    sdkbox: `${XORSHIFT}
  const rows = Array.from({ length: ${SORT_N} }, (_, id) => ({ id, key: next() }));
  rows.sort((a, b) => a.key - b.key);
  return rows[0];`,
    deno: `${XORSHIFT}
  const rows = Array.from({ length: ${SORT_N} }, (_, id) => ({ id, key: next() }));
  rows.sort((a, b) => a.key - b.key);
  return rows[0];`,
    expected: expectedSortFirst,
  },
].filter((w) => !opts.only || opts.only.includes(w.id));
for (const w of workloads) w.want = canonical(w.expected());
const trivial = workloads.find((w) => w.id === "trivial") ?? null;

// Key order is not part of the answer: compare JSON with sorted keys.
function canonical(value) {
  return JSON.stringify(value, (_, v) => (v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v));
}

// ---------------------------------------------------------------------------------------------
// Processes: the provider, the sdkbox client, and cleanup whichever way the bench ends.

const tmp = mkdtempSync(path.join(os.tmpdir(), "sdkbox-bench-workload-"));
const cleanups = [() => rmSync(tmp, { recursive: true, force: true })];
async function cleanup() {
  while (cleanups.length) {
    try {
      await cleanups.pop()();
    } catch {
      // best effort: the process is going away
    }
  }
}
process.on("SIGINT", () => cleanup().then(() => process.exit(130)));
process.on("SIGTERM", () => cleanup().then(() => process.exit(143)));

// A process of its own, so that the client's event loop (and 4 concurrent deno spawns) do not
// slow the provider's answers; its stdin is its lifeline.
async function startProvider() {
  const child = spawn(process.execPath, [path.join(here, "provider.mjs")], { stdio: ["pipe", "pipe", "inherit"] });
  cleanups.push(() => child.kill());
  const line = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(out.split("\n")[0]);
    });
    child.on("exit", (code) => reject(new Error(`the provider exited (${code}) before it listened`)));
  });
  return JSON.parse(line);
}

const provider = await startProvider();
const baseUrl = `http://127.0.0.1:${provider.port}`;

// A made-up key in Stripe's format; the provider ignores it.
const BENCH_SECRET = "sk_test_51BenchOnlyNotARealKey0000000000";
let stderrTail = "";
async function startSdkbox() {
  const transport = new StdioClientTransport({
    command: opts.sdkbox,
    // With a provider secret, as in any real deployment: every response and every outcome
    // is then scrubbed of it, which is part of what a call costs.
    args: ["serve", "--spec", path.join(here, "spec.json"), "--base-url", baseUrl, "--secret-env", "SDKBOX_BENCH_SECRET"],
    env: { ...process.env, SDKBOX_BENCH_SECRET: BENCH_SECRET },
    stderr: "pipe",
  });
  // Kept for error reports: a failing server usually says why on stderr.
  transport.stderr?.on("data", (d) => (stderrTail = (stderrTail + d).slice(-4000)));
  const client = new Client({ name: "sdkbox-bench-workload", version: "1.0.0" });
  const t0 = performance.now();
  await client.connect(transport);
  const connectMs = performance.now() - t0;
  cleanups.push(() => client.close());
  // The client validates every result against the outputSchema that tools/list declared,
  // as it does for a real agent, so list the tools first.
  const { tools } = await client.listTools();
  if (!tools.some((t) => t.name === "execute")) die(`sdkbox offers no execute tool (tools: ${tools.map((t) => t.name).join(", ")})`);
  return { client, transport, connectMs, serverInfo: client.getServerVersion() };
}

const sdk = await startSdkbox();
const supervisorPid = sdk.transport.pid;

// ---------------------------------------------------------------------------------------------
// One call each way. Both return { ms, ok, error?, outcome? }: never throw.

async function sdkboxCall(w) {
  const t0 = performance.now();
  try {
    const result = await sdk.client.callTool({ name: "execute", arguments: { code: w.sdkbox } }, undefined, { timeout: 120_000 });
    const ms = performance.now() - t0;
    const outcome = result.structuredContent;
    if (result.isError || !outcome?.ok) {
      const err = outcome?.error ? `${outcome.error.kind}: ${outcome.error.message}` : JSON.stringify(result.content).slice(0, 300);
      return { ms, ok: false, error: err };
    }
    const got = canonical(outcome.result);
    if (got !== w.want) return { ms, ok: false, error: `wrong answer: ${got.slice(0, 200)} (want ${w.want.slice(0, 200)})` };
    return { ms, ok: true, outcome };
  } catch (error) {
    return { ms: performance.now() - t0, ok: false, error: `${error?.message ?? error}${stderrTail ? ` [server stderr: ${stderrTail.slice(-300)}]` : ""}` };
  }
}

// Deno's own defaults except: no update check (it would phone home: this machine has no such
// network, and the peer's users would switch it off too), no colour, and a cache of this run.
const denoEnv = { PATH: process.env.PATH, HOME: process.env.HOME ?? tmp, DENO_DIR: path.join(tmp, "deno-dir"), DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" };
let denoSeq = 0;

function denoScript(body) {
  return `const BASE = "${baseUrl}";
async function get(path: string): Promise<any> {
  const res = await fetch(BASE + path);
  if (!res.ok) throw new Error(\`\${res.status} \${path}\`);
  return await res.json();
}
const result = await (async () => {
${body}
})();
console.log(JSON.stringify(result));
`;
}

// As the peer does it: the code written to a fresh .ts file, one `deno run` for it, its stdout
// parsed. Timed from writing the file to the process's exit.
function denoRun(source) {
  const file = path.join(tmp, `call-${++denoSeq}.ts`);
  const t0 = performance.now();
  writeFileSync(file, source);
  return new Promise((resolve) => {
    const child = spawn(deno, ["run", `--allow-net=127.0.0.1:${provider.port}`, "--no-prompt", file], { cwd: tmp, env: denoEnv, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err = (err + d).slice(-2000)));
    child.on("error", (e) => resolve({ ms: performance.now() - t0, code: -1, out, err: String(e) }));
    child.on("close", (code) => {
      const ms = performance.now() - t0;
      rmSync(file, { force: true });
      resolve({ ms, code, out, err });
    });
  });
}

async function denoCall(w) {
  const r = await denoRun(w.denoSource);
  if (r.code !== 0) return { ms: r.ms, ok: false, error: `deno exited ${r.code}: ${r.err.trim().slice(-300)}` };
  try {
    const got = canonical(JSON.parse(r.out.trim().split("\n").pop()));
    if (got !== w.want) return { ms: r.ms, ok: false, error: `wrong answer: ${got.slice(0, 200)} (want ${w.want.slice(0, 200)})` };
  } catch {
    return { ms: r.ms, ok: false, error: `unparsable stdout: ${r.out.slice(0, 200)}` };
  }
  return { ms: r.ms, ok: true };
}
for (const w of workloads) w.denoSource = denoScript(w.deno);

// ---------------------------------------------------------------------------------------------
// Measuring

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errors = []; // { where, error }

function quantile(xs, q) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (i - lo);
}
const median = (xs) => quantile(xs, 0.5);
const ms = (x) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)) : "n/a");

// Warm-up calls (errors counted too: a workload that fails while warming fails), then `runs`
// sequential measured calls, `gapMs` apart: the pause a model's turn leaves between calls, in
// which sdkbox's idle worker prepares its next runtime (docs/BENCHMARKS.md does the same).
async function measure(where, call) {
  const samples = [];
  const oks = [];
  let failed = 0;
  for (let i = 0; i < opts.warmup + opts.runs; i++) {
    const r = await call();
    if (!r.ok) {
      failed += 1;
      if (errors.filter((e) => e.where === where).length < 5) errors.push({ where, error: r.error });
    } else if (i >= opts.warmup) {
      samples.push(r.ms);
      oks.push(r);
    }
    if (opts.gapMs) await sleep(opts.gapMs);
  }
  return { samples, oks, failed, p50: median(samples), p95: quantile(samples, 0.95) };
}

// `concurrency` callers, each calling back to back until `seconds` are up.
async function throughput(where, call, seconds) {
  const samples = [];
  let failed = 0;
  const deadline = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      while (performance.now() < deadline) {
        const r = await call();
        if (r.ok) samples.push(r.ms);
        else {
          failed += 1;
          if (errors.filter((e) => e.where === where).length < 5) errors.push({ where, error: r.error });
        }
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  return { calls: samples.length + failed, perS: (samples.length + failed) / wall, p50: median(samples), p95: quantile(samples, 0.95), failed, wall };
}

// RSS of the supervisor and of every process below it (its workers), from /proc.
function statusKiB(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}
function descendants(root) {
  const parent = new Map();
  for (const name of readdirSafe("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // The command name is in parentheses and may hold spaces: the ppid is after the last ')'.
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = [];
  const walk = (pid) => {
    for (const [child, ppid] of parent) if (ppid === pid) (out.push(child), walk(child));
  };
  walk(root);
  return out;
}
function readdirSafe(dir) {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
function memory() {
  const workers = descendants(supervisorPid).map((pid) => ({ pid, rss: statusKiB(pid, "VmRSS") })).filter((w) => w.rss !== null);
  return { supervisor: statusKiB(supervisorPid, "VmRSS"), hwm: statusKiB(supervisorPid, "VmHWM"), workers };
}
const mib = (kib) => (kib == null ? "n/a" : `${(kib / 1024).toFixed(1)} MiB`);
const memLine = (m) => `supervisor ${mib(m.supervisor)}; ${m.workers.length} worker${m.workers.length === 1 ? "" : "s"}: ${m.workers.map((w) => mib(w.rss)).join(", ") || "none"}`;

// ---------------------------------------------------------------------------------------------
// The run

const versions = {
  sdkbox: sdk.serverInfo ? `${sdk.serverInfo.name} ${sdk.serverInfo.version}` : "unknown",
  deno: (await denoRun("console.log(Deno.version.deno)")).out.trim() || "unknown",
  node: process.version,
};
const memStart = memory();

const rows = [];
for (const w of workloads) {
  process.stderr.write(`measuring ${w.id}: sdkbox...`);
  const s = await measure(`${w.id} / sdkbox`, () => sdkboxCall(w));
  process.stderr.write(" deno...");
  const d = await measure(`${w.id} / deno`, () => denoCall(w));
  process.stderr.write(" done\n");
  rows.push({ w, s, d });
}

// The protocol floor: what the client, stdio and the server's JSON-RPC loop cost with no
// execution at all; and the peer's floor, one `deno run` of a script that does nothing.
process.stderr.write("measuring floors...\n");
const timeIt = async (fn) => {
  const t0 = performance.now();
  try {
    await fn();
    return { ms: performance.now() - t0, ok: true };
  } catch (error) {
    return { ms: performance.now() - t0, ok: false, error: String(error?.message ?? error) };
  }
};
const floors = [
  // listTools() as an agent calls it also compiles (with ajv) the output schemas it gets, to
  // check later results; the bare request shows what is left without that client-side work.
  ["`tools/list` (sdkbox), `client.listTools()`", await measure("tools/list", () => timeIt(() => sdk.client.listTools()))],
  ["`tools/list` (sdkbox), bare request, no schema compile", await measure("tools/list bare", () => timeIt(() => sdk.client.request({ method: "tools/list", params: {} }, ListToolsResultSchema)))],
  ["`ping` (sdkbox)", await measure("ping", () => timeIt(() => sdk.client.ping()))],
  [
    "`deno run` of an empty script",
    await measure("deno empty", async () => {
      const r = await denoRun("");
      return { ms: r.ms, ok: r.code === 0, error: `deno exited ${r.code}: ${r.err.slice(-300)}` };
    }),
  ],
];

let tput = null;
let soak = null;
if (trivial) {
  process.stderr.write(`measuring throughput at concurrency ${opts.concurrency} for ${opts.throughputS} s each...\n`);
  tput = {
    sdkbox: await throughput("throughput / sdkbox", () => sdkboxCall(trivial), opts.throughputS),
    deno: await throughput("throughput / deno", () => denoCall(trivial), opts.throughputS),
  };

  if (opts.soak > 0) {
    process.stderr.write(`soaking: ${opts.soak} trivial calls at concurrency ${opts.concurrency}...\n`);
    const before = memory();
    const seenWorkers = new Set(before.workers.map((w) => w.pid));
    let peakWorkers = 0;
    // Sampled while it runs: workers are recycled (every 100 executions by default), so the
    // end state alone would hide what they reached.
    const sampler = setInterval(() => {
      for (const w of memory().workers) {
        seenWorkers.add(w.pid);
        peakWorkers = Math.max(peakWorkers, w.rss);
      }
    }, 250);
    let next = 0;
    let failed = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: opts.concurrency }, async () => {
        while (next < opts.soak) {
          next += 1;
          const r = await sdkboxCall(trivial);
          if (!r.ok) {
            failed += 1;
            if (errors.filter((e) => e.where === "soak").length < 5) errors.push({ where: "soak", error: r.error });
          }
        }
      }),
    );
    clearInterval(sampler);
    const secs = (performance.now() - t0) / 1000;
    soak = { before, after: memory(), failed, secs, seenWorkers: seenWorkers.size, peakWorkers };
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function buildLabel() {
  if (opts.label) return opts.label;
  if (opts.sdkbox.includes(`${path.sep}target${path.sep}release${path.sep}`)) return "release build";
  if (opts.sdkbox.includes(`${path.sep}target${path.sep}debug${path.sep}`)) return "debug build";
  return "build profile unknown (pass --label)";
}

const out = [];
const p = (line = "") => out.push(line);
const errCell = (r) => (r.failed ? ` (${r.failed} err)` : "");

p(`Measured ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC on ${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? "cpu unknown"}), ${Math.round(os.totalmem() / 2 ** 30)} GiB.`);
p(`sdkbox: \`${opts.sdkbox}\` (${buildLabel()}), ${versions.sdkbox}, default limits (2 workers), with a provider secret (so every response and outcome is scrubbed); client @modelcontextprotocol/sdk ${sdkVersion} over stdio, node ${versions.node}.`);
p(`deno: ${versions.deno} (\`${path.relative(repo, deno)}\`), a fresh \`deno run --allow-net=127.0.0.1:PORT --no-prompt call-N.ts\` per call (no type check).`);
p(`Each cell: ${opts.runs} sequential calls after ${opts.warmup} warm-up, ${opts.gapMs} ms apart; milliseconds end to end as the caller sees them; every answer checked.`);
p();
p("| workload | sdkbox p50 / p95 | deno p50 / p95 | ratio of p50s (deno / sdkbox) |");
p("|---|---|---|---|");
for (const { w, s, d } of rows) {
  p(`| ${w.name} | ${ms(s.p50)} / ${ms(s.p95)} ms${errCell(s)} | ${ms(d.p50)} / ${ms(d.p95)} ms${errCell(d)} | ${Number.isFinite(d.p50 / s.p50) ? `${(d.p50 / s.p50).toFixed(1)}x` : "n/a"} |`);
}
p();

// sdkbox's outcome carries the execution's own wall time (`duration_ms`, whole ms) and each
// request's; `timings` (compile/create/run/finish) only if the server puts it there.
p("Where sdkbox's time goes (medians; `execution` is the outcome's `duration_ms`, `requests` the sum of its `http[].duration_ms`, both whole ms; `outside` end-to-end minus execution: client, stdio, JSON-RPC, queueing):");
p();
const timingKeys = [...new Set(rows.flatMap(({ s }) => s.oks.flatMap((r) => Object.keys(r.outcome?.timings ?? {}))))];
p(`| workload | end to end | execution | requests | outside |${timingKeys.map((k) => ` ${k} |`).join("")}`);
p(`|---|---|---|---|---|${timingKeys.map(() => "---|").join("")}`);
for (const { w, s } of rows) {
  const exec = s.oks.map((r) => r.outcome.duration_ms ?? NaN);
  const reqs = s.oks.map((r) => (r.outcome.http ?? []).reduce((n, h) => n + (h.duration_ms ?? 0), 0));
  const outside = s.oks.map((r) => r.ms - (r.outcome.duration_ms ?? NaN));
  const extra = timingKeys.map((k) => ` ${ms(median(s.oks.map((r) => Number(r.outcome.timings?.[k]))))} |`).join("");
  p(`| ${w.name} | ${ms(s.p50)} | ${ms(median(exec))} | ${ms(median(reqs))} | ${ms(median(outside))} |${extra}`);
}
if (timingKeys.length === 0) p("\n(The outcome has no `timings` field: only `duration_ms` and the per-request durations are reported.)");
p();

p("Floors (same client and connection):");
p();
p("| call | p50 / p95 |");
p("|---|---|");
p(`| connect (spawn + \`initialize\`), once | ${ms(sdk.connectMs)} ms |`);
for (const [name, r] of floors) p(`| ${name} | ${ms(r.p50)} / ${ms(r.p95)} ms${errCell(r)} |`);
p();

if (tput) {
  p(`Throughput, trivial workload, ${opts.concurrency} concurrent callers back to back for ${opts.throughputS} s (sdkbox: ${opts.concurrency} callers on one client connection, 2 workers by default; deno: ${opts.concurrency} processes at a time):`);
  p();
  p("| peer | calls/s | p50 / p95 | calls | errors |");
  p("|---|---|---|---|---|");
  for (const [name, t] of Object.entries(tput)) p(`| ${name} | ${t.perS.toFixed(1)} | ${ms(t.p50)} / ${ms(t.p95)} ms | ${t.calls} | ${t.failed} |`);
  p();
}

p("Memory (VmRSS):");
p();
p(`- after connect, before any call: ${memLine(memStart)}`);
if (soak) {
  p(`- before the soak (after the workloads above): ${memLine(soak.before)}`);
  p(`- after ${opts.soak} more trivial calls (${opts.concurrency} callers, ${soak.secs.toFixed(1)} s, ${(opts.soak / soak.secs).toFixed(0)}/s, ${soak.failed} errors): ${memLine(soak.after)}`);
  p(`- supervisor peak (VmHWM) ${mib(soak.after.hwm)}; ${soak.seenWorkers} distinct worker processes seen during the soak (recycled), the largest at ${mib(soak.peakWorkers)}`);
} else if (!trivial) {
  p("- (soak skipped: the trivial workload was not selected)");
}
p();

const totalErrors = rows.reduce((n, { s, d }) => n + s.failed + d.failed, 0) + floors.reduce((n, [, r]) => n + r.failed, 0) + (tput ? tput.sdkbox.failed + tput.deno.failed : 0) + (soak?.failed ?? 0);
p(`Errors: ${totalErrors}.${errors.length ? " First ones:" : ""}`);
for (const e of errors) p(`- ${e.where}: ${e.error}`);
p();
p(`Bench wall time: ${((performance.now() - started) / 1000).toFixed(0)} s.`);

console.log(out.join("\n"));
await cleanup();
process.exit(totalErrors ? 1 : 0);
