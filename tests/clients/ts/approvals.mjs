// Drives the real sdkbox binary's approval gate with an official MCP TypeScript client and
// prints one JSON report line: {"client", "protocol", "checks": {name: "ok" | "FAIL: why"}}.
//
// The client declares form elicitation and answers every approval from the request's
// message (which carries the request body, and so the customer's name):
//   "approve-all-" -> accept {decision: "approve_all"}    "approve-" -> accept {decision: "approve"}
//   "decline-"     -> decline                             "cancel-"  -> cancel
// In the handshake era the server asks with elicitation/create while the execution waits; in
// the 2026-07-28 era tools/call answers `input_required` and the SDK fulfils the embedded
// elicitation/create through the same handler and retries the call by itself. The setup it
// shares with conformance.mjs (environment, transport, checks, validation, the report) is in
// harness.mjs.
//
// Environment (read by harness.mjs, except DEBUG):
//   SDK        v1 (@modelcontextprotocol/sdk, handshake era only) or v2 (@modelcontextprotocol/client)
//   ERA        legacy (initialize), auto (server/discover, then fallback) or 2026-07-28 (pinned)
//   TRANSPORT  stdio (spawns SDKBOX_BIN serve --demo) or http (SDKBOX_URL with SDKBOX_TOKEN)
//   DEBUG      if set, what the handler was asked goes to stderr

import {
  assert,
  callTool as call,
  check,
  era,
  modules,
  negotiation,
  register,
  registered,
  report,
  sdk,
  text,
  transport,
  transportKind,
} from "./harness.mjs";

// Form elicitation is what the approval gate asks through.
const capabilities = { elicitation: { form: {} } };
const options = { capabilities, ...negotiation };
const client = new modules.client.Client({ name: `sdkbox-approvals-${sdk}`, version: "1.0.0" }, options);

// The "user": decides from the message, counts how often it was asked.
let asked = 0;
const messages = [];
async function decide(request) {
  asked += 1;
  const message = String(request.params?.message ?? "");
  messages.push(message);
  if (message.includes("approve-all-")) return { action: "accept", content: { decision: "approve_all" } };
  if (message.includes("approve-")) return { action: "accept", content: { decision: "approve" } };
  if (message.includes("decline-")) return { action: "decline" };
  if (message.includes("cancel-")) return { action: "cancel" };
  return { action: "decline" };
}
if (sdk === "v1") client.setRequestHandler(modules.types.ElicitRequestSchema, decide);
else client.setRequestHandler("elicitation/create", decide);

// A tap on what the server sends, to tell which channel the approvals came through.
const wire = { elicitRequests: 0, inputRequired: 0, largest: 0 };
const tapped = transport();
await client.connect(tapped);
const deliver = tapped.onmessage;
tapped.onmessage = (message, extra) => {
  if (message?.method === "elicitation/create") wire.elicitRequests += 1;
  if (message?.result?.resultType === "input_required") wire.inputRequired += 1;
  // The largest question as it came over the wire (a form, or an input-required result).
  if (message?.method === "elicitation/create" || message?.result?.resultType === "input_required") {
    wire.largest = Math.max(wire.largest, Buffer.byteLength(JSON.stringify(message)));
  }
  return deliver.call(tapped, message, extra);
};

const callTool = (name, args) => call(client, name, args, { timeout: 120000 });
const execute = (code, extra = {}) => callTool("execute", { code, ...extra });
const show = (result) => JSON.stringify(result.structuredContent ?? text(result));

// Every customer's name, read through the API.
async function customerNames() {
  const result = await execute(
    "const all = []; for await (const c of api.paginate(api.customers.list, {})) all.push(c.name); return all;",
  );
  assert(result.structuredContent?.ok === true && Array.isArray(result.structuredContent.result), `list: ${show(result)}`);
  return result.structuredContent.result;
}
// The POST entries of a run's http log.
const posts = (outcome) => (outcome.http ?? []).filter((h) => String(h.method ?? "").toUpperCase() === "POST");
// Runs `code`, returning its outcome and how often the user was asked meanwhile.
async function run(code, extra) {
  const before = asked;
  const result = await execute(code, extra);
  return { result, outcome: result.structuredContent ?? {}, asks: asked - before };
}

