// MCP tasks through the official `@modelcontextprotocol/ext-tasks` adapter over the official
// `@modelcontextprotocol/client` 2.x, in the 2026-07-28 revision over streamable HTTP: the
// adapter drives every task (tasks/get polling, tasks/update answers, tasks/cancel); the
// host hands it the raw dispatch and request framing the 2026 revision needs, as its README
// says. A second, plain client is served while tasks run.
//
// Environment: SDKBOX_URL, SDKBOX_TOKEN (the server), PROVIDER (the test provider's origin:
// GET /_seen reports what it received), PAGES and PAGE_DELAY_MS (the long run's length).
// Prints one report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const pages = Number(process.env.PAGES ?? 20);
const delay = Number(process.env.PAGE_DELAY_MS ?? 100);
const checks = {};
const assert = (condition, message) => {
  if (!condition) throw new Error(message);
};
async function check(name, body) {
  try {
    await body();
    checks[name] = "ok";
  } catch (error) {
    const cause = error?.cause ? ` (cause: ${error.cause?.stack ?? error.cause})` : "";
    checks[name] = `FAIL: ${error?.stack ?? error}${cause}`;
  }
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const seen = async () => (await fetch(`${process.env.PROVIDER}/_seen`)).json();

// Two callers behind one ingress (the server trusts it to name them): the tasks client and
// a plain one, each with its own share of the server.
const TASKS_CALLER = "10.1.0.1";
function connect(name, capabilities, caller) {
  const client = new Client({ name, version: "1.0.0" }, { capabilities, versionNegotiation: { mode: { pin: PROTOCOL } } });
  const transport = new StreamableHTTPClientTransport(new URL(process.env.SDKBOX_URL), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.SDKBOX_TOKEN}`, "X-Forwarded-For": caller } },
  });
  return client.connect(transport).then(() => client);
}

const capabilities = { extensions: { [TASKS]: {} }, elicitation: { form: {} } };
const client = await connect("sdkbox-tasks", capabilities, TASKS_CALLER);
const plain = await connect("sdkbox-plain", {}, "10.1.0.2");

// The raw dispatch the adapter needs in the 2026 revision: the request exactly as it framed
// it, posted as the streamable HTTP transport of that revision posts one (the SDK Client
// refuses a task handle as a tools/call result, which is why the adapter asks the host).
let nextId = 1;
async function rawDispatch(request, options = {}) {
  const id = `raw-${nextId++}`;
  const name = request.method === "tools/call" ? request.params.name : request.params?.taskId;
  const response = await fetch(process.env.SDKBOX_URL, {
    method: "POST",
    signal: options.signal,
    headers: {
      Authorization: `Bearer ${process.env.SDKBOX_TOKEN}`,
      "X-Forwarded-For": TASKS_CALLER,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": PROTOCOL,
      "Mcp-Method": request.method,
      ...(name === undefined ? {} : { "Mcp-Name": String(name) }),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id, method: request.method, params: request.params }),
  });
  const text = await response.text();
  const messages = (response.headers.get("content-type") ?? "").includes("text/event-stream")
    ? text.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim()).filter(Boolean)
    : [text];
  const answer = messages.map((m) => JSON.parse(m)).find((m) => m.id === id);
  if (answer === undefined) throw new Error(`no answer to ${request.method} (HTTP ${response.status}): ${text.slice(0, 300)}`);
  return answer.error ? { kind: "error", error: answer.error } : { kind: "result", result: answer.result };
}

// The user's answers to approvals inside tasks: a write of "deny me" is declined; any other
// is approved after 6 s, longer than the server's approval timeout for a plain call (3 s).
const asked = [];
async function onInputRequest(request, context) {
  assert(request.kind === "elicitation", `unexpected input request ${request.kind}`);
  asked.push(request.params.message);
  if (request.params.message.includes("deny me")) return { action: "decline" };
  if (request.params.message.includes("cancel me")) {
    // Never answered: the task is cancelled while it waits.
    await new Promise((resolve) => {
      if (context.signal.aborted) resolve();
      context.signal.addEventListener("abort", resolve);
    });
    return { action: "cancel" };
  }
  await sleep(6_000);
  return { action: "accept", content: { decision: "approve" } };
}

const session = createTaskSessionFromClient(client, {
  endpointId: "sdkbox-tests",
  rawDispatch,
  v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo: { name: "sdkbox-tasks", version: "1.0.0" }, clientCapabilities: capabilities },
  onInputRequest,
});

const paginate = (count) => `
  let page = 0, items = 0;
  while (page !== null && page < ${count}) {
    const r = await api.pages.list({ page, delay_ms: ${delay} });
    items += r.items.length;
    console.log("page " + page);
    page = r.next_page;
  }
  return { pages: page ?? ${count}, items };
`;
const structured = (outcome) => {
  assert(outcome.status === "completed", `the task ended ${outcome.status}: ${JSON.stringify(outcome.error ?? outcome)}`);
  return outcome.result.structuredContent;
};

await check("long_task_completes", async () => {
  const before = (await seen()).pages;
  const started = Date.now();
  const execution = await session.callTool("execute", { code: paginate(pages) });
  assert(execution.kind === "task", `the call was not made a task: ${execution.kind}`);
  const messages = [];
  // Another client's calls are served while the task runs.
  const others = (async () => {
    const quick = await plain.callTool({ name: "execute", arguments: { code: "return 6 * 7" } });
    assert(quick.structuredContent?.result === 42, `the plain call: ${JSON.stringify(quick)}`);
    assert((await seen()).pages - before < pages, "another caller was served only once the task had read every page");
    const hits = await plain.callTool({ name: "search_docs", arguments: { query: "list pages" } });
    assert(!hits.isError, "search_docs failed while a task ran");
    // And the task's own caller: its quick call runs beside its task.
    await sleep(1_500);
    const mine = await session.callTool("execute", { code: "return 'mine'" });
    const { outcome } = await mine.settle();
    assert(structured(outcome).result === "mine", "the task's caller was not served");
    assert((await seen()).pages - before < pages, "the task's caller was served only once the task had read every page");
    return Date.now();
  })();
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === "task" && event.task.statusMessage) messages.push(event.task.statusMessage);
    },
  });
  const ended = Date.now();
  const content = structured(outcome);
  assert(content.ok === true && content.result.pages === pages, `result: ${JSON.stringify(content).slice(0, 400)}`);
  assert((await seen()).pages - before === pages, "the provider did not see every page once");
  assert(messages.some((m) => /\d+ pages read.*console: page \d+/.test(m)), `no progress was reported: ${JSON.stringify(messages)}`);
  assert((await others) < ended, "the other client's calls waited for the task");
  console.error(`long task: ${pages} pages in ${((ended - started) / 1000).toFixed(1)} s; last status: ${messages.at(-1)}`);
});

await check("quick_call_stays_plain", async () => {
  const execution = await session.callTool("execute", { code: "return 'quick'" });
  assert(execution.kind === "immediate", `a quick call became a ${execution.kind}`);
  const { outcome } = await execution.settle();
  assert(structured(outcome).result === "quick", "wrong result");
});

await check("cancel_stops_the_run", async () => {
  const execution = await session.callTool("execute", { code: paginate(100_000) });
  assert(execution.kind === "task", `the call was not made a task: ${execution.kind}`);
  const start = (await seen()).pages;
  for (let i = 0; i < 200 && (await seen()).pages < start + 5; i++) await sleep(100);
  await execution.cancel();
  const atCancel = (await seen()).pages;
  await sleep(2_500);
  const later = (await seen()).pages;
  assert(later === atCancel, `the provider received ${later - atCancel} requests after the cancel`);
  const { outcome } = await execution.settle();
  assert(outcome.status === "cancelled", `the task ended ${outcome.status}`);
});

await check("approval_waits_in_the_task", async () => {
  const before = (await seen()).notes;
  const execution = await session.callTool("execute", {
    code: `const note = await api.notes.create({ text: "from a task" }); return note.id;`,
  });
  assert(execution.kind === "task", `the call was not made a task: ${execution.kind}`);
  const { outcome } = await execution.settle();
  const content = structured(outcome);
  assert(content.ok === true && typeof content.result === "string", `result: ${JSON.stringify(content).slice(0, 600)}`);
  assert((await seen()).notes === before + 1, "the approved write was not sent exactly once");
  assert(asked.some((m) => m.includes("from a task")), "the approval form did not show the write");
});

await check("denied_write_is_not_sent", async () => {
  const before = (await seen()).notes;
  const execution = await session.callTool("execute", {
    code: `try { await api.notes.create({ text: "deny me" }); return "sent"; } catch (e) { return "refused: " + e.message; }`,
  });
  const { outcome } = await execution.settle();
  const content = structured(outcome);
  assert(String(content.result).startsWith("refused"), `result: ${JSON.stringify(content).slice(0, 600)}`);
  assert((await seen()).notes === before, "a denied write was sent");
});

await check("cancel_while_a_write_waits", async () => {
  const before = (await seen()).notes;
  const execution = await session.callTool("execute", {
    code: `await api.notes.create({ text: "cancel me" }); return "sent";`,
  });
  assert(execution.kind === "task", `the call was not made a task: ${execution.kind}`);
  for (let i = 0; i < 100 && !asked.some((m) => m.includes("cancel me")); i++) await sleep(100);
  assert(asked.some((m) => m.includes("cancel me")), "the write's approval was never asked");
  await execution.cancel();
  const { outcome } = await execution.settle();
  assert(outcome.status === "cancelled", `the task ended ${outcome.status}`);
  await sleep(1_000);
  assert((await seen()).notes === before, "a write cancelled while it waited was sent");
});

console.log(JSON.stringify({ client: "typescript-ext-tasks", protocol: client.getNegotiatedProtocolVersion(), checks }));
await session.close();
await plain.close();
process.exit(0);
