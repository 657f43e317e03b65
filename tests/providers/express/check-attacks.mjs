// Sends each request in attacks.json and near-misses.json straight to server.mjs (no sdkbox in
// between) as raw bytes, and prints what the handler saw. Exits non-zero if an attack does not
// reach the DELETE handler, or a near-miss does: both lists must say what this server really does.
//
//   node check-attacks.mjs          check both lists
//   node check-attacks.mjs FILE     only report what each entry of FILE reaches
//
// An entry: {name, method, path, headers, body} with body the raw text, or bodyBase64 for bytes
// that are not text (compressed, UTF-16). A header value may be a list: one header line each.
// Host, Authorization (unless given), Content-Length and Connection: close are added here.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";

const here = new URL(".", import.meta.url);
const load = (file) => JSON.parse(readFileSync(file, "utf8"));

const server = spawn(process.execPath, [new URL("server.mjs", here).pathname], {
  stdio: ["pipe", "pipe", "inherit"],
});
const port = await new Promise((resolve, reject) => {
  server.stdout.once("data", (line) => resolve(JSON.parse(line).port));
  server.once("exit", (code) => reject(new Error(`server.mjs exited (${code})`)));
});

// One request over its own connection, exactly as written; resolves to the status code.
function send(entry) {
  const body = entry.bodyBase64 !== undefined
    ? Buffer.from(entry.bodyBase64, "base64")
    : Buffer.from(entry.body ?? "", "utf8");
  const headers = Object.entries(entry.headers ?? {});
  const named = (n) => headers.some(([k]) => k.toLowerCase() === n);
  let head = `${entry.method} ${entry.path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`;
  if (!named("authorization")) head += "Authorization: Bearer test-key\r\n";
  for (const [k, v] of headers) for (const one of [v].flat()) head += `${k}: ${one}\r\n`;
  if (!named("content-length")) head += `Content-Length: ${body.length}\r\n`;
  head += "Connection: close\r\n\r\n";
  return new Promise((resolve, reject) => {
    const chunks = [];
    // Written without half-closing: the server closes after its response (Connection: close).
    const socket = net.connect(port, "127.0.0.1", () => socket.write(Buffer.concat([Buffer.from(head, "latin1"), body])));
    socket.setTimeout(5000, () => socket.destroy(new Error("timed out")));
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(Buffer.concat(chunks).toString("latin1"))?.[1] ?? 0)));
  });
}

async function harness(method, path) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  return res.status === 200 ? res.json() : null;
}

// What the handlers saw for one entry: "DELETE" if it reached the DELETE handler.
async function reach(entry) {
  await harness("DELETE", "/__log");
  const status = await send(entry).catch((e) => `error (${e.message})`);
  const log = await harness("GET", "/__log");
  const seen = log.map((e) => `${e.method} ${e.path} (sent ${e.originalMethod})`).join(", ") || "no handler";
  return { status, seen, deleted: log.some((e) => e.method === "DELETE") };
}

let wrong = 0;
async function run(list, expect) {
  for (const entry of list) {
    const { status, seen, deleted } = await reach(entry);
    const ok = expect === undefined || expect === deleted;
    if (!ok) wrong++;
    console.log(`${ok ? "ok  " : "FAIL"} ${entry.name}: ${entry.method} -> ${status}, handler: ${seen}`);
  }
}

try {
  if (process.argv[2]) {
    await run(load(process.argv[2]));
  } else {
    console.log("# attacks.json: each must reach DELETE");
    await run(load(new URL("attacks.json", here)), true);
    console.log("# near-misses.json: none may reach DELETE");
    await run(load(new URL("near-misses.json", here)), false);
  }
} finally {
  server.stdin.end();
}
if (wrong) {
  console.log(`${wrong} entries do not do what their list says`);
  process.exit(1);
}