const sfx = `${sdk}-${era}-${transportKind}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
const create = (name, email) =>
  `return await api.customers.create({ name: ${JSON.stringify(name)}, email: ${JSON.stringify(email)} })`;

await check("tools", async () => {
  const { tools } = await client.listTools();
  for (const tool of tools) register(tool);
  assert(registered("execute"), "no execute tool");
});

await check("approved_write", async () => {
  const name = `approve-${sfx}`;
  const { result, outcome, asks } = await run(create(name, `a${sfx}@example.com`));
  assert(result.isError !== true, `isError: ${show(result)}`);
  assert(outcome.ok === true && typeof outcome.result?.id === "string", `outcome: ${show(result)}`);
  assert(asks >= 1, `the user was asked ${asks} times`);
  const post = posts(outcome).at(-1);
  assert(post?.policy?.rule === "approve" && post.policy.decision === "approved", `http: ${JSON.stringify(outcome.http)}`);
  assert((await customerNames()).includes(name), `${name} is not in the list`);
});

await check("declined_write", async () => {
  const name = `decline-${sfx}`;
  const { result, outcome, asks } = await run(create(name, `b${sfx}@example.com`));
  assert(outcome.ok === false && /denied/i.test(outcome.error?.message ?? ""), `outcome: ${show(result)}`);
  assert(asks >= 1, `the user was asked ${asks} times`);
  const post = posts(outcome).at(-1);
  assert(post?.policy?.decision === "denied", `http: ${JSON.stringify(outcome.http)}`);
  assert(!(await customerNames()).includes(name), `${name} was created`);
});

await check("cancelled_write", async () => {
  const name = `cancel-${sfx}`;
  const { result, outcome, asks } = await run(create(name, `x${sfx}@example.com`));
  assert(outcome.ok === false, `outcome: ${show(result)}`);
  assert(asks >= 1, `the user was asked ${asks} times`);
  assert(!(await customerNames()).includes(name), `${name} was created`);
});

await check("caught_policy_error", async () => {
  const name = `decline-c${sfx}`;
  const code = `try { await api.customers.create({ name: ${JSON.stringify(name)}, email: "c${sfx}@example.com" }); return "sent"; } catch (e) { return { name: e.name, kind: e.kind }; }`;
  const { result, outcome } = await run(code);
  assert(outcome.ok === true, `outcome: ${show(result)}`);
  assert(outcome.result?.name === "PolicyError" && outcome.result?.kind === "policy", `result: ${show(result)}`);
});

await check("raw_fetch_gated", async () => {
  const name = `decline-f${sfx}`;
  const code = `const r = await fetch("/v1/customers", { method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({ name: ${JSON.stringify(name)}, email: "f${sfx}@example.com" }) }); return r.status;`;
  const { result, outcome, asks } = await run(code);
  assert(outcome.ok === false && outcome.error?.name === "PolicyError", `outcome: ${show(result)}`);
  const post = posts(outcome).at(-1);
  assert(post?.policy?.decision === "denied", `http: ${JSON.stringify(outcome.http)}`);
  assert(asks >= 1, `the user was asked ${asks} times`);
  assert(!(await customerNames()).includes(name), `${name} was created`);
});

// One script creating two customers, one after the other.
const twoCreates = (names, tag) => `const a = await api.customers.create({ name: ${JSON.stringify(names[0])}, email: "${tag}1${sfx}@example.com" });
const b = await api.customers.create({ name: ${JSON.stringify(names[1])}, email: "${tag}2${sfx}@example.com" });
return [a.id, b.id];`;

await check("approve_all", async () => {
  const names = [`approve-all-1-${sfx}`, `approve-all-2-${sfx}`];
  const { result, outcome, asks } = await run(twoCreates(names, "e"));
  assert(outcome.ok === true, `outcome: ${show(result)}`);
  assert(asks === 1, `the user was asked ${asks} times, not once`);
  const all = await customerNames();
  for (const name of names) assert(all.includes(name), `${name} is not in the list`);
});

// Runs `code`, which creates the customers `names`, each approved on its own: the user is asked
// once per write and each is created once.
async function eachOnce(code, names) {
  const { result, outcome, asks } = await run(code);
  assert(outcome.ok === true, `outcome: ${show(result)}`);
  assert(asks === names.length, `the user was asked ${asks} times, not ${names.length}`);
  const all = await customerNames();
  for (const name of names) {
    const count = all.filter((n) => n === name).length;
    assert(count === 1, `${name} is in the list ${count} times`);
  }
}

// Two writes, each approved on its own: in the 2026-07-28 era that is three rounds, and the
// first write, sent in the second round, must not be sent again in the third.
await check("two_approvals", async () => {
  const names = [`approve-two-1-${sfx}`, `approve-two-2-${sfx}`];
  await eachOnce(twoCreates(names, "t"), names);
});

// Four writes (in the 2026-07-28 era, five rounds).
await check("four_approvals", async () => {
  const names = [1, 2, 3, 4].map((n) => `approve-four-${n}-${sfx}`);
  const code = `const ids = [];\n${names
    .map((name, n) => `ids.push((await api.customers.create({ name: ${JSON.stringify(name)}, email: "f${n}${sfx}@example.com" })).id);\n`)
    .join("")}return ids;`;
  await eachOnce(code, names);
});

// Writes at once (`Promise.all`), each approved on its own: matched to their approvals and
// the journal by what they are, not by the order they arrive in, which differs between runs.
const parallel = (names, tag) =>
  `return await Promise.all(${JSON.stringify(names)}.map((name, i) => api.customers.create({ name, email: "${tag}" + i + "${sfx}@example.com" })));`;
await check("parallel_writes", async () => {
  for (const n of [2, 3, 5, 6]) {
    const names = Array.from({ length: n }, (_, i) => `approve-par${n}-${i}-${sfx}`);
    await eachOnce(parallel(names, `p${n}x`), names);
  }
  // Identical writes at once: each is its own write, sent once.
  const name = `approve-same-${sfx}`;
  const code = `return await Promise.all([0, 1, 2].map(() => api.customers.create({ name: ${JSON.stringify(name)}, email: "same${sfx}@example.com" })));`;
  const { result, outcome } = await run(code);
  assert(outcome.ok === true && outcome.result?.length === 3, `outcome: ${show(result)}`);
  const count = (await customerNames()).filter((n) => n === name).length;
  assert(count === 3, `${name} is in the list ${count} times, not 3`);
});

// The shape models write: a declared main that the script also calls itself.
await check("entry_called_by_the_script", async () => {
  const name = `approve-entry-${sfx}`;
  const code = `async function main() { return await api.customers.create({ name: ${JSON.stringify(name)}, email: "m${sfx}@example.com" }); }\nconst r = await main();\nconsole.log(r.id);`;
  const { result, outcome, asks } = await run(code);
  assert(outcome.ok === true && typeof outcome.result?.id === "string", `outcome: ${show(result)}`);
  assert(asks === 1, `the user was asked ${asks} times, not once`);
  const count = (await customerNames()).filter((n) => n === name).length;
  assert(count === 1, `${name} is in the list ${count} times`);
});

// A question as large as a human is shown is asked, whole, within one answer's bound; a
// larger one is refused without asking.
await check("large_question", async () => {
  const name = `approve-large-${sfx}`;
  const pad = "p".repeat(14000);
  const code = `return await api.customers.create({ name: ${JSON.stringify(name)}, email: "l${sfx}@example.com", metadata: { pad: "${pad}" } });`;
  const { result, outcome, asks } = await run(code);
  assert(outcome.ok === true, `outcome: ${show(result).slice(0, 500)}`);
  assert(asks === 1, `the user was asked ${asks} times`);
  assert(wire.largest > 14000 && wire.largest <= 256 * 1024, `largest question on the wire: ${wire.largest} bytes`);
  const over = code.replace(pad, "p".repeat(30000)).replace(name, `${name}-over`);
  const refused = await run(over);
  assert(refused.outcome.ok === false && /too large/.test(refused.outcome.error?.message ?? ""), `outcome: ${show(refused.result).slice(0, 500)}`);
  assert(refused.asks === 0, `the user was asked ${refused.asks} times about a question too large`);
});

await check("dry_run", async () => {
  const name = `dry-${sfx}`;
  const { result, outcome, asks } = await run(create(name, `d${sfx}@example.com`), { dry_run: true });
  assert(outcome.ok === true, `outcome: ${show(result)}`);
  const plan = outcome.plan ?? [];
  assert(plan.length === 1 && plan[0].method === "POST" && plan[0].policy === "approve", `plan: ${JSON.stringify(plan)}`);
  assert(asks === 0, `the user was asked ${asks} times in a dry run`);
  assert(!(await customerNames()).includes(name), `${name} was created by a dry run`);
});

await check("channel", async () => {
  // Handshake era: elicitation/create while the execution waits. 2026-07-28: input_required
  // results, fulfilled by the SDK through the same handler.
  const expected = era === "legacy" ? wire.elicitRequests > 0 && wire.inputRequired === 0 : wire.elicitRequests === 0 && wire.inputRequired > 0;
  assert(expected, `wire: ${JSON.stringify(wire)}, handler asked ${asked} times`);
});

if (process.env.DEBUG) console.error(JSON.stringify({ asked, wire, messages }, null, 2));
await report(client);
